//! `perf --json`: a run as one JSON document - its parameters, every row with the figures the
//! table prints (from the same [`BwFigures`](super::report::BwFigures) and histogram), the
//! baseline and the engine's ratio to it, each side's counters, and the totals.

use engine::verbs::Stats;
use serde_json::{Map, Value, json};

use super::config::{BwRow, LatRow};
use super::report::{build_kind, mb};

/// Buckets of a latency histogram (plot and JSON).
pub const LAT_BUCKETS: usize = 40;

/// A latency histogram's buckets: `buckets` log-spaced ranges from the fastest to the slowest
/// message, each with how many messages took that long. Edges in microseconds.
pub fn lat_buckets(r: &LatRow, buckets: usize) -> Vec<(f64, f64, u64)> {
    let h = &r.wall_ns;
    if h.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = (h.min().max(1) as f64, (h.max() as f64).max(h.min().max(1) as f64 + 1.0));
    let step = (hi / lo).powf(1.0 / buckets as f64);
    let edges: Vec<f64> = (0..=buckets).map(|i| lo * step.powi(i as i32)).collect();
    let mut counts = vec![0u64; buckets];
    for v in h.iter_recorded() {
        let ns = h.median_equivalent(v.value_iterated_to()) as f64;
        let i = edges.partition_point(|&e| e <= ns).saturating_sub(1).min(buckets - 1);
        counts[i] += v.count_at_value();
    }
    (0..buckets).map(|i| (edges[i] / 1000.0, edges[i + 1] / 1000.0, counts[i])).collect()
}

/// A bandwidth row: size, iterations, the table's figures, the baseline, the checks.
pub fn bw_row(r: &BwRow) -> Value {
    let f = r.figures();
    let baseline = r.baseline.map(|b| {
        let base = b.bytes_per_sec();
        json!({
            "mb_per_sec": mb(base),
            "gb_per_sec": base * 8.0 / 1e9,
            "intact": b.intact,
            "threads": b.threads,
            "engine_ratio": r.engine_rate() / base,
            "ratio_with_checks": r.average() / base,
        })
    });
    json!({
        "size": r.size,
        "iterations": r.iters,
        "bytes": r.bytes,
        "wall_sec": r.wall.as_secs_f64(),
        "virtual_sec": r.virtual_time.as_secs_f64(),
        "bw_peak_mb_per_sec": f.peak_mb,
        "bw_average_mb_per_sec": f.avg_mb,
        "msg_rate_mpps": f.mpps,
        "goodput_timeline": r.timeline.points().iter().map(|&(t, mb)| json!({"t_sec": t, "mb_per_sec": mb})).collect::<Vec<_>>(),
        "bw_average_gb_per_sec": f.gbps,
        "check_sec": r.check_time.as_secs_f64(),
        "baseline": baseline,
        "verified": r.verified,
        "errors": r.errors,
        "lost": r.lost,
        "duplicates": r.duplicates,
    })
}

/// A latency row: the table's percentiles and the histogram's buckets.
pub fn lat_row(r: &LatRow) -> Value {
    let h = &r.wall_ns;
    let us = |ns: u64| ns as f64 / 1000.0;
    let buckets: Vec<Value> = lat_buckets(r, LAT_BUCKETS)
        .into_iter()
        .map(|(from, to, n)| json!({ "from_usec": from, "to_usec": to, "count": n }))
        .collect();
    json!({
        "size": r.size,
        "iterations": h.len(),
        "t_min_usec": us(h.min()),
        "t_max_usec": us(h.max()),
        "t_typical_usec": us(h.value_at_quantile(0.5)),
        "t_avg_usec": h.mean() / 1000.0,
        "p99_usec": us(h.value_at_quantile(0.99)),
        "p99_9_usec": us(h.value_at_quantile(0.999)),
        "virtual_typical_usec": us(r.virtual_ns.value_at_quantile(0.5)),
        "baseline": r.baseline.map(|b| json!({
            "ns_per_round_trip": b.per_trip.as_nanos() as u64,
            "round_trips": b.trips,
            "intact": b.intact,
            "typical_over_baseline": r.typical_over_baseline(),
        })),
        "histogram": buckets,
        "verified": r.verified,
        "errors": r.errors,
        "lost": r.lost,
    })
}

/// A side's counters, named as `--counters` prints them.
pub fn stats(st: &Stats) -> Value {
    let (r, d) = (&st.requests, &st.drops);
    json!({
        "frames_tx": st.tx_frames, "bytes_tx": st.tx_bytes, "frames_rx": st.rx_frames, "bytes_rx": st.rx_bytes,
        "rx_bad": st.rx_bad, "rx_unknown": st.rx_unknown, "rx_stranger": d.foreign_source,
        "requests": r.packets, "retries": r.retries, "timeouts": r.timeouts, "tail_probes": r.tail_probes,
        "window_cuts": r.window_cuts,
        "naks_in_seq": r.seq_naks, "naks_in_rnr": r.rnr_naks, "naks_in_error": r.error_naks,
        "naks_out_seq": d.seq_naks_sent, "naks_out_rnr": d.rnr_naks_sent, "duplicates": d.duplicates,
        "placed_ahead": d.placed_ahead, "not_held": d.not_held,
        "dropped_qkey": d.qkey, "dropped_no_wqe": d.no_wqe, "dropped_uc": d.uc_aborted,
        "tx_stalls": st.tx_stalls, "tx_failed": st.tx_failed,
    })
}

/// A whole run: `params`, then `rows` (each already a JSON object), then the totals.
pub fn document(params: Value, rows: Vec<Value>, verified: u64, errors: u64, lost: u64) -> Value {
    let mut m = Map::new();
    m.insert("tool".into(), json!(concat!("softrdma ", env!("CARGO_PKG_VERSION"))));
    m.insert("build".into(), json!(build_kind()));
    m.insert("params".into(), params);
    m.insert("rows".into(), Value::Array(rows));
    m.insert("verified".into(), json!(verified));
    m.insert("errors".into(), json!(errors));
    m.insert("lost".into(), json!(lost));
    Value::Object(m)
}
