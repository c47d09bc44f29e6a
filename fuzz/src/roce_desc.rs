//! Well-formed RoCE packets from 16-byte fuzzer descriptions, shared by the targets that feed
//! packets to QPs (`qp_packets`, `context_rx`). The opcode table decides which headers a packet
//! carries; the description fuzzes the opcode, PSN, flags, key, address, length and extras.
//!
//! Layout: `d[0] % 3` transport, `d[1] & 0x1F` opcode, `d[2..5]` PSN, `d[5]` bit 0 AckReq, bit 1
//! solicited; `d[6] % 5` which key (one of `regions`, or `d[7..11]` raw), `d[11..13]` offset into
//! it, `d[13]` low nibble subtracted from it, `d[13..15]` DMA length, `d[15]` an extra byte (atomic
//! operand, AETH syndrome, Q_Key choice, payload length).

use wire::ib::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Headers, IethRepr, ImmDt, Opcode, RethRepr,
    RoceRepr, Transport,
};

/// Bytes of a description.
pub const DESC: usize = 16;

pub fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Builds a packet to `dest_qp` from description `d` (at least [`DESC`] bytes) carrying
/// `payload`; `regions` are (key, base address) pairs the key choice picks from; `qkey` is the
/// Q_Key a DETH carries when `d[15]` is even; `src_qp` goes in the DETH.
pub fn packet<'a>(
    d: &[u8],
    payload: &'a [u8],
    regions: &[(u32, u64); 4],
    dest_qp: u32,
    qkey: u32,
    src_qp: u32,
) -> Option<RoceRepr<'a>> {
    let transport = [Transport::Rc, Transport::Uc, Transport::Ud][usize::from(d[0] % 3)];
    let op = Opcode(
        match transport {
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
            _ => 0x00,
        } | (d[1] & 0x1F),
    );
    let info = op.info()?;
    let psn = u32_at(d, 2) & 0xFF_FFFF;
    let mut bth = BthRepr::new(op, dest_qp, psn);
    bth.ack_req = d[5] & 1 != 0;
    bth.solicited = d[5] & 2 != 0;
    let (key, base) = match regions.get(usize::from(d[6] % 5)) {
        Some(&r) => r,
        None => (u32_at(d, 7), u64::from(u32_at(d, 7)) << 12),
    };
    let va = base
        .wrapping_add(u64::from(u16::from_be_bytes([d[11], d[12]])))
        .wrapping_sub(u64::from(d[13] & 0x0F));
    let dma_len = u32::from(u16::from_be_bytes([d[13], d[14]]));
    let mut pkt = RoceRepr::new(bth, payload);
    let h = info.headers;
    if h.contains(Headers::RETH) {
        pkt.reth = Some(RethRepr { va, rkey: key, dma_len });
    }
    if h.contains(Headers::ATOMIC_ETH) {
        pkt.atomic_eth = Some(AtomicEthRepr { va, rkey: key, swap_add: u64::from(d[15]), compare: 0 });
    }
    if h.contains(Headers::AETH) {
        pkt.aeth = Some(AethRepr { syndrome: d[15], msn: u32_at(d, 7) & 0xFF_FFFF });
    }
    if h.contains(Headers::ATOMIC_ACK_ETH) {
        pkt.atomic_ack_eth = Some(AtomicAckEthRepr { orig: u64::from(d[15]) });
    }
    if h.contains(Headers::IMMDT) {
        pkt.immdt = Some(ImmDt(u32_at(d, 7)));
    }
    if h.contains(Headers::IETH) {
        pkt.ieth = Some(IethRepr { rkey: key });
    }
    if h.contains(Headers::DETH) {
        let qkey = if d[15] & 1 == 0 { qkey } else { u32_at(d, 7) };
        pkt.deth = Some(DethRepr { qkey, reserved: 0, src_qp });
    }
    if h.contains(Headers::RDETH) || h.contains(Headers::FETH) {
        return None;
    }
    Some(pkt)
}
