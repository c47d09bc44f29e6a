//! Two CMs on a simulated network that loses, duplicates and reorders MADs.

use super::types::encode;
use super::{AcceptParams, Cm, CmConfig, CmError, CmEvent, ConnId, ConnectParams, Mad, State};
use proptest::prelude::*;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::time::Duration;
use wire::ib::cm::Rtu;
use wire::ib::cm::{CmMessage, Drep, Dreq, Rej, rej_reason};
use wire::ib::cma::{port_space, service_id};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

fn svc() -> u64 {
    service_id(port_space::TCP, 7174)
}

/// How the network between the two CMs misbehaves.
#[derive(Debug, Clone, Copy, Default)]
struct Net {
    loss: f64,
    dup: f64,
    /// Each MAD is delayed uniformly in [0, jitter): MADs overtake each other.
    jitter_ms: u64,
}

/// The two CMs, their consumers' behaviour and everything each consumer saw.
struct Pair {
    now: Duration,
    cms: [Cm; 2],
    net: Net,
    rng: Xoshiro256PlusPlus,
    flight: Vec<(Duration, usize, Box<Mad>)>,
    events: [Vec<CmEvent>; 2],
    /// Whether the passive consumer accepts at once (else it leaves requests waiting).
    accept: bool,
    /// Passive consumer answers DREQ at once.
    answer_dreq: bool,
}

fn params(qpn: u32) -> ConnectParams {
    ConnectParams {
        service_id: svc(),
        qpn,
        transport: 0,
        starting_psn: 0x3DA6,
        responder_resources: 1,
        initiator_depth: 1,
        path_mtu: 3,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: false,
        local_ack_timeout: 17,
        local_gid: [0; 16],
        remote_gid: [0; 16],
        hop_limit: 64,
        traffic_class: 0,
        private_data: vec![0xAB; 40],
    }
}

fn accept_params(qpn: u32) -> AcceptParams {
    AcceptParams {
        qpn,
        starting_psn: 0xFEBD3D,
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        srq: false,
        private_data: vec![0xCD; 10],
    }
}

impl Pair {
    fn new(net: Net, seed: u64) -> Pair {
        let cfg = |s: u32| CmConfig { ca_guid: u64::from(s), seed: s, ..CmConfig::default() };
        let mut cms = [Cm::new(cfg(0x1111)), Cm::new(cfg(0x2222))];
        cms[1].listen(svc(), 64).unwrap();
        Pair {
            now: Duration::ZERO,
            cms,
            net,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            flight: Vec::new(),
            events: [Vec::new(), Vec::new()],
            accept: true,
            answer_dreq: true,
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// Moves MADs and events until `until`, in 1 ms steps.
    fn run(&mut self, until: Duration) {
        while self.now < until {
            for side in 0..2 {
                while let Some((to, mad)) = self.cms[side].poll_transmit() {
                    assert_eq!(to, if side == 0 { B } else { A });
                    let copies = if self.chance(self.net.dup) { 2 } else { 1 };
                    for _ in 0..copies {
                        if self.chance(self.net.loss) {
                            continue;
                        }
                        let delay =
                            if self.net.jitter_ms > 0 { self.rng.next_u64() % self.net.jitter_ms } else { 0 };
                        let at = self.now + Duration::from_millis(delay);
                        self.flight.push((at, 1 - side, mad.clone()));
                    }
                }
            }
            let now = self.now;
            let mut due = Vec::new();
            self.flight.retain(|(at, to, mad)| {
                if *at <= now {
                    due.push((*to, mad.clone()));
                    false
                } else {
                    true
                }
            });
            for (to, mad) in due {
                let from = if to == 0 { B } else { A };
                self.cms[to].handle_mad(now, from, &mad[..]);
            }
            for side in 0..2 {
                if self.cms[side].poll_timeout().is_some_and(|t| t <= now) {
                    self.cms[side].handle_timeout(now);
                }
                while let Some(ev) = self.cms[side].poll_event() {
                    self.consume(side, &ev);
                    self.events[side].push(ev);
                }
            }
            self.now += Duration::from_millis(1);
        }
    }

    /// What the consumers do with events: the passive one accepts, the active one establishes.
    fn consume(&mut self, side: usize, ev: &CmEvent) {
        let now = self.now;
        match ev {
            CmEvent::Request(id, _) if self.accept => {
                self.cms[side].accept(now, *id, &accept_params(0x2B)).unwrap()
            }
            CmEvent::Reply(id, _) => self.cms[side].establish(now, *id).unwrap(),
            CmEvent::DisconnectRequest(id, _) if self.answer_dreq => {
                self.cms[side].disconnect(now, *id, &[]).unwrap()
            }
            _ => {}
        }
    }

    fn count(&self, side: usize, f: impl Fn(&CmEvent) -> bool) -> usize {
        self.events[side].iter().filter(|e| f(e)).count()
    }
}

fn established(e: &CmEvent) -> bool {
    matches!(e, CmEvent::Established(_))
}

#[test]
fn connect_and_disconnect_on_a_clean_network() {
    let mut p = Pair::new(Net::default(), 1);
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    p.run(Duration::from_millis(20));
    assert_eq!(p.cms[0].state(a), Some(State::Established));
    assert_eq!((p.count(0, established), p.count(1, established)), (1, 1));
    let Some(CmEvent::Request(b, req)) = p.events[1].first().cloned() else { panic!("{:?}", p.events[1]) };
    assert_eq!((req.remote_qpn, req.starting_psn, req.path_mtu, req.service_id), (0x2C, 0x3DA6, 3, svc()));
    assert_eq!(&req.private_data[..40], &[0xAB; 40][..]);
    assert!(req.private_data[40..].iter().all(|&b| b == 0));
    let rep =
        p.events[0].iter().find_map(|e| if let CmEvent::Reply(_, r) = e { Some(r.clone()) } else { None });
    let rep = rep.unwrap();
    assert_eq!((rep.remote_qpn, rep.starting_psn), (0x2B, 0xFEBD3D));
    assert_eq!(p.cms[1].state(b), Some(State::Established));

    p.cms[0].disconnect(p.now, a, b"bye").unwrap();
    assert!(!p.cms[0].settled(), "a DREQ to send and a DREP to wait for");
    p.run(p.now + Duration::from_millis(20));
    assert!(p.cms[0].settled() && p.cms[1].settled());
    assert!(
        p.events[1].iter().any(|e| matches!(e, CmEvent::DisconnectRequest(_, d) if d.starts_with(b"bye")))
    );
    assert_eq!(p.count(0, |e| matches!(e, CmEvent::Disconnected(_))), 1);
    assert_eq!(p.count(1, |e| matches!(e, CmEvent::Disconnected(_))), 1);
    // Time wait ends; nothing is left.
    p.run(p.now + Duration::from_secs(2));
    assert_eq!((p.cms[0].conns(), p.cms[1].conns()), (0, 0));
    assert_eq!(p.cms[0].stats().retries + p.cms[1].stats().retries, 0);
}

#[test]
fn an_unknown_service_is_rejected() {
    let mut p = Pair::new(Net::default(), 2);
    let mut req = params(0x2C);
    req.service_id = service_id(port_space::TCP, 9);
    let a = p.cms[0].connect(p.now, B, &req).unwrap();
    // Held for the grace first (a server may be about to listen), then refused.
    let grace = CmConfig::default().unclaimed_grace;
    p.run(grace - Duration::from_millis(5));
    assert!(p.events[0].is_empty(), "{:?}", p.events[0]);
    p.run(grace + Duration::from_millis(10));
    assert_eq!(p.events[0], vec![CmEvent::Rejected(a, rej_reason::INVALID_SERVICE_ID, vec![0; 148])]);
    assert!(p.events[1].is_empty());
    assert_eq!(p.cms[1].conns(), 0);
}

#[test]
fn a_request_that_comes_before_the_listen_is_served() {
    let mut p = Pair::new(Net::default(), 8);
    let late = service_id(port_space::TCP, 18515);
    let mut req = params(0x2C);
    req.service_id = late;
    let a = p.cms[0].connect(p.now, B, &req).unwrap();
    p.run(Duration::from_millis(300));
    assert!(p.events[1].is_empty());
    p.cms[1].listen(late, 4).unwrap();
    p.run(Duration::from_millis(320));
    assert_eq!(p.cms[0].state(a), Some(State::Established), "{:?}", p.events[0]);
    assert_eq!(p.count(1, |e| matches!(e, CmEvent::Request(..))), 1);
    // A flood of requests for nothing is held only so far.
    for i in 0..200u32 {
        let mut r = params(i);
        r.service_id = service_id(port_space::TCP, 1);
        let mad = super::conn::req(&CmConfig::default(), 0x1000 + i, 7, &r).unwrap();
        p.cms[1].handle_mad(p.now, A, &mad[..]);
    }
    assert!(p.cms[1].parked.len() <= 64);
    while p.cms[1].poll_transmit().is_some() {}
    p.run(p.now + Duration::from_secs(2));
    assert!(p.cms[1].parked.is_empty());
}

#[test]
fn a_client_rejected_for_want_of_a_listener_tries_again_within_the_grace() {
    // B rejects at once, as the kernel's CM does; its server listens 300 ms later.
    let mut p = Pair::new(Net::default(), 9);
    p.cms[1] = Cm::new(CmConfig { unclaimed_grace: Duration::ZERO, seed: 0x2222, ..CmConfig::default() });
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    p.run(Duration::from_millis(300));
    assert!(p.events[0].is_empty(), "{:?}", p.events[0]);
    p.cms[1].listen(svc(), 4).unwrap();
    p.run(Duration::from_millis(500));
    assert_eq!(p.cms[0].state(a), Some(State::Established), "{:?}", p.events[0]);
    // Past the grace, a REJ for want of a listener is the answer.
    let mut late = params(0x2D);
    late.service_id = service_id(port_space::TCP, 1);
    let b = p.cms[0].connect(p.now, B, &late).unwrap();
    p.run(p.now + CmConfig::default().unclaimed_grace + Duration::from_millis(200));
    assert!(p.events[0].contains(&CmEvent::Rejected(b, rej_reason::INVALID_SERVICE_ID, vec![0; 148])));
}

#[test]
fn a_slow_consumer_gets_mra_and_the_active_side_waits() {
    let mut p = Pair::new(Net::default(), 3);
    p.accept = false;
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    // Far longer than every REQ retry together would last without the MRAs.
    let all_retries = Cm::wait_for(CmConfig::default().response_timeout) * 16;
    p.run(all_retries + Duration::from_secs(1));
    assert_eq!(p.cms[0].state(a), Some(State::ReqSent), "{:?}", p.events[0]);
    let Some(CmEvent::Request(b, _)) = p.events[1].first().cloned() else { panic!() };
    p.cms[1].accept(p.now, b, &accept_params(0x2B)).unwrap();
    p.run(p.now + Duration::from_millis(20));
    assert_eq!((p.count(0, established), p.count(1, established)), (1, 1));
}

#[test]
fn a_dead_peer_is_reported_unreachable_after_the_retries() {
    let mut p = Pair::new(Net { loss: 1.0, ..Net::default() }, 4);
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    p.run(Cm::wait_for(CmConfig::default().response_timeout) * 17);
    assert_eq!(p.events[0], vec![CmEvent::Unreachable(a)]);
    assert_eq!(p.cms[0].stats().retries, 15);
    p.run(p.now + Duration::from_secs(2));
    assert_eq!(p.cms[0].conns(), 0);
}

#[test]
fn the_backlog_bounds_waiting_requests() {
    let mut b = Cm::new(CmConfig::default());
    b.listen(svc(), 4).unwrap();
    let mut a = Cm::new(CmConfig { seed: 7, ..CmConfig::default() });
    for i in 0..100 {
        a.connect(Duration::ZERO, B, &params(i + 0x20)).unwrap();
    }
    while let Some((_, mad)) = a.poll_transmit() {
        b.handle_mad(Duration::ZERO, A, &mad[..]);
    }
    assert_eq!(b.conns(), 4);
    assert_eq!(b.stats().rejected_busy, 96);
    let mut rejected = 0;
    while let Some((_, mad)) = b.poll_transmit() {
        a.handle_mad(Duration::ZERO, B, &mad[..]);
    }
    while let Some(ev) = a.poll_event() {
        rejected += usize::from(matches!(ev, CmEvent::Rejected(_, rej_reason::NO_RESOURCES, _)));
    }
    assert_eq!(rejected, 96);
}

#[test]
fn the_record_table_is_bounded() {
    let mut a = Cm::new(CmConfig { max_conns: 8, ..CmConfig::default() });
    for i in 0..8 {
        a.connect(Duration::ZERO, B, &params(i)).unwrap();
    }
    assert_eq!(a.connect(Duration::ZERO, B, &params(9)), Err(CmError::NoResources));
    assert_eq!(a.sidr_request(Duration::ZERO, B, svc(), &[]), Err(CmError::NoResources));
}

#[test]
fn stray_and_malformed_mads_change_nothing() {
    let mut b = Cm::new(CmConfig::default());
    b.listen(svc(), 4).unwrap();
    b.handle_mad(Duration::ZERO, A, &[0u8; 10]);
    b.handle_mad(Duration::ZERO, A, &[0xFF; 256]);
    assert_eq!(b.stats().rx_bad, 2);
    // RTU, DREP, REP, MRA, REJ for connections that do not exist.
    for msg in [
        CmMessage::Rtu(Rtu { local_comm_id: 5, remote_comm_id: 6, private_data: &[] }),
        CmMessage::Drep(Drep { local_comm_id: 5, remote_comm_id: 6, private_data: &[] }),
    ] {
        let mad = encode(&msg, 1).unwrap();
        b.handle_mad(Duration::ZERO, A, &mad[..]);
    }
    assert_eq!(b.stats().rx_stray, 2);
    assert_eq!((b.conns(), b.poll_event(), b.poll_transmit().is_none()), (0, None, true));
    // A DREQ for an unknown connection is answered with a DREP.
    let dreq = encode(
        &CmMessage::Dreq(Dreq { local_comm_id: 5, remote_comm_id: 6, remote_qpn: 0x11, private_data: &[] }),
        9,
    )
    .unwrap();
    b.handle_mad(Duration::ZERO, A, &dreq[..]);
    let (to, mad) = b.poll_transmit().unwrap();
    let (hdr, msg) = CmMessage::parse(&mad[..]).unwrap();
    assert_eq!((to, hdr.tid), (A, 9));
    assert!(matches!(msg, CmMessage::Drep(Drep { local_comm_id: 6, remote_comm_id: 5, .. })));
    assert_eq!(b.conns(), 0);
}

#[test]
fn only_the_peer_of_a_connection_moves_it() {
    let mut p = Pair::new(Net::default(), 5);
    p.accept = false;
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    p.run(Duration::from_millis(5));
    // A REJ naming A's connection but sent from a third address is ignored.
    let rej = encode(
        &CmMessage::Rej(Rej {
            local_comm_id: 0,
            remote_comm_id: a.0,
            message_rejected: 0,
            reject_info_len: 0,
            reason: rej_reason::CONSUMER_REJECT,
            ari: &[],
            private_data: &[],
        }),
        1,
    )
    .unwrap();
    p.cms[0].handle_mad(p.now, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99)), &rej[..]);
    assert_eq!(p.cms[0].state(a), Some(State::ReqSent));
}

#[test]
fn simultaneous_disconnects_both_finish() {
    let mut p = Pair::new(Net::default(), 6);
    p.answer_dreq = false;
    let a = p.cms[0].connect(p.now, B, &params(0x2C)).unwrap();
    p.run(Duration::from_millis(10));
    let Some(CmEvent::Request(b, _)) = p.events[1].first().cloned() else { panic!() };
    p.cms[0].disconnect(p.now, a, &[]).unwrap();
    p.cms[1].disconnect(p.now, b, &[]).unwrap();
    p.run(p.now + Duration::from_millis(10));
    assert_eq!(p.count(0, |e| matches!(e, CmEvent::Disconnected(_))), 1);
    assert_eq!(p.count(1, |e| matches!(e, CmEvent::Disconnected(_))), 1);
    p.run(p.now + Duration::from_secs(2));
    assert_eq!((p.cms[0].conns(), p.cms[1].conns()), (0, 0));
}

#[test]
fn sidr_finds_the_service_qp() {
    let mut p = Pair::new(Net { loss: 0.3, dup: 0.2, jitter_ms: 5 }, 7);
    let udp = service_id(port_space::UDP, 7174);
    p.cms[1].listen(udp, 8).unwrap();
    let a = p.cms[0].sidr_request(p.now, B, udp, b"hello").unwrap();
    p.run(Duration::from_millis(2));
    let mut answered = false;
    for _ in 0..20_000 {
        if !answered {
            if let Some(CmEvent::SidrRequest(b, peer, s, pd)) = p.events[1].first().cloned() {
                assert_eq!((peer, s), (A, udp));
                assert!(pd.starts_with(b"hello"));
                p.cms[1].sidr_reply(p.now, b, 0, 0x44, 0x0123_4567, &[]).unwrap();
                answered = true;
            }
        }
        p.run(p.now + Duration::from_millis(1));
    }
    let replies: Vec<_> = p.events[0].iter().filter(|e| matches!(e, CmEvent::SidrReply(..))).collect();
    assert_eq!(replies.len(), 1, "{:?}", p.events[0]);
    let CmEvent::SidrReply(id, info) = replies[0] else { unreachable!() };
    assert_eq!((*id, info.status, info.qpn, info.qkey), (a, 0, 0x44, 0x0123_4567));
    assert_eq!(p.count(1, |e| matches!(e, CmEvent::SidrRequest(..))), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Under loss, duplication and reordering, every connection ends established exactly once on
    /// both sides, or on neither; disconnecting then leaves no record behind.
    #[test]
    fn connections_establish_exactly_once_under_loss(
        loss in 0.0f64..0.4,
        dup in 0.0f64..0.3,
        jitter_ms in 0u64..40,
        n in 1usize..6,
        seed in any::<u64>(),
    ) {
        let mut p = Pair::new(Net { loss, dup, jitter_ms }, seed);
        let ids: Vec<ConnId> = (0..n).map(|i| p.cms[0].connect(p.now, B, &params(0x20 + i as u32)).unwrap()).collect();
        p.run(Duration::from_secs(30));
        let up_a = p.count(0, established);
        let up_b = p.count(1, established);
        for id in &ids {
            let ended = p.events[0].iter().filter(|e| match e {
                CmEvent::Established(x) | CmEvent::Unreachable(x) | CmEvent::Rejected(x, ..) => x == id,
                _ => false,
            }).count();
            prop_assert_eq!(ended, 1, "conn {:?}: {:?}", id, p.events[0]);
        }
        // Half-open connections do not stay: each side's established count matches.
        prop_assert_eq!(up_a, up_b, "A {:?}\nB {:?}", p.events[0], p.events[1]);
        prop_assert_eq!(p.count(1, |e| matches!(e, CmEvent::Request(..))), n);
        for id in &ids {
            if p.cms[0].state(*id) == Some(State::Established) {
                p.cms[0].disconnect(p.now, *id, &[]).unwrap();
            }
        }
        p.run(p.now + Duration::from_secs(30));
        prop_assert_eq!(p.count(0, |e| matches!(e, CmEvent::Disconnected(_))), up_a);
        prop_assert_eq!(p.count(1, |e| matches!(e, CmEvent::Disconnected(_))), up_b);
        prop_assert_eq!((p.cms[0].conns(), p.cms[1].conns()), (0, 0));
    }
}

/// Every MAD of a connection goes with its primary path's traffic class, as Linux's CM sends
/// them: the active side's from its REQ, the passive side's from the REQ it received.
#[test]
fn mads_go_with_the_connections_traffic_class() {
    let cfg = |s: u32| CmConfig { ca_guid: u64::from(s), seed: s, ..CmConfig::default() };
    let (mut a, mut b) = (Cm::new(cfg(1)), Cm::new(cfg(2)));
    b.listen(svc(), 4).unwrap();
    let now = Duration::ZERO;
    let mut classes = Vec::new();
    // Moves what `from` sends to `to`, noting each MAD's attribute and class.
    let hand = |from: &mut Cm, to: &mut Cm, src: IpAddr, classes: &mut Vec<(u16, u8)>| {
        while let Some((_, tc, mad)) = from.poll_transmit_classed() {
            classes.push((u16::from_be_bytes([mad[16], mad[17]]), tc));
            to.handle_mad(now, src, &mad[..]);
        }
    };
    let id = a.connect(now, B, &ConnectParams { traffic_class: 0x68, ..params(0x11) }).unwrap();
    hand(&mut a, &mut b, A, &mut classes);
    let Some(CmEvent::Request(passive, req)) = b.poll_event() else { panic!("a request") };
    assert_eq!(req.traffic_class, 0x68);
    b.accept(now, passive, &accept_params(0x22)).unwrap();
    hand(&mut b, &mut a, B, &mut classes);
    assert!(matches!(a.poll_event(), Some(CmEvent::Reply(..))));
    a.establish(now, id).unwrap();
    a.disconnect(now, id, &[]).unwrap();
    hand(&mut a, &mut b, A, &mut classes);
    while let Some(e) = b.poll_event() {
        if matches!(e, CmEvent::DisconnectRequest(..)) {
            b.disconnect(now, passive, &[]).unwrap();
        }
    }
    hand(&mut b, &mut a, B, &mut classes);
    // REQ, REP, RTU, DREQ, DREP.
    assert_eq!(classes, [(0x10, 0x68), (0x13, 0x68), (0x14, 0x68), (0x15, 0x68), (0x16, 0x68)]);
}
