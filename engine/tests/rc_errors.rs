//! RC error paths and verbs misuse over the simulated network (issue 4, acceptance 2).

mod common;

use common::{drain, run_for, sge};
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::MemError;
use engine::verbs::{
    Access, AddressVector, Mr, Mtu, QpAttr, QpCap, QpInitAttr, QpState, RecvWr, SendFlags, SendWr, Sge,
    VerbsError, WcOpcode, WcStatus, WorkCompletion, WrOpcode,
};
use nicsim::LinkConfig;
use std::time::Duration;
use wire::FrameRepr;
use wire::ib::{AethKind, NakCode};

/// Runs until `a` has `n` completions, collecting them.
fn until_a(p: &mut SimPair, n: usize, limit: Duration) -> Vec<WorkCompletion> {
    let mut got = Vec::new();
    let end = p.net.now() + limit;
    p.run_until(end, |p| {
        got.extend(drain(p, true));
        got.len() >= n
    })
    .unwrap();
    got
}

fn wr(wr_id: u64, opcode: WrOpcode, sg: Vec<Sge>) -> SendWr {
    SendWr::new(wr_id, opcode, sg)
}

/// The RoCE packets the tap saw, parsed: (sent by a?, opcode, psn, ack_req, AETH kind).
fn tap(p: &mut SimPair) -> Vec<(bool, u8, u32, bool, Option<AethKind>)> {
    p.net
        .with(|n| n.take_tap())
        .iter()
        .filter_map(|r| {
            let f = FrameRepr::parse(&r.bytes).ok()?;
            let pkt = f.roce()?;
            Some((r.port == 0, pkt.bth.opcode.0, pkt.bth.psn, pkt.bth.ack_req, pkt.aeth.map(|a| a.kind())))
        })
        .collect()
}

const FILL: u8 = 0xAB;

/// A pair with a 32 KiB source on a and a 32 KiB target on b (filled with 0xAB) of the given access.
fn setup(cfg: PairConfig, target_access: Access) -> (SimPair, Mr, Mr) {
    let mut p = SimPair::new(&cfg).unwrap();
    p.net.with(|n| n.enable_tap());
    let src = p.a.reg_mr(p.pd_a, 32768, Access::LOCAL_WRITE).unwrap();
    p.a.mr_bytes_mut(&src).unwrap().fill(0x11);
    let dst = p.b.reg_mr(p.pd_b, 32768, target_access).unwrap();
    p.b.mr_bytes_mut(&dst).unwrap().fill(FILL);
    (p, src, dst)
}

#[test]
fn remote_access_errors_leave_target_memory_untouched() {
    let lw = Access::LOCAL_WRITE;
    let rw = lw | Access::REMOTE_WRITE;
    type Case = (&'static str, Access, fn(&Mr, &Mr) -> SendWr);
    let cases: [Case; 8] = [
        ("bad rkey", rw, |s, d| {
            wr(1, WrOpcode::RdmaWrite { remote_addr: d.addr, rkey: d.rkey ^ 0x100 }, vec![sge(s, 0, 100)])
        }),
        ("range past the end", rw, |s, d| {
            wr(
                1,
                WrOpcode::RdmaWrite { remote_addr: d.addr + 32768 - 50, rkey: d.rkey },
                vec![sge(s, 0, 100)],
            )
        }),
        ("address below the region", rw, |s, d| {
            wr(1, WrOpcode::RdmaWrite { remote_addr: d.addr - 8, rkey: d.rkey }, vec![sge(s, 0, 100)])
        }),
        ("multi-packet WRITE whose end is outside", rw, |s, d| {
            wr(1, WrOpcode::RdmaWrite { remote_addr: d.addr + 24576, rkey: d.rkey }, vec![sge(s, 0, 9000)])
        }),
        ("WRITE without REMOTE_WRITE", lw | Access::REMOTE_READ, |s, d| {
            wr(1, WrOpcode::RdmaWrite { remote_addr: d.addr, rkey: d.rkey }, vec![sge(s, 0, 100)])
        }),
        ("WRITE_WITH_IMM without REMOTE_WRITE", lw, |s, d| {
            wr(
                1,
                WrOpcode::RdmaWriteWithImm { remote_addr: d.addr, rkey: d.rkey, imm: 5 },
                vec![sge(s, 0, 10)],
            )
        }),
        ("READ without REMOTE_READ", rw, |s, d| {
            wr(1, WrOpcode::RdmaRead { remote_addr: d.addr, rkey: d.rkey }, vec![sge(s, 0, 100)])
        }),
        ("atomic without REMOTE_ATOMIC", rw | Access::REMOTE_READ, |s, d| {
            wr(
                1,
                WrOpcode::AtomicFetchAndAdd { remote_addr: d.addr, rkey: d.rkey, add: 1 },
                vec![sge(s, 0, 8)],
            )
        }),
    ];
    for (name, access, make) in cases {
        let (mut p, src, dst) = setup(PairConfig::default(), access);
        let (qa, qb) = p.qps[0];
        p.b.post_recv(qb, &[RecvWr { wr_id: 9, sg_list: vec![] }]).unwrap();
        let w = make(&src, &dst);
        let want_op = w.opcode.wc_opcode();
        p.a.post_send(qa, &[w, wr(2, WrOpcode::Send, vec![])]).unwrap();
        let wcs = until_a(&mut p, 2, Duration::from_secs(1));
        assert_eq!(wcs.len(), 2, "{name}: {wcs:?}");
        assert_eq!(
            (wcs[0].status, wcs[0].opcode, wcs[0].wr_id),
            (WcStatus::RemAccessErr, want_op, 1),
            "{name}"
        );
        assert_eq!((wcs[1].status, wcs[1].wr_id), (WcStatus::WrFlushErr, 2), "{name}: the rest is flushed");
        assert!(p.b.mr_bytes(&dst).unwrap().iter().all(|&x| x == FILL), "{name}: target memory changed");
        let naks: Vec<_> = tap(&mut p).into_iter().filter(|t| !t.0 && t.4.is_some()).collect();
        assert!(
            naks.iter().any(|t| t.4 == Some(AethKind::Nak(NakCode::RemoteAccessError))),
            "{name}: no NAK 0x62 on the wire: {naks:?}"
        );
        assert_eq!(p.a.query_qp(qa).unwrap().0, QpState::Error, "{name}");
        assert_eq!(
            p.b.query_qp(qb).unwrap().0,
            QpState::Error,
            "{name}: rxe moves the responder to error too"
        );
        let flushed = drain(&mut p, false);
        assert_eq!(flushed.len(), 1, "{name}: the receive is flushed");
        assert_eq!(flushed[0].status, WcStatus::WrFlushErr);
    }
}

#[test]
fn rnr_nak_then_success_when_the_receive_comes_late() {
    let cfg = PairConfig { min_rnr_timer: 3, rnr_retry: 7, ..PairConfig::default() };
    let (mut p, src, _) = setup(cfg, Access::LOCAL_WRITE);
    let (qa, qb) = p.qps[0];
    p.a.post_send(qa, &[wr(1, WrOpcode::SendWithImm { imm: 77 }, vec![sge(&src, 0, 3000)])]).unwrap();
    run_for(&mut p, Duration::from_millis(5));
    assert!(drain(&mut p, true).is_empty(), "no completion without a receive");
    let t = tap(&mut p);
    let rnr: Vec<_> = t.iter().filter(|x| matches!(x.4, Some(AethKind::RnrNak { timer: 3 }))).collect();
    assert!(rnr.len() >= 10, "an RNR NAK per 30 us retry (min_rnr_timer 3): {}", rnr.len());
    let recv_mr = p.b.reg_mr(p.pd_b, 4096, Access::LOCAL_WRITE).unwrap();
    p.b.post_recv(qb, &[RecvWr { wr_id: 5, sg_list: vec![sge(&recv_mr, 0, 4096)] }]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!((wcs[0].status, wcs[0].opcode), (WcStatus::Success, WcOpcode::Send));
    let r = drain(&mut p, false);
    assert_eq!(
        (r[0].wr_id, r[0].status, r[0].byte_len, r[0].imm_data),
        (5, WcStatus::Success, 3000, Some(77))
    );
    assert!(p.b.mr_bytes(&recv_mr).unwrap()[..3000].iter().all(|&x| x == 0x11));
}

#[test]
fn rnr_retry_exceeded() {
    let cfg = PairConfig { min_rnr_timer: 1, rnr_retry: 2, ..PairConfig::default() };
    let (mut p, src, _) = setup(cfg, Access::LOCAL_WRITE);
    let (qa, _) = p.qps[0];
    p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![sge(&src, 0, 10)]), wr(2, WrOpcode::Send, vec![])])
        .unwrap();
    let wcs = until_a(&mut p, 2, Duration::from_secs(1));
    assert_eq!(wcs[0].status, WcStatus::RnrRetryExcErr);
    assert_eq!(wcs[1].status, WcStatus::WrFlushErr);
    let rnr = tap(&mut p).iter().filter(|x| matches!(x.4, Some(AethKind::RnrNak { .. }))).count();
    assert_eq!(rnr, 3, "the first RNR NAK and one per retry");
}

#[test]
fn retry_exceeded_when_the_peer_is_gone() {
    let cfg = PairConfig { retry_cnt: 3, timeout: 8, ..PairConfig::default() };
    let (mut p, src, dst) = setup(cfg, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let (qa, _) = p.qps[0];
    // Cut the cable in both directions.
    let cut = LinkConfig { loss: 1.0, ..LinkConfig::default() };
    p.net.with(|n| {
        n.set_egress(nicsim::PortId(0), cut).unwrap();
        n.set_egress(nicsim::PortId(1), cut).unwrap();
    });
    let t0 = p.net.now();
    let write = WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(qa, &[wr(1, write, vec![sge(&src, 0, 2000)]), wr(2, write, vec![sge(&src, 0, 10)])])
        .unwrap();
    let wcs = until_a(&mut p, 2, Duration::from_secs(1));
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::RetryExcErr));
    assert_eq!((wcs[1].wr_id, wcs[1].status), (2, WcStatus::WrFlushErr));
    // Four rounds (the first send and three retries): T = 4.096 us x 2^8, then each timeout
    // doubles the next, up to 4T (T + 2T + 4T + 4T).
    let took = p.net.now() - t0;
    let timeout = Duration::from_nanos(4096 << 8);
    assert!(took >= 11 * timeout && took < 12 * timeout, "failed after {took:?}");
    let sent = tap(&mut p).iter().filter(|x| x.0).count();
    assert_eq!(
        sent,
        4 * 9,
        "2 + 1 packets and three tail probes (the oldest and the last again) per round, 4 rounds"
    );
    assert_eq!(p.a.stats().requests.tail_probes, 4 * 3);
}

#[test]
fn qp_flush_on_error() {
    let (mut p, src, _) = setup(PairConfig::default(), Access::LOCAL_WRITE);
    let (qa, qb) = p.qps[0];
    for i in 0..4 {
        p.a.post_send(qa, &[wr(i, WrOpcode::Send, vec![sge(&src, 0, 100)])]).unwrap();
        p.b.post_recv(qb, &[RecvWr { wr_id: 10 + i, sg_list: vec![] }]).unwrap();
    }
    p.a.modify_qp(qa, QpState::Error, &QpAttr::default()).unwrap();
    p.b.modify_qp(qb, QpState::Error, &QpAttr::default()).unwrap();
    let a = drain(&mut p, true);
    let b = drain(&mut p, false);
    assert_eq!(
        a.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (0..4).map(|i| (i, WcStatus::WrFlushErr)).collect::<Vec<_>>()
    );
    assert_eq!(
        b.iter().map(|w| (w.wr_id, w.opcode)).collect::<Vec<_>>(),
        (10..14).map(|i| (i, WcOpcode::Recv)).collect::<Vec<_>>()
    );
    assert!(b.iter().all(|w| w.status == WcStatus::WrFlushErr));
    // Posting in the error state completes at once with a flush error.
    p.a.post_send(qa, &[wr(7, WrOpcode::Send, vec![])]).unwrap();
    assert_eq!(drain(&mut p, true)[0].status, WcStatus::WrFlushErr);
    run_for(&mut p, Duration::from_millis(10));
    assert_eq!(tap(&mut p).len(), 0, "nothing is sent from the error state");
    // ERR -> RESET -> INIT works; RESET -> RTS does not.
    p.a.modify_qp(qa, QpState::Reset, &QpAttr::default()).unwrap();
    assert_eq!(
        p.a.modify_qp(qa, QpState::Rts, &QpAttr::default()),
        Err(VerbsError::InvalidTransition(QpState::Reset, QpState::Rts))
    );
    p.a.modify_qp(qa, QpState::Init, &QpAttr { qp_access_flags: Some(Access::NONE), ..QpAttr::default() })
        .unwrap();
}

#[test]
fn receive_too_short_is_an_invalid_request() {
    let (mut p, src, _) = setup(PairConfig::default(), Access::LOCAL_WRITE);
    let (qa, qb) = p.qps[0];
    let small = p.b.reg_mr(p.pd_b, 1000, Access::LOCAL_WRITE).unwrap();
    p.b.post_recv(qb, &[RecvWr { wr_id: 3, sg_list: vec![sge(&small, 0, 1000)] }]).unwrap();
    p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![sge(&src, 0, 2000)])]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!(wcs[0].status, WcStatus::RemInvReqErr);
    let r = drain(&mut p, false);
    assert_eq!((r[0].wr_id, r[0].status), (3, WcStatus::LocLenErr));
}

#[test]
fn send_with_invalidate_revokes_the_rkey() {
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_INVALIDATE;
    let (mut p, src, dst) = setup(PairConfig::default(), all);
    let (qa, qb) = p.qps[0];
    p.b.post_recv(qb, &[RecvWr { wr_id: 4, sg_list: vec![] }]).unwrap();
    p.a.post_send(qa, &[wr(1, WrOpcode::SendWithInv { invalidate_rkey: dst.rkey }, vec![])]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!(wcs[0].status, WcStatus::Success);
    let r = drain(&mut p, false);
    assert_eq!((r[0].status, r[0].invalidated_rkey, r[0].byte_len), (WcStatus::Success, Some(dst.rkey), 0));
    let write = WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(qa, &[wr(2, write, vec![sge(&src, 0, 64)])]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
    assert!(p.b.mr_bytes(&dst).unwrap().iter().all(|&x| x == FILL));
}

#[test]
fn inline_data_and_scatter_gather_lists() {
    let cap = QpCap { max_send_sge: 3, max_recv_sge: 3, max_inline_data: 64, ..QpCap::default() };
    let (mut p, _, _) = setup(PairConfig { cap, ..PairConfig::default() }, Access::LOCAL_WRITE);
    let (qa, qb) = p.qps[0];
    let m1 = p.a.reg_mr(p.pd_a, 4096, Access::NONE).unwrap();
    let m2 = p.a.reg_mr(p.pd_a, 4096, Access::NONE).unwrap();
    p.a.mr_bytes_mut(&m1).unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    p.a.mr_bytes_mut(&m2).unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = (i * 3) as u8);
    let r1 = p.b.reg_mr(p.pd_b, 4096, Access::LOCAL_WRITE).unwrap();
    let r2 = p.b.reg_mr(p.pd_b, 4096, Access::LOCAL_WRITE).unwrap();
    let r3 = p.b.reg_mr(p.pd_b, 4096, Access::LOCAL_WRITE).unwrap();
    // Three receive SGEs take 10 + 2500 + 3000 bytes; the gather list sends 2000 + 3000.
    let rsg = vec![sge(&r1, 0, 10), sge(&r2, 100, 2500), sge(&r1, 1000, 3000)];
    let rsg2 = vec![sge(&r3, 0, 30), sge(&r3, 100, 30)];
    p.b.post_recv(qb, &[RecvWr { wr_id: 1, sg_list: rsg }, RecvWr { wr_id: 2, sg_list: rsg2 }]).unwrap();
    let big = wr(1, WrOpcode::Send, vec![sge(&m1, 0, 2000), sge(&m2, 500, 3000)]);
    let mut inline = wr(2, WrOpcode::Send, vec![sge(&m1, 3000, 20), sge(&m2, 0, 20)]);
    inline.flags = SendFlags::SIGNALED | SendFlags::INLINE;
    p.a.post_send(qa, &[big, inline]).unwrap();
    // Inline data is copied at post time: changing the source now must not matter.
    p.a.mr_bytes_mut(&m1).unwrap()[3000..3020].fill(0xEE);
    let wcs = until_a(&mut p, 2, Duration::from_secs(1));
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let r = drain(&mut p, false);
    assert_eq!(r.iter().map(|w| w.byte_len).collect::<Vec<_>>(), vec![5000, 40]);
    let mut expect: Vec<u8> = (0..2000).map(|i| i as u8).collect();
    expect.extend((500..3500).map(|i| (i * 3) as u8));
    let mut got = Vec::new();
    got.extend_from_slice(&p.b.mr_bytes(&r1).unwrap()[..10]);
    got.extend_from_slice(&p.b.mr_bytes(&r2).unwrap()[100..2600]);
    got.extend_from_slice(&p.b.mr_bytes(&r1).unwrap()[1000..3490]);
    let first_diff = got.iter().zip(&expect).position(|(a, b)| a != b);
    assert!(got == expect, "scattered SEND data differs from byte {first_diff:?}");
    let mut inl: Vec<u8> = (3000..3020).map(|i| i as u8).collect();
    inl.extend((0..20).map(|i| (i * 3) as u8));
    let r3b = p.b.mr_bytes(&r3).unwrap();
    assert!(r3b[..30] == inl[..30] && r3b[100..110] == inl[30..], "inline SEND data differs");
}

#[test]
fn verbs_misuse_gives_typed_errors() {
    let cap = QpCap { max_send_wr: 2, max_send_sge: 1, max_inline_data: 16, ..QpCap::default() };
    let (mut p, src, dst) = setup(PairConfig { cap, ..PairConfig::default() }, Access::LOCAL_WRITE);
    let (qa, _) = p.qps[0];
    let e = |r: Result<(), (usize, VerbsError)>| r.unwrap_err().1;
    // SGEs: out of range, unknown key, another PD's region, too many.
    assert_eq!(
        e(p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![sge(&src, 32000, 1000)])])),
        VerbsError::InvalidSge(MemError::OutOfRange)
    );
    let bogus = Sge { addr: src.addr, length: 4, lkey: src.lkey ^ 0x7700 };
    assert_eq!(
        e(p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![bogus])])),
        VerbsError::InvalidSge(MemError::BadKey)
    );
    let pd2 = p.a.alloc_pd();
    let other = p.a.reg_mr(pd2, 64, Access::LOCAL_WRITE).unwrap();
    assert_eq!(
        e(p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![sge(&other, 0, 4)])])),
        VerbsError::InvalidSge(MemError::WrongPd)
    );
    assert_eq!(
        e(p.a.post_send(qa, &[wr(1, WrOpcode::Send, vec![sge(&src, 0, 1), sge(&src, 1, 1)])])),
        VerbsError::TooManySge
    );
    // READ into memory without LOCAL_WRITE.
    let ro = p.a.reg_mr(p.pd_a, 64, Access::NONE).unwrap();
    let read = WrOpcode::RdmaRead { remote_addr: dst.addr, rkey: dst.rkey };
    assert_eq!(
        e(p.a.post_send(qa, &[wr(1, read, vec![sge(&ro, 0, 8)])])),
        VerbsError::InvalidSge(MemError::Access)
    );
    // Atomics need one 8-byte buffer and an aligned target; inline has a limit.
    let fadd = WrOpcode::AtomicFetchAndAdd { remote_addr: dst.addr, rkey: dst.rkey, add: 1 };
    assert!(matches!(e(p.a.post_send(qa, &[wr(1, fadd, vec![sge(&src, 0, 4)])])), VerbsError::InvalidWr(_)));
    let odd = WrOpcode::AtomicFetchAndAdd { remote_addr: dst.addr + 4, rkey: dst.rkey, add: 1 };
    assert!(matches!(e(p.a.post_send(qa, &[wr(1, odd, vec![sge(&src, 0, 8)])])), VerbsError::InvalidWr(_)));
    let mut inline = wr(1, WrOpcode::Send, vec![sge(&src, 0, 17)]);
    inline.flags = SendFlags::INLINE;
    assert!(matches!(e(p.a.post_send(qa, &[inline])), VerbsError::InvalidWr(_)));
    // Queue full: the third of three fails and the first two stay posted.
    let s = || wr(1, WrOpcode::Send, vec![]);
    assert_eq!(p.a.post_send(qa, &[s(), s(), s()]), Err((2, VerbsError::QueueFull)));
    // Dereg'd keys are refused.
    p.a.dereg_mr(&src).unwrap();
    assert_eq!(p.a.mr_bytes(&src), Err(VerbsError::Memory(MemError::BadKey)));
    // Wrong state, missing and bad attributes, bad transitions.
    let q = p.a.create_qp(p.pd_a, &QpInitAttr::rc(p.cq_a)).unwrap();
    assert_eq!(e(p.a.post_send(q, &[s()])), VerbsError::InvalidState(QpState::Reset));
    assert_eq!(
        e(p.a.post_recv(q, &[RecvWr { wr_id: 0, sg_list: vec![] }])),
        VerbsError::InvalidState(QpState::Reset)
    );
    assert_eq!(
        p.a.modify_qp(q, QpState::Rtr, &QpAttr::default()),
        Err(VerbsError::InvalidTransition(QpState::Reset, QpState::Rtr))
    );
    p.a.modify_qp(q, QpState::Init, &QpAttr::default()).unwrap();
    assert_eq!(e(p.a.post_send(q, &[s()])), VerbsError::InvalidState(QpState::Init));
    let mut rtr = QpAttr {
        ah_attr: Some(AddressVector::new(p.b.gid())),
        path_mtu: Some(Mtu::Mtu1024),
        rq_psn: Some(0),
        max_dest_rd_atomic: Some(1),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    assert_eq!(p.a.modify_qp(q, QpState::Rtr, &rtr), Err(VerbsError::MissingAttr("dest_qp_num")));
    rtr.dest_qp_num = Some(0x1000000);
    assert_eq!(p.a.modify_qp(q, QpState::Rtr, &rtr), Err(VerbsError::InvalidAttr("dest_qp_num")));
    rtr.dest_qp_num = Some(0x11);
    rtr.ah_attr = Some(AddressVector::new("10.9.9.9".parse().unwrap()));
    assert_eq!(p.a.modify_qp(q, QpState::Rtr, &rtr), Err(VerbsError::Unreachable));
    rtr.ah_attr = Some(AddressVector::new(p.b.gid()));
    p.a.modify_qp(q, QpState::Rtr, &rtr).unwrap();
    let rts = QpAttr {
        sq_psn: Some(0),
        timeout: Some(14),
        retry_cnt: Some(8),
        rnr_retry: Some(7),
        max_rd_atomic: Some(1),
        ..QpAttr::default()
    };
    assert_eq!(p.a.modify_qp(q, QpState::Rts, &rts), Err(VerbsError::InvalidAttr("retry_cnt")));
    // Object lifetimes and handles.
    assert_eq!(p.a.dealloc_pd(p.pd_a), Err(VerbsError::Busy("PD")));
    assert_eq!(p.a.destroy_cq(p.cq_a), Err(VerbsError::Busy("CQ")));
    assert_eq!(
        p.a.reg_mr(p.pd_a, 8, Access::REMOTE_WRITE).map(drop),
        Err(VerbsError::InvalidAttr("access: REMOTE_WRITE/ATOMIC need LOCAL_WRITE"))
    );
    p.a.destroy_qp(q).unwrap();
    assert_eq!(p.a.query_qp(q).map(drop), Err(VerbsError::InvalidHandle("QP")));
    assert_eq!(p.a.create_cq(0).map(drop), Err(VerbsError::InvalidAttr("cq depth")));
}

#[test]
fn ack_req_at_least_every_64_packets_and_on_the_last() {
    let cfg = PairConfig { mtu: Mtu::Mtu256, ..PairConfig::default() };
    let (mut p, src, dst) = setup(cfg, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let (qa, _) = p.qps[0];
    // 100 packets of 256 bytes.
    let write = WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(qa, &[wr(1, write, vec![sge(&src, 0, 25600)])]).unwrap();
    assert_eq!(until_a(&mut p, 1, Duration::from_secs(1))[0].status, WcStatus::Success);
    let reqs: Vec<bool> = tap(&mut p).iter().filter(|t| t.0).map(|t| t.3).collect();
    assert_eq!(reqs.len(), 100);
    let acked: Vec<usize> = reqs.iter().enumerate().filter(|&(_, &a)| a).map(|(i, _)| i).collect();
    assert_eq!(acked, vec![63, 99]);
    let d = p.b.mr_bytes(&dst).unwrap();
    assert!(d[..25600].iter().all(|&x| x == 0x11) && d[25600..].iter().all(|&x| x == FILL));
}

#[test]
fn read_and_atomic_limit_is_max_rd_atomic() {
    let cfg = PairConfig { max_rd_atomic: 2, ..PairConfig::default() };
    let (mut p, src, dst) = setup(cfg, Access::LOCAL_WRITE | Access::REMOTE_READ);
    let (qa, _) = p.qps[0];
    let read = WrOpcode::RdmaRead { remote_addr: dst.addr, rkey: dst.rkey };
    let wrs: Vec<SendWr> = (0..8).map(|i| wr(i, read, vec![sge(&src, i * 100, 100)])).collect();
    p.a.post_send(qa, &wrs).unwrap();
    let wcs = until_a(&mut p, 8, Duration::from_secs(1));
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    assert!(p.a.mr_bytes(&src).unwrap()[..800].iter().all(|&x| x == FILL));
    // Walk the tap in order: requests out minus responses back never exceeds 2.
    let (mut outstanding, mut most) = (0i32, 0);
    for t in tap(&mut p) {
        if t.0 && t.1 == 0x0C {
            outstanding += 1;
        } else if !t.0 && t.1 == 0x10 {
            outstanding -= 1;
        }
        most = most.max(outstanding);
    }
    assert_eq!(most, 2);
}

#[test]
fn send_with_invalidate_needs_an_invalidatable_region() {
    // The target allows remote writes but not remote invalidation: a peer's SEND_WITH_INV naming it
    // is an invalid request, and another connection's writes through the R_Key keep working.
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (mut p, src, dst) = setup(PairConfig { qps: 2, ..PairConfig::default() }, rw);
    let (qa, qb) = p.qps[0];
    let (qa2, _) = p.qps[1];
    p.b.post_recv(qb, &[RecvWr { wr_id: 4, sg_list: vec![] }]).unwrap();
    p.a.post_send(qa, &[wr(1, WrOpcode::SendWithInv { invalidate_rkey: dst.rkey }, vec![])]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!(wcs[0].status, WcStatus::RemInvReqErr, "SEND_WITH_INV of a plain MR must be refused");
    let write = WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(qa2, &[wr(2, write, vec![sge(&src, 0, 64)])]).unwrap();
    let wcs = until_a(&mut p, 1, Duration::from_secs(1));
    assert_eq!((wcs[0].wr_id, wcs[0].status), (2, WcStatus::Success));
    assert!(p.b.mr_bytes(&dst).unwrap()[..64].iter().all(|&x| x == 0x11));
}

/// `Context::rereg_mr` (issue 54): a region moved onto new bytes takes a peer's WRITE through its
/// new R_Key there; a WRITE through the old R_Key (at the old or the new address) is NAKed
/// (remote access error, the target untouched); so is a WRITE after its rights lost REMOTE_WRITE,
/// while a READ it kept still works; a PD change refuses the QPs of the old PD.
#[test]
fn reregistered_region_refuses_its_old_key_range_and_rights() {
    let user = |len: usize| {
        let bytes: &'static mut [u8] = Box::leak(vec![FILL; len].into_boxed_slice());
        let va = bytes.as_ptr() as u64;
        (engine::verbs::UserBuf::from_static(bytes).unwrap(), va)
    };
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    type Case = (&'static str, Option<WcStatus>);
    let cases: [Case; 5] = [
        ("new key at the new address", None),
        ("old key at the old address", Some(WcStatus::RemAccessErr)),
        ("old key at the new address", Some(WcStatus::RemAccessErr)),
        ("rights without REMOTE_WRITE", Some(WcStatus::RemAccessErr)),
        ("moved to another PD", Some(WcStatus::RemAccessErr)),
    ];
    for (name, want) in cases {
        let mut p = SimPair::new(&PairConfig::default()).unwrap();
        let (qa, _) = p.qps[0];
        let src = p.a.reg_mr(p.pd_a, 4096, Access::LOCAL_WRITE).unwrap();
        p.a.mr_bytes_mut(&src).unwrap().fill(0x11);
        let (old, old_va) = user(4096);
        let mut dst = p.b.reg_user_mr(p.pd_b, old, old_va, rw).unwrap();
        let before = dst;
        let (new, new_va) = user(2048);
        match name {
            "rights without REMOTE_WRITE" => {
                p.b.rereg_mr(&mut dst, None, None, Some(Access::LOCAL_WRITE | Access::REMOTE_READ)).unwrap();
                // The READ it kept works.
                let read = WrOpcode::RdmaRead { remote_addr: dst.addr, rkey: dst.rkey };
                p.a.post_send(qa, &[wr(7, read, vec![sge(&src, 0, 64)])]).unwrap();
                let wcs = until_a(&mut p, 1, Duration::from_secs(1));
                assert_eq!((wcs[0].wr_id, wcs[0].status), (7, WcStatus::Success), "{name}: READ");
                assert!(p.a.mr_bytes(&src).unwrap()[..64].iter().all(|&x| x == FILL), "{name}: READ data");
            }
            "moved to another PD" => {
                let pd = p.b.alloc_pd();
                p.b.rereg_mr(&mut dst, Some(pd), None, None).unwrap();
            }
            _ => p.b.rereg_mr(&mut dst, None, Some((new, new_va)), None).unwrap(),
        }
        let moved = name.contains("address");
        assert_eq!(dst.rkey != before.rkey, moved, "{name}: new keys with new bytes only");
        let (va, rkey) = match name {
            "old key at the old address" => (before.addr, before.rkey),
            "old key at the new address" => (dst.addr, before.rkey),
            _ => (dst.addr, dst.rkey),
        };
        let write = WrOpcode::RdmaWrite { remote_addr: va + 8, rkey };
        p.a.post_send(qa, &[wr(1, write, vec![sge(&src, 0, 100)])]).unwrap();
        let wcs = until_a(&mut p, 1, Duration::from_secs(1));
        assert_eq!((wcs[0].wr_id, wcs[0].status), (1, want.unwrap_or(WcStatus::Success)), "{name}");
        let bytes = p.b.mr_bytes(&dst).unwrap();
        let expect = |i: usize| if want.is_none() && (8..108).contains(&i) { 0x11 } else { FILL };
        let off = bytes.iter().enumerate().position(|(i, &x)| x != expect(i));
        assert_eq!(off, None, "{name}: the region's bytes");
        if name.starts_with("new") {
            assert_eq!((dst.addr, dst.length), (new_va, 2048), "{name}: the new range");
        }
    }
}
