//! The receiving half of a PDC: the next expected PSN, a bitmap of the packets received beyond it
//! ([`RX_WINDOW`] PSNs), the ACK policy (coalescing, AR forcing an ACK, at once on out-of-order or
//! duplicate arrival) and the NACKs a receiver produces (ROD_OOO, PSN_OOR_WINDOW).

use std::time::Duration;

use wire::uet::pds::{Mode, NackCode};

use crate::config::{Config, RX_WINDOW};
use crate::psn::diff;

const WORDS: usize = (RX_WINDOW / 64) as usize;
/// After a ROD_OOO NACK for one expected PSN, another is sent for every this many further
/// out-of-order arrivals (in case the retransmission was lost too).
const ROD_RENACK_EVERY: u32 = 16;

/// What became of an arriving sequenced packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// New: deliver it.
    New,
    /// Already received: drop (an ACK is due).
    Duplicate,
    /// ROD: ahead of the expected PSN; dropped and NACKed.
    OutOfOrder,
    /// Beyond the window; dropped and NACKed.
    OutOfWindow,
}

/// A NACK waiting to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingNack {
    pub(crate) code: NackCode,
    pub(crate) psn: u32,
    /// "Max received PSN + 1" (the Wireshark label of the NACK payload).
    pub(crate) payload: u32,
}

#[derive(Debug)]
pub(crate) struct RxHalf {
    expected: u32,
    /// Bit `psn % RX_WINDOW`: `psn` (in `expected+1 .. expected+RX_WINDOW`) was received.
    bits: [u64; WORDS],
    /// The PSN of the packet that triggered the next ACK.
    pub(crate) ack_psn: u32,
    pub(crate) ack_now: bool,
    pub(crate) ack_due: Option<Duration>,
    unacked: u32,
    /// The ACK answers a retransmission (RETX flag).
    pub(crate) retx_seen: bool,
    /// Packets received out of order so far (the NSCC `ooo_count`).
    pub(crate) ooo_count: u16,
    /// The sender's CLEAR_PSN: it holds nothing unacknowledged before it.
    clear_psn: u32,
    pub(crate) nack: Option<PendingNack>,
    nacked: Option<u32>,
    since_nack: u32,
}

impl RxHalf {
    pub(crate) fn new(start_psn: u32) -> RxHalf {
        RxHalf {
            expected: start_psn,
            bits: [0; WORDS],
            ack_psn: start_psn,
            ack_now: false,
            ack_due: None,
            unacked: 0,
            retx_seen: false,
            ooo_count: 0,
            clear_psn: start_psn,
            nack: None,
            nacked: None,
            since_nack: 0,
        }
    }

    /// Lowest PSN not yet received.
    pub(crate) fn expected(&self) -> u32 {
        self.expected
    }

    /// The sender's latest CLEAR_PSN.
    pub(crate) fn clear_psn(&self) -> u32 {
        self.clear_psn
    }

    fn bit(&self, psn: u32) -> bool {
        let i = (psn % RX_WINDOW) as usize;
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_bit(&mut self, psn: u32, on: bool) {
        let i = (psn % RX_WINDOW) as usize;
        if on {
            self.bits[i / 64] |= 1 << (i % 64);
        } else {
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Whether `psn` has been received.
    #[cfg(test)]
    pub(crate) fn received(&self, psn: u32) -> bool {
        let d = diff(psn, self.expected);
        d < 0 || ((d as u32) < RX_WINDOW && self.bit(psn))
    }

    /// Records the sender's CLEAR_PSN (it only moves forward, and never past what was received).
    pub(crate) fn set_clear_psn(&mut self, clear: u32) {
        if diff(clear, self.clear_psn) > 0 && diff(clear, self.expected) <= 0 {
            self.clear_psn = clear;
        }
    }

    /// A sequenced packet `psn` arrived (`ar`: the sender asked for an ACK; `retx`: it is a
    /// retransmission).
    pub(crate) fn accept(
        &mut self,
        psn: u32,
        mode: Mode,
        ar: bool,
        retx: bool,
        now: Duration,
        cfg: &Config,
    ) -> Verdict {
        let d = diff(psn, self.expected);
        self.retx_seen |= retx;
        if d < 0 || (d > 0 && (d as u32) < RX_WINDOW && self.bit(psn)) {
            self.ack_psn = psn;
            self.ack_now = true;
            return Verdict::Duplicate;
        }
        if d as u32 >= RX_WINDOW {
            self.nack = Some(PendingNack { code: NackCode::PsnOorWindow, psn, payload: self.expected });
            return Verdict::OutOfWindow;
        }
        self.ack_psn = psn;
        if d > 0 {
            self.ooo_count = self.ooo_count.wrapping_add(1);
            if mode == Mode::Rod {
                if self.nacked != Some(self.expected) || self.since_nack >= ROD_RENACK_EVERY {
                    let payload = psn.wrapping_add(1);
                    self.nack = Some(PendingNack { code: NackCode::RodOoo, psn: self.expected, payload });
                    self.nacked = Some(self.expected);
                    self.since_nack = 0;
                } else {
                    self.since_nack += 1;
                }
                return Verdict::OutOfOrder;
            }
            self.set_bit(psn, true);
            self.ack_now = true;
            return Verdict::New;
        }
        self.expected = self.expected.wrapping_add(1);
        while self.bit(self.expected) {
            self.set_bit(self.expected, false);
            self.expected = self.expected.wrapping_add(1);
        }
        self.unacked += 1;
        if ar || self.unacked >= cfg.ack_every {
            self.ack_now = true;
        } else if self.ack_due.is_none() {
            self.ack_due = Some(now + cfg.ack_delay);
        }
        Verdict::New
    }

    /// The SACK bitmap for the 64 PSNs from `expected`: bit i set = `expected + i` received
    /// (bit 0 is always clear).
    pub(crate) fn sack_bitmap(&self) -> u64 {
        (1..64u32).filter(|&i| self.bit(self.expected.wrapping_add(i))).fold(0, |m, i| m | (1 << i))
    }

    /// An ACK went out.
    pub(crate) fn acked(&mut self) {
        self.ack_now = false;
        self.ack_due = None;
        self.unacked = 0;
        self.retx_seen = false;
    }

    /// An ACK should go out now.
    pub(crate) fn ack_ready(&self, now: Duration) -> bool {
        self.ack_now || self.ack_due.is_some_and(|t| t <= now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::ZERO;

    #[test]
    fn rud_accepts_out_of_order_once_and_slides() {
        let cfg = Config::default();
        let start = u32::MAX - 1;
        let mut rx = RxHalf::new(start);
        let p = |i: u32| start.wrapping_add(i);
        assert_eq!(rx.accept(p(2), Mode::Rud, false, false, NOW, &cfg), Verdict::New);
        assert!(rx.ack_now, "out of order arrival is acknowledged at once");
        assert_eq!(rx.sack_bitmap(), 0b100);
        assert_eq!(rx.accept(p(2), Mode::Rud, false, true, NOW, &cfg), Verdict::Duplicate);
        rx.acked();
        assert_eq!(rx.accept(p(0), Mode::Rud, false, false, NOW, &cfg), Verdict::New);
        assert_eq!(rx.expected(), p(1));
        assert!(!rx.ack_now && rx.ack_due == Some(cfg.ack_delay), "in order: delayed ACK");
        assert_eq!(rx.accept(p(1), Mode::Rud, true, false, NOW, &cfg), Verdict::New);
        assert_eq!(rx.expected(), p(3), "slides over the bitmap");
        assert!(rx.ack_now, "AR forces an ACK");
        assert_eq!(rx.sack_bitmap(), 0);
        assert_eq!(rx.accept(p(1), Mode::Rud, false, false, NOW, &cfg), Verdict::Duplicate);
        assert!(rx.received(p(0)) && !rx.received(p(3)));
        assert_eq!(rx.accept(p(3 + RX_WINDOW), Mode::Rud, false, false, NOW, &cfg), Verdict::OutOfWindow);
        assert_eq!(rx.nack.unwrap().code, NackCode::PsnOorWindow);
        assert!(!rx.received(p(3 + RX_WINDOW)));
    }

    #[test]
    fn coalesces_every_n() {
        let cfg = Config { ack_every: 4, ..Config::default() };
        let mut rx = RxHalf::new(0);
        for i in 0..3 {
            rx.accept(i, Mode::Rud, false, false, NOW, &cfg);
            assert!(!rx.ack_ready(NOW));
        }
        assert!(rx.ack_ready(cfg.ack_delay));
        rx.accept(3, Mode::Rud, false, false, NOW, &cfg);
        assert!(rx.ack_ready(NOW));
    }

    #[test]
    fn rod_drops_and_nacks_out_of_order() {
        let cfg = Config::default();
        let mut rx = RxHalf::new(10);
        assert_eq!(rx.accept(12, Mode::Rod, false, false, NOW, &cfg), Verdict::OutOfOrder);
        assert_eq!(rx.nack.take(), Some(PendingNack { code: NackCode::RodOoo, psn: 10, payload: 13 }));
        assert_eq!(rx.accept(13, Mode::Rod, false, false, NOW, &cfg), Verdict::OutOfOrder);
        assert_eq!(rx.nack, None, "one NACK per expected PSN");
        for psn in 14..14 + ROD_RENACK_EVERY {
            rx.accept(psn, Mode::Rod, false, false, NOW, &cfg);
        }
        assert!(rx.nack.take().is_some(), "renacked after more out-of-order arrivals");
        assert_eq!(rx.accept(10, Mode::Rod, false, false, NOW, &cfg), Verdict::New);
        assert_eq!(rx.accept(12, Mode::Rod, false, false, NOW, &cfg), Verdict::OutOfOrder);
        assert!(rx.nack.is_some(), "a new expected PSN is NACKed at once");
        assert!(!rx.received(12));
    }

    #[test]
    fn clear_psn_moves_forward_only() {
        let cfg = Config::default();
        let mut rx = RxHalf::new(5);
        rx.set_clear_psn(7);
        assert_eq!(rx.clear_psn(), 5, "not past what was received");
        rx.accept(5, Mode::Rud, false, false, NOW, &cfg);
        rx.accept(6, Mode::Rud, false, false, NOW, &cfg);
        rx.set_clear_psn(7);
        rx.set_clear_psn(6);
        assert_eq!(rx.clear_psn(), 7);
    }
}
