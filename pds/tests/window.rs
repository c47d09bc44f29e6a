//! The PDCs' loss-adaptive window (`Config::min_window`, issue 27) on a slow path with no ECN and
//! no congestion control: a 10 Gb/s link with a 64 KiB tail-drop queue (what a VM's queues or a
//! receiver's socket buffer are to a sender that does not pace itself), 4 KiB packets, 2400 of them
//! queued at once on one PDC (RUD and ROD), seeds 1-3.
//!
//! The fixed window of 256 packets (1 MiB) overflows the queue in every round trip. RUD collapses:
//! most of each burst is dropped, the SACK bitmap (64 PSNs) cannot report what arrived beyond it,
//! the per-packet timers back off to `max_rto`, and the PDC moves about a queue's worth of packets
//! per timeout (on seed 1 it had 616 of the 2400 acknowledged after 60 s of virtual time). The
//! adaptive window halves on the losses the SACK bitmap or the ROD_OOO NACKs show and settles near
//! what the path holds. Both run for at most 2 s of virtual time; the table prints the rates per
//! packet delivered, and the test asserts that the adaptive window delivers everything, drops at
//! most a fifth as many frames and times out at most half as often per packet delivered, and
//! moves at least as many bytes per second.
//!
//! Measured (2 s of virtual time): with the fixed window RUD had 180 of 2,400 packets acknowledged
//! and ROD moved 0.8-0.9 Gb/s; with the adaptive one RUD delivered all at 9.0-9.2 Gb/s and ROD at
//! 7.5 Gb/s, with no timeouts.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::Pds;
use nicsim::LinkConfig;
use pds::{Config, DeliveryKind, Event, Mode, NextHeader};

const PACKETS: u64 = 2400;
const SIZE: usize = 4096;
const BUDGET: Duration = Duration::from_secs(2);

#[derive(Debug)]
struct Run {
    /// Packets acknowledged within the budget.
    acked: u64,
    /// Frames the link tail-dropped, per 1000 packets acknowledged.
    drops: f64,
    /// Retransmission timer expiries, per 1000 packets acknowledged.
    timeouts: f64,
    /// Retransmissions, per 1000 packets acknowledged.
    retransmits: f64,
    cuts: u64,
    probes: u64,
    goodput_bps: f64,
}

fn run(seed: u64, mode: Mode, min_window: Option<u32>) -> Run {
    let link = LinkConfig {
        latency: Duration::from_micros(5),
        bandwidth_bps: 10_000_000_000,
        queue_limit: 64 << 10,
        // A little loss besides, so that the seeds differ.
        loss: 0.0005,
        ..LinkConfig::default()
    };
    let cfg = Config { min_window, max_retries: 1000, ..Config::default() };
    let mut sim = Pds::pair(seed, cfg, link, link);
    let body = Bytes::from(vec![0x5A; SIZE]);
    for i in 0..PACKETS {
        sim.ends.sides[0].ep.send(1, mode, NextHeader::ReqStd, body.clone(), i).unwrap();
    }
    let t0 = sim.now();
    let acked = |sim: &common::Sim| {
        sim.ends.sides[0].events.iter().filter(|e| matches!(e, Event::Acked { .. })).count() as u64
    };
    sim.run_until(t0 + BUDGET, |sim| acked(sim) == PACKETS);
    let (n, elapsed) = (acked(&sim), sim.now() - t0);
    let got =
        sim.ends.sides[1].received.iter().filter(|r| matches!(r.kind, DeliveryKind::Pdc { .. })).count();
    assert!(got as u64 >= n, "acknowledged packets were delivered");
    assert!(sim.ends.sides[0].events.iter().all(|e| !matches!(e, Event::Failed { .. })));
    let st = sim.ends.sides[0].ep.stats();
    let per_k = |x: u64| x as f64 * 1000.0 / n.max(1) as f64;
    Run {
        acked: n,
        drops: per_k(sim.net.total_stats().tail_dropped),
        timeouts: per_k(st.timeouts),
        retransmits: per_k(st.tx_retransmits),
        cuts: st.window_cuts,
        probes: st.tail_probes,
        goodput_bps: (n as usize * SIZE) as f64 * 8.0 / elapsed.as_secs_f64(),
    }
}

#[test]
fn the_adaptive_window_stops_overrunning_a_short_queue() {
    for mode in [Mode::Rud, Mode::Rod] {
        for seed in [1u64, 2, 3] {
            let fixed = run(seed, mode, None);
            let adaptive = run(seed, mode, Some(4));
            for (name, r) in [("fixed 256", &fixed), ("adaptive", &adaptive)] {
                println!(
                    "{mode:?} seed {seed} {name:<9} acked {:>4}/{PACKETS}  goodput {:6.3} Gb/s  per 1000 \
                     delivered: retransmits {:>7.1} drops {:>7.1} timeouts {:>7.1}  window cuts {} probes {}",
                    r.acked,
                    r.goodput_bps / 1e9,
                    r.retransmits,
                    r.drops,
                    r.timeouts,
                    r.cuts,
                    r.probes
                );
            }
            let why = format!("{mode:?} seed {seed}: {adaptive:?} vs {fixed:?}");
            assert_eq!(adaptive.acked, PACKETS, "{why}");
            assert!(adaptive.drops * 5.0 <= fixed.drops, "{why}");
            assert!(adaptive.timeouts * 2.0 <= fixed.timeouts, "{why}");
            assert!(adaptive.goodput_bps >= fixed.goodput_bps, "{why}");
        }
    }
}
