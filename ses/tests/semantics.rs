//! SES semantics over a clean simulated link (issue 8, acceptance 2): every return-code path,
//! wildcard tagged matching, unexpected messages (complete and still arriving), truncation,
//! completion data, RUDI RMA.

mod common;

use std::time::Duration;

use common::{Ses, Sim, addr, pattern};
use nicsim::LinkConfig;
use ses::key::IDEMPOTENT_SAFE;
use ses::{Access, CompletionKind, Config, JobScope, Opts, RecvSpec, ReturnCode, Source, Status};

const LIMIT: Duration = Duration::from_secs(5);

fn cfgs() -> [Config; 2] {
    let a =
        Config { initiator: 10, pid_on_fep: 1, resource_index: 3, max_payload: 1000, ..Config::default() };
    let b =
        Config { initiator: 20, pid_on_fep: 2, resource_index: 5, max_payload: 1000, ..Config::default() };
    [a, b]
}

fn sim() -> Sim {
    Ses::pair(1, cfgs(), LinkConfig::default())
}

fn b(sim: &Sim) -> ses::Addr<u8> {
    addr(sim.ends.eps[1].config(), 1)
}

fn wait(sim: &mut Sim, side: usize, context: u64) -> ses::Completion<u8> {
    assert!(
        sim.run_until(LIMIT, |s| s.ends.completion(side, context).is_some()),
        "no completion {context} on side {side}"
    );
    sim.ends.completion(side, context).unwrap().clone()
}

fn any() -> RecvSpec<u8> {
    RecvSpec::any()
}

#[test]
fn untagged_in_posted_order_with_segmentation_and_header_data() {
    let mut sim = sim();
    sim.ends.eps[1].post_recv(any(), 5000, 100);
    sim.ends.eps[1].post_recv(any(), 5000, 101);
    let m1 = pattern(1, 3500);
    let m2 = pattern(2, 0);
    let dst = b(&sim);
    sim.ends.eps[0]
        .send(
            dst,
            &m1,
            None,
            Opts { header_data: Some(0xfeed), ordered: false, context: 1, ..Opts::default() },
        )
        .unwrap();
    sim.ends.eps[0]
        .send(dst, &m2, None, Opts { header_data: None, ordered: true, context: 2, ..Opts::default() })
        .unwrap();
    for (ctx, rctx, m, hd) in [(1, 100, &m1, Some(0xfeed)), (2, 101, &m2, None)] {
        let c = wait(&mut sim, 0, ctx);
        assert_eq!((c.kind, c.status, c.len), (CompletionKind::Send, Status::Ok, m.len()));
        let r = wait(&mut sim, 1, rctx);
        assert_eq!((r.kind, r.status, &r.data, r.header_data), (CompletionKind::Recv, Status::Ok, m, hd));
        assert_eq!(r.src, Some(Source { fep: 0, initiator: 10 }));
    }
    assert_eq!(sim.ends.eps[0].outstanding(), 0);
}

#[test]
fn wildcard_tags_and_source_matching() {
    let mut sim = sim();
    let from_a = Source { fep: 0u8, initiator: 10 };
    let other = Source { fep: 0u8, initiator: 11 };
    sim.ends.eps[1].post_recv(
        RecvSpec { tag: Some((0x5500, 0xFF)), src: Some(other), ..RecvSpec::any() },
        100,
        1,
    ); // wrong initiator
    sim.ends.eps[1].post_recv(
        RecvSpec { tag: Some((0x5500, 0xFF)), src: Some(from_a), ..RecvSpec::any() },
        100,
        2,
    );
    sim.ends.eps[1].post_recv(RecvSpec { tag: Some((0x5500, 0)), src: None, ..RecvSpec::any() }, 100, 3); // exact
    sim.ends.eps[1].post_recv(any(), 100, 4);
    let dst = b(&sim);
    sim.ends.eps[0]
        .send(
            dst,
            b"wild",
            Some(0x55AA),
            Opts { header_data: None, ordered: true, context: 10, ..Opts::default() },
        )
        .unwrap();
    sim.ends.eps[0]
        .send(
            dst,
            b"exact",
            Some(0x5500),
            Opts { header_data: None, ordered: true, context: 11, ..Opts::default() },
        )
        .unwrap();
    sim.ends.eps[0]
        .send(dst, b"plain", None, Opts { header_data: None, ordered: true, context: 12, ..Opts::default() })
        .unwrap();
    for c in [10, 11, 12] {
        assert_eq!(wait(&mut sim, 0, c).status, Status::Ok);
    }
    let r2 = wait(&mut sim, 1, 2);
    assert_eq!((r2.data.as_slice(), r2.tag), (&b"wild"[..], Some(0x55AA)));
    assert_eq!(wait(&mut sim, 1, 3).data, b"exact");
    assert_eq!(wait(&mut sim, 1, 4).data, b"plain");
    assert!(sim.ends.completion(1, 1).is_none(), "the receive for another initiator stays posted");
    assert_eq!(sim.ends.eps[1].posted_count(), 1);
    assert!(sim.ends.eps[1].cancel_recv(1));
    assert_eq!(wait(&mut sim, 1, 1).status, Status::Cancelled);
}

#[test]
fn unexpected_messages_complete_and_in_flight() {
    let mut sim = sim();
    let dst = b(&sim);
    let whole = pattern(3, 2500);
    sim.ends.eps[0]
        .send(
            dst,
            &whole,
            Some(7),
            Opts { header_data: Some(99), ordered: false, context: 1, ..Opts::default() },
        )
        .unwrap();
    // The sender completes: the message is delivered into the unexpected store.
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
    assert_eq!(sim.ends.eps[1].unexpected_count(), 1);
    // A receive posted later takes it at once.
    sim.ends.eps[1].post_recv(RecvSpec { tag: Some((0, u64::MAX)), src: None, ..RecvSpec::any() }, 4000, 50);
    let r = wait(&mut sim, 1, 50);
    assert_eq!((r.status, &r.data, r.tag, r.header_data), (Status::Ok, &whole, Some(7), Some(99)));
    assert_eq!(sim.ends.eps[1].unexpected_count(), 0);

    // A message still arriving when the receive is posted: 3 packets, the receive comes after the
    // first has been delivered.
    let slow =
        LinkConfig { latency: Duration::from_micros(1), bandwidth_bps: 100_000_000, ..LinkConfig::default() };
    let mut sim = Ses::pair(2, cfgs(), slow);
    let dst = b(&sim);
    let msg = pattern(4, 2900);
    sim.ends.eps[0]
        .send(dst, &msg, None, Opts { header_data: None, ordered: false, context: 1, ..Opts::default() })
        .unwrap();
    assert!(sim.run_until(LIMIT, |s| s.ends.eps[1].unexpected_count() == 1));
    sim.ends.eps[1].post_recv(any(), 2900, 60);
    let r = wait(&mut sim, 1, 60);
    assert_eq!((r.status, &r.data), (Status::Ok, &msg));
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
}

#[test]
fn return_codes() {
    let mut sim = sim();
    let key = 0x42;
    sim.ends.eps[1]
        .regions
        .register(key, vec![0; 64], Access { remote_read: true, remote_write: false }, JobScope::Job(1))
        .unwrap();
    sim.ends.eps[1].regions.register(0x43, vec![0; 64], Access::ALL, JobScope::Job(2)).unwrap();
    let dst = b(&sim);
    let wrong_pid = ses::Addr { pid_on_fep: 9, ..dst };
    let wrong_ri = ses::Addr { resource_index: 9, ..dst };
    sim.ends.eps[0]
        .write(dst, 0x99, 0, b"x", Opts { header_data: None, ordered: false, context: 1, ..Opts::default() })
        .unwrap();
    sim.ends.eps[0]
        .write(dst, key, 0, b"x", Opts { header_data: None, ordered: false, context: 2, ..Opts::default() })
        .unwrap();
    sim.ends.eps[0]
        .read(dst, key, 60, 8, Opts { header_data: None, ordered: false, context: 3, ..Opts::default() })
        .unwrap();
    sim.ends.eps[0]
        .read(dst, 0x43, 0, 8, Opts { header_data: None, ordered: false, context: 4, ..Opts::default() })
        .unwrap();
    sim.ends.eps[0]
        .write(
            wrong_pid,
            0x43,
            0,
            b"x",
            Opts { header_data: None, ordered: false, context: 5, ..Opts::default() },
        )
        .unwrap();
    sim.ends.eps[0]
        .send(wrong_ri, b"x", None, Opts { header_data: None, ordered: false, context: 6, ..Opts::default() })
        .unwrap();
    let want = [
        (1, ReturnCode::BadMkey),
        (2, ReturnCode::PermViolation),
        (3, ReturnCode::BadAddr),
        (4, ReturnCode::BadJobId),
        (5, ReturnCode::BadPid),
        (6, ReturnCode::BadIndex),
    ];
    for (ctx, rc) in want {
        let c = wait(&mut sim, 0, ctx);
        assert_eq!((c.status, c.len), (Status::Remote(rc), 0), "context {ctx}");
    }
    assert_eq!(
        sim.ends.eps[1].regions.get(key).unwrap().data.bytes(),
        &[0; 64][..],
        "refused writes changed nothing"
    );
    assert_eq!(sim.ends.eps[1].stats().errors_sent, 6);

    // NO_MATCH: nothing posted and no room for unexpected messages.
    let mut cfg = cfgs();
    cfg[1].unexpected_bytes = 100;
    let mut sim = Ses::pair(3, cfg, LinkConfig::default());
    let dst = b(&sim);
    sim.ends.eps[0]
        .send(
            dst,
            &pattern(5, 80),
            None,
            Opts { header_data: None, ordered: false, context: 1, ..Opts::default() },
        )
        .unwrap();
    sim.ends.eps[0]
        .send(
            dst,
            &pattern(6, 80),
            None,
            Opts { header_data: None, ordered: false, context: 2, ..Opts::default() },
        )
        .unwrap();
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
    assert_eq!(wait(&mut sim, 0, 2).status, Status::Remote(ReturnCode::NoMatch));

    // TOO_LONG: the receive is smaller than the message (the receiver sees a truncated
    // completion with the bytes that fit); and a message above max_message.
    cfg[1].max_message = 10_000;
    let mut sim = Ses::pair(4, cfg, LinkConfig::default());
    let dst = b(&sim);
    sim.ends.eps[1].post_recv(any(), 1500, 70);
    let msg = pattern(7, 2200);
    sim.ends.eps[0]
        .send(dst, &msg, None, Opts { header_data: None, ordered: false, context: 1, ..Opts::default() })
        .unwrap();
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Remote(ReturnCode::TooLong));
    let r = wait(&mut sim, 1, 70);
    assert_eq!(
        (r.status, r.len, &r.data[..], r.src.map(|s| s.initiator)),
        (Status::Truncated, 1500, &msg[..1500], Some(10))
    );
    sim.ends.eps[1].regions.register(1, vec![0; 20_000], Access::ALL, JobScope::Any).unwrap();
    sim.ends.eps[0]
        .write(
            dst,
            1,
            0,
            &pattern(8, 10_001),
            Opts { header_data: None, ordered: false, context: 2, ..Opts::default() },
        )
        .unwrap();
    assert_eq!(wait(&mut sim, 0, 2).status, Status::Remote(ReturnCode::TooLong));
}

#[test]
fn rma_write_read_with_completion_data_and_rudi() {
    for key in [0x10, 0x11 | IDEMPOTENT_SAFE] {
        let mut sim = sim();
        sim.ends.eps[1].regions.register(key, vec![0; 10_000], Access::ALL, JobScope::Job(1)).unwrap();
        let dst = b(&sim);
        let data = pattern(9, 4321);
        let hd = (key & IDEMPOTENT_SAFE == 0).then_some(0xabcd);
        sim.ends.eps[0]
            .write(
                dst,
                key,
                100,
                &data,
                Opts { header_data: hd, ordered: false, context: 1, ..Opts::default() },
            )
            .unwrap();
        assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
        assert_eq!(&sim.ends.eps[1].regions.get(key).unwrap().data.bytes()[100..100 + data.len()], &data[..]);
        if hd.is_some() {
            let t = sim.ends.done[1]
                .iter()
                .find(|c| c.kind == CompletionKind::RemoteWrite)
                .expect("target completion");
            assert_eq!((t.header_data, t.len), (hd, data.len()));
        }
        sim.ends.eps[0]
            .read(
                dst,
                key,
                50,
                4500,
                Opts { header_data: None, ordered: false, context: 2, ..Opts::default() },
            )
            .unwrap();
        let r = wait(&mut sim, 0, 2);
        assert_eq!((r.status, r.len), (Status::Ok, 4500));
        assert_eq!(r.data, sim.ends.eps[1].regions.get(key).unwrap().data.bytes()[50..4550]);
        // RUDI went without any PDC; the others opened one.
        let pdcs = sim.ends.eps[0].pds().pdc_count();
        assert_eq!(pdcs, usize::from(key & IDEMPOTENT_SAFE == 0), "key {key:#x}");
    }
}

#[test]
fn a_region_deregistered_during_a_write_refuses_the_rest() {
    let slow =
        LinkConfig { latency: Duration::from_micros(1), bandwidth_bps: 100_000_000, ..LinkConfig::default() };
    let mut sim = Ses::pair(5, cfgs(), slow);
    sim.ends.eps[1].regions.register(0x77, vec![0; 8000], Access::ALL, JobScope::Any).unwrap();
    let dst = b(&sim);
    let data = pattern(11, 5000);
    sim.ends.eps[0].write(dst, 0x77, 0, &data, Opts { context: 1, ..Opts::default() }).unwrap();
    // Once the first packet has landed, the target deregisters the region.
    assert!(sim.run_until(LIMIT, |s| {
        s.ends.eps[1].regions.get(0x77).is_some_and(|r| r.data.bytes()[..1000] == data[..1000])
    }));
    let gone = sim.ends.eps[1].regions.deregister(0x77).unwrap();
    assert_ne!(gone.data.bytes()[..5000], data[..], "the write was still arriving");
    assert_eq!(wait(&mut sim, 0, 1).status, Status::Remote(ReturnCode::BadMkey));
}

/// JobID authorization (issue 9, acceptance 2): requests of a JobID the endpoint does not serve
/// are answered BAD_JOB_ID with nothing touched; an authorized second JobID (the AV method's auth
/// keys) is served; receive buffers and regions bound to one JobID refuse the others.
#[test]
fn jobid_authorization() {
    let mut sim = sim();
    let dst = b(&sim);
    let own = sim.ends.eps[1].config().job_id;
    let (other, third) = (own + 100, own + 200);
    let before = pattern(9, 256);
    sim.ends.eps[1].regions.register(0x10, before.clone(), Access::ALL, JobScope::Any).unwrap();
    sim.ends.eps[1].regions.register(0x11, before.clone(), Access::ALL, JobScope::Job(other)).unwrap();
    sim.ends.eps[1].post_recv(any(), 100, 500);
    let o = |context, job| Opts { context, job_id: Some(job), ..Opts::default() };
    // A JobID the target does not serve: every kind of request is refused, nothing touched.
    let e = &mut sim.ends.eps[0];
    e.send(dst, b"intruder", None, o(1, third)).unwrap();
    e.write(dst, 0x10, 0, b"intruder", o(2, third)).unwrap();
    e.read(dst, 0x10, 0, 8, o(3, third)).unwrap();
    let one = 1u64.to_le_bytes();
    e.atomic(
        dst,
        0x10,
        0,
        wire::uet::ses::AmoOpcode::Sum,
        wire::uet::ses::AmoDatatype::Uint64,
        &one,
        o(4, third),
    )
    .unwrap();
    for ctx in 1..=4 {
        assert_eq!(wait(&mut sim, 0, ctx).status, Status::Remote(ReturnCode::BadJobId), "context {ctx}");
    }
    assert_eq!(sim.ends.eps[1].regions.get(0x10).unwrap().data.bytes(), &before[..]);
    assert_eq!((sim.ends.eps[1].posted_count(), sim.ends.eps[1].unexpected_count()), (1, 0));
    // Authorized: the other JobID is served, but only where it is allowed.
    sim.ends.eps[1].authorize_job(other);
    sim.ends.eps[1].post_recv(RecvSpec { job: JobScope::Job(other), ..any() }, 100, 501);
    sim.ends.eps[0].send(dst, b"own job", None, o(10, own)).unwrap();
    sim.ends.eps[0].send(dst, b"other job", None, o(11, other)).unwrap();
    assert_eq!(wait(&mut sim, 1, 500).data, b"own job", "the any-JobID buffer takes the first message");
    assert_eq!(wait(&mut sim, 1, 501).data, b"other job");
    sim.ends.eps[0].send(dst, b"own again", None, o(12, own)).unwrap();
    sim.ends.eps[1].post_recv(RecvSpec { job: JobScope::Job(other), ..any() }, 100, 502);
    assert_eq!(wait(&mut sim, 0, 12).status, Status::Ok);
    assert_eq!(
        sim.ends.eps[1].unexpected_count(),
        1,
        "the own-JobID message does not take the other's buffer"
    );
    assert!(sim.ends.completion(1, 502).is_none());
    sim.ends.eps[0].write(dst, 0x11, 0, b"wrong", o(13, own)).unwrap();
    assert_eq!(wait(&mut sim, 0, 13).status, Status::Remote(ReturnCode::BadJobId));
    sim.ends.eps[0].write(dst, 0x11, 0, b"right", o(14, other)).unwrap();
    assert_eq!(wait(&mut sim, 0, 14).status, Status::Ok);
    assert_eq!(&sim.ends.eps[1].regions.get(0x11).unwrap().data.bytes()[..5], b"right");
    sim.ends.eps[1].revoke_job(other);
    sim.ends.eps[0].send(dst, b"revoked", None, o(15, other)).unwrap();
    assert_eq!(wait(&mut sim, 0, 15).status, Status::Remote(ReturnCode::BadJobId));
    assert!(sim.ends.completion(1, 502).is_none());
}

/// A READ answered with more packets than the PDC's send queue holds: the rest wait for room
/// instead of being dropped (the read would never complete).
#[test]
fn a_read_larger_than_the_send_queue_completes() {
    let [mut a, mut b] = cfgs();
    for c in [&mut a, &mut b] {
        c.pds.max_queued = 16;
    }
    let mut sim = Ses::pair(4, [a, b], LinkConfig::default());
    let data = pattern(11, 100_000);
    sim.ends.eps[1].regions.register(0x40, data.clone(), Access::ALL, JobScope::Any).unwrap();
    let dst = addr(sim.ends.eps[1].config(), 1);
    for i in 0..3 {
        sim.ends.eps[0].read(dst, 0x40, 0, data.len(), Opts { context: i, ..Opts::default() }).unwrap();
    }
    for i in 0..3 {
        let c = wait(&mut sim, 0, i);
        assert_eq!((c.status, c.data == data), (Status::Ok, true), "read {i}");
    }
}

/// Responses waiting for room on one PDC do not hold back another PDC's: on a 1 Gb/s link, a write
/// over ROD is answered at once while three large reads' answers over RUD (300 packets, 8 us each,
/// 16 at a time in the RUD PDC's send queue) are still waiting at the target.
#[test]
fn a_full_pdc_does_not_hold_back_the_responses_of_another() {
    let [mut a, mut b] = cfgs();
    for c in [&mut a, &mut b] {
        c.pds.max_queued = 16;
    }
    let link = LinkConfig { bandwidth_bps: 1_000_000_000, ..LinkConfig::default() };
    let mut sim = Ses::pair(5, [a, b], link);
    let data = pattern(12, 100_000);
    sim.ends.eps[1].regions.register(0x40, data.clone(), Access::ALL, JobScope::Any).unwrap();
    let dst = addr(sim.ends.eps[1].config(), 1);
    for i in 0..3 {
        sim.ends.eps[0].read(dst, 0x40, 0, data.len(), Opts { context: i, ..Opts::default() }).unwrap();
    }
    let w = Opts { context: 9, ordered: true, ..Opts::default() };
    sim.ends.eps[0].write(dst, 0x40, 0, &data[..100], w).unwrap();
    assert_eq!(wait(&mut sim, 0, 9).status, Status::Ok);
    let write_done = sim.now();
    for i in 0..3 {
        let c = wait(&mut sim, 0, i);
        assert_eq!((c.status, c.data == data), (Status::Ok, true), "read {i}");
    }
    let reads_done = sim.now();
    assert!(
        write_done * 10 < reads_done,
        "the write's response waited behind the reads' answers: {write_done:?} of {reads_done:?}"
    );
}

/// A packet claiming another request_length than the rest of its message is not part of it:
/// dropped and counted, never written past the message's buffer (found by the uet_endpoint fuzz
/// target: an unexpected message's buffer overflowed).
#[test]
fn a_packet_disagreeing_on_the_message_length_is_dropped() {
    use wire::uet::PdsRepr;
    let [a, b] = cfgs();
    let mut tx = ses::Endpoint::<u8>::new(a, 1);
    let mut rx = ses::Endpoint::<u8>::new(b, 2);
    let dst = ses::Addr { fep: 1, pid_on_fep: b.pid_on_fep, resource_index: b.resource_index };
    tx.send(dst, &pattern(3, 3000), None, Opts::default()).unwrap();
    let now = Duration::ZERO;
    let mut pkts = Vec::new();
    let mut buf = vec![0u8; 9000];
    while let Some(t) = tx.poll_transmit(now, &mut buf) {
        pkts.push(buf[..t.len].to_vec());
    }
    assert_eq!(pkts.len(), 3, "SOM, middle, EOM");
    rx.handle_packet(now, 0, &pkts[0]).unwrap();
    assert_eq!(rx.unexpected_count(), 1);
    let at = PdsRepr::parse(&pkts[1]).unwrap().buffer_len() + 40;
    pkts[1][at..at + 4].copy_from_slice(&6000u32.to_be_bytes());
    let dropped = rx.stats().dropped;
    rx.handle_packet(now, 0, &pkts[1]).unwrap();
    assert_eq!(rx.stats().dropped, dropped + 1);
    rx.handle_packet(now, 0, &pkts[2]).unwrap();
    rx.post_recv(any(), 3000, 9);
    assert!(rx.poll_completion().is_none(), "the message is still missing its middle");
}

/// `write_bytes` and `send_bytes` carry slices of the caller's buffer (shared, not copied) over a
/// lossy link, deliver it intact, and let go of it when the operation completes (RUD, ROD, RUDI).
#[test]
fn shared_buffers_are_sent_without_a_copy_and_released_at_completion() {
    let lossy = LinkConfig { loss: 0.2, ..LinkConfig::default() };
    for key in [0x10, 0x11 | IDEMPOTENT_SAFE] {
        for ordered in [false, true] {
            let mut sim = Ses::pair(3, cfgs(), lossy);
            sim.ends.eps[1].regions.register(key, vec![0; 10_000], Access::ALL, JobScope::Job(1)).unwrap();
            let dst = b(&sim);
            let data = bytes::Bytes::from(pattern(4, 4321));
            let opts = Opts { ordered, context: 1, ..Opts::default() };
            sim.ends.eps[0].write_bytes(dst, key, 100, data.clone(), opts).unwrap();
            assert!(!data.is_unique(), "the packets share the caller's buffer");
            assert_eq!(wait(&mut sim, 0, 1).status, Status::Ok);
            assert!(data.is_unique(), "released once the write completed");
            assert_eq!(
                &sim.ends.eps[1].regions.get(key).unwrap().data.bytes()[100..100 + data.len()],
                &data[..]
            );
        }
    }
    let mut sim = Ses::pair(4, cfgs(), lossy);
    sim.ends.eps[1].post_recv(any(), 5000, 7);
    let data = bytes::Bytes::from(pattern(5, 4321));
    sim.ends.eps[0].send_bytes(b(&sim), data.clone(), None, Opts { context: 2, ..Opts::default() }).unwrap();
    let got = wait(&mut sim, 1, 7);
    assert_eq!((got.status, &got.data[..]), (Status::Ok, &data[..]));
    assert_eq!(wait(&mut sim, 0, 2).status, Status::Ok);
    assert!(data.is_unique(), "released once the send completed");
}

/// Every request is counted by its opcode on the side that sends it and on the side that receives
/// it (`softrdma stat`'s SES operations, issue 58): a message of several packets once, a refused
/// one once, an RMA over RUDI once per piece.
#[test]
fn requests_are_counted_by_opcode_on_both_sides() {
    use wire::uet::ses::{AmoDatatype, AmoOpcode, SesOpcode};
    let mut sim = sim();
    sim.ends.eps[1].regions.register(0x10, vec![0; 10_000], Access::ALL, JobScope::Job(1)).unwrap();
    sim.ends.eps[1]
        .regions
        .register(0x11 | IDEMPOTENT_SAFE, vec![0; 10_000], Access::ALL, JobScope::Job(1))
        .unwrap();
    sim.ends.eps[1].post_recv(any(), 5000, 100);
    sim.ends.eps[1].post_recv(any(), 5000, 101);
    let dst = b(&sim);
    let o = |context| Opts { context, ..Opts::default() };
    let e = &mut sim.ends.eps[0];
    e.send(dst, &pattern(1, 3500), None, o(1)).unwrap();
    e.send(dst, b"tagged", Some(7), o(2)).unwrap();
    e.write(dst, 0x10, 0, &pattern(2, 2500), o(3)).unwrap();
    e.write(dst, 0x99, 0, &pattern(3, 2500), o(4)).unwrap();
    e.write(dst, 0x11 | IDEMPOTENT_SAFE, 0, &pattern(4, 2500), o(5)).unwrap();
    e.read(dst, 0x10, 0, 100, o(6)).unwrap();
    e.atomic(dst, 0x10, 8, AmoOpcode::Sum, AmoDatatype::Uint64, &1u64.to_le_bytes(), o(7)).unwrap();
    e.fetch_atomic(dst, 0x10, 8, AmoOpcode::Sum, AmoDatatype::Uint64, &1u64.to_le_bytes(), o(8)).unwrap();
    for ctx in 1..=8 {
        wait(&mut sim, 0, ctx);
    }
    let want = [
        (SesOpcode::Send, 1),
        (SesOpcode::TaggedSend, 1),
        // Two over a PDC (one refused: BAD_MKEY), three pieces over RUDI.
        (SesOpcode::Write, 5),
        (SesOpcode::Read, 1),
        (SesOpcode::Atomic, 1),
        (SesOpcode::FetchingAtomic, 1),
    ];
    for (side, counts) in [(0, sim.ends.eps[0].stats().ops_tx), (1, sim.ends.eps[1].stats().ops_rx)] {
        for (op, n) in want {
            assert_eq!(counts.get(op.into()), n, "{op:?} on side {side}");
        }
        assert_eq!(counts.total(), 10, "side {side}: {counts:?}");
    }
    assert_eq!(sim.ends.eps[0].stats().ops_rx.total(), 0, "side 0 received no request");
    assert_eq!(sim.ends.eps[1].stats().ops_tx.total(), 0, "side 1 sent no request");
    assert_eq!(sim.ends.eps[1].stats().errors_sent_codes.get(ReturnCode::BadMkey.into()), 1);
}
