//! QP1, the general services interface, as the CM uses it over RoCEv2: MADs travel as UD SEND only
//! packets to QP1 with the GSI Q_Key, from UDP port 55410 as rxe's QP1 sends (roce-wire.md §1.4),
//! P_Key 0xFFFF. Also remembers which MAC each CM peer sent from, so answers need no lookup.

use std::net::IpAddr;

use ahash::AHashMap;
use wire::ib::deth::GSI_QKEY;
use wire::ib::mad::MAD_LEN;
use wire::ib::{BthRepr, DethRepr, Opcode, Operation, RoceRepr, Transport};

use crate::roce::{BuildError, Path};

/// The UDP source port of rxe's QP1.
pub(super) const GSI_UDP_PORT: u16 = 55410;
/// The QP number of the general services interface.
pub(super) const GSI_QPN: u32 = 1;
/// Peers whose MAC is remembered at most (the table starts over beyond it).
const NEIGHBOURS: usize = 1024;

/// QP1's send PSN and the CM peers' MACs.
#[derive(Debug, Default)]
pub(super) struct Gsi {
    psn: u32,
    neigh: AHashMap<IpAddr, [u8; 6]>,
}

/// The MAD in a packet, if it is one QP1 takes: UD SEND only, GSI Q_Key, a whole MAD.
pub(super) fn mad_of<'a>(pkt: &RoceRepr<'a>) -> Option<&'a [u8]> {
    let ud_send = Opcode::new(Transport::Ud, Operation::SendOnly)?;
    let deth = pkt.deth?;
    (pkt.bth.opcode == ud_send && deth.qkey == GSI_QKEY && pkt.payload.len() >= MAD_LEN)
        .then(|| &pkt.payload[..MAD_LEN])
}

impl Gsi {
    /// `peer` sent from `mac`.
    pub(super) fn learn(&mut self, peer: IpAddr, mac: [u8; 6]) {
        let peer = peer.to_canonical();
        if self.neigh.len() >= NEIGHBOURS && !self.neigh.contains_key(&peer) {
            self.neigh.clear();
        }
        self.neigh.insert(peer, mac);
    }

    /// The MAC `peer` last sent from, if any.
    pub(super) fn mac(&self, peer: IpAddr) -> Option<[u8; 6]> {
        self.neigh.get(&peer.to_canonical()).copied()
    }

    /// Builds the frame carrying `mad` from our QP1 to `peer`'s, at the start of `buf`, from and to
    /// UDP ports `ports`, with IP traffic class `traffic_class` (its connection's:
    /// `roce::cm::Cm::poll_transmit_classed`).
    pub(super) fn build(
        &mut self,
        src: ([u8; 6], IpAddr),
        dst: ([u8; 6], IpAddr),
        ports: (u16, u16),
        traffic_class: u8,
        mad: &[u8; MAD_LEN],
        buf: &mut [u8],
    ) -> Result<usize, BuildError> {
        let path = Path {
            src_mac: src.0,
            dst_mac: dst.0,
            src_ip: src.1,
            dst_ip: dst.1,
            src_port: ports.0,
            dst_port: ports.1,
            traffic_class,
            hop_limit: 64,
            flow_label: 0,
        };
        let opcode = Opcode::new(Transport::Ud, Operation::SendOnly)
            .ok_or(BuildError::Wire(wire::Error::UnknownOpcode(0x64)))?;
        let mut bth = BthRepr::new(opcode, GSI_QPN, self.psn);
        bth.pkey = 0xFFFF;
        bth.ack_req = true;
        self.psn = (self.psn + 1) & 0xFF_FFFF;
        let mut pkt = RoceRepr::new(bth, &[]);
        pkt.deth = Some(DethRepr { qkey: GSI_QKEY, reserved: 0, src_qp: GSI_QPN });
        path.emit(buf, &pkt, MAD_LEN, |b| {
            b.copy_from_slice(mad);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::uet::UetConfig;

    #[test]
    fn frames_carry_the_mad_to_qp1_and_back() {
        let mut g = Gsi::default();
        let mut mad = [0u8; MAD_LEN];
        mad[0] = 1;
        mad[1] = 7;
        mad[255] = 0xEE;
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let mut buf = [0u8; 512];
        let build = |g: &mut Gsi, buf: &mut [u8]| {
            g.build(
                ([2, 0, 0, 0, 0, 1], a),
                ([2, 0, 0, 0, 0, 2], b),
                (GSI_UDP_PORT, wire::ROCEV2_UDP_PORT),
                0,
                &mad,
                buf,
            )
            .unwrap()
        };
        let n = build(&mut g, &mut buf);
        let f = wire::FrameRepr::parse_verified(&buf[..n], &UetConfig::default()).unwrap();
        let pkt = f.roce().unwrap();
        assert_eq!((pkt.bth.dest_qp, pkt.bth.pkey, pkt.deth.unwrap().src_qp), (GSI_QPN, 0xFFFF, GSI_QPN));
        assert_eq!(mad_of(pkt), Some(&mad[..]));
        // The next MAD gets the next PSN.
        let n2 = build(&mut g, &mut buf);
        let f = wire::FrameRepr::parse_verified(&buf[..n2], &UetConfig::default()).unwrap();
        assert_eq!(f.roce().unwrap().bth.psn, 1);
    }

    #[test]
    fn only_gsi_sends_with_a_whole_mad_are_taken() {
        let op = Opcode::new(Transport::Ud, Operation::SendOnly).unwrap();
        let mad = [0u8; MAD_LEN];
        let mut pkt = RoceRepr::new(BthRepr::new(op, 1, 0), &mad);
        pkt.deth = Some(DethRepr { qkey: 0x1234, reserved: 0, src_qp: 1 });
        assert_eq!(mad_of(&pkt), None);
        pkt.deth = Some(DethRepr { qkey: GSI_QKEY, reserved: 0, src_qp: 1 });
        assert!(mad_of(&pkt).is_some());
        pkt.payload = &mad[..100];
        assert_eq!(mad_of(&pkt), None);
    }

    #[test]
    fn the_neighbour_table_is_bounded() {
        let mut g = Gsi::default();
        for i in 0..3000u32 {
            g.learn(IpAddr::V4(i.into()), [0; 6]);
        }
        assert!(g.neigh.len() <= NEIGHBOURS);
        g.learn("::ffff:10.0.0.9".parse().unwrap(), [9; 6]);
        assert_eq!(g.mac("10.0.0.9".parse().unwrap()), Some([9; 6]));
    }
}
