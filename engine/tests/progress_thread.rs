//! The background progress-thread mode (issue 5): a thread owns and drives the engine while the
//! application posts work through it and blocks on a completion channel's file descriptor.

use engine::progress::{Idle, ProgressThread, wait_readable};
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, RecvWr, SendWr, Sge, WcStatus, WrOpcode};
use std::time::Duration;

fn run(idle: Idle) {
    let cfg = PairConfig { qps: 0, ..PairConfig::default() };
    let pt = ProgressThread::spawn(move || SimPair::new(&cfg), SimPair::step, idle).unwrap();
    // Set up on the progress thread: a channel-backed CQ on b, one QP pair, buffers, receives.
    let (fd, cq, ch, qa, src, dst) = pt
        .call(move |p: &mut SimPair| {
            let ch = p.b.create_comp_channel().unwrap();
            let cq = p.b.create_cq_with_channel(64, Some(ch)).unwrap();
            let (qa, qb) = p.add_qp_pair(&cfg, p.cq_a, cq).unwrap();
            let src = p.a.reg_mr(p.pd_a, 1 << 16, Access::LOCAL_WRITE).unwrap();
            let dst = p.b.reg_mr(p.pd_b, 1 << 16, Access::LOCAL_WRITE).unwrap();
            for (i, b) in p.a.mr_bytes_mut(&src).unwrap().iter_mut().enumerate() {
                *b = (i % 253) as u8;
            }
            for k in 0..16u64 {
                let sge = Sge { addr: dst.addr + k * 4096, length: 4096, lkey: dst.lkey };
                p.b.post_recv(qb, &[RecvWr { wr_id: k, sg_list: vec![sge] }]).unwrap();
            }
            p.b.req_notify_cq(cq, false).unwrap();
            let fd = p.b.comp_channel_fd(ch).unwrap().try_clone_to_owned().unwrap();
            (fd, cq, ch, qa, src, dst)
        })
        .unwrap();
    pt.call(move |p: &mut SimPair| {
        let wrs: Vec<SendWr> = (0..16u64)
            .map(|i| {
                SendWr::new(
                    i,
                    WrOpcode::Send,
                    vec![Sge { addr: src.addr + i * 4096, length: 3000, lkey: src.lkey }],
                )
            })
            .collect();
        p.a.post_send(qa, &wrs).unwrap();
    })
    .unwrap();
    // Block on the eventfd, then take the event, re-arm and poll, until all 16 arrived.
    let mut got = Vec::new();
    while got.len() < 16 {
        assert!(
            wait_readable(&fd, Some(Duration::from_secs(10))).unwrap(),
            "no completion event within 10 s"
        );
        let wcs = pt
            .call(move |p: &mut SimPair| {
                let c = p.b.get_cq_event(ch).unwrap().expect("an event is pending when the fd is readable");
                p.b.ack_cq_events(c, 1).unwrap();
                p.b.req_notify_cq(cq, false).unwrap();
                let mut wcs = Vec::new();
                p.b.poll_cq(cq, &mut wcs, 64).unwrap();
                wcs
            })
            .unwrap();
        got.extend(wcs);
    }
    assert_eq!(got.iter().map(|w| w.wr_id).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    assert!(got.iter().all(|w| w.status == WcStatus::Success && w.byte_len == 3000));
    let ok = pt
        .call(move |p: &mut SimPair| {
            let s = p.a.mr_bytes(&src).unwrap();
            let d = p.b.mr_bytes(&dst).unwrap();
            (0..16).all(|k| d[k * 4096..k * 4096 + 3000] == s[k * 4096..k * 4096 + 3000])
        })
        .unwrap();
    assert!(ok, "received data differs");
    pt.stop().unwrap();
}

#[test]
fn parked_progress_thread_with_blocking_waits() {
    run(Idle::Park(Duration::from_micros(200)));
}

#[test]
fn spinning_progress_thread_with_blocking_waits() {
    run(Idle::Spin);
}

#[test]
fn a_failing_setup_is_reported() {
    let r = ProgressThread::<SimPair>::spawn(
        || Err(engine::verbs::VerbsError::OutOfResources),
        SimPair::step,
        Idle::Park(Duration::from_millis(1)),
    );
    assert_eq!(r.err(), Some(engine::verbs::VerbsError::OutOfResources));
}

#[test]
fn adaptive_progress_thread_sleeps_until_a_call() {
    // On the simulated network there is no descriptor: the thread sleeps only when nothing is
    // pending at all, and each call wakes it through its eventfd.
    run(Idle::ADAPTIVE);
}
