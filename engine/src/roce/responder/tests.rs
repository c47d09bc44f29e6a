//! The responder's unit tests.

use super::*;
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
    (Responder::new(cfg, 0), mem, key, addr)
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
