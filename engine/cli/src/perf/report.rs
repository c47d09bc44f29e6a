//! What perf prints: the header and rule, the table columns and lines, the baseline comparison,
//! the links' queue report and each side's counters.

use engine::verbs::QpType;

use super::config::{AtomicOp, BwRow, LatRow, Mode, PerfConfig, PerfOp};

impl PerfOp {
    fn title(self) -> &'static str {
        match self {
            PerfOp::Send => "Send",
            PerfOp::Write => "RDMA_Write",
            PerfOp::Read => "RDMA_Read",
            PerfOp::Atomic => "Atomic",
        }
    }
}

/// The queue report of a simulated pair's two link directions (when they have a rate): frames
/// offered, tail drops, CE marks and the queue's p99, toward `names[0]`'s port 0 and `names[1]`'s
/// port 1.
pub fn link_report(net: &engine::datapath::sim::SimNet, names: [&str; 2]) -> String {
    net.with(|n| {
        let mut out = String::new();
        for (i, name) in names.iter().enumerate() {
            let port = nicsim::PortId(i);
            let (Some(st), q) = (n.ingress_stats(port), n.ingress_queue_quantile(port, 0.99)) else {
                continue;
            };
            out += &format!(
                " link toward {name}: frames {} tail drops {} ({:.3} %) trimmed {} CE marks {} queue p99 {} B\n",
                st.offered,
                st.tail_dropped,
                100.0 * st.tail_dropped as f64 / st.offered.max(1) as f64,
                st.trimmed,
                st.ecn_marked,
                q.unwrap_or(0)
            );
        }
        out.trim_end().to_string()
    })
}

/// The rule above and below every `softrdma perf` header and table, perftest's width.
pub const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// Which build this binary is. The compiler's layout of the protocol code moves a run's share of
/// its baseline by several points (issue 10: `perf write --transport rud --tss` reads about 5 points
/// higher in the profile-guided build of `scripts/pgo.sh`), so the headers say which it is.
pub fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "debug (not representative of speed)"
    } else if env!("SOFTRDMA_PGO") == "1" {
        "release, profile-guided (scripts/pgo.sh)"
    } else {
        "release, not profile-guided (scripts/pgo.sh builds with it)"
    }
}

/// The header perftest prints above a table.
pub fn header(cfg: &PerfConfig) -> String {
    let l = &cfg.link;
    let mode = if cfg.mode == Mode::Bw { "BW" } else { "Latency" };
    let transport = match (cfg.qp_type, cfg.srq) {
        (QpType::Rc, false) => "RC",
        (QpType::Rc, true) => "RC with SRQ",
        (QpType::Uc, _) => "UC",
        (QpType::Ud, false) => "UD",
        (QpType::Ud, true) => "UD with SRQ",
    };
    let op = match (cfg.op, cfg.atomic) {
        (PerfOp::Atomic, AtomicOp::FetchAdd) => "Atomic FETCH_AND_ADD",
        (PerfOp::Atomic, AtomicOp::CmpSwap) => "Atomic CMP_AND_SWAP",
        (o, _) => o.title(),
    };
    format!(
        "{LINE}\n                    {op} {mode} Test\n Transport: {transport} over nicsim (in-process, {})   \
         Number of qps: {}   MTU: {}   tx depth: {} (at most what the 128-PSN window holds + 2)\n Link: latency {:?} each way, loss {}, reorder {}, \
         dup {}, corrupt {}, seed {}\n Build: {}\n{LINE}",
        match cfg.threads {
            0 | 1 => "one thread".to_string(),
            n => format!("{n} threads, each owning both ends of its QPs on a cable of its own"),
        },
        cfg.qps,
        cfg.mtu.bytes(),
        if cfg.mode == Mode::Bw { cfg.tx_depth } else { 1 },
        l.latency,
        l.loss,
        l.reorder,
        l.duplicate,
        l.corrupt,
        cfg.seed,
        build_kind()
    )
}

/// Bytes per second in MB/s (2^20 bytes), perftest's unit.
pub(super) fn mb(bytes_per_sec: f64) -> f64 {
    bytes_per_sec / (1u64 << 20) as f64
}

/// Column titles of the bandwidth table.
pub const BW_COLUMNS: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   BW average[Gb/sec]";

/// The figures of a bandwidth row as the table, the JSON document and the plot show them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwFigures {
    /// Best rate over a window of completions, MB/s (2^20 bytes).
    pub peak_mb: f64,
    /// Average rate, MB/s.
    pub avg_mb: f64,
    /// Messages per second, millions.
    pub mpps: f64,
    /// Average rate, Gb/s (10^9 bits).
    pub gbps: f64,
}

impl BwRow {
    /// This row's figures.
    pub fn figures(&self) -> BwFigures {
        let avg = self.average();
        let msgs = self.bytes as f64 / self.size.max(1) as f64;
        BwFigures {
            peak_mb: mb(self.peak),
            avg_mb: mb(avg),
            mpps: msgs / self.wall.as_secs_f64().max(1e-9) / 1e6,
            gbps: avg * 8.0 / 1e9,
        }
    }
}

/// One bandwidth table line.
pub fn bw_line(r: &BwRow) -> String {
    let f = r.figures();
    format!(
        " {:<10} {:<14} {:<18.2} {:<20.2} {:<15.6} {:.2}",
        r.size, r.iters, f.peak_mb, f.avg_mb, f.mpps, f.gbps
    )
}

/// The baseline comparison under a bandwidth line.
pub fn baseline_line(r: &BwRow) -> Option<String> {
    let b = r.baseline?;
    let base = b.bytes_per_sec();
    let share = r.check_time.as_secs_f64() / r.wall.as_secs_f64().max(1e-9) * 100.0;
    let threads = match b.threads {
        0 | 1 => "one thread".to_string(),
        n => format!("{n} threads at once, each on its share"),
    };
    Some(format!(
        " baseline ({threads}, plain loop: headers + copy + ICRC, then ICRC check + copy): {:.2} MB/sec \
         ({:.2} Gb/sec{})\n engine / baseline: {:.3} (engine time: wall-clock minus the {share:.1}% spent \
         checking delivered bytes; {:.3} with the checks)",
        mb(base),
        base * 8.0 / 1e9,
        if b.intact { "" } else { ", DATA NOT INTACT" },
        r.engine_rate() / base,
        r.average() / base
    ))
}

/// Column titles of the latency table.
pub const LAT_COLUMNS: &str =
    " #bytes #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  99%[usec]  99.9%[usec]";

/// One latency table line (wall-clock times, post to completion).
pub fn lat_line(r: &LatRow) -> String {
    let h = &r.wall_ns;
    let us = |ns: u64| ns as f64 / 1000.0;
    format!(
        " {:<6} {:<12} {:<12.2} {:<12.2} {:<16.2} {:<12.2} {:<10.2} {:.2}",
        r.size,
        h.len(),
        us(h.min()),
        us(h.max()),
        us(h.value_at_quantile(0.5)),
        h.mean() / 1000.0,
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999))
    )
}

/// The baseline comparison under a latency line: the round trip's frames in a plain loop, and the
/// median post-to-completion time over it.
pub fn lat_baseline_line(r: &LatRow) -> Option<String> {
    let (b, ratio) = (r.baseline?, r.typical_over_baseline()?);
    Some(format!(
        " baseline (one thread, plain loop: a {}-byte SEND and its ACK built with headers and ICRC, parsed and \
         verified): {:.0} ns per round trip{}\n typical / baseline: {ratio:.1}",
        r.size,
        b.per_trip.as_nanos() as f64,
        if b.intact { "" } else { ", FRAMES NOT INTACT" },
    ))
}

/// One line of a side's counters, for the end of a run.
pub fn counters_line(side: &str, st: &engine::verbs::Stats) -> String {
    let (r, d) = (&st.requests, &st.drops);
    format!(
        " {side}: frames tx {} ({} B) rx {} ({} B) (bad {}, unknown {}, stranger {}); requests {} retries {} timeouts {} tail probes {} window cuts {}; \
         NAKs in: seq {} rnr {} error {}; NAKs out: seq {} rnr {}; duplicates {}; placed ahead {} not held {}; dropped: qkey {} no-wqe {} uc {}; \
         tx stalls {} failed {}",
        st.tx_frames,
        st.tx_bytes,
        st.rx_frames,
        st.rx_bytes,
        st.rx_bad,
        st.rx_unknown,
        d.foreign_source,
        r.packets,
        r.retries,
        r.timeouts,
        r.tail_probes,
        r.window_cuts,
        r.seq_naks,
        r.rnr_naks,
        r.error_naks,
        d.seq_naks_sent,
        d.rnr_naks_sent,
        d.duplicates,
        d.placed_ahead,
        d.not_held,
        d.qkey,
        d.no_wqe,
        d.uc_aborted,
        st.tx_stalls,
        st.tx_failed
    )
}
