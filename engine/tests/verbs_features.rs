//! Verbs behaviours RDMA programs rely on (issue 5, acceptance 2): end-to-end credits, fences,
//! unsignaled completions, solicited events, the epoll-able completion channel, CQ overrun, Q_Key
//! mismatch, and async events.

mod common;

use common::{drain, run_for, sge};
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{
    Access, AsyncEvent, Mr, QpType, RecvWr, SendFlags, SendWr, SrqAttr, UdDest, VerbsError, WcOpcode,
    WcStatus, WrOpcode,
};
use rustix::event::epoll;
use std::time::Duration;
use wire::FrameRepr;
use wire::ib::AethKind;

/// (sent by a?, opcode, PSN, AETH) of every RoCE frame on the tap.
fn tap(p: &mut SimPair) -> Vec<(bool, u8, u32, Option<AethKind>)> {
    p.net
        .with(|n| n.take_tap())
        .iter()
        .filter_map(|r| {
            let f = FrameRepr::parse(&r.bytes).ok()?;
            let pkt = f.roce()?;
            Some((r.port == 0, pkt.bth.opcode.0, pkt.bth.psn, pkt.aeth.map(|a| a.kind())))
        })
        .collect()
}

fn pair(cfg: PairConfig) -> (SimPair, Mr, Mr) {
    let mut p = SimPair::new(&cfg).unwrap();
    p.net.with(|n| n.enable_tap());
    let src = p.a.reg_mr(p.pd_a, 1 << 16, Access::LOCAL_WRITE).unwrap();
    let dst =
        p.b.reg_mr(p.pd_b, 1 << 16, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ)
            .unwrap();
    (p, src, dst)
}

/// Posts `n` 100-byte SENDs from a, keeps `posted` receives on b (reposting each one consumed), and
/// returns how many RNR NAKs and which ACK credit codes crossed the wire.
fn throttled_sends(srq: bool, n: usize, posted: usize) -> (usize, Vec<u8>) {
    let (mut p, src, dst) = pair(PairConfig { srq, ..PairConfig::default() });
    let (qa, qb) = p.qps[0];
    let post_recv = |p: &mut SimPair, k: u64| {
        let wr = RecvWr { wr_id: k, sg_list: vec![sge(&dst, (k % 64) * 512, 512)] };
        match p.srqs {
            Some((_, s)) => p.b.post_srq_recv(s, &[wr]).unwrap(),
            None => p.b.post_recv(qb, &[wr]).unwrap(),
        }
    };
    for k in 0..posted as u64 {
        post_recv(&mut p, k);
    }
    let wrs: Vec<SendWr> =
        (0..n as u64).map(|i| SendWr::new(i, WrOpcode::Send, vec![sge(&src, 0, 100)])).collect();
    p.a.post_send(qa, &wrs).unwrap();
    let (mut sent_done, mut received, mut next) = (0, 0, posted as u64);
    let end = p.net.now() + Duration::from_secs(1);
    p.run_until(end, |p| {
        sent_done += drain(p, true).iter().filter(|w| w.status == WcStatus::Success).count();
        for _ in drain(p, false) {
            received += 1;
            post_recv(p, next);
            next += 1;
        }
        sent_done == n && received == n
    })
    .unwrap();
    assert_eq!((sent_done, received), (n, n), "every SEND delivered");
    let t = tap(&mut p);
    let rnr = t.iter().filter(|x| matches!(x.3, Some(AethKind::RnrNak { .. }))).count();
    let credits = t
        .iter()
        .filter_map(|x| if let Some(AethKind::Ack { credits }) = x.3 { Some(credits) } else { None })
        .collect();
    (rnr, credits)
}

#[test]
fn credits_throttle_the_sender_without_rnr_naks() {
    let (rnr, credits) = throttled_sends(false, 40, 2);
    assert_eq!(rnr, 0, "the sender waited for credits instead of meeting RNR NAKs");
    assert!(credits.iter().all(|&c| c <= 2), "the responder advertises at most its 2 receives: {credits:?}");
    // The same workload with an SRQ: ACKs say "no credit information" and the sender runs into
    // RNR NAKs, recovering from them.
    let (rnr, credits) = throttled_sends(true, 40, 2);
    assert!(credits.iter().all(|&c| c == 0x1F), "{credits:?}");
    assert!(rnr > 0, "with an SRQ credits are ignored");
}

#[test]
fn fence_waits_for_earlier_reads() {
    for fence in [false, true] {
        let (mut p, src, dst) = pair(PairConfig::default());
        let (qa, qb) = p.qps[0];
        p.b.post_recv(qb, &[RecvWr { wr_id: 1, sg_list: vec![] }]).unwrap();
        let read = SendWr::new(
            1,
            WrOpcode::RdmaRead { remote_addr: dst.addr, rkey: dst.rkey },
            vec![sge(&src, 0, 8000)],
        );
        // A WRITE (a SEND would also wait for end-to-end credits at the start of the connection).
        let mut send = SendWr::new(2, WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey }, vec![]);
        if fence {
            send.flags = SendFlags::SIGNALED | SendFlags::FENCE;
        }
        p.a.post_send(qa, &[read, send]).unwrap();
        run_for(&mut p, Duration::from_millis(1));
        assert_eq!(drain(&mut p, true).len(), 2);
        let order: Vec<u8> = tap(&mut p).iter().map(|t| t.1).collect();
        let send_at = order.iter().position(|&o| o == 0x0A).unwrap();
        let last_resp = order.iter().rposition(|&o| o == 0x0F).unwrap();
        if fence {
            assert!(send_at > last_resp, "fenced WRITE went before the READ completed: {order:x?}");
        } else {
            assert_eq!(send_at, 1, "an unfenced WRITE follows the READ request at once: {order:x?}");
        }
    }
}

#[test]
fn unsignaled_requests_complete_silently_and_sq_sig_all_reports_them() {
    for sig_all in [false, true] {
        let (mut p, src, dst) = pair(PairConfig { sq_sig_all: sig_all, ..PairConfig::default() });
        let (qa, _) = p.qps[0];
        p.a.mr_bytes_mut(&src).unwrap()[..600].fill(0x5A);
        let mut wrs: Vec<SendWr> = (0..6u64)
            .map(|i| {
                let w = WrOpcode::RdmaWrite { remote_addr: dst.addr + i * 100, rkey: dst.rkey };
                let mut wr = SendWr::new(i, w, vec![sge(&src, i * 100, 100)]);
                wr.flags = SendFlags::NONE;
                wr
            })
            .collect();
        wrs[5].flags = SendFlags::SIGNALED;
        p.a.post_send(qa, &wrs).unwrap();
        run_for(&mut p, Duration::from_millis(1));
        let ids: Vec<u64> = drain(&mut p, true).iter().map(|w| w.wr_id).collect();
        if sig_all {
            assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
        } else {
            // Only the signaled one; its completion means the five before it are done too.
            assert_eq!(ids, vec![5]);
        }
        assert!(p.b.mr_bytes(&dst).unwrap()[..600].iter().all(|&x| x == 0x5A));
        // The send queue is empty again: the unsignaled requests freed their slots.
        assert_eq!(
            p.a.post_send(qa, &(0..128).map(|i| SendWr::new(i, WrOpcode::Send, vec![])).collect::<Vec<_>>()),
            Ok(())
        );
    }
}

#[test]
fn completion_channel_wakes_epoll_and_solicited_only_filters() {
    let (mut p, src, dst) = pair(PairConfig::default());
    let ch = p.b.create_comp_channel().unwrap();
    // A CQ on b with the channel, for a second QP pair.
    let cq = p.b.create_cq_with_channel(16, Some(ch)).unwrap();
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    epoll::add(&ep, p.b.comp_channel_fd(ch).unwrap(), epoll::EventData::new_u64(7), epoll::EventFlags::IN)
        .unwrap();
    let ready = |ep: &rustix::fd::OwnedFd| {
        let mut events = Vec::with_capacity(4);
        let zero = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
        epoll::wait(ep, rustix::buffer::spare_capacity(&mut events), Some(&zero)).unwrap();
        events.iter().map(|e| e.data.u64()).collect::<Vec<u64>>()
    };
    let (qa2, qb2) = p.add_qp_pair(&PairConfig::default(), p.cq_a, cq).unwrap();
    for k in 0..3 {
        p.b.post_recv(qb2, &[RecvWr { wr_id: k, sg_list: vec![sge(&dst, k * 256, 256)] }]).unwrap();
    }
    // Armed for solicited events only: a plain SEND completes but does not wake the channel.
    p.b.req_notify_cq(cq, true).unwrap();
    p.a.post_send(qa2, &[SendWr::new(1, WrOpcode::Send, vec![sge(&src, 0, 10)])]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert!(ready(&ep).is_empty(), "an unsolicited completion does not notify");
    assert_eq!(p.b.get_cq_event(ch).unwrap(), None);
    // A SEND with the solicited bit wakes epoll.
    let mut solicited = SendWr::new(2, WrOpcode::Send, vec![sge(&src, 0, 10)]);
    solicited.flags = SendFlags::SIGNALED | SendFlags::SOLICITED;
    p.a.post_send(qa2, &[solicited]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(ready(&ep), vec![7]);
    assert_eq!(p.b.get_cq_event(ch).unwrap(), Some(cq));
    assert!(ready(&ep).is_empty(), "get_cq_event drains the eventfd");
    let mut wcs = Vec::new();
    p.b.poll_cq(cq, &mut wcs, 16).unwrap();
    assert_eq!(wcs.iter().map(|w| w.solicited).collect::<Vec<_>>(), vec![false, true]);
    // A CQ with unacknowledged events cannot be destroyed.
    assert_eq!(p.b.destroy_qp(qb2), Ok(()));
    assert_eq!(p.b.destroy_cq(cq), Err(VerbsError::Busy("CQ")));
    p.b.ack_cq_events(cq, 1).unwrap();
    assert_eq!(p.b.destroy_cq(cq), Ok(()));
    // Not armed: no notification without req_notify_cq.
    assert_eq!(
        p.b.req_notify_cq(p.cq_b, false),
        Err(VerbsError::InvalidWr("the CQ has no completion channel"))
    );
}

#[test]
fn cq_overrun_is_an_error_not_silent_loss() {
    let (mut p, src, dst) = pair(PairConfig { cq_depth: 2, ..PairConfig::default() });
    let (qa, _) = p.qps[0];
    let wrs: Vec<SendWr> = (0..4)
        .map(|i| {
            SendWr::new(
                i,
                WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey },
                vec![sge(&src, 0, 8)],
            )
        })
        .collect();
    p.a.post_send(qa, &wrs).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    let mut wcs = Vec::new();
    assert_eq!(p.a.poll_cq(p.cq_a, &mut wcs, 16), Err(VerbsError::CqOverrun));
    assert!(wcs.is_empty());
}

#[test]
fn ud_qkey_mismatch_is_dropped_and_counted() {
    let cfg = PairConfig { qp_type: QpType::Ud, ..PairConfig::default() };
    let (mut p, src, dst) = pair(cfg);
    let (qa, qb) = p.qps[0];
    let (ah, _) = p.ahs.unwrap();
    for k in 0..3 {
        p.b.post_recv(qb, &[RecvWr { wr_id: k, sg_list: vec![sge(&dst, k * 1024, 1024)] }]).unwrap();
    }
    let send = |qkey: u32, id: u64| {
        let mut wr = SendWr::new(id, WrOpcode::Send, vec![sge(&src, 0, 64)]);
        wr.ud = Some(UdDest { ah, remote_qpn: qb.qpn(), remote_qkey: qkey });
        wr
    };
    // A wrong Q_Key, the right one, and the "use my own" form (top bit set; both QPs share it).
    p.a.post_send(qa, &[send(cfg.qkey ^ 1, 1), send(cfg.qkey, 2), send(0x8000_0000, 3)]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(drain(&mut p, true).len(), 3, "UD sends complete when sent");
    let got = drain(&mut p, false);
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|w| w.status == WcStatus::Success && w.opcode == WcOpcode::Recv && w.byte_len == 40 + 64)
    );
    assert_eq!(p.b.stats().drops.qkey, 1);
    // UD takes SEND and SEND_WITH_IMM only, one packet, with an address handle.
    let mut bad = SendWr::new(4, WrOpcode::Send, vec![sge(&src, 0, 5000)]);
    bad.ud = Some(UdDest { ah, remote_qpn: qb.qpn(), remote_qkey: cfg.qkey });
    assert!(matches!(p.a.post_send(qa, &[bad]), Err((0, VerbsError::InvalidWr(_)))));
    assert!(matches!(
        p.a.post_send(qa, &[SendWr::new(5, WrOpcode::Send, vec![])]),
        Err((0, VerbsError::InvalidWr(_)))
    ));
}

#[test]
fn async_events_qp_fatal_srq_limit_and_port_state() {
    let (mut p, src, dst) = pair(PairConfig::default());
    let (qa, _) = p.qps[0];
    assert_eq!(p.a.poll_async_event(), Some(AsyncEvent::PortActive));
    assert_eq!(p.a.poll_async_event(), None);
    // A remote access error moves both QPs to ERR on their own: QP fatal on both sides.
    let bad = SendWr::new(
        1,
        WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey ^ 0x100 },
        vec![sge(&src, 0, 8)],
    );
    p.a.post_send(qa, &[bad]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(p.a.poll_async_event(), Some(AsyncEvent::QpFatal(qa)));
    let (_, qb) = p.qps[0];
    assert_eq!(p.b.poll_async_event(), Some(AsyncEvent::PortActive));
    assert_eq!(p.b.poll_async_event(), Some(AsyncEvent::QpFatal(qb)));
    // SRQ limit: armed at 3 with 4 posted; two SENDs consume two.
    let cfg = PairConfig { srq: true, ..PairConfig::default() };
    let (mut p, src, dst) = pair(cfg);
    let (qa, _) = p.qps[0];
    let (_, srq) = p.srqs.unwrap();
    for k in 0..4 {
        p.b.post_srq_recv(srq, &[RecvWr { wr_id: k, sg_list: vec![sge(&dst, k * 64, 64)] }]).unwrap();
    }
    p.b.modify_srq_limit(srq, 3).unwrap();
    while p.b.poll_async_event().is_some() {}
    p.a.post_send(qa, &[SendWr::new(1, WrOpcode::Send, vec![sge(&src, 0, 8)])]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(p.b.poll_async_event(), None, "3 left: not below the limit");
    p.a.post_send(qa, &[SendWr::new(2, WrOpcode::Send, vec![sge(&src, 0, 8)])]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(p.b.poll_async_event(), Some(engine::verbs::AsyncEvent::SrqLimitReached(srq)));
    assert_eq!(p.b.srq_len(srq), Ok(2));
    // Fired once, then disarmed.
    p.a.post_send(qa, &[SendWr::new(3, WrOpcode::Send, vec![sge(&src, 0, 8)])]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    assert_eq!(p.b.poll_async_event(), None);
    assert!(matches!(
        p.b.create_srq(p.pd_b, &SrqAttr { max_wr: 0, max_sge: 1, srq_limit: 0 }),
        Err(VerbsError::InvalidAttr(_))
    ));
    // Port state: pull b's cable.
    p.net.with(|n| n.set_port_up(nicsim::PortId(1), false)).unwrap();
    p.b.progress().unwrap();
    assert_eq!(p.b.poll_async_event(), Some(AsyncEvent::PortError));
    p.net.with(|n| n.set_port_up(nicsim::PortId(1), true)).unwrap();
    p.b.progress().unwrap();
    assert_eq!(p.b.poll_async_event(), Some(AsyncEvent::PortActive));
}

#[test]
fn separate_send_and_receive_cqs_and_one_cq_for_many_qps() {
    let cfg = PairConfig { qps: 3, ..PairConfig::default() };
    let (mut p, src, dst) = pair(cfg);
    // Three QPs on each side already share cq_a / cq_b. One more pair with split CQs on both sides.
    let send_cq = p.a.create_cq(16).unwrap();
    let recv_cq = p.b.create_cq(16).unwrap();
    let (qa, qb) = p.add_qp_pair(&cfg, send_cq, recv_cq).unwrap();
    p.b.post_recv(qb, &[RecvWr { wr_id: 9, sg_list: vec![sge(&dst, 0, 64)] }]).unwrap();
    p.a.post_send(qa, &[SendWr::new(1, WrOpcode::Send, vec![sge(&src, 0, 64)])]).unwrap();
    for &(a, b) in &p.qps.clone() {
        p.b.post_recv(b, &[RecvWr { wr_id: u64::from(b.qpn()), sg_list: vec![] }]).unwrap();
        p.a.post_send(a, &[SendWr::new(u64::from(a.qpn()), WrOpcode::Send, vec![])]).unwrap();
    }
    run_for(&mut p, Duration::from_millis(1));
    let mut wcs = Vec::new();
    p.a.poll_cq(send_cq, &mut wcs, 16).unwrap();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.opcode, w.qp_num)).collect::<Vec<_>>(),
        vec![(1, WcOpcode::Send, qa.qpn())]
    );
    wcs.clear();
    p.b.poll_cq(recv_cq, &mut wcs, 16).unwrap();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.opcode, w.qp_num)).collect::<Vec<_>>(),
        vec![(9, WcOpcode::Recv, qb.qpn())]
    );
    // The shared CQs hold one completion per QP, each naming its QP.
    let mut sends: Vec<u32> = drain(&mut p, true).iter().map(|w| w.qp_num).collect();
    let mut recvs: Vec<u32> = drain(&mut p, false).iter().map(|w| w.qp_num).collect();
    sends.sort();
    recvs.sort();
    assert_eq!(sends, p.qps.iter().map(|q| q.0.qpn()).collect::<Vec<_>>());
    assert_eq!(recvs, p.qps.iter().map(|q| q.1.qpn()).collect::<Vec<_>>());
}

/// What a device's counters make of frames none of its QPs takes: bad (a broken ICRC, a UDP port no
/// transport of it has) or unknown (a RoCE frame for a QPN it does not have, or for another MAC). The
/// frames are a real WRITE from a, altered, and sent again from a's port.
#[test]
fn received_frames_are_counted_bad_or_unknown() {
    let (mut p, src, dst) = pair(PairConfig::default());
    let (qa, _) = p.qps[0];
    let wr =
        SendWr::new(1, WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey }, vec![sge(&src, 0, 64)]);
    p.a.post_send(qa, &[wr]).unwrap();
    run_for(&mut p, Duration::from_millis(1));
    let write = p.net.with(|n| n.take_tap()).into_iter().find(|r| r.port == 0).expect("the WRITE").bytes;
    let before = p.b.stats();
    let (ip, bth) = (14, 14 + 20 + 8);
    let altered = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = write.clone();
        f(&mut b);
        b
    };
    let frames = [
        // A payload bit flipped: the ICRC no longer holds.
        altered(&|b| *b.last_mut().unwrap() ^= 1),
        // UDP port 9: neither RoCE nor UET.
        altered(&|b| b[ip + 20 + 2..ip + 20 + 4].copy_from_slice(&9u16.to_be_bytes())),
        // A QPN b does not have, ICRC recomputed.
        altered(&|b| {
            b[bth + 5..bth + 8].copy_from_slice(&[0x12, 0x34, 0x56]);
            wire::ib::icrc::fill(&mut b[ip..]).unwrap();
        }),
        // Another destination MAC (the ICRC does not cover Ethernet).
        altered(&|b| b[0] ^= 0x02),
    ];
    for f in &frames {
        p.net.with(|n| {
            let mut out = n.alloc();
            out.buffer_mut()[..f.len()].copy_from_slice(f);
            out.set_len(f.len());
            n.transmit(nicsim::PortId(0), out).unwrap();
        });
    }
    run_for(&mut p, Duration::from_millis(1));
    let after = p.b.stats();
    assert_eq!((after.rx_bad - before.rx_bad, after.rx_unknown - before.rx_unknown), (2, 2));
    assert_eq!(after.rx_frames - before.rx_frames, 4);
}

/// A driver loop may sleep while a QP's send window is full: the engine has nothing to send until
/// an ACK or its timer comes (`next_work_in` is the tail probe's deadline, not zero), and the QP
/// is taken up again when the ACKs open the window (issue 27: a full window kept a `perf` client
/// polling its socket, 263,480 empty polls in a 1,000-message run between two VMs).
#[test]
fn a_full_send_window_leaves_the_engine_nothing_to_send_until_the_acks() {
    use engine::progress::Sleep;
    let (mut p, src, dst) = pair(PairConfig::default());
    let (qa, _) = p.qps[0];
    // Three 64 KiB WRITEs: 192 packets at MTU 1024, more than the window's 128.
    let wrs: Vec<SendWr> = (0..3u64)
        .map(|i| {
            SendWr::new(
                i,
                WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey },
                vec![sge(&src, 0, 1 << 16)],
            )
        })
        .collect();
    p.a.post_send(qa, &wrs).unwrap();
    assert!(p.a.wants_transmit());
    assert_eq!(p.a.next_work_in(), Some(Duration::ZERO));
    // Rounds without the network moving: the window goes out, then nothing is left to do.
    let mut sent = 0;
    for _ in 0..100 {
        sent += p.a.progress().unwrap();
    }
    assert_eq!(sent, 128, "the window");
    assert!(!p.a.wants_transmit(), "held back by the window");
    let wait = p.a.next_work_in().expect("the tail probe is armed");
    assert!(wait > Duration::ZERO, "a loop may sleep until then");
    // The ACKs open the window and the rest goes: every WRITE completes.
    let mut done = Vec::new();
    let end = p.net.now() + Duration::from_millis(100);
    p.run_until(end, |p| {
        done.extend(drain(p, true));
        done.len() == 3
    })
    .unwrap();
    assert_eq!(done.iter().filter(|w| w.status == WcStatus::Success).count(), 3);
}
