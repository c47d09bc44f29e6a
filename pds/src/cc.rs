//! NSCC, the UET sender-side congestion control (`../shared/spec/uet-wire.md` §5, "NSCC in
//! HTSIM"): a window in bytes driven per ACK by the ECN echo (the ACK's M flag) and the queuing
//! delay (RTT sample minus the base RTT) against a target delay.
//!
//! | ECN | delay vs target | action |
//! |---|---|---|
//! | no | at or above | fair increase: `fi = 5·MSS·a` per window |
//! | no | below | proportional increase `4·MSS·a·b·(target − delay)/target` per window, plus a fast increase (the acked bytes) when the delay is under 1 µs |
//! | yes | at or above | multiplicative decrease `cwnd *= max(1 − 0.8·(avg − target)/avg, 0.5)`, at most once per base RTT |
//! | yes | below | nothing |
//!
//! Plus `η = 0.15·MSS·a` per window, quick adapt on loss (a retransmission timeout or NACK: the
//! window becomes what was acknowledged in the last base RTT, at least one MSS), the delay EWMA with
//! α = 0.0125, `maxwnd = 1.5·BDP`, `a = BDP / BDP_ref` (100 Gb/s x 12 µs) and `b = target / 12 µs`.
//! Without trimming the target delay is the base RTT.

use std::time::Duration;

/// NSCC parameters of a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsccConfig {
    /// The sender's line rate, bits per second.
    pub link_bps: u64,
    /// The path's unloaded round-trip time.
    pub base_rtt: Duration,
    /// Bytes per packet on the wire (the MSS of the window arithmetic).
    pub mss: usize,
}

impl NsccConfig {
    fn bdp(&self) -> f64 {
        self.link_bps as f64 / 8.0 * self.base_rtt.as_secs_f64()
    }
}

/// The reference BDP of the htsim model: 100 Gb/s x 12 µs.
const BDP_REF: f64 = 100e9 / 8.0 * 12e-6;

/// One PDC's NSCC state.
#[derive(Debug, Clone)]
pub struct Nscc {
    cfg: NsccConfig,
    cwnd: f64,
    maxwnd: f64,
    target: f64,
    avg_delay: f64,
    last_decrease: Option<Duration>,
    /// Bytes acknowledged since `epoch_start` (for quick adapt).
    acked_epoch: f64,
    acked_last_rtt: f64,
    epoch_start: Duration,
    a: f64,
    b: f64,
}

impl Nscc {
    /// Starts at the maximum window (as htsim does: the first RTT is sent at line rate).
    pub fn new(cfg: NsccConfig) -> Nscc {
        let bdp = cfg.bdp().max(cfg.mss as f64);
        let target = cfg.base_rtt.as_secs_f64();
        Nscc {
            cfg,
            cwnd: 1.5 * bdp,
            maxwnd: 1.5 * bdp,
            target,
            avg_delay: 0.0,
            last_decrease: None,
            acked_epoch: 0.0,
            acked_last_rtt: 1.5 * bdp,
            epoch_start: Duration::ZERO,
            a: bdp / BDP_REF,
            b: target / 12e-6,
        }
    }

    /// The window in bytes.
    pub fn cwnd(&self) -> usize {
        self.cwnd as usize
    }

    /// The window in whole packets: the packets that fit in it, at least one.
    pub fn cwnd_packets(&self) -> usize {
        (self.cwnd / self.cfg.mss as f64).floor().max(1.0) as usize
    }

    /// An ACK that newly acknowledged `acked` bytes; `rtt` from the newest of them, `ecn` the M
    /// flag.
    pub fn on_ack(&mut self, now: Duration, acked: usize, rtt: Option<Duration>, ecn: bool) {
        let mss = self.cfg.mss as f64;
        let acked = acked as f64;
        self.acked_epoch += acked;
        if now.saturating_sub(self.epoch_start) >= self.cfg.base_rtt {
            self.acked_last_rtt = self.acked_epoch;
            self.acked_epoch = 0.0;
            self.epoch_start = now;
        }
        let Some(rtt) = rtt else { return };
        let delay = (rtt.as_secs_f64() - self.cfg.base_rtt.as_secs_f64()).max(0.0);
        self.avg_delay = 0.9875 * self.avg_delay + 0.0125 * delay;
        let per_window = acked / self.cwnd.max(mss);
        match (ecn, delay >= self.target) {
            (false, true) => self.cwnd += 5.0 * mss * self.a * per_window,
            (false, false) => {
                self.cwnd += 4.0 * mss * self.a * self.b * (self.target - delay) / self.target * per_window;
                if delay < 1e-6 {
                    self.cwnd += acked;
                }
            }
            (true, true) => {
                let due = self.last_decrease.is_none_or(|t| now.saturating_sub(t) >= self.cfg.base_rtt);
                if due && self.avg_delay > self.target {
                    let f = (1.0 - 0.8 * (self.avg_delay - self.target) / self.avg_delay).max(0.5);
                    self.cwnd *= f;
                    self.last_decrease = Some(now);
                }
            }
            (true, false) => {}
        }
        self.cwnd += 0.15 * mss * self.a * per_window;
        self.cwnd = self.cwnd.clamp(mss, self.maxwnd);
    }

    /// Loss (a timeout or a NACK): quick adapt to what got through in the last base RTT.
    pub fn on_loss(&mut self, now: Duration) {
        let mss = self.cfg.mss as f64;
        if self.last_decrease.is_some_and(|t| now.saturating_sub(t) < self.cfg.base_rtt) {
            return;
        }
        self.cwnd = self.acked_last_rtt.min(self.cwnd / 2.0).clamp(mss, self.maxwnd);
        self.last_decrease = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NsccConfig {
        NsccConfig { link_bps: 10_000_000_000, base_rtt: Duration::from_micros(10), mss: 4160 }
    }

    #[test]
    fn window_moves_with_ecn_and_delay() {
        let mut n = Nscc::new(cfg());
        let max = n.cwnd();
        assert_eq!(max, 18_750, "1.5 x BDP of 10 Gb/s x 10 us");
        // ECN with a delay above target: multiplicative decrease, once per base RTT.
        let mut t = Duration::from_micros(100);
        for _ in 0..50 {
            n.on_ack(t, 4160, Some(Duration::from_micros(40)), true);
        }
        let once = n.cwnd();
        assert!(once < max && once >= max / 2, "{once}");
        for _ in 0..20 {
            t += Duration::from_micros(11);
            n.on_ack(t, 4160, Some(Duration::from_micros(40)), true);
        }
        assert_eq!(n.cwnd(), 4160, "down to one MSS, never below");
        // No ECN, low delay: it grows back to the maximum and no further.
        for _ in 0..2000 {
            t += Duration::from_micros(1);
            n.on_ack(t, 4160, Some(Duration::from_micros(10)), false);
        }
        assert_eq!(n.cwnd(), max);
        n.on_loss(t + Duration::from_micros(50));
        assert!(n.cwnd() <= max / 2);
        assert!(n.cwnd_packets() >= 1);
    }
}
