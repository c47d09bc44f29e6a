//! Tests of the endpoint's scheduling (issue 29): idle PDCs cost the polls nothing, deadlines stay
//! exact, and the timer heap stays small under load.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::request::FLAG_SYN;
use wire::uet::pds::{Mode, NextHeader, RequestRepr};

use super::Endpoint;
use crate::config::Config;

fn syn(spdcid: u16) -> Vec<u8> {
    let r = RequestRepr {
        mode: Mode::Rud,
        next_hdr: NextHeader::ReqStd,
        flags: FLAG_SYN,
        clear_psn_offset: 0,
        psn: 1000,
        spdcid,
        dpdcid: RequestRepr::syn_word(false, 0),
        cc: None,
    };
    let mut b = vec![0; 16];
    let n = r.emit(&mut b).unwrap();
    b.truncate(n);
    b
}

#[test]
fn idle_pdcs_leave_the_polls_and_deadlines_stay_exact() {
    let cfg = Config { max_pdcs: 10_000, max_pdcs_per_peer: 10_000, ..Config::default() };
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    for spdcid in 1..=5000 {
        ep.handle_packet(Duration::ZERO, 5, &syn(spdcid)).unwrap();
    }
    assert_eq!(ep.pdc_count(), 5000);
    // Their ACKs go once due; then nothing is left to send and no PDC is looked at.
    let mut buf = [0u8; 256];
    let t = ep.poll_timeout().expect("ACKs due");
    assert_eq!(t, cfg.ack_delay);
    let acks = std::iter::from_fn(|| ep.poll_transmit(t, &mut buf)).count();
    assert_eq!(acks, 5000);
    assert_eq!(ep.sched.active_len(), 0);
    assert!(ep.poll_transmit(t, &mut buf).is_none());
    // The next deadline is the reaper's, exactly.
    assert_eq!(ep.poll_timeout(), Some(cfg.half_open_timeout));
    assert!(ep.sched.heap_len() <= 2 * 5000 + 64, "{} heap entries", ep.sched.heap_len());
    ep.handle_timeout(cfg.half_open_timeout);
    assert_eq!((ep.pdc_count(), ep.stats().pdcs_reaped, ep.poll_timeout()), (0, 5000, None));
}

#[test]
fn a_busy_pdc_keeps_the_timer_heap_small() {
    let (mut a, mut b) =
        (Endpoint::<u8>::new(Config::default(), 1), Endpoint::<u8>::new(Config::default(), 2));
    let mut buf = [0u8; 2048];
    let mut now = Duration::ZERO;
    let mut delivered = 0;
    let mut max_heap = 0;
    while delivered < 20_000 {
        while a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 0).is_ok()
            && a.pdc_info(1).is_some_and(|p| p.unacked < 64)
        {}
        now += Duration::from_micros(5);
        for ep in [&mut a, &mut b] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            delivered +=
                usize::from(b.handle_packet(now, t.dst.wrapping_sub(1), &buf[..t.len]).unwrap().is_some());
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            a.handle_packet(now, t.dst.wrapping_add(1), &buf[..t.len]).unwrap();
        }
        max_heap = max_heap.max(a.sched.heap_len()).max(b.sched.heap_len());
    }
    assert!(max_heap <= 2 + 64 + 1, "{max_heap} heap entries for one PDC a side");
}
