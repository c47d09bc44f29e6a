//! Deterministic simulation matrix for the PDS (issue 8, acceptance 1): two endpoints over nicsim,
//! 200 seeds per line and per mode, lines for loss 0/1/10/30 %, reorder, duplication, corruption and
//! all of them at once with a bandwidth limit.
//!
//! Per run, side A sends 48 messages to B over a RUD or ROD PDC, B answers with 16 messages of its own
//! on the PDC it accepted, A sends 8 RUDI requests (B answers each with a read-like result) and 8
//! UUD datagrams; then A closes the PDC. Checked: every PDC message delivered exactly once with its
//! data (ROD: in order), every send acknowledged exactly once, no PDC failure, every RUDI request
//! answered exactly once with the right data, every UUD datagram delivered intact (or not at all),
//! both sides closed with no PDC left, and nothing at all happening in the 50 ms after.
//! Odd seeds run RCCC (credit-paced sends); by `seed / 2 % 3` PDCs open freely, with 0-RTT or with
//! 1-RTT secure establishment. `PDS_SEED=N` replays one seed of every line; `PDS_TRACE=Rud` (or
//! `Rod`) also prints every packet of a run of that mode that does not finish.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use common::{Pds, Rng, Sim, check_message, message, rudi_answer};
use nicsim::LinkConfig;
use pds::credit::RcccConfig;
use pds::{Config, DeliveryKind, Establishment, Event, Mode, NextHeader};

const SEEDS: u64 = 200;
const FORWARD: u32 = 48;
const REVERSE: u32 = 16;
const RUDI: u32 = 8;
const UUD: u32 = 8;

/// CREDIT_REQs sent over all runs (RCCC seeds), for the report.
static CREDIT_REQS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn run(seed: u64, mode: Mode, link: LinkConfig) -> Result<(Duration, [u64; 2]), String> {
    let mut rng = Rng(seed);
    // Retries: enough that 30 % loss each way does not exhaust them (the limit itself is tested in
    // pdc_races.rs); windows from 4 to 256 packets.
    let mut cfg =
        Config { max_retries: 16, window: [4, 16, 64, 256][(seed % 4) as usize], ..Config::default() };
    // Half the seeds run RCCC with little speculative credit and slow grants, so that sends wait
    // for grants and ask with CREDIT_REQ (and lose, duplicate and reorder those) all the time.
    if seed % 2 == 1 {
        cfg.rccc = Some(RcccConfig { grant_bps: 2_000_000_000, speculative: 2048, pull: 8192, overhead: 42 });
    }
    let mut sim = Pds::pair(seed, cfg, link, link);
    // Secure establishment on a third of the seeds each (1-RTT: every PDC starts with a NACK
    // NEW_START_PSN round trip, itself subject to the link's impairments).
    let establishment =
        [Establishment::Open, Establishment::ZeroRtt, Establishment::OneRtt][(seed / 2 % 3) as usize];
    for side in &mut sim.ends.sides {
        side.ep.set_secure(establishment);
    }
    let mut forward = Vec::new();
    for i in 0..FORWARD {
        let len = rng.below(3000) as usize;
        let body = message(1, i, len);
        forward.push(body.clone());
        sim.ends.sides[0]
            .ep
            .send(1, mode, NextHeader::ReqStd, Bytes::from(body), u64::from(i))
            .map_err(|e| e.to_string())?;
    }
    let mut rudi = Vec::new();
    for i in 0..RUDI {
        let req = message(3, i, rng.below(40) as usize);
        let id = sim.ends.sides[0].ep.rudi_send(
            1,
            NextHeader::ReqSmall,
            Bytes::from(req.clone()),
            1000 + u64::from(i),
        );
        rudi.push((id, req));
    }
    for i in 0..UUD {
        sim.ends.sides[0].ep.uud_send(
            1,
            NextHeader::ReqSmall,
            Bytes::from(message(4, i, rng.below(1500) as usize)),
        );
    }
    let mut reverse_started = false;
    let limit = Duration::from_secs(60);
    let ok = sim.run_until(limit, |sim| {
        if !reverse_started {
            let acc = sim.ends.sides[1].events.iter().find_map(|e| match e {
                Event::Accepted { pdc, .. } => Some(*pdc),
                _ => None,
            });
            if let Some(pdc) = acc {
                reverse_started = true;
                for i in 0..REVERSE {
                    let body = message(2, i, (i as usize * 97) % 2500);
                    sim.ends.sides[1]
                        .ep
                        .send_on(pdc, NextHeader::RspData, Bytes::from(body), u64::from(i))
                        .unwrap();
                }
                return false;
            }
        }
        let acked =
            |s: usize| sim.ends.sides[s].events.iter().filter(|e| matches!(e, Event::Acked { .. })).count();
        let got = |s: usize, tag: u8| {
            sim.ends.sides[s]
                .received
                .iter()
                .filter(|r| matches!(r.kind, DeliveryKind::Pdc { .. }) && r.body[0] == tag)
                .count()
        };
        acked(0) == FORWARD as usize
            && acked(1) == REVERSE as usize
            && got(1, 1) >= FORWARD as usize
            && got(0, 2) >= REVERSE as usize
            && sim.ends.sides[0].ep.rudi_outstanding() == 0
    });
    if !ok {
        if std::env::var("PDS_TRACE").is_ok_and(|m| m == format!("{mode:?}")) {
            for (side, p) in &sim.ends.sent {
                eprintln!("{side} {p:?}");
            }
            eprintln!(
                "events A {:?}",
                std::iter::from_fn(|| sim.ends.sides[0].ep.poll_event()).collect::<Vec<_>>()
            );
        }
        return Err(format!("transfer not done by {:?} (t = {:?})", limit, sim.now()));
    }
    let pdc = sim.ends.sides[0].ep.connect(1, mode).unwrap();
    sim.ends.sides[0].ep.close(sim.now(), pdc).map_err(|e| e.to_string())?;
    let closed =
        |sim: &mut Sim, s: usize| sim.ends.sides[s].events.iter().any(|e| matches!(e, Event::Closed { .. }));
    if !sim.run_until(limit, |sim| closed(sim, 0) && closed(sim, 1)) {
        return Err(format!("close not done by {limit:?}"));
    }
    let done_at = sim.now();
    let counts = |sim: &Sim| sim.ends.sides.each_ref().map(|s| (s.events.len(), s.received.len()));
    let before = counts(&sim);
    sim.run_for(Duration::from_millis(50));
    // Late duplicates may still be delivered as nothing (dropped); UUD duplicates are legitimate.
    let after = counts(&sim);
    let extra_rx: usize = (0..2)
        .map(|s| {
            sim.ends.sides[s].received[before[s].1..after[s].1]
                .iter()
                .filter(|r| r.kind != DeliveryKind::Uud)
                .count()
        })
        .sum();
    if before.map(|c| c.0) != after.map(|c| c.0) || extra_rx != 0 {
        return Err("events or deliveries after the close".into());
    }
    for s in 0..2 {
        if sim.ends.sides[s].ep.pdc_count() != 0 {
            return Err(format!("side {s} still holds {} PDCs", sim.ends.sides[s].ep.pdc_count()));
        }
    }

    // Exactly once, intact, in order for ROD.
    for (s, tag, n) in [(1usize, 1u8, FORWARD), (0, 2, REVERSE)] {
        let mut seen = Vec::new();
        for r in &sim.ends.sides[s].received {
            if let DeliveryKind::Pdc { mode: m, .. } = r.kind {
                if m != mode {
                    return Err("delivered in the wrong mode".into());
                }
                let (t, i) = check_message(&r.body)?;
                if t == tag {
                    seen.push(i);
                }
            }
        }
        let set: BTreeSet<u32> = seen.iter().copied().collect();
        if seen.len() != n as usize || set.len() != n as usize {
            return Err(format!(
                "stream {tag}: {} deliveries of {} distinct messages, want {n}",
                seen.len(),
                set.len()
            ));
        }
        if mode == Mode::Rod && seen.windows(2).any(|w| w[0] > w[1]) {
            return Err(format!("ROD stream {tag} out of order: {seen:?}"));
        }
    }
    for r in &sim.ends.sides[1].received {
        if let (DeliveryKind::Pdc { .. }, Ok((1, i))) = (r.kind, check_message(&r.body)) {
            if forward.get(i as usize) != Some(&r.body) {
                return Err(format!("forward message {i} differs from what was sent"));
            }
        }
    }
    // Every send acknowledged exactly once; no failure.
    for s in 0..2 {
        let mut cookies = Vec::new();
        for e in &sim.ends.sides[s].events {
            match e {
                Event::Acked { cookie, .. } => cookies.push(*cookie),
                Event::Failed { error, .. } => return Err(format!("side {s}: PDC failed: {error}")),
                Event::RudiFailed { pkt_id, .. } => return Err(format!("RUDI {pkt_id} failed")),
                _ => {}
            }
        }
        cookies.sort();
        let want = if s == 0 { FORWARD } else { REVERSE };
        if cookies != (0..u64::from(want)).collect::<Vec<_>>() {
            return Err(format!("side {s}: acked cookies {cookies:?}"));
        }
    }
    // RUDI: one response each, the right one.
    let responses: Vec<_> = sim.ends.sides[0]
        .received
        .iter()
        .filter_map(|r| match r.kind {
            DeliveryKind::RudiResponse { pkt_id, cookie } => Some((pkt_id, cookie, r.body.clone())),
            _ => None,
        })
        .collect();
    if responses.len() != RUDI as usize {
        return Err(format!("{} RUDI responses, want {RUDI}", responses.len()));
    }
    for (i, (id, req)) in rudi.iter().enumerate() {
        let Some((_, cookie, body)) = responses.iter().find(|r| r.0 == *id) else {
            return Err(format!("no response to RUDI {id}"));
        };
        if *cookie != 1000 + i as u64 || *body != rudi_answer(req) {
            return Err(format!("wrong response to RUDI {id}"));
        }
    }
    // UUD: whatever arrived is whole.
    for r in sim.ends.sides[1].received.iter().filter(|r| r.kind == DeliveryKind::Uud) {
        let (t, _) = check_message(&r.body)?;
        if t != 4 {
            return Err("UUD datagram with the wrong tag".into());
        }
    }
    let st = sim.ends.sides.each_ref().map(|s| *s.ep.stats());
    if seed % 2 == 1 && st[0].tx_credits + st[1].tx_credits == 0 {
        return Err("RCCC seed without a CP CREDIT".into());
    }
    CREDIT_REQS.fetch_add(st[0].tx_credit_reqs + st[1].tx_credit_reqs, std::sync::atomic::Ordering::Relaxed);
    Ok((done_at, [st[0].fast_retransmits + st[1].fast_retransmits, st[0].timeouts + st[1].timeouts]))
}

fn matrix(name: &str, first_seed: u64, link: LinkConfig) {
    let seeds: Vec<u64> = match std::env::var("PDS_SEED") {
        Ok(s) => vec![s.parse().expect("PDS_SEED is a number")],
        Err(_) => (first_seed..first_seed + SEEDS).collect(),
    };
    let mut failures = Vec::new();
    let mut longest = Duration::ZERO;
    let mut recovered = [0u64; 2];
    for &seed in &seeds {
        for mode in [Mode::Rud, Mode::Rod] {
            match run(seed, mode, link) {
                Ok((t, r)) => {
                    longest = longest.max(t);
                    recovered[0] += r[0];
                    recovered[1] += r[1];
                }
                Err(e) => failures.push(format!("seed {seed} {mode:?}: {e}")),
            }
        }
    }
    println!(
        "{name}: {} runs, {} failed, longest {longest:?}; {} packets resent from SACK/NACK, {} timer expiries; \
         {} RCCC CREDIT_REQs (all lines so far)",
        seeds.len() * 2,
        failures.len(),
        recovered[0],
        recovered[1],
        CREDIT_REQS.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
    if link.loss >= 0.1 && seeds.len() > 1 {
        assert!(
            recovered[0] > recovered[1],
            "{name}: most losses should be repaired without waiting for the timer"
        );
    }
}

/// Line `name` of nicsim's impairment matrix on a 2 us cable; line `i`'s seeds start at `1000 i`.
fn line(name: &str) {
    let base = LinkConfig { latency: Duration::from_micros(2), ..LinkConfig::default() };
    let lines = nicsim::impairments(base);
    let i = lines.iter().position(|l| l.0 == name).expect("a line of the matrix");
    matrix(name, 1000 * i as u64, lines[i].1);
}

#[test]
fn clean() {
    line("clean");
}

#[test]
fn loss_1_percent() {
    line("loss 1%");
}

#[test]
fn loss_10_percent() {
    line("loss 10%");
}

#[test]
fn loss_30_percent() {
    line("loss 30%");
}

#[test]
fn reorder() {
    line("reorder 20%");
}

#[test]
fn duplication() {
    line("duplicate 20%");
}

#[test]
fn corruption() {
    line("corrupt 10%");
}

#[test]
fn everything_at_once() {
    line("all");
}
