//! A PDC's loss-adaptive window ([`Config::min_window`](crate::Config::min_window)): when neither
//! NSCC nor RCCC runs, the only congestion signal a sender has is loss, and a fixed window of
//! [`Config::window`](crate::Config::window) packets overruns a slow path (a receiver's socket
//! buffer, a VM's queues, a short tail-drop queue) in every round trip. This is the RoCE RC
//! requester's adaptive window (`engine::roce`'s `SendWindow::Adaptive`) in packets: AIMD as TCP's
//! congestion window (RFC 5681, with NewReno's recovery point, RFC 6582).
//!
//! - **Start** at the configured window, so a path that loses nothing sends as before.
//! - **Decrease**: a loss the PDC learns of without its timer (packets the SACK bitmap shows
//!   overtaken, a ROD_OOO NACK, a NACK for a trimmed or refused packet) halves the window, once per
//!   round (the packets in flight when it was seen may report more losses of the same round); a
//!   retransmission timeout sets it to the floor and remembers half of it as the slow-start
//!   threshold.
//! - **Increase**: every packet newly acknowledged adds one below the threshold (slow start) and
//!   one per window's worth above it (congestion avoidance), back to the configured window.

use crate::psn::diff;

/// One PDC's adaptive window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LossWindow {
    min: u32,
    max: u32,
    cwnd: u32,
    ssthresh: u32,
    /// Packets acknowledged towards the next one-packet increase (congestion avoidance).
    acked: u32,
    /// While set, losses of packets before it belong to the round already reacted to (one past
    /// the highest PSN sent when it was seen).
    recover: Option<u32>,
    /// The transmission sequence number (`tx.rs`) when the window last fell on a timeout: the
    /// timers of packets sent before it run out one by one, and are that same timeout.
    timeout_seq: u64,
}

impl LossWindow {
    /// A window of `max` packets that never goes below `min` (clamped to 1..=max).
    pub(crate) fn new(min: u32, max: u32) -> LossWindow {
        let max = max.max(1);
        LossWindow {
            min: min.clamp(1, max),
            max,
            cwnd: max,
            ssthresh: max,
            acked: 0,
            recover: None,
            timeout_seq: 0,
        }
    }

    /// Packets allowed in flight now.
    pub(crate) fn limit(&self) -> u32 {
        self.cwnd
    }

    /// True while the window is below its maximum.
    pub(crate) fn reduced(&self) -> bool {
        self.cwnd < self.max
    }

    /// `n` packets newly known received; `una` is the oldest PSN not cumulatively acknowledged.
    pub(crate) fn on_ack(&mut self, una: u32, n: u32) {
        if self.recover.is_some_and(|r| diff(una, r) >= 0) {
            self.recover = None;
        }
        let mut n = n;
        if self.cwnd < self.ssthresh {
            let step = n.min(self.ssthresh - self.cwnd);
            self.cwnd += step;
            n -= step;
        }
        if self.cwnd >= self.ssthresh {
            self.acked += n;
            while self.acked >= self.cwnd && self.cwnd < self.max {
                self.acked -= self.cwnd;
                self.cwnd += 1;
            }
        }
        if self.cwnd >= self.max {
            self.cwnd = self.max;
            self.acked = 0;
        }
    }

    /// A loss learned without the timer, `sent_end` one past the highest PSN sent: halves the
    /// window unless this round already did. Returns whether it did.
    pub(crate) fn on_loss(&mut self, sent_end: u32) -> bool {
        if self.recover.is_some() {
            return false;
        }
        self.ssthresh = (self.cwnd / 2).max(self.min);
        self.cwnd = self.ssthresh;
        self.acked = 0;
        self.recover = Some(sent_end);
        true
    }

    /// A retransmission timeout of packets whose newest transmission had sequence number
    /// `expired`, `seq` the newest so far: the floor, and slow start back to half the window (or
    /// to the threshold a halving of this round already set). Packets sent before the last
    /// timeout the window fell on are part of it (each packet has its own timer). Returns whether
    /// the window fell.
    pub(crate) fn on_timeout(&mut self, sent_end: u32, expired: u64, seq: u64) -> bool {
        if expired <= self.timeout_seq {
            return false;
        }
        self.timeout_seq = seq;
        if self.recover.is_none() {
            self.ssthresh = (self.cwnd / 2).max(self.min);
        }
        self.cwnd = self.min;
        self.acked = 0;
        self.recover = Some(sent_end);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_once_per_round_falls_to_the_floor_on_timeout_and_grows_back() {
        let start = u32::MAX - 10;
        let at = |n: u32| start.wrapping_add(n);
        let mut w = LossWindow::new(4, 256);
        assert_eq!((w.limit(), w.reduced()), (256, false));
        assert!(w.on_loss(at(300)));
        assert_eq!(w.limit(), 128);
        assert!(!w.on_loss(at(300)), "the same round");
        w.on_ack(at(299), 100);
        assert!(!w.on_loss(at(400)), "before the recovery point: the same round");
        w.on_ack(at(300), 1);
        assert!(w.on_loss(at(400)));
        assert_eq!(w.limit(), 64);
        w.on_ack(at(400), 0);
        assert!(w.on_timeout(at(500), 900, 1000));
        assert_eq!(w.limit(), 4);
        // The timers of other packets of that flight run out later: the same timeout.
        w.on_ack(at(450), 4);
        assert!(!w.on_timeout(at(500), 1000, 1004));
        assert_eq!(w.limit(), 8);
        w.on_timeout(at(500), 1001, 1004);
        assert_eq!(w.limit(), 4);
        // Slow start to 32, then one a window.
        for (n, want) in [(4, 8), (8, 16), (16, 32), (32, 33)] {
            w.on_ack(at(480), n);
            assert_eq!(w.limit(), want);
        }
        for _ in 0..10_000 {
            let n = w.limit();
            w.on_ack(at(600), n);
        }
        assert_eq!((w.limit(), w.reduced()), (256, false));
        for i in 0..40 {
            w.on_ack(at(1000 + i), 1);
            w.on_loss(at(1000 + i));
            w.on_timeout(at(1000 + i), 2000 + u64::from(i), 2000 + u64::from(i));
        }
        assert_eq!(w.limit(), 4, "never below the floor");
        assert_eq!(LossWindow::new(8, 4).limit(), 4);
        let mut one = LossWindow::new(0, 16);
        one.on_timeout(0, 1, 1);
        assert_eq!(one.limit(), 1);
    }
}
