//! Feeds arbitrary RoCE transport packets to a connected RC QP (requester, completer and responder)
//! with requests outstanding in both directions, running its timers and transmissions in between.
//! Nothing may panic, and every frame the QP sends must parse and carry a correct ICRC.
//!
//! Input: chunks of `[u16 big-endian length][BTH and the rest]`.
#![no_main]

use engine::roce::{QpConfig, QueuePair};
use engine::verbs::{
    Access, AddressVector, MemTable, Mtu, QpAttr, QpCap, QpState, RecvWr, SendFlags, SendWr, Sge, WrOpcode,
};
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use wire::FrameRepr;
use wire::ib::RoceRepr;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

fn setup() -> (QueuePair, MemTable) {
    let mut mem = MemTable::default();
    let (key, addr) = mem.register(0, 65536, Access::ALL).unwrap();
    let cfg = QpConfig {
        qpn: 0x11,
        pd: 0,
        cap: QpCap::default(),
        sq_sig_all: true,
        mac: [2, 0, 0, 0, 0, 1],
        gid: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    };
    let mut qp = QueuePair::new(cfg);
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    qp.modify(QpState::Init, &QpAttr { qp_access_flags: Some(access), ..QpAttr::default() }).unwrap();
    let mut av = AddressVector::new(PEER);
    av.dmac = Some([2, 0, 0, 0, 0, 2]);
    let rtr = QpAttr {
        ah_attr: Some(av),
        path_mtu: Some(Mtu::Mtu256),
        dest_qp_num: Some(0x12),
        rq_psn: Some(0),
        max_dest_rd_atomic: Some(4),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rtr, &rtr).unwrap();
    let rts = QpAttr {
        sq_psn: Some(0),
        timeout: Some(1),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(4),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rts, &rts).unwrap();
    let sge = |off: u64, len: u32| Sge { addr: addr + off, length: len, lkey: key };
    for i in 0..3u64 {
        qp.post_recv(&RecvWr { wr_id: 100 + i, sg_list: vec![sge(i * 1024, 1024)] }, &mem).unwrap();
    }
    let ops = [
        WrOpcode::Send,
        WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 7 },
        WrOpcode::RdmaRead { remote_addr: 0x1000, rkey: 7 },
        WrOpcode::AtomicFetchAndAdd { remote_addr: 0x1000, rkey: 7, add: 1 },
    ];
    for (i, op) in ops.into_iter().enumerate() {
        let len = if matches!(op, WrOpcode::AtomicFetchAndAdd { .. }) { 8 } else { 700 };
        let wr = SendWr {
            wr_id: i as u64,
            opcode: op,
            sg_list: vec![sge(8192 + i as u64 * 1024, len)],
            flags: SendFlags::SIGNALED,
        };
        qp.post_send(&wr, &mem).unwrap();
    }
    (qp, mem)
}

fuzz_target!(|data: &[u8]| {
    let (mut qp, mut mem) = setup();
    let mut buf = vec![0u8; 8192];
    let mut now = Duration::ZERO;
    let mut rest = data;
    loop {
        while let Some(n) = qp.poll_transmit(now, &mem, &mut buf) {
            let f =
                FrameRepr::parse_verified(&buf[..n], &Default::default()).expect("the QP sends valid frames");
            assert!(f.roce().is_some());
        }
        while qp.poll_completion().is_some() {}
        if rest.len() < 2 {
            break;
        }
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let (pkt, tail) = rest[2..].split_at(len);
        rest = tail;
        if let Ok(r) = RoceRepr::parse(pkt) {
            qp.handle_packet(now, PEER, &r, &mut mem);
        }
        now += Duration::from_micros(3);
        if qp.poll_timeout().is_some_and(|t| t <= now) {
            qp.handle_timeout(now);
        }
    }
});
