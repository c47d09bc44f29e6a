//! The responder's unit tests.

use super::*;
use crate::window::WIDE_CAP;
use wire::ib::{AtomicEthRepr, RethRepr};

const MTU: u32 = 256;

fn setup() -> (Responder, MemTable, u32, u64) {
    let mut mem = MemTable::default();
    let (key, addr) = mem.register(1, 4096, Access::ALL).unwrap();
    mem.bytes_mut(key).unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let cfg = RespConfig {
        transport: Transport::Rc,
        qkey: 0,
        srq: false,
        qpn: 0x11,
        dest_qp: 0x12,
        pd: 1,
        mtu: MTU,
        access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        max_dest_rd_atomic: 4,
        min_rnr_timer: 5,
    };
    (Responder::new(cfg, 0, HoldPool::new(WIDE_CAP as usize - 1)), mem, key, addr)
}

fn pkt(op: Operation, psn: u32) -> RoceRepr<'static> {
    let mut b = BthRepr::new(Opcode::new(Transport::Rc, op).unwrap(), 0x11, psn);
    b.ack_req = true;
    RoceRepr::new(b, &[])
}

fn read(psn: u32, va: u64, rkey: u32, len: u32) -> RoceRepr<'static> {
    let mut p = pkt(Operation::ReadRequest, psn);
    p.reth = Some(RethRepr { va, rkey, dma_len: len });
    p
}

/// Every queued reply: (opcode offset, PSN, AETH syndrome, payload source).
fn replies(r: &mut Responder) -> Vec<(u8, u32, Option<u8>, TxPayload)> {
    std::iter::from_fn(|| r.poll())
        .map(|d| (d.packet.bth.opcode.0, d.packet.bth.psn, d.packet.aeth.map(|a| a.syndrome), d.payload))
        .collect()
}

#[test]
fn one_nak_per_gap_with_the_expected_psn() {
    let (mut r, mut mem, ..) = setup();
    let mut rq = VecDeque::new();
    for psn in [3, 4, 5] {
        r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, psn), &mut mem, &mut rq).unwrap();
    }
    assert_eq!(replies(&mut r), vec![(0x11, 0, Some(0x60), TxPayload::None)]);
    // The expected PSN clears the NAK state: the next gap gets its own NAK.
    rq.push_back(RecvWqe::new(&RecvWr { wr_id: 1, sg_list: vec![] }));
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 0), &mut mem, &mut rq).unwrap();
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 7), &mut mem, &mut rq).unwrap();
    // The ACK advertises the receive WQEs left: none (credit code 0).
    assert_eq!(
        replies(&mut r),
        vec![(0x11, 0, Some(0x00), TxPayload::None), (0x11, 1, Some(0x60), TxPayload::None)]
    );
}

#[test]
fn duplicate_send_is_acked_again_not_delivered_again() {
    let (mut r, mut mem, ..) = setup();
    let mut rq = VecDeque::new();
    rq.push_back(RecvWqe::new(&RecvWr { wr_id: 1, sg_list: vec![] }));
    rq.push_back(RecvWqe::new(&RecvWr { wr_id: 2, sg_list: vec![] }));
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 0), &mut mem, &mut rq).unwrap();
    assert_eq!(replies(&mut r).len(), 1, "the first copy is acknowledged");
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 0), &mut mem, &mut rq).unwrap();
    assert_eq!(r.done.len(), 1, "delivered once");
    assert_eq!(rq.len(), 1, "the second receive is still posted");
    // The duplicate is acknowledged with the PSN before the expected one, MSN 1; credit code 1:
    // one receive WQE left.
    assert_eq!(replies(&mut r), vec![(0x11, 0, Some(0x01), TxPayload::None)]);
    assert_eq!(r.msn, 1);
}

#[test]
fn acks_of_one_burst_coalesce_into_the_last_and_never_absorb_a_nak() {
    let (mut r, mut mem, ..) = setup();
    let mut rq = VecDeque::new();
    for id in 0..4 {
        rq.push_back(RecvWqe::new(&RecvWr { wr_id: id, sg_list: vec![] }));
    }
    // Three AckReq'd SENDs before the responder transmits: one ACK, for the last, whose MSN and
    // credits are the latest.
    for psn in 0..3 {
        r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, psn), &mut mem, &mut rq).unwrap();
    }
    assert_eq!(replies(&mut r), vec![(0x11, 2, Some(0x01), TxPayload::None)]);
    assert_eq!(r.msn, 3);
    // A sequence NAK stays; the ACK after it is queued behind it, not merged into it.
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 5), &mut mem, &mut rq).unwrap();
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 3), &mut mem, &mut rq).unwrap();
    assert_eq!(
        replies(&mut r),
        vec![(0x11, 3, Some(0x60), TxPayload::None), (0x11, 3, Some(0x00), TxPayload::None)]
    );
}

#[test]
fn duplicate_read_replays_a_subset_with_the_same_rkey_only() {
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    // 600 bytes at MTU 256: PSNs 0, 1, 2.
    r.handle_request(Operation::ReadRequest, &read(0, addr, key, 600), &mut mem, &mut rq).unwrap();
    let first = replies(&mut r);
    let ops: Vec<(u8, u32)> = first.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(ops, vec![(0x0D, 0), (0x0E, 1), (0x0F, 2)]);
    assert_eq!(first[2].3, TxPayload::Remote { rkey: key, va: addr + 512, len: 88 });
    assert_eq!(r.epsn, 3);
    // The requester lost PSN 1 and 2 and asks again from PSN 1 for the rest.
    r.handle_request(Operation::ReadRequest, &read(1, addr + 256, key, 344), &mut mem, &mut rq).unwrap();
    let replay: Vec<(u8, u32, TxPayload)> = replies(&mut r).into_iter().map(|x| (x.0, x.1, x.3)).collect();
    assert_eq!(
        replay,
        vec![
            (0x0E, 1, TxPayload::Remote { rkey: key, va: addr + 256, len: 256 }),
            (0x0F, 2, TxPayload::Remote { rkey: key, va: addr + 512, len: 88 }),
        ]
    );
    // Another R_Key, or more than the original range: dropped silently.
    r.handle_request(Operation::ReadRequest, &read(1, addr + 256, key ^ 1, 100), &mut mem, &mut rq).unwrap();
    r.handle_request(Operation::ReadRequest, &read(0, addr, key, 601), &mut mem, &mut rq).unwrap();
    assert!(replies(&mut r).is_empty());
    assert_eq!(r.epsn, 3);
}

#[test]
fn duplicate_atomic_replays_the_cached_value_without_executing_again() {
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let mut fadd = pkt(Operation::FetchAdd, 0);
    fadd.atomic_eth = Some(AtomicEthRepr { va: addr + 8, rkey: key, swap_add: 100, compare: 0 });
    let before = u64::from_ne_bytes(mem.bytes(key).unwrap()[8..16].try_into().unwrap());
    for _ in 0..3 {
        r.handle_request(Operation::FetchAdd, &fadd, &mut mem, &mut rq).unwrap();
    }
    let after = u64::from_ne_bytes(mem.bytes(key).unwrap()[8..16].try_into().unwrap());
    assert_eq!(after, before + 100, "executed once");
    let acks = std::iter::from_fn(|| r.poll()).collect::<Vec<_>>();
    assert_eq!(acks.len(), 3);
    assert!(acks.iter().all(|a| a.packet.atomic_ack_eth.map(|x| x.orig) == Some(before)));
    assert!(acks.iter().all(|a| a.packet.bth.psn == 0 && a.packet.aeth.map(|x| x.msn) == Some(1)));
}

#[test]
fn missing_receive_gives_rnr_nak_and_keeps_the_psn() {
    let (mut r, mut mem, ..) = setup();
    let mut rq = VecDeque::new();
    r.handle_request(Operation::SendOnly, &pkt(Operation::SendOnly, 0), &mut mem, &mut rq).unwrap();
    assert_eq!(replies(&mut r), vec![(0x11, 0, Some(0x20 | 5), TxPayload::None)]);
    assert_eq!(r.epsn, 0);
}

#[test]
fn write_outside_the_region_is_nakd_before_any_byte_moves() {
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let before = mem.bytes(key).unwrap().to_vec();
    let data = [0xEEu8; 256];
    let mut w = pkt(Operation::WriteFirst, 0);
    w.reth = Some(RethRepr { va: addr + 4000, rkey: key, dma_len: 1000 });
    w.payload = &data;
    assert_eq!(r.handle_request(Operation::WriteFirst, &w, &mut mem, &mut rq), Err(RespFatal));
    assert_eq!(replies(&mut r), vec![(0x11, 0, Some(0x62), TxPayload::None)]);
    assert_eq!(mem.bytes(key).unwrap(), &before[..]);
}

/// One WRITE packet of `len` bytes, each byte `k`, asking for no ACK.
fn write_pkt(op: Operation, psn: u32, data: &'static [u8]) -> RoceRepr<'static> {
    let mut p = pkt(op, psn);
    p.bth.ack_req = false;
    p.payload = data;
    p
}

/// A WRITE of 5 packets (PSNs 0..=4) whose PSN 1 is lost: 2, 3 and the LAST 4 are written where
/// they belong as they come (one NAK for the gap, nothing acknowledged), and the resent 1 fills
/// the gap: the expected PSN moves past 4, the WRITE is complete (MSN 1), one ACK covers it, and
/// every byte is where it belongs. The copies a go-back-N requester sends again are duplicates.
#[test]
fn write_packets_after_a_gap_are_placed_and_count_once_it_is_filled() {
    static D: [[u8; MTU as usize]; 5] = [[0xA0; 256], [0xA1; 256], [0xA2; 256], [0xA3; 256], [0xA4; 256]];
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let len = 4 * MTU + 100;
    let mut first = write_pkt(Operation::WriteFirst, 0, &D[0]);
    first.reth = Some(RethRepr { va: addr + 512, rkey: key, dma_len: len });
    r.handle_request(Operation::WriteFirst, &first, &mut mem, &mut rq).unwrap();
    for (op, psn, data) in [
        (Operation::WriteMiddle, 2, &D[2][..]),
        (Operation::WriteMiddle, 3, &D[3][..]),
        (Operation::WriteLast, 4, &D[4][..100]),
    ] {
        r.handle_request(op, &write_pkt(op, psn, data), &mut mem, &mut rq).unwrap();
    }
    assert!(r.take_urgent() && !r.take_urgent(), "the NAK is urgent (the requester's window fills), once");
    assert_eq!(replies(&mut r), vec![(0x11, 1, Some(0x60), TxPayload::None)], "one NAK, expecting 1");
    assert_eq!((r.epsn, r.msn, r.drops.placed_ahead), (1, 0, 3));
    assert!(mem.bytes(key).unwrap()[512 + 2 * 256..512 + 3 * 256].iter().all(|&b| b == 0xA2), "written");
    // A copy of a kept packet is not kept again, nor one past the widest window.
    r.handle_request(Operation::WriteMiddle, &write_pkt(Operation::WriteMiddle, 3, &D[1]), &mut mem, &mut rq)
        .unwrap();
    r.handle_request(
        Operation::WriteMiddle,
        &write_pkt(Operation::WriteMiddle, WIDE_CAP + 1, &D[1]),
        &mut mem,
        &mut rq,
    )
    .unwrap();
    assert_eq!(r.drops.placed_ahead, 3);
    assert!(replies(&mut r).is_empty());
    r.handle_request(Operation::WriteMiddle, &write_pkt(Operation::WriteMiddle, 1, &D[1]), &mut mem, &mut rq)
        .unwrap();
    assert_eq!((r.epsn, r.msn), (5, 1));
    assert!(r.take_urgent(), "the ACK that ends the repair is urgent");
    assert_eq!(replies(&mut r), vec![(0x11, 4, Some(0x00), TxPayload::None)], "one ACK for all of it");
    let m = mem.bytes(key).unwrap();
    for k in 0..4 {
        let at = 512 + k * MTU as usize;
        assert!(m[at..at + MTU as usize].iter().all(|&b| b == 0xA0 + k as u8), "packet {k}");
    }
    assert!(m[512 + 4 * 256..512 + 4 * 256 + 100].iter().all(|&b| b == 0xA4));
    assert_eq!(m[512 + 4 * 256 + 100], (512 + 4 * 256 + 100) as u8, "nothing past the WRITE");
    // rxe's go-back-N copies: duplicates, acknowledged again.
    r.handle_request(Operation::WriteMiddle, &write_pkt(Operation::WriteMiddle, 2, &D[2]), &mut mem, &mut rq)
        .unwrap();
    assert_eq!((r.drops.duplicates, r.epsn), (1, 5));
    assert!(r.has_reply() && !r.take_urgent(), "an ACK of a duplicate is not urgent");
}

/// Packets of later messages after a gap are held and handled in order once it is filled: a
/// WRITE of 3 packets (0..=2) loses its MIDDLE 1; a WRITE FIRST/LAST (3, 4), a WRITE ONLY (5)
/// and a WRITE ONLY with immediate (6, whose receive WQE is missing) follow, then more (7, 8).
/// Nothing of them is written before the resent 1 comes; then 3..=5 complete, 6 draws the RNR NAK
/// it would have drawn in order, and what follows it waits for the requester to go back.
#[test]
fn later_messages_after_a_gap_are_held_and_handled_in_order() {
    static D: [u8; 256] = [0xB1; 256];
    static E: [u8; 256] = [0xB2; 256];
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let reth = |va: u64, len: u32| Some(RethRepr { va, rkey: key, dma_len: len });
    let mut first = write_pkt(Operation::WriteFirst, 0, &D);
    first.reth = reth(addr, 3 * MTU);
    r.handle_request(Operation::WriteFirst, &first, &mut mem, &mut rq).unwrap();
    let mut later = vec![write_pkt(Operation::WriteLast, 2, &D)];
    let mut f = write_pkt(Operation::WriteFirst, 3, &E);
    f.reth = reth(addr + 1024, 300);
    later.push(f);
    later.push(write_pkt(Operation::WriteLast, 4, &E[..44]));
    let mut only = write_pkt(Operation::WriteOnly, 5, &E[..10]);
    only.reth = reth(addr + 2048, 10);
    later.push(only);
    let mut imm = write_pkt(Operation::WriteOnlyImm, 6, &E[..10]);
    imm.reth = reth(addr + 3000, 10);
    later.push(imm);
    let mut next = write_pkt(Operation::WriteOnly, 7, &E[..10]);
    next.reth = reth(addr + 3500, 10);
    later.push(next);
    for p in &later {
        let op = p.bth.opcode.info().unwrap().operation;
        r.handle_request(op, p, &mut mem, &mut rq).unwrap();
    }
    assert_eq!(r.drops.placed_ahead, 6);
    assert_eq!(replies(&mut r), vec![(0x11, 1, Some(0x60), TxPayload::None)]);
    assert_eq!(mem.bytes(key).unwrap()[1024], 0, "a later WRITE waits for the gap");
    r.handle_request(Operation::WriteMiddle, &write_pkt(Operation::WriteMiddle, 1, &D), &mut mem, &mut rq)
        .unwrap();
    assert_eq!((r.epsn, r.msn), (6, 3));
    assert_eq!(replies(&mut r), vec![(0x11, 6, Some(0x20 | 5), TxPayload::None)], "the RNR NAK");
    let m = mem.bytes(key).unwrap();
    assert!(m[..768].iter().all(|&b| b == 0xB1));
    assert!(m[1024..1324].iter().all(|&b| b == 0xB2) && m[1324] == (1324 % 256) as u8);
    assert!(m[2048..2058].iter().all(|&b| b == 0xB2) && m[2058] == (2058 % 256) as u8);
    assert_eq!(m[3500], (3500 % 256) as u8, "what follows the RNR NAK is sent again");
    // The requester goes back to 6 once a WQE is posted; 7 comes again and is taken in order.
    rq.push_back(RecvWqe::new(&RecvWr { wr_id: 9, sg_list: vec![] }));
    for p in &later[4..] {
        let op = p.bth.opcode.info().unwrap().operation;
        r.handle_request(op, p, &mut mem, &mut rq).unwrap();
    }
    assert_eq!((r.epsn, r.msn, r.done.len()), (8, 5, 1));
}

/// A packet held after a gap that is not valid where it stands gets, once the gap is filled, the
/// NAK it would have got in order (here a WRITE MIDDLE after the WRITE's LAST), and the QP fails
/// as it would have.
#[test]
fn a_held_packet_meets_the_in_order_checks() {
    static D: [u8; 256] = [0xB1; 256];
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let mut only = write_pkt(Operation::WriteOnly, 0, &D[..8]);
    only.reth = Some(RethRepr { va: addr, rkey: key, dma_len: 8 });
    let stray = write_pkt(Operation::WriteMiddle, 1, &D);
    r.handle_request(Operation::WriteMiddle, &stray, &mut mem, &mut rq).unwrap();
    assert_eq!(r.drops.placed_ahead, 1);
    assert_eq!(r.handle_request(Operation::WriteOnly, &only, &mut mem, &mut rq), Err(RespFatal));
    assert_eq!(replies(&mut r), vec![(0x11, 1, Some(0x61), TxPayload::None)], "invalid request");
    assert_eq!(r.msn, 1, "the WRITE before it completed");
}

/// A SEND of 4 packets (0..=3) loses its FIRST; the rest, and a SEND ONLY after it (4), are held,
/// and once the resent FIRST comes each takes its receive WQE in order, every byte in place.
#[test]
fn sends_after_a_gap_are_held_and_take_their_receive_wqes_in_order() {
    static D: [[u8; MTU as usize]; 4] = [[0xD0; 256], [0xD1; 256], [0xD2; 256], [0xD3; 256]];
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    for (wr_id, off) in [(1u64, 0u64), (2, 2048)] {
        let sg_list = vec![crate::types::Sge { addr: addr + off, length: 1024, lkey: key }];
        rq.push_back(RecvWqe::new(&RecvWr { wr_id, sg_list }));
    }
    let ops = [Operation::SendFirst, Operation::SendMiddle, Operation::SendMiddle, Operation::SendLast];
    for psn in [1u32, 2, 3] {
        let len = if psn == 3 { 20 } else { 256 };
        let p = write_pkt(ops[psn as usize], psn, &D[psn as usize][..len]);
        r.handle_request(ops[psn as usize], &p, &mut mem, &mut rq).unwrap();
    }
    let mut only = write_pkt(Operation::SendOnly, 4, &D[0][..5]);
    only.bth.ack_req = true;
    r.handle_request(Operation::SendOnly, &only, &mut mem, &mut rq).unwrap();
    assert_eq!((r.drops.placed_ahead, rq.len(), r.done.len()), (4, 2, 0));
    r.handle_request(Operation::SendFirst, &write_pkt(Operation::SendFirst, 0, &D[0]), &mut mem, &mut rq)
        .unwrap();
    assert_eq!((r.epsn, r.msn), (5, 2));
    let done: Vec<_> = r.done.iter().map(|wc| (wc.wr_id, wc.status, wc.byte_len)).collect();
    assert_eq!(done, vec![(1, WcStatus::Success, 3 * 256 + 20), (2, WcStatus::Success, 5)]);
    assert_eq!(replies(&mut r).last().map(|x| (x.1, x.2)), Some((4, Some(0x00))), "one ACK for all");
    let m = mem.bytes(key).unwrap();
    for k in 0..3 {
        assert!(m[k * 256..(k + 1) * 256].iter().all(|&b| b == 0xD0 + k as u8), "packet {k}");
    }
    assert!(m[768..788].iter().all(|&b| b == 0xD3));
    assert!(m[2048..2053].iter().all(|&b| b == 0xD0));
}

/// A WRITE of a later message placed after a gap is held until the gap is filled: the atomic the
/// gap hid (lost, then resent) still sees memory as it was, and the WRITE lands after it, as in
/// order.
#[test]
fn a_later_write_waits_for_the_atomic_the_gap_hid() {
    static W: [u8; 8] = [0xCC; 8];
    let (mut r, mut mem, key, addr) = setup();
    let mut rq = VecDeque::new();
    let word = |mem: &MemTable| u64::from_ne_bytes(mem.bytes(key).unwrap()[8..16].try_into().unwrap());
    let before = word(&mem);
    let mut only = write_pkt(Operation::WriteOnly, 1, &W);
    only.reth = Some(RethRepr { va: addr + 8, rkey: key, dma_len: 8 });
    r.handle_request(Operation::WriteOnly, &only, &mut mem, &mut rq).unwrap();
    assert_eq!((r.drops.placed_ahead, word(&mem)), (1, before), "held, not written");
    let mut fadd = pkt(Operation::FetchAdd, 0);
    fadd.atomic_eth = Some(AtomicEthRepr { va: addr + 8, rkey: key, swap_add: 100, compare: 0 });
    r.handle_request(Operation::FetchAdd, &fadd, &mut mem, &mut rq).unwrap();
    assert_eq!((r.epsn, r.msn), (2, 2));
    assert_eq!(word(&mem), u64::from_ne_bytes(W), "the WRITE came after the atomic");
    let out = std::iter::from_fn(|| r.poll()).collect::<Vec<_>>();
    assert_eq!(out[1].packet.atomic_ack_eth.map(|a| a.orig), Some(before));
    assert_eq!(out.last().map(|a| a.packet.bth.psn), Some(1), "one ACK covers the WRITE");
}
