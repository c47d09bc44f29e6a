//! What a perf run is (operation, transport, sizes, link) and what it gives back (a bandwidth or
//! latency row, or why it stopped), and how many messages its rings hold.

use engine::verbs::{Mtu, QpType, VerbsError};
use hdrhistogram::Histogram;
use nicsim::LinkConfig;
use std::time::Duration;

use super::baseline;

/// The operation measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfOp {
    /// SEND / RECV.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// 64-bit atomics.
    Atomic,
}

/// Which atomic `perf atomic` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// FETCH_AND_ADD of 1: the returned values count up.
    FetchAdd,
    /// CMP_AND_SWP of n -> n+1: every swap succeeds.
    CmpSwap,
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keep `tx_depth` messages in flight per QP.
    Bw,
    /// One message at a time.
    Lat,
}

/// A perf run.
#[derive(Debug, Clone)]
pub struct PerfConfig {
    /// Operation.
    pub op: PerfOp,
    /// Transport: RC, or UC (SEND, WRITE) and UD (SEND), which may lose messages.
    pub qp_type: QpType,
    /// Receives come from a shared receive queue on the receiving side (RC, UD).
    pub srq: bool,
    /// Which atomic.
    pub atomic: AtomicOp,
    /// Message sizes, one table row each.
    pub sizes: Vec<usize>,
    /// Messages per QP and size.
    pub iters: u64,
    /// QP pairs.
    pub qps: usize,
    /// Engine threads the QPs are sharded over (bw mode on the simulated network): each owns both
    /// ends of its share of the QPs on a simulated cable of its own.
    pub threads: usize,
    /// Bandwidth or latency.
    pub mode: Mode,
    /// Path MTU.
    pub mtu: Mtu,
    /// The simulated cable (both directions).
    pub link: LinkConfig,
    /// Seed of the impairments.
    pub seed: u64,
    /// Messages in flight per QP (bw mode).
    pub tx_depth: usize,
    /// Retries without progress: 0..=7 is verbs' `retry_cnt`, more uses the `max_retries` extension.
    pub retries: u32,
    /// Keep every frame the tap sees (for `--pcap`).
    pub tap: bool,
    /// Also run the baseline: TX+RX (bw mode), the round trip's frames (lat mode, RC, one packet).
    pub baseline: bool,
    /// DCQCN on both sides (RC).
    pub dcqcn: Option<engine::roce::dcqcn::DcqcnConfig>,
    /// The traffic class of every QP (`ah_attr.grh.traffic_class`: DSCP << 2, ECN bits 0).
    pub traffic_class: u8,
}

/// One bandwidth row.
#[derive(Debug, Clone, Copy)]
pub struct BwRow {
    /// Message size.
    pub size: usize,
    /// Messages per QP.
    pub iters: u64,
    /// Payload bytes over all QPs.
    pub bytes: u64,
    /// Wall-clock time.
    pub wall: Duration,
    /// Virtual time on the simulated network.
    pub virtual_time: Duration,
    /// Best rate over a window of completions, bytes per second.
    pub peak: f64,
    /// Messages checked.
    pub verified: u64,
    /// Messages that failed a check or completed with an error.
    pub errors: u64,
    /// Messages an unreliable transport lost (sent but never delivered).
    pub lost: u64,
    /// UD messages delivered a second time by a duplicated frame (checked, not counted as new).
    pub duplicates: u64,
    /// Wall-clock time spent comparing delivered bytes (part of `wall`).
    pub check_time: Duration,
    /// The baseline at the same size and byte count, if run.
    pub baseline: Option<baseline::Baseline>,
    /// Goodput over time, one point per twentieth of the messages; empty where not sampled.
    pub timeline: Timeline,
}

/// Goodput over time: (seconds since the start, MB/s over the stretch of completions that ended
/// then), up to [`Timeline::MAX`] points (further ones are dropped).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeline {
    points: [(f64, f64); Timeline::MAX],
    len: usize,
}

impl Timeline {
    /// The most points kept.
    pub const MAX: usize = 64;

    /// Adds a point (dropped when full).
    pub fn push(&mut self, t_sec: f64, mb_per_sec: f64) {
        if let Some(p) = self.points.get_mut(self.len) {
            *p = (t_sec, mb_per_sec);
            self.len += 1;
        }
    }

    /// The points, in time order.
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points[..self.len]
    }
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline { points: [(0.0, 0.0); Timeline::MAX], len: 0 }
    }
}

impl BwRow {
    /// A row from totals alone: `iters` messages of `size` bytes in `wall` (peak = average, no
    /// baseline, no check time).
    pub fn measured(
        size: usize,
        iters: u64,
        wall: Duration,
        virtual_time: Duration,
        verified: u64,
        errors: u64,
        lost: u64,
    ) -> BwRow {
        let bytes = iters * size as u64;
        BwRow {
            size,
            iters,
            bytes,
            wall,
            virtual_time,
            peak: bytes as f64 / wall.as_secs_f64().max(1e-9),
            verified,
            errors,
            lost,
            duplicates: 0,
            check_time: Duration::ZERO,
            baseline: None,
            timeline: Timeline::default(),
        }
    }

    /// Average payload bytes per wall-clock second.
    pub fn average(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Payload bytes per second of engine time: wall-clock minus the time spent checking data.
    pub fn engine_rate(&self) -> f64 {
        self.bytes as f64 / self.wall.saturating_sub(self.check_time).as_secs_f64().max(1e-9)
    }
}

/// One latency row.
#[derive(Debug, Clone)]
pub struct LatRow {
    /// Message size.
    pub size: usize,
    /// Wall-clock nanoseconds from post to completion.
    pub wall_ns: Histogram<u64>,
    /// Virtual nanoseconds from post to completion.
    pub virtual_ns: Histogram<u64>,
    /// Messages checked.
    pub verified: u64,
    /// Errors.
    pub errors: u64,
    /// Messages an unreliable transport lost.
    pub lost: u64,
    /// The round trip's frames in a plain loop (RC messages of one packet), if run.
    pub baseline: Option<baseline::RoundTrip>,
}

impl LatRow {
    /// The median post-to-completion time over the baseline's round trip, if it ran.
    pub fn typical_over_baseline(&self) -> Option<f64> {
        let base = self.baseline?.per_trip.as_nanos() as f64;
        Some(self.wall_ns.value_at_quantile(0.5) as f64 / base.max(1.0))
    }
}

/// Why a perf run stopped.
#[derive(Debug)]
pub enum PerfError {
    /// A verbs call failed.
    Verbs(VerbsError),
    /// Work is outstanding but nothing can happen any more.
    Stalled(&'static str),
    /// The run cannot be set up as asked.
    Config(&'static str),
}

impl std::fmt::Display for PerfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PerfError::Verbs(e) => write!(f, "{e}"),
            PerfError::Stalled(why) => write!(f, "stalled: {why}"),
            PerfError::Config(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for PerfError {}

impl From<VerbsError> for PerfError {
    fn from(e: VerbsError) -> Self {
        PerfError::Verbs(e)
    }
}

/// Message slots per QP ring: `depth`, but no more than the messages the widest window (256 PSNs,
/// against a responder that keeps what follows a gap) lets be in flight plus two, shared by the
/// `qps` QPs of one link, so rings of large messages stay cache-sized however many QPs (perftest
/// also reuses one small buffer per QP). Each QP keeps at least 2 messages, and up to 8 while they
/// fit one packet, so that one ACK (a burst asks for one at its end) still covers several small
/// messages on a QP's share. In-flight messages never exceed the slots, so no slot is reused before
/// its message was checked.
pub fn ring_slots(depth: usize, size: usize, mtu: usize, qps: usize) -> usize {
    let one = window_slots(engine::roce::MAX_WIDE_PSNS as usize, depth, size, mtu);
    let floor = (mtu / size.max(1)).clamp(2, 8).min(depth);
    one.div_ceil(qps.max(1)).max(floor)
}

/// Messages to keep in flight: `depth`, but no more than a window of `window` packets of `payload`
/// bytes holds of `size`-byte messages, plus two (more would only wait in a queue, holding memory
/// that is cold by the time it is sent), and at least 2 unless `depth` is 1.
pub fn window_slots(window: usize, depth: usize, size: usize, payload: usize) -> usize {
    let in_window = (window * payload).div_ceil(size.max(1));
    depth.min(in_window + 2).max(2.min(depth))
}

/// Sizes perftest's `-a` runs: 2 bytes to 8 MiB in powers of two.
pub fn all_sizes() -> Vec<usize> {
    (1..=23).map(|s| 1usize << s).collect()
}

/// Messages to run at `size` when sweeping every size: at most ~256 MiB per QP, at least 16.
pub fn sweep_iters(iters: u64, size: usize) -> u64 {
    iters.min(((256u64 << 20) / size.max(1) as u64).max(16))
}
