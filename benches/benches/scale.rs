//! Issue 29, acceptance 1 (RoCE): an idle device with 10,000 connected RC QPs, against one with
//! a single QP: what a `progress()` call with no work costs on each (ratio target <= 2x), and the
//! resident memory the 10,000 QPs (both ends, on the simulated network) take (target <= 100 MiB).
//! Rounds alternate the two devices; medians. Results go to stdout and `target/bench/scale.json`.
//!
//! `cargo bench -p benches --bench scale` (`SOFTRDMA_BENCH_ROUNDS`, default 7; `SCALE_QPS`,
//! default 10,000).

use engine::datapath::sim::SimNet;
use engine::simpair::{PairConfig, connect};
use engine::verbs::{Context, QpInitAttr};
use serde_json::json;
use softrdma::perf::LinkConfig;
use std::time::Instant;

/// Progress calls timed per round and device.
const CALLS: u32 = 20_000;

/// A connected device pair with `qps` RC QPs on each side, every one idle.
struct Idle {
    _net: SimNet,
    a: Context,
    _b: Context,
}

fn idle_pair(qps: usize) -> Idle {
    let (net, pa, pb) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
    let (mut a, mut b) = (Context::open(pa), Context::open(pb));
    let (pd_a, pd_b) = (a.alloc_pd(), b.alloc_pd());
    let (cq_a, cq_b) = (a.create_cq(64).expect("cq"), b.create_cq(64).expect("cq"));
    let cfg = PairConfig::default();
    for i in 0..qps {
        let qa = a.create_qp(pd_a, &QpInitAttr::rc(cq_a)).expect("qp");
        let qb = b.create_qp(pd_b, &QpInitAttr::rc(cq_b)).expect("qp");
        let psn = (i as u32 * 7) & 0xFF_FFFF;
        connect(&mut a, qa, qb.qpn(), b.gid(), psn, psn, &cfg).expect("connect");
        connect(&mut b, qb, qa.qpn(), a.gid(), psn, psn, &cfg).expect("connect");
    }
    // The first rounds visit the QPs the connection touched; then they are idle.
    for _ in 0..3 {
        a.progress().expect("progress");
        b.progress().expect("progress");
    }
    Idle { _net: net, a, _b: b }
}

/// Nanoseconds per `progress()` call on `ctx`, which has nothing to do.
fn idle_call_ns(ctx: &mut Context) -> f64 {
    let t = Instant::now();
    for _ in 0..CALLS {
        let n = ctx.progress().expect("progress");
        assert_eq!(n, 0, "an idle device found work");
    }
    t.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("SOFTRDMA_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let many: usize = std::env::var("SCALE_QPS").ok().and_then(|r| r.parse().ok()).unwrap_or(10_000);
    let mut one = idle_pair(1);
    let before = rss();
    let mut lots = idle_pair(many);
    let bytes = rss().saturating_sub(before);
    let (mut t1, mut tn, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = idle_call_ns(&mut one.a);
            (a, idle_call_ns(&mut lots.a))
        } else {
            let b = idle_call_ns(&mut lots.a);
            (idle_call_ns(&mut one.a), b)
        };
        println!(
            "  round {round}: idle progress() with 1 QP {a:.0} ns, with {many} QPs {b:.0} ns ({:.2}x)",
            b / a
        );
        t1.push(a);
        tn.push(b);
        ratios.push(b / a);
    }
    let (m1, mn, r) = (median(&mut t1), median(&mut tn), median(&mut ratios));
    let mib = bytes as f64 / f64::from(1 << 20);
    println!(
        "scale: idle progress() {mn:.0} ns with {many} connected RC QPs vs {m1:.0} ns with 1 (median of the rounds' ratios \
         {r:.2}x: target <= 2 {}); the {many} QP pairs take {mib:.1} MiB resident ({:.0} bytes per QP, both ends: target \
         <= 100 MiB {})",
        if r <= 2.0 { "met" } else { "NOT met" },
        bytes as f64 / many as f64 / 2.0,
        if mib <= 100.0 { "met" } else { "NOT met" }
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let doc = json!({
        "qps": many, "rounds": rounds, "calls_per_round": CALLS,
        "idle_progress_ns": {"one_qp": m1, "many_qps": mn, "median_ratio": r},
        "resident_mib_for_the_qps": mib,
    });
    let _ = std::fs::write(dir.join("scale.json"), serde_json::to_string_pretty(&doc).unwrap());
}
