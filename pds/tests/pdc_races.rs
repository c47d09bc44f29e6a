//! PDC establishment and close races (issue 8, acceptance 2): both sides opening at once, lost SYN,
//! lost ACK, lost CLOSE_CMD, lost close ACK, target-requested close, and the retry limit.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Pds, Sim, check_message, message};
use nicsim::LinkConfig;
use pds::{Config, DeliveryKind, Event, Mode, NackCode, NextHeader, PdcError};
use wire::uet::PdsRepr;
use wire::uet::pds::CtlType;

const LIMIT: Duration = Duration::from_secs(10);

fn sim(cfg: Config) -> Sim {
    let l = LinkConfig { latency: Duration::from_micros(2), ..LinkConfig::default() };
    Pds::pair(7, cfg, l, l)
}

fn send_n(sim: &mut Sim, from: usize, mode: Mode, n: u32) {
    for i in 0..n {
        let body = Bytes::from(message(from as u8 + 1, i, 100 + i as usize));
        sim.ends.sides[from].ep.send(1 - from as u8, mode, NextHeader::ReqStd, body, u64::from(i)).unwrap();
    }
}

fn delivered(sim: &Sim, side: usize, tag: u8) -> Vec<u32> {
    sim.ends.sides[side]
        .received
        .iter()
        .filter(|r| matches!(r.kind, DeliveryKind::Pdc { .. }))
        .map(|r| check_message(&r.body).unwrap())
        .filter(|&(t, _)| t == tag)
        .map(|(_, i)| i)
        .collect()
}

fn count(sim: &Sim, side: usize, f: impl Fn(&Event<u8>) -> bool) -> usize {
    sim.ends.sides[side].events.iter().filter(|e| f(e)).count()
}

fn acked(sim: &Sim, side: usize) -> usize {
    count(sim, side, |e| matches!(e, Event::Acked { .. }))
}

fn closed(sim: &Sim, side: usize) -> bool {
    count(sim, side, |e| matches!(e, Event::Closed { .. })) == 1
}

/// Closes A's initiator PDC and runs until both sides report it closed and hold no PDC.
fn close_both(sim: &mut Sim, mode: Mode) {
    let pdc = sim.ends.sides[0].ep.connect(1, mode).unwrap();
    let now = sim.now();
    sim.ends.sides[0].ep.close(now, pdc).unwrap();
    assert!(sim.run_until(LIMIT, |s| closed(s, 0) && closed(s, 1)), "close did not finish");
    assert_eq!((sim.ends.sides[0].ep.pdc_count(), sim.ends.sides[1].ep.pdc_count()), (0, 0));
    assert!(sim.ends.sides.iter().all(|s| !s.events.iter().any(|e| matches!(e, Event::Failed { .. }))));
}

#[test]
fn both_sides_open_at_once() {
    for mode in [Mode::Rud, Mode::Rod] {
        let mut sim = sim(Config::default());
        send_n(&mut sim, 0, mode, 10);
        send_n(&mut sim, 1, mode, 10);
        assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 10 && acked(s, 1) == 10));
        assert_eq!(delivered(&sim, 1, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(delivered(&sim, 0, 2), (0..10).collect::<Vec<_>>());
        for s in 0..2 {
            // One PDC each way: each side initiated one and accepted one.
            assert_eq!(sim.ends.sides[s].ep.pdc_count(), 2);
            assert_eq!(count(&sim, s, |e| matches!(e, Event::Established { .. })), 1);
            assert_eq!(count(&sim, s, |e| matches!(e, Event::Accepted { .. })), 1);
        }
        // Both close their own at once.
        for s in 0..2 {
            let pdc = sim.ends.sides[s].ep.connect(1 - s as u8, mode).unwrap();
            let now = sim.now();
            sim.ends.sides[s].ep.close(now, pdc).unwrap();
        }
        let two_closed = |s: &Sim, side| count(s, side, |e| matches!(e, Event::Closed { .. })) == 2;
        assert!(sim.run_until(LIMIT, |s| two_closed(s, 0) && two_closed(s, 1)));
        assert_eq!((sim.ends.sides[0].ep.pdc_count(), sim.ends.sides[1].ep.pdc_count()), (0, 0));
    }
}

#[test]
fn lost_syn_packets_are_resent_with_syn() {
    let mut sim = sim(Config::default());
    // Lose A's first three requests (all carry SYN).
    sim.ends.drop =
        Box::new(|from, pds| from == 0 && matches!(pds, PdsRepr::Request(r) if r.syn()) && !is_retx(pds));
    send_n(&mut sim, 0, Mode::Rud, 3);
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 3));
    assert_eq!(delivered(&sim, 1, 1).len(), 3);
    // The retransmissions still carried SYN (the target's PDCID was unknown), and the target
    // opened exactly one PDC.
    let syn_retx = sim
        .ends
        .sent
        .iter()
        .filter(|(f, p)| *f == 0 && is_retx(p) && matches!(p, PdsRepr::Request(r) if r.syn()))
        .count();
    assert_eq!(syn_retx, 3);
    assert_eq!(count(&sim, 1, |e| matches!(e, Event::Accepted { .. })), 1);
    assert!(sim.now() >= Duration::from_millis(5), "recovered by the retransmit timer");
    close_both(&mut sim, Mode::Rud);
}

fn is_retx(p: &PdsRepr) -> bool {
    p.flags() & wire::uet::pds::request::FLAG_RETX != 0
}

#[test]
fn lost_ack_of_the_syn() {
    for mode in [Mode::Rud, Mode::Rod] {
        let mut sim = sim(Config::default());
        // Lose every ACK the target sends during the first 6 ms: the retransmit timer (5 ms) fires
        // and the initiator resends its SYN packets.
        sim.ends.drop = Box::new(|from, pds| from == 1 && matches!(pds, PdsRepr::Ack(_)));
        send_n(&mut sim, 0, mode, 4);
        sim.run_for(Duration::from_millis(6));
        assert_eq!(delivered(&sim, 1, 1), [0, 1, 2, 3], "delivered once despite the retransmissions");
        assert_eq!(acked(&sim, 0), 0);
        sim.ends.drop = Box::new(|_, _| false);
        assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 4));
        assert_eq!(delivered(&sim, 1, 1), [0, 1, 2, 3]);
        assert_eq!(count(&sim, 1, |e| matches!(e, Event::Accepted { .. })), 1);
        assert_eq!(count(&sim, 0, |e| matches!(e, Event::Established { .. })), 1);
        assert!(sim.ends.sides[1].ep.stats().rx_duplicates >= 1);
        close_both(&mut sim, mode);
    }
}

fn is_close_cmd(p: &PdsRepr) -> bool {
    matches!(p, PdsRepr::Cp(c) if c.ctl_type == CtlType::CloseCmd)
}

#[test]
fn lost_close_cmd() {
    let mut sim = sim(Config::default());
    send_n(&mut sim, 0, Mode::Rod, 2);
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 2));
    sim.ends.drop = Box::new(|from, p| from == 0 && is_close_cmd(p) && !is_retx(p));
    close_both(&mut sim, Mode::Rod);
    assert_eq!(sim.ends.sent.iter().filter(|(_, p)| is_close_cmd(p)).count(), 2, "CLOSE_CMD sent twice");
}

#[test]
fn lost_ack_of_the_close() {
    let mut sim = sim(Config::default());
    send_n(&mut sim, 0, Mode::Rud, 2);
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 2));
    let close_seen = std::rc::Rc::new(std::cell::Cell::new(false));
    let seen = close_seen.clone();
    // Once the CLOSE_CMD has gone out, lose every ACK of the target: the initiator resends the
    // CLOSE_CMD, the target (already gone) answers INV_DPDCID, and that ends the close.
    sim.ends.drop = Box::new(move |from, p| {
        if is_close_cmd(p) {
            seen.set(true);
        }
        from == 1 && seen.get() && matches!(p, PdsRepr::Ack(_))
    });
    close_both(&mut sim, Mode::Rud);
    let inv = sim
        .ends
        .sent
        .iter()
        .filter(|(f, p)| *f == 1 && matches!(p, PdsRepr::Nack(n) if n.nack_code == NackCode::InvDpdcid));
    assert_eq!(inv.count(), 1);
}

#[test]
fn target_asks_to_close() {
    let mut sim = sim(Config::default());
    send_n(&mut sim, 0, Mode::Rud, 2);
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 2));
    let target_pdc = sim.ends.sides[1]
        .events
        .iter()
        .find_map(|e| if let Event::Accepted { pdc, .. } = e { Some(*pdc) } else { None })
        .unwrap();
    // The first CLOSE_REQ is lost; the target repeats it.
    let mut first = true;
    sim.ends.drop = Box::new(move |from, p| {
        let hit = from == 1 && first && matches!(p, PdsRepr::Cp(c) if c.ctl_type == CtlType::CloseReq);
        first &= !hit;
        hit
    });
    let now = sim.now();
    sim.ends.sides[1].ep.close(now, target_pdc).unwrap();
    assert!(sim.run_until(LIMIT, |s| closed(s, 0) && closed(s, 1)));
    assert_eq!((sim.ends.sides[0].ep.pdc_count(), sim.ends.sides[1].ep.pdc_count()), (0, 0));
    let reqs =
        sim.ends.sent.iter().filter(|(_, p)| matches!(p, PdsRepr::Cp(c) if c.ctl_type == CtlType::CloseReq));
    assert_eq!(reqs.count(), 2);
}

#[test]
fn retry_limit_fails_the_pdc_with_every_unacked_cookie() {
    let cfg = Config { max_retries: 3, ..Config::default() };
    let mut sim = sim(cfg);
    send_n(&mut sim, 0, Mode::Rud, 2);
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 2));
    let t0 = sim.now();
    let port = sim.ports[1];
    sim.net.set_port_up(port, false).unwrap();
    sim.ends.sides[0].ep.send(1, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"lost"), 77).unwrap();
    sim.ends.sides[0].ep.send(1, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"lost"), 78).unwrap();
    assert!(sim.run_until(LIMIT, |s| count(s, 0, |e| matches!(e, Event::Failed { .. })) == 1));
    let failed = sim.ends.sides[0].events.iter().find(|e| matches!(e, Event::Failed { .. })).unwrap();
    assert!(
        matches!(failed, Event::Failed { error: PdcError::RetryExceeded, unacked, .. } if unacked == &[77, 78])
    );
    // 5 + 10 + 20 + 40 ms: the first transmission and three retransmissions, each timed out.
    let took = sim.now() - t0;
    assert!(took >= Duration::from_millis(75) && took < Duration::from_millis(76), "{took:?}");
    assert_eq!(sim.ends.sides[0].ep.pdc_count(), 0);
    // A new send opens a new PDC.
    sim.net.set_port_up(port, true).unwrap();
    sim.ends.sides[0].ep.send(1, Mode::Rud, NextHeader::ReqStd, Bytes::from(message(1, 9, 5)), 79).unwrap();
    assert!(sim.run_until(LIMIT, |s| acked(s, 0) == 3));
}

#[test]
fn no_pdc_available_fails_the_initiator() {
    let l = LinkConfig::default();
    let mut sim = Pds::pair(3, Config::default(), l, l);
    sim.ends.sides[1].ep = pds::Endpoint::new(Config { max_pdcs: 0, ..Config::default() }, 1);
    send_n(&mut sim, 0, Mode::Rud, 2);
    assert!(sim.run_until(LIMIT, |s| count(s, 0, |e| matches!(e, Event::Failed { .. })) == 1));
    assert!(sim.ends.sides[0].events.iter().any(|e| matches!(e,
        Event::Failed { error: PdcError::Nack(NackCode::NoPdcAvail), unacked, .. } if unacked == &[0, 1])));
    assert!(sim.ends.sides[1].received.is_empty());
}

#[test]
fn rudi_request_to_nobody_fails() {
    let cfg = Config { max_retries: 2, ..Config::default() };
    let mut sim = sim(cfg);
    let port = sim.ports[1];
    sim.net.set_port_up(port, false).unwrap();
    let id = sim.ends.sides[0].ep.rudi_send(1, NextHeader::ReqSmall, Bytes::from_static(b"r"), 5);
    assert!(sim.run_until(LIMIT, |s| !s.ends.sides[0].events.is_empty()));
    assert_eq!(sim.ends.sides[0].events, [Event::RudiFailed { peer: 1, pkt_id: id, cookie: 5 }]);
    assert_eq!(sim.ends.sent.len(), 3, "sent once and retransmitted twice");
}
