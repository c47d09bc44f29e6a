//! `softrdma gen roce`: a deterministic corpus of well-formed RoCEv2 frames, one or more of every opcode
//! the wire layer knows, over IPv4 and IPv6, for checking dissectors (Wireshark) and as round-trip
//! vectors. IPv4 frames carry a zero UDP checksum (as rxe sends); IPv6 frames a correct one.
//!
//! RD opcodes are decode-only and left out: rxe creates no RD QPs, and tshark 4.0 mis-dissects RD
//! READ_REQUEST, COMPARE_SWAP, FETCH_ADD and ATOMIC_ACKNOWLEDGE (it reads the headers 8 bytes early),
//! although the layout here is rxe's own (`rxe_opcode.c`: RDETH, DETH, then RETH or AtomicETH).

use super::frame::{Generated, emit_frame, ip_header};
use wire::ib::opcode::{Headers, PayloadRule};
use wire::ib::packet::pad_for;
use wire::ib::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, FethRepr, IethRepr, ImmDt, NakCode, Opcode,
    Operation, RdethRepr, RethRepr, RoceRepr, Transport,
};
use wire::ipv4::PROTO_UDP;
use wire::{L4Repr, UdpChecksum, UdpRepr};

/// The opcodes of the RoCE corpus: every opcode of the table except RD.
pub fn roce_opcodes() -> Vec<Opcode> {
    (0..=255u8).map(Opcode).filter(|o| o.info().is_some_and(|i| i.transport != Transport::Rd)).collect()
}

/// The RoCE corpus: every opcode of [`roce_opcodes`] over IPv4, then again over IPv6, then the AETH
/// syndromes (RNR NAK, every NAK code, an ACK with real credits) over IPv4.
pub fn roce_corpus() -> Vec<Generated> {
    let opcodes = roce_opcodes();
    let mut out = Vec::new();
    for ipv6 in [false, true] {
        for (i, &op) in opcodes.iter().enumerate() {
            out.push(frame(op, i as u32, ipv6, None));
        }
    }
    let ack = Opcode::new(Transport::Rc, Operation::Acknowledge).expect("RC ACK is in the table");
    let syndromes = [
        AethRepr::ack(6, 0x10),
        AethRepr::rnr_nak(14, 0x11),
        AethRepr::nak(NakCode::PsnSequenceError, 0x12),
        AethRepr::nak(NakCode::InvalidRequest, 0x13),
        AethRepr::nak(NakCode::RemoteAccessError, 0x14),
        AethRepr::nak(NakCode::RemoteOperationalError, 0x15),
    ];
    for (i, aeth) in syndromes.into_iter().enumerate() {
        out.push(frame(ack, 0x100 + i as u32, false, Some(aeth)));
    }
    out
}

/// A payload of `len` bytes with a recognisable pattern.
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8).collect()
}

fn frame(op: Opcode, n: u32, ipv6: bool, aeth: Option<AethRepr>) -> Generated {
    let info = op.info().expect("only known opcodes are generated");
    // FIRST and MIDDLE packets are exactly one path MTU (256); others vary, some needing pad.
    let len = match (info.payload, info.operation) {
        (PayloadRule::Empty, _) => 0,
        (PayloadRule::Exact(n), _) => n,
        (PayloadRule::Any, Operation::SendFirst | Operation::SendMiddle | Operation::WriteFirst)
        | (PayloadRule::Any, Operation::WriteMiddle | Operation::ReadResponseFirst)
        | (PayloadRule::Any, Operation::ReadResponseMiddle) => 256,
        (PayloadRule::Any, _) => 17 + (n as usize % 40),
    };
    let payload = pattern(len, n);
    let dest_qp = 0x11 + n;
    let psn = (0x00AB_C000 + n * 7) & 0xFF_FFFF;
    let mut bth = BthRepr::new(op, dest_qp, psn);
    bth.pad_count = pad_for(payload.len());
    bth.ack_req = !info.operation.is_response() && info.transport == Transport::Rc;
    bth.becn = info.operation == Operation::Cnp;
    if info.operation == Operation::Cnp {
        bth.psn = 0;
    }
    let h = info.headers;
    let mut p = RoceRepr::new(bth, &payload);
    let va = 0x7f00_0000_1000 + u64::from(n) * 0x1000;
    p.rdeth = h.contains(Headers::RDETH).then_some(RdethRepr { reserved: 0, ee_context: 0x42 + n });
    p.deth =
        h.contains(Headers::DETH).then_some(DethRepr { qkey: 0x1111_1111, reserved: 0, src_qp: 0x22 + n });
    p.feth = h.contains(Headers::FETH).then_some(FethRepr::new(1, 0));
    p.reth = h.contains(Headers::RETH).then_some(RethRepr { va, rkey: 0x2b8 + n, dma_len: 4096 });
    p.atomic_eth = h.contains(Headers::ATOMIC_ETH).then_some(AtomicEthRepr {
        va,
        rkey: 0x2b8 + n,
        swap_add: 0x0102_0304_0506_0708,
        compare: 0x1111_2222_3333_4444,
    });
    p.aeth = h.contains(Headers::AETH).then_some(aeth.unwrap_or(AethRepr::ack(31, n)));
    p.atomic_ack_eth =
        h.contains(Headers::ATOMIC_ACK_ETH).then_some(AtomicAckEthRepr { orig: 0xfeed_0000 + u64::from(n) });
    p.immdt = h.contains(Headers::IMMDT).then_some(ImmDt(0xdead_0000 + n));
    p.ieth = h.contains(Headers::IETH).then_some(IethRepr { rkey: 0x3c4 + n });

    let udp = UdpRepr {
        src_port: 0xC000 | (dest_qp as u16 & 0x3fff),
        dst_port: wire::ROCEV2_UDP_PORT,
        checksum: if ipv6 { UdpChecksum::Computed } else { UdpChecksum::Zero },
    };
    let bytes = emit_frame(ip_header(ipv6, PROTO_UDP), L4Repr::Roce { udp, packet: p });
    Generated { bytes, opcode: op.0, dest_qp, psn: bth.psn }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::FrameRepr;

    #[test]
    fn corpus_is_deterministic_and_verifies() {
        let a = roce_corpus();
        assert_eq!(a, roce_corpus());
        // RC 25 + UC 12 + UD 2 + CNP 1, over IPv4 and IPv6, plus six AETH syndromes.
        assert_eq!(roce_opcodes().len(), 40);
        assert_eq!(a.len(), 2 * 40 + 6);
        for g in &a {
            let r = FrameRepr::parse_verified(&g.bytes, &Default::default()).unwrap();
            let p = r.roce().unwrap();
            assert_eq!((p.bth.opcode.0, p.bth.dest_qp, p.bth.psn), (g.opcode, g.dest_qp, g.psn));
        }
    }
}
