//! Issue 29, acceptance 1: an idle device with 10,000 connected RC QPs, against one with a single
//! QP: what a `progress()` call with no work costs on each (ratio target <= 2x), and the resident
//! memory the 10,000 QPs (both ends, on the simulated network) take (target <= 100 MiB); the same
//! for a UET node holding 10,000 established PDCs against one holding one. Rounds alternate the
//! two devices; medians. Acceptance 2: `perf write` over 1,024 QPs against 1 QP, 64 KiB and 64 B
//! messages, the same messages in total, every one verified (target >= 0.8x). Acceptance 4: a
//! 64-QP `perf write` of 4 KiB messages on one engine thread against the same run sharded over two
//! (`perf --threads 2`, target >= 1.7x on two cores). Results go to stdout and
//! `target/bench/scale.json`.
//!
//! `cargo bench -p benches --bench scale` (`SOFTRDMA_BENCH_ROUNDS`, default 7; `SCALE_QPS`,
//! default 10,000, also the number of PDCs; `SCALE_BUSY_QPS`, default 1,024; `SCALE_THREADS`,
//! default 2).
//!
//! Measured on the 2-core development VM: `perf write` of 64 KiB over 1,024 QPs made 0.26x of one QP
//! while each QP had its own ring (256 MiB of rings, eight times the L3 cache: the run measured memory),
//! 0.9x once the QPs shared one ring of slots; the 64-QP run of 4 KiB WRITEs made 0.81 Mmsg/s on one
//! thread and 1.40 on two, 1.71x (medians of 7 interleaved rounds).

use engine::datapath::Datapath;
use engine::datapath::sim::{SimNet, SimPort};
use engine::simpair::{PairConfig, connect};
use engine::uet::{UetNode, write_headers};
use engine::verbs::{Context, QpInitAttr};
use serde_json::json;
use softrdma::perf::{Bench, LinkConfig, PerfConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wire::uet::pds::{Mode, NextHeader, RequestRepr, request::FLAG_SYN};

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

/// A UET node on the simulated network holding `pdcs` target PDCs, each opened by a SYN from one
/// peer address and confirmed by a second packet (so none is half-open), all idle (the packets
/// carry no SES header: nothing is answered but the ACKs).
struct IdleUet {
    _net: SimNet,
    node: UetNode<SimPort>,
}

fn idle_uet(pdcs: usize) -> IdleUet {
    let (net, pa, mut peer) = SimNet::pair(2, LinkConfig::default(), LinkConfig::default());
    let hour = Duration::from_secs(3600);
    let pds = pds::Config {
        max_pdcs: pdcs + 16,
        max_pdcs_per_peer: pdcs + 16,
        half_open_timeout: hour,
        idle_timeout: hour,
        ..pds::Config::default()
    };
    let cfg = ses::Config { pds, ..ses::Config::default() };
    let mut node = UetNode::new(pa, ses::Endpoint::new(cfg, 1), true).expect("node");
    let (IpAddr::V4(src), dst) = (peer.gid(), node.ip()) else { panic!("IPv4 sim ports") };
    let dst_mac = peer.resolve(IpAddr::V4(dst)).expect("resolved");
    for id in 1..=pdcs as u16 {
        // The node numbers its PDCs from 1 in the order they open.
        for (flags, psn, dpdcid) in [(FLAG_SYN, 1000, RequestRepr::syn_word(false, 0)), (0, 1001, id)] {
            let r = RequestRepr {
                mode: Mode::Rud,
                next_hdr: NextHeader::ReqStd,
                flags,
                clear_psn_offset: 0,
                psn,
                spdcid: id,
                dpdcid,
                cc: None,
            };
            send_raw(&mut peer, &r, src, dst, dst_mac);
        }
        if id % 64 == 0 {
            settle(&net, &mut node, &mut peer);
        }
    }
    for _ in 0..3 {
        settle(&net, &mut node, &mut peer);
    }
    assert_eq!(node.ses().pds().pdc_count(), pdcs, "every PDC open");
    IdleUet { _net: net, node }
}

/// Lets a millisecond pass and everything in flight arrive; the peer drops what it gets.
fn settle(net: &SimNet, node: &mut UetNode<SimPort>, peer: &mut SimPort) {
    net.advance_to(net.now() + Duration::from_millis(1));
    while node.progress() {}
    while let Some(f) = peer.receive() {
        peer.recycle(f);
    }
}

/// Sends one PDS request with no body from `peer` to `dst`.
fn send_raw(peer: &mut SimPort, r: &RequestRepr, src: Ipv4Addr, dst: Ipv4Addr, dst_mac: [u8; 6]) {
    const HEADERS: usize = 14 + 20 + 8;
    let mut f = peer.alloc();
    let n = r.emit(&mut f.buffer_mut()[HEADERS..]).expect("fits");
    write_headers(f.buffer_mut(), peer.mac(), dst_mac, src, dst, n).expect("headers");
    f.set_len(HEADERS + n);
    peer.transmit(f).expect("sent");
}

/// Nanoseconds per `progress()` call on a UET node with nothing to do.
fn idle_uet_call_ns(u: &mut IdleUet) -> f64 {
    let t = Instant::now();
    for _ in 0..CALLS {
        assert!(!u.node.progress(), "an idle node found work");
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

/// `rounds` rounds timing `one` and `many` (which goes first alternates), each round printed under
/// `label` ("first | second") in `unit`; the medians of both and of the rounds' ratios.
fn alternate(
    rounds: usize,
    label: &str,
    unit: &str,
    mut one: impl FnMut() -> f64,
    mut many: impl FnMut() -> f64,
) -> (f64, f64, f64) {
    let (first, second) = label.split_once(" | ").unwrap_or((label, ""));
    let (mut t1, mut tn, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = one();
            (a, many())
        } else {
            let b = many();
            (one(), b)
        };
        println!("  round {round}: {first} {a:.0} {unit}, {second} {b:.0} {unit} ({:.2}x)", b / a);
        t1.push(a);
        tn.push(b);
        ratios.push(b / a);
    }
    (median(&mut t1), median(&mut tn), median(&mut ratios))
}

/// `perf write` on the simulated network as the CLI runs it (MTU 4096, 128 in flight): messages
/// per second over `qps` QPs sharded over `threads` engine threads, `total` messages of `size`
/// bytes in all; panics unless every one was verified.
fn write_rate(qps: usize, threads: usize, size: usize, total: u64) -> f64 {
    let cfg = PerfConfig { threads, ..benches::perf_write(size, qps, total / qps as u64) };
    let row = if threads > 1 {
        softrdma::perf::threads::run_bw(&cfg, size).expect("the run completes").row
    } else {
        Bench::new(&cfg, size).expect("the QPs connect").run_bw().expect("the run completes")
    };
    assert_eq!((row.verified, row.errors), (cfg.iters * qps as u64, 0), "every message verified");
    row.verified as f64 / row.wall.as_secs_f64()
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
    let (m1, mn, r) = alternate(
        rounds,
        &format!("idle progress() with 1 QP | with {many} QPs"),
        "ns",
        || idle_call_ns(&mut one.a),
        || idle_call_ns(&mut lots.a),
    );
    let mib = bytes as f64 / f64::from(1 << 20);
    println!(
        "scale: idle progress() {mn:.0} ns with {many} connected RC QPs vs {m1:.0} ns with 1 (median of the rounds' ratios \
         {r:.2}x: target <= 2 {}); the {many} QP pairs take {mib:.1} MiB resident ({:.0} bytes per QP, both ends: target \
         <= 100 MiB {})",
        if r <= 2.0 { "met" } else { "NOT met" },
        bytes as f64 / many as f64 / 2.0,
        if mib <= 100.0 { "met" } else { "NOT met" }
    );
    let (mut one_uet, mut lots_uet) = (idle_uet(1), idle_uet(many));
    let (um1, umn, ur) = alternate(
        rounds,
        &format!("idle UET node progress() with 1 PDC | with {many} PDCs"),
        "ns",
        || idle_uet_call_ns(&mut one_uet),
        || idle_uet_call_ns(&mut lots_uet),
    );
    println!(
        "scale: idle UET node progress() {umn:.0} ns with {many} established PDCs vs {um1:.0} ns with 1 (median of \
         the rounds' ratios {ur:.2}x: target <= 2 {})",
        if ur <= 2.0 { "met" } else { "NOT met" }
    );
    let busy: usize = std::env::var("SCALE_BUSY_QPS").ok().and_then(|r| r.parse().ok()).unwrap_or(1024);
    let mut write = serde_json::Map::new();
    for (size, total) in [(65536usize, 50 * busy as u64), (64, 1000 * busy as u64)] {
        let (r1, rn, r) = alternate(
            rounds,
            &format!("perf write {size} B with 1 QP | with {busy} QPs"),
            "kmsg/s",
            || write_rate(1, 1, size, total) / 1e3,
            || write_rate(busy, 1, size, total) / 1e3,
        );
        println!(
            "scale: perf write {size} B over {busy} QPs {:.0} MB/s ({:.3} Mmsg/s) vs 1 QP {:.0} MB/s ({:.3} Mmsg/s), \
             {total} messages each, all verified (median of the rounds' ratios {r:.2}x: target >= 0.8 {})",
            rn * 1e3 * size as f64 / 1e6,
            rn / 1e3,
            r1 * 1e3 * size as f64 / 1e6,
            r1 / 1e3,
            if r >= 0.8 { "met" } else { "NOT met" }
        );
        write.insert(
            size.to_string(),
            json!({"messages": total, "one_qp_msgs_per_s": r1 * 1e3, "many_qps_msgs_per_s": rn * 1e3, "median_ratio": r}),
        );
    }
    // Acceptance 4: the same 64-QP run of 4 KiB WRITEs on one engine thread and sharded over
    // `SCALE_THREADS` (default 2), each thread owning both ends of its QPs.
    let threads: usize = std::env::var("SCALE_THREADS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    let (tqps, tsize, ttotal) = (64usize, 4096usize, 64 * 6000u64);
    let (t1, tn, tr) = alternate(
        rounds,
        &format!("perf write {tsize} B over {tqps} QPs on 1 thread | on {threads} threads"),
        "kmsg/s",
        || write_rate(tqps, 1, tsize, ttotal) / 1e3,
        || write_rate(tqps, threads, tsize, ttotal) / 1e3,
    );
    println!(
        "scale: perf write {tsize} B over {tqps} QPs on {threads} engine threads {:.3} Mmsg/s vs one thread {:.3} Mmsg/s, \
         {ttotal} messages each, all verified (median of the rounds' ratios {tr:.2}x: target >= 1.7 with 2 threads on 2 \
         cores {})",
        tn / 1e3,
        t1 / 1e3,
        if tr >= 1.7 { "met" } else { "NOT met" }
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let doc = json!({
        "qps": many, "rounds": rounds, "calls_per_round": CALLS,
        "idle_progress_ns": {"one_qp": m1, "many_qps": mn, "median_ratio": r},
        "resident_mib_for_the_qps": mib,
        "uet_idle_progress_ns": {"pdcs": many, "one_pdc": um1, "many_pdcs": umn, "median_ratio": ur},
        "perf_write": {"qps": busy, "by_size": write},
        "threads": {"threads": threads, "qps": tqps, "size": tsize, "messages": ttotal,
            "one_thread_msgs_per_s": t1 * 1e3, "threads_msgs_per_s": tn * 1e3, "median_ratio": tr},
    });
    let _ = std::fs::write(dir.join("scale.json"), serde_json::to_string_pretty(&doc).unwrap());
}
