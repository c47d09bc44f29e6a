#![doc = include_str!("../README.md")]
//!
//! # The helpers
//!
//! Helpers for the benchmarks: repeated measurements summarised as median and best (p10), as
//! `../shared/notes/performance.md` asks (this machine kind runs at two speed levels).

pub mod netns;

/// Median and 10th percentile (the "best window") of a set of rates; higher is better.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median.
    pub p50: f64,
    /// Value 90% of the samples do not exceed, from the top: the best window.
    pub best: f64,
}

/// Summarises rates (higher is better). `None` for no samples.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Some(Summary { p50: at(0.5), best: at(0.9) })
}

/// `softrdma perf write` as the command line runs it on the simulated network by default (RC, MTU
/// 4096, 128 in flight per QP, the cable's 1 us latency, no baseline): `iters` messages of `size`
/// bytes on each of `qps` QPs.
pub fn perf_write(size: usize, qps: usize, iters: u64) -> softrdma::perf::PerfConfig {
    use softrdma::perf::{AtomicOp, LinkConfig, Mode, PerfConfig, PerfOp};
    PerfConfig {
        op: PerfOp::Write,
        qp_type: engine::verbs::QpType::Rc,
        srq: false,
        atomic: AtomicOp::FetchAdd,
        sizes: vec![size],
        iters,
        qps,
        threads: 1,
        mode: Mode::Bw,
        mtu: engine::verbs::Mtu::Mtu4096,
        link: LinkConfig { latency: std::time::Duration::from_micros(1), ..LinkConfig::default() },
        seed: 1,
        tx_depth: 128,
        retries: 7,
        tap: false,
        baseline: false,
        dcqcn: None,
        traffic_class: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_best() {
        assert_eq!(summarize(&[]), None);
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.p50, s.best), (3.0, 5.0));
        let s = summarize(&(1..=11).map(f64::from).collect::<Vec<_>>()).unwrap();
        assert_eq!((s.p50, s.best), (6.0, 10.0));
    }
}
