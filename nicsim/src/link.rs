//! Link parameters and counters.

use std::time::Duration;

/// One direction of a link: delay, rate and impairments. Probabilities are per frame, in 0.0..=1.0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub latency: Duration,
    /// Bits per second; 0 means unlimited (no serialization delay, no queue).
    pub bandwidth_bps: u64,
    /// Bytes that may wait for the wire before tail drop (only with a bandwidth).
    pub queue_limit: usize,
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame is held back by up to `reorder_window`, so later frames overtake it.
    pub reorder: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_window: Duration,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one random bit of a frame is flipped.
    pub corrupt: f64,
}

impl Default for LinkConfig {
    /// 1 us latency, unlimited bandwidth, no impairments.
    fn default() -> Self {
        LinkConfig {
            latency: Duration::from_micros(1),
            bandwidth_bps: 0,
            queue_limit: 1 << 20,
            loss: 0.0,
            reorder: 0.0,
            reorder_window: Duration::from_micros(10),
            duplicate: 0.0,
            corrupt: 0.0,
        }
    }
}

/// What happened to the frames offered to one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames offered.
    pub offered: u64,
    /// Bytes offered.
    pub bytes: u64,
    /// Frames lost on purpose.
    pub lost: u64,
    /// Frames dropped because the queue was full.
    pub tail_dropped: u64,
    /// Frames held back to reorder them.
    pub reordered: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Frames with a flipped bit.
    pub corrupted: u64,
}

impl LinkStats {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &LinkStats) {
        self.offered += other.offered;
        self.bytes += other.bytes;
        self.lost += other.lost;
        self.tail_dropped += other.tail_dropped;
        self.reordered += other.reordered;
        self.duplicated += other.duplicated;
        self.corrupted += other.corrupted;
    }
}
