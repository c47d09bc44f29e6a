//! `softrdma flood`: hostile traffic for testing a receiver (security review, issue 30). It builds
//! the UDP payloads an attacker with no credentials can send to a RoCEv2 (4791) or UET (4793)
//! endpoint; the CLI sends them from one or more local addresses at a chosen rate. Every kind is
//! something a receiver must refuse, answer with the spec's NAK/NACK, or bound:
//!
//! - [`FloodKind::RoceGarbage`] cycles four shapes: random bytes; a well-formed RC SEND_ONLY to
//!   an unknown QPN (correct ICRC); one to the QPNs softrdma and rxe hand out first (0x11...) from
//!   an address that is not the QP's peer (correct ICRC); and the same with a corrupted ICRC.
//! - [`FloodKind::UetGarbage`]: random bytes.
//! - [`FloodKind::UetSyn`]: RUD requests with SYN set, each with a new SPDCID and PSN, carrying a
//!   one-packet WRITE: each opens a target PDC unless the receiver bounds them.
//! - [`FloodKind::UetPartial`]: first packets (SOM, not EOM) of SENDs that claim 4 GiB, each with
//!   a new message id, alternately over UUD and RUDI (no PDC) and over SYN-opened RUD PDCs: each
//!   leaves reassembly state unless the receiver refuses or reaps it.
//!
//! The ICRC of RoCE datagrams is computed over the headers the receiver rebuilds (IPv4 ID 0, DF,
//! TTL 64), as softrdma's UDP datapath and rdma_rxe check it. Payloads are deterministic for a seed.

use std::net::{Ipv4Addr, SocketAddrV4};

use wire::ethernet::EthernetAddress;
use wire::ib::{BthRepr, Opcode, RoceRepr};
use wire::ipv4::{DONT_FRAGMENT, PROTO_UDP};
use wire::uet::pds::{Mode, NextHeader, RequestRepr, RudiRepr, UudRepr, request};
use wire::uet::ses::common::{FLAG_EOM, FLAG_SOM};
use wire::uet::ses::{RequestCommon, SesHeader, SesOpcode, SomField, StandardRequest};
use wire::uet::{PdsRepr, SesRepr, UDP_PORT, UetRepr};
use wire::{EthernetRepr, FrameRepr, IpRepr, Ipv4Repr, L4Repr, ROCEV2_UDP_PORT, UdpChecksum, UdpRepr};

/// Ethernet + IPv4 + UDP header bytes in front of the datagram payload of an emitted frame.
const HEADERS: usize = 14 + 20 + 8;

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodKind {
    /// Malformed and misaddressed RoCEv2 datagrams (UDP 4791).
    RoceGarbage,
    /// Random bytes to UDP 4793.
    UetGarbage,
    /// UET SYNs, each opening a new PDC (UDP 4793).
    UetSyn,
    /// First packets of UET messages that never finish (UDP 4793).
    UetPartial,
}

impl FloodKind {
    /// The UDP destination port of this kind's datagrams.
    pub const fn port(self) -> u16 {
        match self {
            FloodKind::RoceGarbage => ROCEV2_UDP_PORT,
            _ => UDP_PORT,
        }
    }
}

/// UET job, PIDonFEP and resource index the requests address (perf's defaults: job 1, 0, 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UetTarget {
    /// JobID (24 bits).
    pub job_id: u32,
    /// PIDonFEP (12 bits).
    pub pid_on_fep: u16,
    /// Resource index (12 bits).
    pub resource_index: u16,
}

/// Builds flood datagrams (UDP payloads) from `src` to `dst`.
#[derive(Debug, Clone)]
pub struct Flood {
    kind: FloodKind,
    src: SocketAddrV4,
    dst: Ipv4Addr,
    target: UetTarget,
    rng: u64,
    n: u64,
}

impl Flood {
    /// A generator of `kind` datagrams sent from `src` (the sending socket's address: the RoCE
    /// ICRC covers the UDP source port); `seed` makes the sequence reproducible.
    pub fn new(kind: FloodKind, src: SocketAddrV4, dst: Ipv4Addr, target: UetTarget, seed: u64) -> Flood {
        Flood { kind, src, dst, target, rng: seed ^ 0x9e37_79b9_7f4a_7c15, n: 0 }
    }

    /// SplitMix64.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn random_bytes(&mut self, out: &mut Vec<u8>, max: usize) {
        let len = 1 + (self.next_u64() as usize % max);
        out.clear();
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
    }

    /// The next datagram's UDP payload, written into `out`.
    pub fn next_datagram(&mut self, out: &mut Vec<u8>) {
        let n = self.n;
        self.n += 1;
        match self.kind {
            FloodKind::RoceGarbage => self.roce(n, out),
            FloodKind::UetGarbage => self.random_bytes(out, 1400),
            FloodKind::UetSyn => self.uet_syn(out),
            FloodKind::UetPartial => self.uet_partial(n, out),
        }
    }

    fn roce(&mut self, n: u64, out: &mut Vec<u8>) {
        let r = self.next_u64();
        let (qpn, corrupt) = match n % 4 {
            0 => return self.random_bytes(out, 1200),
            1 => (0x1000 + (r as u32 & 0xF_FFFF), false),
            2 => (0x11 + (r as u32 & 7), false),
            _ => (0x11 + (r as u32 & 7), true),
        };
        let payload = (r >> 32).to_le_bytes();
        let mut bth = BthRepr::new(Opcode(0x04), qpn, (r >> 8) as u32 & 0xFF_FFFF);
        bth.ack_req = true;
        let udp =
            UdpRepr { src_port: self.src.port(), dst_port: ROCEV2_UDP_PORT, checksum: UdpChecksum::Zero };
        self.emit(L4Repr::Roce { udp, packet: RoceRepr::new(bth, &payload) }, out);
        if corrupt {
            let last = out.len() - 1;
            out[last] ^= 0xA5;
        }
    }

    fn common(&self, opcode: SesOpcode, flags: u8, msg_id: u16) -> RequestCommon {
        RequestCommon {
            rsvd: 0,
            opcode,
            version: 0,
            flags,
            word2: msg_id,
            ri_generation: 0,
            job_id: self.target.job_id & 0xFF_FFFF,
            pid_word: self.target.pid_on_fep & 0x0FFF,
            ri_word: self.target.resource_index & 0x0FFF,
        }
    }

    fn standard(&self, opcode: SesOpcode, flags: u8, msg_id: u16, request_length: u32) -> SesRepr {
        let header = SesHeader::Standard(StandardRequest {
            common: self.common(opcode, flags, msg_id),
            buffer_offset: 0,
            initiator: 0,
            memory_key: 0,
            som_field: SomField::HeaderData(0),
            request_length,
        });
        SesRepr { header, ext: None }
    }

    fn syn(&mut self) -> PdsRepr {
        let r = self.next_u64();
        PdsRepr::Request(RequestRepr {
            mode: Mode::Rud,
            next_hdr: NextHeader::ReqStd,
            flags: request::FLAG_SYN | request::FLAG_AR,
            clear_psn_offset: 0,
            psn: (r >> 32) as u32,
            // SPDCID 0 is not a PDC.
            spdcid: (r as u16).max(1),
            dpdcid: RequestRepr::syn_word(false, 0),
            cc: None,
        })
    }

    fn uet_syn(&mut self, out: &mut Vec<u8>) {
        let pds = self.syn();
        let msg_id = self.next_u64() as u16;
        let ses = self.standard(SesOpcode::Write, FLAG_SOM | FLAG_EOM, msg_id, 8);
        self.emit_uet(pds, ses, &[0x5a; 8], out);
    }

    fn uet_partial(&mut self, n: u64, out: &mut Vec<u8>) {
        let r = self.next_u64();
        let pds = match n % 3 {
            0 => PdsRepr::Uud(UudRepr { next_hdr: NextHeader::ReqStd, flags: 0, reserved: 0 }),
            1 => PdsRepr::Rudi(RudiRepr {
                response: false,
                next_hdr: NextHeader::ReqStd,
                flags: 0,
                reserved: 0,
                pkt_id: (r >> 16) as u32,
            }),
            _ => self.syn(),
        };
        let opcode = if n % 3 == 0 { SesOpcode::DatagramSend } else { SesOpcode::Send };
        let ses = self.standard(opcode, FLAG_SOM, r as u16, u32::MAX);
        self.emit_uet(pds, ses, &[0xa5], out);
    }

    fn emit_uet(&self, pds: PdsRepr, ses: SesRepr, payload: &[u8], out: &mut Vec<u8>) {
        let packet = UetRepr::Clear { pds, ses: Some(ses), payload, crc: false };
        let udp = UdpRepr { src_port: self.src.port(), dst_port: UDP_PORT, checksum: UdpChecksum::Zero };
        self.emit(L4Repr::UetUdp { udp, packet }, out);
    }

    /// Emits a whole frame with the receiver's view of the IP header, keeps the UDP payload.
    fn emit(&self, l4: L4Repr<'_>, out: &mut Vec<u8>) {
        let ip = IpRepr::V4(Ipv4Repr {
            dscp_ecn: 0,
            ident: 0,
            flags_frag: DONT_FRAGMENT,
            ttl: 64,
            protocol: PROTO_UDP,
            src_addr: *self.src.ip(),
            dst_addr: self.dst,
            options: &[],
            payload_len: 0,
        });
        let ethernet = EthernetRepr {
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            vlan_tags: [None; 2],
            ethertype: ip.ethertype(),
        };
        let f = FrameRepr { ethernet, ip, l4, trailer: &[] };
        out.clear();
        out.resize(f.buffer_len(), 0);
        f.emit(out).expect("flood frames are consistent by construction");
        out.drain(..HEADERS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::uet::UetConfig;

    const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 1, 0, 9), 40_000);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
    const TARGET: UetTarget = UetTarget { job_id: 1, pid_on_fep: 0, resource_index: 0 };

    /// The frame the receiver rebuilds around a datagram, as the UDP datapath does.
    fn frame(payload: &[u8], dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; HEADERS];
        let eth = EthernetRepr {
            dst_addr: EthernetAddress([2; 6]),
            src_addr: EthernetAddress([2; 6]),
            vlan_tags: [None; 2],
            ethertype: wire::ethernet::ethertype::IPV4,
        };
        let ip = Ipv4Repr {
            dscp_ecn: 0,
            ident: 0,
            flags_frag: DONT_FRAGMENT,
            ttl: 64,
            protocol: PROTO_UDP,
            src_addr: *SRC.ip(),
            dst_addr: DST,
            options: &[],
            payload_len: 8 + payload.len(),
        };
        let udp = UdpRepr { src_port: SRC.port(), dst_port: dport, checksum: UdpChecksum::Zero };
        let at = eth.emit(&mut f).unwrap();
        let at = at + ip.emit(&mut f[at..]).unwrap();
        udp.emit(&mut f[at..], payload.len()).unwrap();
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn roce_kinds_have_the_shapes_they_claim() {
        let mut g = Flood::new(FloodKind::RoceGarbage, SRC, DST, TARGET, 7);
        let mut d = Vec::new();
        let cfg = UetConfig { crc: false, ip_proto: None };
        for n in 0..40 {
            g.next_datagram(&mut d);
            let f = frame(&d, ROCEV2_UDP_PORT);
            let verified = FrameRepr::parse_verified(&f, &cfg);
            match n % 4 {
                1 | 2 => {
                    let r = verified.unwrap_or_else(|e| panic!("datagram {n}: {e:?}"));
                    let qpn = r.roce().unwrap().bth.dest_qp;
                    assert_eq!(qpn >= 0x1000, n % 4 == 1, "datagram {n}: QPN {qpn:#x}");
                }
                3 => assert!(verified.is_err(), "datagram {n}: the ICRC is corrupted"),
                _ => {}
            }
        }
    }

    #[test]
    fn uet_kinds_parse_and_vary() {
        let cfg = UetConfig { crc: false, ip_proto: None };
        for kind in [FloodKind::UetSyn, FloodKind::UetPartial] {
            let mut g = Flood::new(kind, SRC, DST, TARGET, 1);
            let (mut d, mut seen) = (Vec::new(), std::collections::BTreeSet::new());
            for n in 0..30 {
                g.next_datagram(&mut d);
                let f = frame(&d, UDP_PORT);
                let r = FrameRepr::parse_verified(&f, &cfg).unwrap_or_else(|e| panic!("{kind:?} {n}: {e:?}"));
                let UetRepr::Clear { pds, ses: Some(ses), .. } = r.uet().unwrap() else {
                    panic!("{kind:?} {n}")
                };
                let SesHeader::Standard(s) = ses.header else { panic!("{kind:?} {n}") };
                assert_eq!(s.common.job_id, 1);
                if kind == FloodKind::UetPartial {
                    assert!(s.common.has(FLAG_SOM) && !s.common.has(FLAG_EOM), "{kind:?} {n}");
                    assert_eq!(s.request_length, u32::MAX);
                }
                if let PdsRepr::Request(q) = pds {
                    assert!(q.flags & request::FLAG_SYN != 0 && q.spdcid != 0);
                    seen.insert(q.spdcid);
                }
            }
            assert!(seen.len() >= 9, "{kind:?}: new SPDCIDs, {seen:?}");
        }
    }

    /// What a UET endpoint set up as perf's server does with each kind, from 16 sources: every
    /// datagram is refused, once, at the layer that sees what is wrong with it; none is taken.
    #[test]
    fn every_uet_flood_datagram_is_refused_and_counted_once() {
        for kind in [FloodKind::UetGarbage, FloodKind::UetSyn, FloodKind::UetPartial] {
            let cfg = ses::Config { initiator: 1, ..ses::Config::default() };
            let mut ep = ses::Endpoint::<Ipv4Addr>::new(cfg, 1);
            ep.post_recv(ses::RecvSpec::any(), 65536, 1);
            let mut gens: Vec<Flood> = (1..=16u8)
                .map(|i| {
                    let src = SocketAddrV4::new(Ipv4Addr::new(10, 2, 0, i), 40_000);
                    Flood::new(kind, src, DST, TARGET, u64::from(i))
                })
                .collect();
            let (mut d, mut out) = (Vec::new(), vec![0u8; 9000]);
            let mut malformed = 0;
            let mut now = std::time::Duration::ZERO;
            for n in 0..6000 {
                let g = &mut gens[n % 16];
                g.next_datagram(&mut d);
                let src = *g.src.ip();
                now += std::time::Duration::from_micros(25);
                if ep.handle_packet(now, src, &d).is_err() {
                    malformed += 1;
                }
                ep.handle_timeout(now);
                while ep.poll_transmit(now, &mut out).is_some() {}
            }
            let (p, s) = (*ep.pds().stats(), *ep.stats());
            assert_eq!((p.rx_control, s.rx_used), (0, 0), "{kind:?}: {p:?} {s:?}");
            assert_eq!(p.rx_malformed, malformed, "{kind:?}");
            assert_eq!(malformed + p.rx_refused() + s.rx_refused(), 6000, "{kind:?}: {p:?} {s:?}");
        }
    }

    #[test]
    fn same_seed_same_datagrams() {
        let run = |seed| {
            let mut g = Flood::new(FloodKind::UetPartial, SRC, DST, TARGET, seed);
            let mut d = Vec::new();
            (0..10)
                .map(|_| {
                    g.next_datagram(&mut d);
                    d.clone()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
