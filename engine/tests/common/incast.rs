//! The 8:1 incast scenario shared by `incast.rs` (UET) and `incast_rc.rs` (RoCE RC): eight senders
//! and one receiver behind a switch whose egress toward the receiver is the 100 Gb/s bottleneck.

use std::time::Duration;

use nicsim::{LinkConfig, LinkStats, jain};

/// Senders.
pub const SENDERS: usize = 8;
/// Every link's rate, bits per second.
pub const RATE: u64 = 100_000_000_000;
/// ECN marking threshold at the bottleneck: NSCC's target queuing delay (8 us) at 100 Gb/s.
pub const ECN_K: usize = 100_000;
/// Message size.
pub const MSG: usize = 65_536;
/// Virtual time of a run.
pub const RUN: Duration = Duration::from_millis(20);

/// A 100 Gb/s link with 1 us latency and 1 MB of buffer, and the bottleneck (the same, marking).
pub fn links() -> (LinkConfig, LinkConfig) {
    let fast = LinkConfig {
        latency: Duration::from_micros(1),
        bandwidth_bps: RATE,
        queue_limit: 1_000_000,
        ..LinkConfig::default()
    };
    (fast, LinkConfig { ecn_threshold: ECN_K, ..fast })
}

/// When each sender starts: seed-dependent times within the first 50 us.
pub fn starts(seed: u64) -> Vec<Duration> {
    (0..SENDERS as u64)
        .map(|i| {
            Duration::from_nanos(
                (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03)) % 50_000,
            )
        })
        .collect()
}

/// What a run measured at the bottleneck and at the senders.
#[derive(Debug)]
pub struct Metrics {
    pub drop_rate: f64,
    pub drops: u64,
    pub marked: u64,
    /// Frames the bottleneck trimmed instead of dropping.
    pub trimmed: u64,
    pub q_p99: usize,
    pub goodput: f64,
    pub jain: f64,
    /// CNPs the senders received (RoCE).
    pub cnps: u64,
}

impl Metrics {
    /// From the bottleneck's counters and queue p99 and the bytes each sender completed in `RUN`.
    pub fn new(st: LinkStats, q_p99: usize, bytes: &[u64], cnps: u64) -> Metrics {
        let total: u64 = bytes.iter().sum();
        let shares: Vec<f64> = bytes.iter().map(|&d| d as f64).collect();
        Metrics {
            drop_rate: st.tail_dropped as f64 / st.offered.max(1) as f64,
            drops: st.tail_dropped,
            marked: st.ecn_marked,
            trimmed: st.trimmed,
            q_p99,
            goodput: total as f64 * 8.0 / RUN.as_secs_f64() / RATE as f64,
            jain: jain(&shares),
            cnps,
        }
    }

    /// One line of the table.
    pub fn print(&self, seed: u64, name: &str) {
        println!(
            "seed {seed} {name:<11} drops {:>5} ({:.3} %)  trimmed {}  queue p99 {:>7} B  goodput {:.1} %  Jain {:.3}  CE marks {}  CNPs {}",
            self.drops,
            100.0 * self.drop_rate,
            self.trimmed,
            self.q_p99,
            100.0 * self.goodput,
            self.jain,
            self.marked,
            self.cnps
        );
    }

    /// Asserts the acceptance thresholds with congestion control (`self`): drops at most 0.1 %,
    /// queue p99 at most `queue_bound`, goodput at least 90 %, Jain at least 0.9; and that the run
    /// `without` it is worse (10x the drops, or less goodput).
    pub fn assert_meets(&self, name: &str, without: &Metrics, queue_bound: usize) {
        assert!(self.drop_rate <= 0.001, "{name} drops: {self:?}");
        assert!(self.q_p99 <= queue_bound, "{name} queue p99: {self:?}");
        assert!(self.goodput >= 0.9, "{name} goodput: {self:?}");
        assert!(self.jain >= 0.9, "{name} fairness: {self:?}");
        assert!(
            without.drops >= 10 * self.drops.max(1) || without.goodput < self.goodput,
            "without CC it is worse: {without:?} vs {self:?}"
        );
    }
}
