//! The L2-L4 headers of one connection and the frame builder: Ethernet, IPv4 or IPv6, UDP to port
//! 4791 (or the port the peer listens on), then BTH and extension headers, the payload gathered in
//! place, pad and ICRC (roce-wire.md §1.3, §1.4).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::ethernet::ethertype;
use wire::ib::RoceRepr;
use wire::ib::icrc::{self, ICRC_LEN};
use wire::ib::packet::pad_for;
use wire::ipv4::PROTO_UDP;
use wire::{EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr, Ipv6Repr, UdpChecksum, UdpRepr, UdpTemplate};

/// Where a connection's frames go and how they are addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path {
    /// Our MAC.
    pub src_mac: [u8; 6],
    /// Next hop MAC.
    pub dst_mac: [u8; 6],
    /// Our GID as an IP address.
    pub src_ip: IpAddr,
    /// Peer GID as an IP address.
    pub dst_ip: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port: 4791 ([`wire::ROCEV2_UDP_PORT`]), or the port a softrdma peer said it
    /// listens on (`AddressVector::udp_dport`).
    pub dst_port: u16,
    /// IP traffic class.
    pub traffic_class: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label.
    pub flow_label: u32,
}

/// rxe's UDP source port for a connection (`rdma_get_udp_sport`, roce-wire.md §1.4): from the flow
/// label, or when it is 0 from the two QP numbers, so both ends pick the same port.
pub fn udp_sport(flow_label: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = if flow_label != 0 {
        flow_label & 0xF_FFFF
    } else {
        let mut v = u64::from(lqpn) * u64::from(rqpn);
        v ^= v >> 20;
        v ^= v >> 40;
        (v & 0xF_FFFF) as u32
    };
    let low = (fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14);
    0xC000 | low as u16
}

/// Why a frame could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The headers or the buffer were wrong.
    Wire(wire::Error),
    /// The payload source failed (the memory region is gone or too short).
    Payload(super::mem::MemError),
}

impl Path {
    /// Whether frames on this path use IPv4.
    pub fn is_v4(&self) -> bool {
        matches!((self.src_ip.to_canonical(), self.dst_ip.to_canonical()), (IpAddr::V4(_), IpAddr::V4(_)))
    }

    /// Bytes of Ethernet, IP and UDP header.
    pub fn header_len(&self) -> usize {
        let ip = if self.is_v4() { wire::ipv4::MIN_HEADER_LEN } else { wire::ipv6::HEADER_LEN };
        wire::ethernet::HEADER_LEN + ip + wire::udp::HEADER_LEN
    }

    /// The connection's Ethernet, IP and UDP headers, built once (see [`HeaderTemplate`]).
    pub fn template(&self) -> HeaderTemplate {
        HeaderTemplate::new(self)
    }

    /// Builds a whole frame at the start of `buf` (see [`HeaderTemplate::emit`]). A QP keeps the
    /// template instead of building it per packet.
    pub fn emit(
        &self,
        buf: &mut [u8],
        packet: &RoceRepr<'_>,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), super::mem::MemError>,
    ) -> Result<usize, BuildError> {
        self.template().emit(buf, packet, payload_len, fill)
    }
}

/// A path's Ethernet, IP and UDP headers as bytes ([`UdpTemplate`]): the per-packet cost is a
/// copy of 42 (IPv4) or 62 (IPv6) bytes and a checksum fold, not a header build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderTemplate {
    udp: UdpTemplate,
}

impl HeaderTemplate {
    fn new(path: &Path) -> HeaderTemplate {
        let v4 = path.is_v4();
        let ip = match (path.src_ip.to_canonical(), path.dst_ip.to_canonical()) {
            (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => IpRepr::V4(Ipv4Repr {
                dscp_ecn: path.traffic_class,
                ident: 0,
                flags_frag: 0x4000,
                ttl: path.hop_limit,
                protocol: PROTO_UDP,
                src_addr,
                dst_addr,
                options: &[],
                payload_len: 0,
            }),
            (s, d) => IpRepr::V6(Ipv6Repr {
                traffic_class: path.traffic_class,
                flow_label: path.flow_label & 0xF_FFFF,
                next_header: PROTO_UDP,
                hop_limit: path.hop_limit,
                src_addr: v6(s),
                dst_addr: v6(d),
                payload_len: 0,
            }),
        };
        let eth = EthernetRepr {
            dst_addr: EthernetAddress(path.dst_mac),
            src_addr: EthernetAddress(path.src_mac),
            vlan_tags: [None; 2],
            ethertype: if v4 { ethertype::IPV4 } else { ethertype::IPV6 },
        };
        // RoCEv2 sends no UDP checksum (the ICRC covers the packet).
        let udp = UdpRepr { src_port: path.src_port, dst_port: path.dst_port, checksum: UdpChecksum::Zero };
        let udp = UdpTemplate::new(&eth, &ip, &udp).expect("untagged Ethernet, IP without options");
        HeaderTemplate { udp }
    }

    /// Builds a whole frame at the start of `buf`: the headers, `packet`'s BTH and extension headers
    /// (its payload is ignored and its pad count is set here), then `payload_len` bytes that `fill`
    /// writes in place, pad and ICRC.
    pub fn emit(
        &self,
        buf: &mut [u8],
        packet: &RoceRepr<'_>,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), super::mem::MemError>,
    ) -> Result<usize, BuildError> {
        let mut packet = *packet;
        packet.bth.pad_count = pad_for(payload_len);
        packet.payload = &[];
        let pad = usize::from(packet.bth.pad_count);
        let roce_len = packet.header_len() + payload_len + pad + ICRC_LEN;
        let total = self.udp.len() + roce_len;
        if buf.len() < total {
            return Err(BuildError::Wire(wire::Error::BufferTooSmall));
        }
        let hl = self.udp.len();
        let pay_at = hl + packet.emit_header(&mut buf[hl..]).map_err(BuildError::Wire)?;
        fill(&mut buf[pay_at..pay_at + payload_len]).map_err(BuildError::Payload)?;
        buf[pay_at + payload_len..total - ICRC_LEN].fill(0);
        self.udp.write(buf, roce_len).map_err(BuildError::Wire)?;
        icrc::fill(&mut buf[wire::ethernet::HEADER_LEN..total]).map_err(BuildError::Wire)?;
        Ok(total)
    }
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The IPv4 address `a.b.c.d` as its RoCEv2 GID `::ffff:a.b.c.d`.
pub fn gid_of(ip: Ipv4Addr) -> Ipv6Addr {
    ip.to_ipv6_mapped()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ib::{BthRepr, Opcode, RethRepr};
    use wire::uet::UetConfig;

    #[test]
    fn rxe_source_port() {
        // roce-wire.md §1.4: QPs 0x1b and 0x1d both send from 49935 in the linlinw5 captures.
        assert_eq!(udp_sport(0, 0x1b, 0x1d), 49935);
        assert_eq!(udp_sport(0, 0x1d, 0x1b), 49935);
    }

    fn path(src: IpAddr, dst: IpAddr) -> Path {
        Path {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: src,
            dst_ip: dst,
            src_port: 49935,
            dst_port: wire::ROCEV2_UDP_PORT,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        }
    }

    #[test]
    fn template_frames_equal_the_wire_crate_emit() {
        let v4 = path("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let v6 = path("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        for p in [v4, v6] {
            let t = p.template();
            for len in [0usize, 1, 3, 255, 1024, 4093, 4096] {
                let mut bth = BthRepr::new(Opcode(0x07), 0x42, 0xFF_FFFE);
                bth.pad_count = wire::ib::packet::pad_for(len);
                let pkt = RoceRepr::new(bth, &payload[..len]);
                let mut ours = vec![0u8; 8192];
                let n = t
                    .emit(&mut ours, &pkt, len, |b| {
                        b.copy_from_slice(&payload[..len]);
                        Ok(())
                    })
                    .unwrap();
                let first = wire::FrameRepr::parse(&ours[..n]).unwrap();
                let mut theirs = vec![0u8; first.buffer_len()];
                first.emit(&mut theirs).unwrap();
                assert_eq!(&ours[..n], &theirs[..], "{} bytes", len);
                let f = wire::FrameRepr::parse_verified(&ours[..n], &UetConfig::default()).unwrap();
                assert_eq!(f.roce().unwrap().payload, &payload[..len]);
            }
        }
    }

    #[test]
    fn frames_parse_and_verify() {
        let v4 = path("10.0.0.1".parse().unwrap(), "::ffff:10.0.0.2".parse().unwrap());
        let v6 = path("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        for p in [v4, v6] {
            let mut bth = BthRepr::new(Opcode(0x0A), 0x11, 77);
            bth.ack_req = true;
            let mut pkt = RoceRepr::new(bth, &[]);
            pkt.reth = Some(RethRepr { va: 0x1000, rkey: 5, dma_len: 7 });
            let mut buf = [0u8; 256];
            let n = p
                .emit(&mut buf, &pkt, 7, |b| {
                    b.copy_from_slice(b"payload");
                    Ok(())
                })
                .unwrap();
            assert_eq!(n, p.header_len() + 12 + 16 + 7 + 1 + 4);
            let f = wire::FrameRepr::parse_verified(&buf[..n], &UetConfig::default()).unwrap();
            let r = f.roce().unwrap();
            assert_eq!(r.payload, b"payload");
            assert_eq!((r.bth.psn, r.bth.dest_qp, r.bth.pad_count), (77, 0x11, 1));
            assert_eq!(f.ip.dst_addr(), p.dst_ip.to_canonical());
        }
        let mut small = [0u8; 40];
        let pkt = RoceRepr::new(BthRepr::new(Opcode(0x04), 1, 1), &[]);
        assert_eq!(
            v4.emit(&mut small, &pkt, 0, |_| Ok(())),
            Err(BuildError::Wire(wire::Error::BufferTooSmall))
        );
    }
}
