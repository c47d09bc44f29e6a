//! One RC queue pair fed hand-made packets (no network): source checks, DCQCN's reaction to CNPs,
//! and the responder's limits on what a peer may send.

use engine::roce::dcqcn::DcqcnConfig;
use engine::roce::{HoldPool, HoldStats, MAX_MSG_SIZE, QpConfig, QueuePair, RxMeta};
use engine::verbs::{
    Access, AddressVector, MemTable, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, Sge, WcStatus,
};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use wire::ib::{BthRepr, Opcode, Operation, RethRepr, RoceRepr, Transport};

const ME: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const STRANGER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99));
const LINE: u64 = 100_000_000_000;
/// An IPv4 header without ECN marks.
const IP: [u8; 20] = [0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];

/// An RC QP 0x11 connected to PEER's QP 0x12, in RTS, with DCQCN if asked and a 4096-byte MTU.
fn rc_qp(dcqcn: Option<DcqcnConfig>) -> QueuePair {
    rc_qp_holding_in(dcqcn, None)
}

/// [`rc_qp`], holding packets after a gap in `pool` if given (a pool of its own otherwise).
fn rc_qp_holding_in(dcqcn: Option<DcqcnConfig>, pool: Option<&HoldPool>) -> QueuePair {
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        srq: false,
        port_mtu: Mtu::Mtu4096,
        fixed_src_port: None,
        qpn: 0x11,
        pd: 0,
        cap: QpCap { max_recv_sge: 32, ..QpCap::default() },
        sq_sig_all: true,
        mac: [2, 0, 0, 0, 0, 1],
        gid: ME,
        dcqcn,
    };
    let mut qp = match pool {
        Some(pool) => QueuePair::with_hold_pool(cfg, pool.clone()),
        None => QueuePair::new(cfg),
    };
    let init = QpAttr { qp_access_flags: Some(Access::REMOTE_WRITE), ..QpAttr::default() };
    qp.modify(QpState::Init, &init).unwrap();
    let mut av = AddressVector::new(PEER);
    av.dmac = Some([2, 0, 0, 0, 0, 2]);
    let rtr = QpAttr {
        ah_attr: Some(av),
        path_mtu: Some(Mtu::Mtu4096),
        dest_qp_num: Some(0x12),
        rq_psn: Some(0),
        max_dest_rd_atomic: Some(4),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rtr, &rtr).unwrap();
    let rts = QpAttr {
        sq_psn: Some(0),
        timeout: Some(14),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(1),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rts, &rts).unwrap();
    qp
}

fn cnp_from(qp: &mut QueuePair, mem: &mut MemTable, now: Duration, src: IpAddr) {
    let mut bth = BthRepr::new(Opcode::CNP, 0x11, 0);
    bth.becn = true;
    let pkt = RoceRepr::new(bth, &[]);
    qp.handle_packet(now, &RxMeta { src, ip_header: &IP }, &pkt, mem, None);
}

#[test]
fn a_cnp_from_a_foreign_source_does_not_change_the_rate() {
    let mut qp = rc_qp(Some(DcqcnConfig::new(LINE)));
    let mut mem = MemTable::default();
    for i in 0..100 {
        cnp_from(&mut qp, &mut mem, Duration::from_micros(10 + 100 * i), STRANGER);
    }
    let d = qp.dcqcn().unwrap();
    assert_eq!((d.rate_bps(), d.cnps()), (LINE, 0), "CNPs from a stranger changed the rate");
    cnp_from(&mut qp, &mut mem, Duration::from_micros(20_000), PEER);
    assert_eq!(qp.dcqcn().unwrap().rate_bps(), LINE / 2, "a CNP from the peer cuts the rate");
}

#[test]
fn at_most_one_rate_cut_per_cnp_interval() {
    let cfg = DcqcnConfig::new(LINE);
    let mut qp = rc_qp(Some(cfg));
    let mut mem = MemTable::default();
    let t0 = Duration::from_micros(10);
    cnp_from(&mut qp, &mut mem, t0, PEER);
    let cut = qp.dcqcn().unwrap().rate_bps();
    assert_eq!(cut, LINE / 2);
    for i in 1..50 {
        cnp_from(&mut qp, &mut mem, t0 + Duration::from_micros(i), PEER);
    }
    let d = qp.dcqcn().unwrap();
    assert_eq!(d.rate_bps(), cut, "a burst of CNPs inside one interval cut the rate more than once");
    assert_eq!(d.cnps(), 50);
    cnp_from(&mut qp, &mut mem, t0 + cfg.cnp_interval, PEER);
    assert!(qp.dcqcn().unwrap().rate_bps() < cut, "the next interval's CNP cuts again");
}

#[test]
fn a_send_longer_than_max_msg_size_is_refused_on_receive() {
    let mut qp = rc_qp(None);
    let mut mem = MemTable::default();
    // One 1 MiB region named 16 times: a 16 MiB receive WQE, twice the largest message.
    let (key, addr) = mem.register(0, 1 << 20, Access::LOCAL_WRITE).unwrap();
    let sg_list = vec![Sge { addr, length: 1 << 20, lkey: key }; 16];
    qp.post_recv(&RecvWr { wr_id: 7, sg_list }).unwrap();
    let payload = vec![0x5A; 4096];
    let meta = RxMeta { src: PEER, ip_header: &IP };
    let packets = MAX_MSG_SIZE / 4096 + 1;
    for psn in 0..packets as u32 {
        let op = if psn == 0 { Operation::SendFirst } else { Operation::SendMiddle };
        let bth = BthRepr::new(Opcode::new(Transport::Rc, op).unwrap(), 0x11, psn);
        qp.handle_packet(Duration::from_micros(10), &meta, &RoceRepr::new(bth, &payload), &mut mem, None);
    }
    assert_eq!(qp.state(), QpState::Error, "{} bytes of one SEND were accepted", packets * 4096);
    let wc = std::iter::from_fn(|| qp.poll_completion()).find(|(_, wc)| wc.wr_id == 7).unwrap().1;
    assert_eq!(wc.status, WcStatus::LocLenErr);
}

/// A peer that leaves a gap on every QP it talks to (PSN 0 never comes, 254 WRITEs after it do)
/// makes a device hold at most what its pool allows, not 254 packets per QP: the QPs share the
/// bound, what finds it spent is dropped and counted, and every copy goes back to the pool when
/// its gap is filled or its QP is reset or destroyed, to serve the next gap without allocating.
#[test]
fn packets_held_after_gaps_share_one_bound_per_device() {
    const AFTER_GAP: u32 = 254;
    let pool = HoldPool::new(300);
    let mut mem = MemTable::default();
    let (rkey, va) = mem.register(0, 16 * 256, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let mut qps: Vec<QueuePair> = (0..4).map(|_| rc_qp_holding_in(None, Some(&pool))).collect();
    let meta = RxMeta { src: PEER, ip_header: &IP };
    let write_at = |qp: &mut QueuePair, mem: &mut MemTable, psn: u32| {
        let bth = BthRepr::new(Opcode::new(Transport::Rc, Operation::WriteOnly).unwrap(), 0x11, psn);
        let payload = [psn as u8; 16];
        let mut pkt = RoceRepr::new(bth, &payload);
        pkt.reth = Some(RethRepr { va: va + 16 * u64::from(psn), rkey, dma_len: 16 });
        qp.handle_packet(Duration::from_micros(10), &meta, &pkt, mem, None);
    };
    for qp in &mut qps {
        (1..=AFTER_GAP).for_each(|psn| write_at(qp, &mut mem, psn));
    }
    let kept: Vec<(u64, u64)> = qps.iter().map(|q| (q.drops().placed_ahead, q.drops().not_held)).collect();
    assert_eq!(kept, [(254, 0), (46, 208), (0, 254), (0, 254)], "held, then dropped, QP by QP");
    assert_eq!(pool.stats(), HoldStats { held: 300, spare: 0, capacity: 300 });

    // The first QP's gap is filled: its 254 held WRITEs land, in order, and their copies go back.
    write_at(&mut qps[0], &mut mem, 0);
    let written = mem.bytes(rkey).unwrap();
    assert!((0..=AFTER_GAP as usize).all(|p| written[16 * p..16 * (p + 1)] == [p as u8; 16]));
    assert_eq!(pool.stats(), HoldStats { held: 46, spare: 254, capacity: 300 });
    // The second is reset: its copies go back too.
    qps[1].modify(QpState::Reset, &QpAttr::default()).unwrap();
    assert_eq!(pool.stats(), HoldStats { held: 0, spare: 300, capacity: 300 });
    // A gap on a fresh QP takes its copies from the spares.
    qps[2] = rc_qp_holding_in(None, Some(&pool));
    (1..=AFTER_GAP).for_each(|psn| write_at(&mut qps[2], &mut mem, psn));
    assert_eq!(pool.stats(), HoldStats { held: 254, spare: 46, capacity: 300 });
    drop(qps);
    assert_eq!(pool.stats(), HoldStats { held: 0, spare: 300, capacity: 300 });
}
