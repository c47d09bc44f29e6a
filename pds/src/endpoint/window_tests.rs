//! The PDCs' loss-adaptive window (`Config::min_window`), sans-IO: two endpoints joined by a test
//! loop that moves every packet at explicit times and loses the ones a test chooses.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::{Mode, NextHeader, PdsRepr};

use super::Endpoint;
use crate::config::Config;
use crate::event::Event;
use crate::pdc::PdcId;

/// Sender `a` (address 1) and receiver `b` (address 2).
struct Pair {
    a: Endpoint<u8>,
    b: Endpoint<u8>,
    now: Duration,
    /// Data packets `a` sent (first transmissions and retransmissions).
    data: u64,
    /// Data packets `b` took (each PSN once).
    delivered: Vec<u32>,
}

impl Pair {
    fn new(cfg: Config) -> Pair {
        Pair {
            a: Endpoint::new(cfg, 1),
            b: Endpoint::new(cfg, 2),
            now: Duration::ZERO,
            data: 0,
            delivered: Vec::new(),
        }
    }

    /// One step of 5 us: timers due, then everything each side has to send, `a`'s through
    /// `lose(psn, retransmission)`.
    fn step(&mut self, lose: &mut impl FnMut(u32, bool) -> bool) {
        self.now += Duration::from_micros(5);
        let now = self.now;
        for ep in [&mut self.a, &mut self.b] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
        let mut buf = [0u8; 512];
        while let Some(t) = self.a.poll_transmit(now, &mut buf) {
            if let Ok(PdsRepr::Request(r)) = PdsRepr::parse(&buf[..t.len]) {
                self.data += 1;
                if lose(r.psn, r.flags & wire::uet::pds::request::FLAG_RETX != 0) {
                    continue;
                }
            }
            if let Some(d) = self.b.handle_packet(now, 1, &buf[..t.len]).unwrap() {
                if let crate::DeliveryKind::Pdc { psn, .. } = d.kind {
                    self.delivered.push(psn);
                }
            }
        }
        while let Some(t) = self.b.poll_transmit(now, &mut buf) {
            self.a.handle_packet(now, 2, &buf[..t.len]).unwrap();
        }
    }

    /// Steps until `a` has every packet acknowledged (at most `limit` steps).
    fn run(&mut self, pdc: PdcId, limit: usize, lose: &mut impl FnMut(u32, bool) -> bool) {
        for _ in 0..limit {
            self.step(lose);
            if self.a.pdc_info(pdc).is_some_and(|i| i.unacked == 0) {
                return;
            }
        }
        panic!("not done after {limit} steps: {:?}", self.a.pdc_info(pdc));
    }

    fn window(&self, pdc: PdcId) -> Option<u32> {
        self.a.pdc_info(pdc).and_then(|i| i.window)
    }
}

/// Queues `n` packets on `a`'s PDC to `b` in `mode`; returns the PDC and the first PSN.
fn queue(p: &mut Pair, mode: Mode, n: u64) -> (PdcId, u32) {
    let mut first = None;
    let mut pdc = 0;
    for i in 0..n {
        let (id, psn) = p.a.send(2, mode, NextHeader::ReqStd, Bytes::from_static(b"data"), i).unwrap();
        (pdc, first) = (id, first.or(Some(psn)));
    }
    (pdc, first.unwrap())
}

/// RUD: one packet lost in a full window of 256 is resent alone, as soon as the SACK bitmap shows
/// later ones received (no timer); the window halves once; repeated ACKs change nothing.
#[test]
fn rud_one_loss_is_one_selective_retransmission_and_one_halving() {
    let mut p = Pair::new(Config::default());
    let (pdc, start) = queue(&mut p, Mode::Rud, 600);
    let lost = start.wrapping_add(10);
    let mut lose = |psn: u32, retx: bool| psn == lost && !retx;
    p.step(&mut lose);
    assert_eq!(p.window(pdc), Some(128), "halved at the first SACK past the hole");
    p.run(pdc, 400, &mut lose);
    let st = *p.a.stats();
    assert_eq!((st.fast_retransmits, st.timeouts, st.window_cuts), (1, 0, 1));
    assert_eq!(p.data, 601, "one packet sent twice");
    let mut got = p.delivered.clone();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len(), 600);
    assert_eq!(p.a.poll_event().map(|e| matches!(e, Event::Established { .. })), Some(true));
}

/// ROD: a loss draws one ROD_OOO NACK per gap (and a repeat every 16 packets): one go-back, one
/// halving, no timeout; the go-back resends within the halved window.
#[test]
fn rod_one_loss_is_one_go_back_and_one_halving() {
    let mut p = Pair::new(Config::default());
    let (pdc, start) = queue(&mut p, Mode::Rod, 600);
    let lost = start.wrapping_add(10);
    let mut lose = |psn: u32, retx: bool| psn == lost && !retx;
    p.run(pdc, 400, &mut lose);
    let st = *p.a.stats();
    assert_eq!((st.timeouts, st.window_cuts), (0, 1), "{st:?}");
    assert!(p.data < 600 + 256, "the go-back resent within half the window: {}", p.data);
    assert_eq!(p.delivered.len(), 600);
    assert!(p.delivered.windows(2).all(|w| w[1] == w[0].wrapping_add(1)), "in order");
    assert!(p.b.stats().tx_nacks >= 1 && p.a.stats().rx_nacks == p.b.stats().tx_nacks);
}

/// A stall (everything lost for 5 ms) times out: the window falls to the floor, then slow-starts
/// back and grows to the configured window on a clean path. Without `min_window` it stays put.
#[test]
fn the_window_falls_on_a_timeout_and_recovers() {
    for min_window in [Some(4), None] {
        let mut p = Pair::new(Config { min_window, max_queued: 100_000, ..Config::default() });
        let (pdc, _) = queue(&mut p, Mode::Rud, 100_000);
        let mut clean = |_: u32, _: bool| false;
        for _ in 0..20 {
            p.step(&mut clean);
        }
        let before = p.window(pdc);
        // A black hole (the probe it draws is lost too) until the retransmission timers of the
        // packets sent into it are about to run out.
        let mut all = |_: u32, _: bool| true;
        let rto_at = p.now + Duration::from_micros(5) + Config::default().rto;
        while p.now + Duration::from_micros(5) < rto_at {
            p.step(&mut all);
        }
        let st = *p.a.stats();
        assert_eq!((st.tail_probes, st.timeouts), (u64::from(min_window.is_some()), 0), "a lost probe");
        p.step(&mut clean);
        assert!(p.a.stats().timeouts > 0);
        let fallen = p.window(pdc);
        let mut seen = Vec::new();
        for _ in 0..400 {
            p.step(&mut clean);
            seen.push(p.window(pdc));
        }
        if min_window.is_none() {
            assert_eq!((before, fallen, seen.last().copied().flatten()), (None, None, None));
            continue;
        }
        // The timer fell to the floor (4), and the step acknowledged what the floor let go. Then
        // slow start doubles per round trip (a step here) to the threshold (128), and congestion
        // avoidance adds one a round trip up to the configured window.
        let seen: Vec<u32> = seen.into_iter().map(Option::unwrap).collect();
        assert_eq!(before, Some(256));
        assert!(fallen.unwrap() <= 8, "{fallen:?}");
        let ss = seen.iter().position(|&w| w >= 128).unwrap();
        assert!(ss <= 6, "slow start: {seen:?}");
        assert!(seen[ss..].windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1), "{seen:?}");
        assert_eq!(seen.last(), Some(&256), "back to the configured window");
        assert!(p.a.stats().window_cuts >= 1);
    }
}
