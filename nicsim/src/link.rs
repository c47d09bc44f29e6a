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
    /// ECN marking (only with a bandwidth): an IPv4 frame with ECT(0) or ECT(1) that arrives while
    /// more than this many bytes wait is marked CE (RFC 3168; the IPv4 checksum is updated as RFC
    /// 1624 says). 0: never mark.
    pub ecn_threshold: usize,
    /// RED-style marking below `ecn_threshold` (the (Kmin, Kmax, Pmax) profile DCQCN deployments
    /// use, with Kmax = `ecn_threshold`): a frame arriving while more than `ecn_min` bytes wait is
    /// marked with a probability rising linearly from 0 at `ecn_min` to `ecn_pmax` at the
    /// threshold. 0: off (marking is the step at the threshold).
    pub ecn_min: usize,
    /// RED's Pmax, in 0.0..=1.0.
    pub ecn_pmax: f64,
    /// Packet trimming (UET): a frame the queue has no room for is, if it is IPv4/UDP and longer,
    /// cut to this many bytes, given DSCP `trim_dscp` and sent ahead of the queue (a strict-priority
    /// class) instead of being dropped, so its receiver learns of the loss at once ([`trim`]). 0:
    /// tail drop.
    pub trim_to: usize,
    /// The DSCP of trimmed frames.
    pub trim_dscp: u8,
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
            ecn_threshold: 0,
            ecn_min: 0,
            ecn_pmax: 0.0,
            trim_to: 0,
            trim_dscp: 0,
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
    /// Frames marked CE.
    pub ecn_marked: u64,
    /// Frames trimmed instead of dropped.
    pub trimmed: u64,
    /// Frames held back to reorder them.
    pub reordered: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Frames with a flipped bit.
    pub corrupted: u64,
}

/// Width of a queue histogram bucket, bytes.
pub const QUEUE_BUCKET: usize = 256;

/// Marks an Ethernet II / IPv4 frame carrying ECT(0) or ECT(1) as CE, fixing the header checksum
/// incrementally (RFC 1624, eqn. 3); false (and unchanged) for anything else.
pub fn mark_ce(f: &mut [u8]) -> bool {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 {
        return false;
    }
    let ecn = f[15] & 3;
    if ecn == 0 || ecn == 3 {
        return false;
    }
    let old = u16::from_be_bytes([f[14], f[15]]);
    f[15] |= 3;
    let new = u16::from_be_bytes([f[14], f[15]]);
    let hc = u16::from_be_bytes([f[24], f[25]]);
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

/// Trims an Ethernet II / IPv4 / UDP frame of `len` bytes to `to` bytes: the IPv4 DSCP becomes
/// `dscp` (ECN kept), the IPv4 total length and header checksum and the UDP length are rewritten and
/// the UDP checksum is set to 0 (the cut payload no longer matches it; RFC 768 allows 0 over IPv4).
/// Returns the new length, or `None` (frame untouched) if it is not IPv4/UDP, or not longer than
/// `to`, or `to` would cut into the UDP header.
pub fn trim(f: &mut [u8], len: usize, to: usize, dscp: u8) -> Option<usize> {
    let f = f.get_mut(..len)?;
    if len < 34 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 || f[23] != 17 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0F) * 4;
    let udp = 14 + ihl;
    if ihl < 20 || to < udp + 8 || len <= to {
        return None;
    }
    f[15] = (dscp << 2) | (f[15] & 3);
    f[16..18].copy_from_slice(&((to - 14) as u16).to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let mut sum: u32 = f[14..udp].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[udp + 4..udp + 6].copy_from_slice(&((to - udp) as u16).to_be_bytes());
    f[udp + 6..udp + 8].copy_from_slice(&[0, 0]);
    Some(to)
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one takes everything.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 { 1.0 } else { s * s / (x.len() as f64 * q) }
}

impl LinkStats {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &LinkStats) {
        self.offered += other.offered;
        self.bytes += other.bytes;
        self.lost += other.lost;
        self.tail_dropped += other.tail_dropped;
        self.ecn_marked += other.ecn_marked;
        self.trimmed += other.trimmed;
        self.reordered += other.reordered;
        self.duplicated += other.duplicated;
        self.corrupted += other.corrupted;
    }
}

/// The impairment matrix of the simulation tests (pds, ses and the engine's UC/UD sweep): named
/// lines, each `base` with one impairment, and the last all of them at once behind a bandwidth
/// limit. In order: clean; loss 1 %, 10 %, 30 %; reorder 20 % (held back up to 30 us); duplicate
/// 20 %; corrupt 10 %; all (loss 5 %, reorder 10 % within `base`'s window, duplicate 10 %, corrupt
/// 5 %, 10 Gb/s with a 64 KiB queue).
pub fn impairments(base: LinkConfig) -> [(&'static str, LinkConfig); 8] {
    let reorder_window = Duration::from_micros(30);
    [
        ("clean", base),
        ("loss 1%", LinkConfig { loss: 0.01, ..base }),
        ("loss 10%", LinkConfig { loss: 0.10, ..base }),
        ("loss 30%", LinkConfig { loss: 0.30, ..base }),
        ("reorder 20%", LinkConfig { reorder: 0.2, reorder_window, ..base }),
        ("duplicate 20%", LinkConfig { duplicate: 0.2, ..base }),
        ("corrupt 10%", LinkConfig { corrupt: 0.1, ..base }),
        (
            "all",
            LinkConfig {
                loss: 0.05,
                reorder: 0.1,
                duplicate: 0.1,
                corrupt: 0.05,
                bandwidth_bps: 10_000_000_000,
                queue_limit: 64 * 1024,
                ..base
            },
        ),
    ]
}
