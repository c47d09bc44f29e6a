//! The RC requester's round-trip estimate and retransmission timeout.
//!
//! The local ACK timeout a QP is given (`4.096 us x 2^timeout`, `T`) is a fixed guess about the
//! path. IBTA lets the timer fire anywhere between `T` and `4T`; this estimator uses that range to
//! follow the path it measures, as TCP's RTO does (RFC 6298): the timeout is the smoothed round
//! trip plus four times its mean deviation, never below `T` (so a QP never retransmits sooner than
//! its owner asked) and never above `4T`; each timeout without progress doubles it (within the same
//! bounds), and progress ends the back-off. A path whose round trip grows under load (a VM's
//! queues, a host busy with both peers) then sees late ACKs as late, not as losses that cost a
//! go-back-N of the whole window.

use std::time::Duration;

/// Round-trip samples folded into an RFC 6298 estimate, and the timeout they give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    /// Timeouts since the last progress (each doubles the timeout, up to `4T`).
    backoff: u32,
}

impl RttEstimator {
    /// One round trip measured (Karn's rule is the caller's: only first transmissions are timed).
    pub(crate) fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let err = s.abs_diff(r);
                self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
                self.srtt = Some(s - s / 8 + r / 8);
            }
        }
    }

    /// The smoothed round trip, once one has been measured.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The retransmission timeout for a QP whose local ACK timeout is `t`: within `[t, 4t]`.
    pub(crate) fn rto(&self, t: Duration) -> Duration {
        let est = self.srtt.map_or(Duration::ZERO, |s| s + self.rttvar * 4);
        let backed_off = est.max(t).saturating_mul(1 << self.backoff.min(2));
        backed_off.clamp(t, t * 4)
    }

    /// A retransmission timeout fired: the next one waits twice as long (up to `4t`).
    pub(crate) fn on_timeout(&mut self) {
        self.backoff = self.backoff.saturating_add(1).min(2);
    }

    /// Forward progress: the back-off ends.
    pub(crate) fn on_progress(&mut self) {
        self.backoff = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_timeout_follows_the_measured_round_trip_between_t_and_4t() {
        let t = ms(4);
        let mut e = RttEstimator::default();
        assert_eq!(e.rto(t), t, "nothing measured: the configured timeout");
        // A fast path: the floor is the configured timeout.
        e.sample(Duration::from_micros(50));
        assert_eq!(e.rto(t), t);
        // A path whose round trip grew to ~6 ms: srtt + 4 rttvar, above T.
        let mut e = RttEstimator::default();
        e.sample(ms(6));
        assert_eq!(e.srtt(), Some(ms(6)));
        assert_eq!(e.rto(t), ms(16), "6 ms + 4 x 3 ms, within 4T");
        for _ in 0..50 {
            e.sample(ms(6));
        }
        let settled = e.rto(t);
        assert!(settled >= ms(6) && settled < ms(8), "steady samples shrink the deviation: {settled:?}");
        // A very slow path: never above 4T.
        let mut e = RttEstimator::default();
        e.sample(ms(100));
        assert_eq!(e.rto(t), ms(16));
    }

    #[test]
    fn timeouts_double_it_up_to_4t_and_progress_ends_the_back_off() {
        let t = ms(4);
        let mut e = RttEstimator::default();
        e.on_timeout();
        assert_eq!(e.rto(t), ms(8));
        e.on_timeout();
        assert_eq!(e.rto(t), ms(16));
        e.on_timeout();
        assert_eq!(e.rto(t), ms(16), "capped at 4T");
        e.on_progress();
        assert_eq!(e.rto(t), t);
    }
}
