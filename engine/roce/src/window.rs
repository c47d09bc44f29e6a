//! The RC requester's loss-adaptive send window ([`SendWindow::Adaptive`]): a limit on
//! unacknowledged PSNs below rxe's 128 that reacts to loss as TCP's congestion window does (AIMD,
//! RFC 5681 with NewReno's recovery point, RFC 6582), for paths that give no ECN/CNP feedback: a
//! receiver whose socket buffer overflows, a VM's queues, a slow link with a short tail-drop queue.
//!
//! - **Start**: at the cap (128 PSNs), so a path that loses nothing never sees the window below
//!   rxe's and the requester sends exactly what it would with [`SendWindow::Fixed`].
//! - **Decrease**: a PSN sequence NAK or a lost READ/atomic response halves the window (not below
//!   the floor); a retransmission timeout sets it to the floor and remembers half of it as the
//!   slow-start threshold. One loss round costs one halving: the PSNs in flight when it was seen
//!   (up to the highest sent, the recovery point) may report more losses, which are the same round.
//!   A loss the responder repaired with a one-packet resend (softrdma's responder keeps the
//!   packets that follow a gap) halves it only once the round lost more than 1/16 of the window:
//!   random loss on a clean path then costs one packet each, not the window
//!   ([`LossWindow::on_repaired_loss`]).
//! - **Increase**: every acknowledged PSN adds one PSN below the threshold (slow start: the window
//!   doubles per round trip), and one PSN per window's worth of acknowledged PSNs above it
//!   (congestion avoidance), back to the cap.
//! - **Wider against a responder that keeps**: once the responder is seen to keep what follows a
//!   gap (softrdma's, `Responder::keep_ahead`; never rxe's), or from the start when the caller
//!   knows it does ([`SendWindow::AdaptiveWide`]: `softrdma perf` between two softrdma processes),
//!   the cap doubles to [`WIDE_CAP`] and the window slow-starts up to it ([`LossWindow::widen`]).
//!   A one-packet repair takes a round trip (the resend queues behind everything in flight), and
//!   the PSNs in flight behind the gap still count until it is filled: with the window at the cap
//!   in flight, a loss would hold the sender for that round trip. Twice the cap keeps it sending
//!   through the repair, and the responder keeps that many (its span is the wide cap). Four times
//!   (512) made 64 KiB WRITEs between the one-vCPU VMs of `scripts/vm-bench.sh` about 20 % faster
//!   over UDP, but SENDs under 1 % loss on a veth pair 2-7 % slower (more packets held and
//!   replayed per gap), below 0.80 of the clean run in 3 of 4 `veth-bench` runs: it stays twice.
//!
//! The window is counted in PSNs as rxe's limit is (a READ takes one per response packet). Only the
//! sender changes; the responder sees AckReq at least twice per window (see
//! `Requester::ack_every`), so a small window still gets its ACKs.
//!
//! [`SendWindow::Adaptive`]: super::types::SendWindow::Adaptive
//! [`SendWindow::Fixed`]: super::types::SendWindow::Fixed
//! [`SendWindow::AdaptiveWide`]: super::types::SendWindow::AdaptiveWide

use super::types::SendWindow;
use wire::ib::psn;

/// The cap: rxe's limit (`requester::MAX_UNACKED_PSNS`).
pub(crate) const CAP: u32 = 128;

/// The cap against a responder that keeps what follows a gap ([`LossWindow::widen`]).
pub(crate) const WIDE_CAP: u32 = 2 * CAP;

/// One RC requester's adaptive window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LossWindow {
    min: u32,
    /// [`CAP`], or [`WIDE_CAP`] once widened.
    cap: u32,
    cwnd: u32,
    ssthresh: u32,
    /// PSNs acknowledged towards the next one-PSN increase (congestion avoidance).
    acked: u32,
    /// While set, losses reported for PSNs before it belong to the round already reacted to (one
    /// past the highest PSN sent when it was seen).
    recover: Option<u32>,
    /// Losses of the round repaired one packet at a time ([`LossWindow::on_repaired_loss`]).
    repaired: u32,
    /// Whether the round cut the window already.
    cut: bool,
}

impl LossWindow {
    /// A window at the cap with floor `min` (at least 1, at most the cap).
    pub(crate) fn new(min: u8) -> LossWindow {
        LossWindow {
            min: u32::from(min).clamp(1, CAP),
            cap: CAP,
            cwnd: CAP,
            ssthresh: CAP,
            acked: 0,
            recover: None,
            repaired: 0,
            cut: false,
        }
    }

    /// The window a [`SendWindow`] asks for: `None` for rxe's fixed one.
    pub(crate) fn of(window: SendWindow) -> Option<LossWindow> {
        match window {
            SendWindow::Fixed => None,
            SendWindow::Adaptive { min } => Some(LossWindow::new(min)),
            SendWindow::AdaptiveWide { min } => {
                let mut w = LossWindow::new(min);
                w.widen();
                Some(w)
            }
        }
    }

    /// Unacknowledged PSNs allowed now.
    pub(crate) fn limit(&self) -> u32 {
        self.cwnd
    }

    /// `n` more PSNs acknowledged, the oldest unacknowledged now `comp_psn`.
    pub(crate) fn on_ack(&mut self, comp_psn: u32, n: u32) {
        if self.recover.is_some_and(|r| psn::diff(comp_psn, r) >= 0) {
            (self.recover, self.repaired, self.cut) = (None, 0, false);
        }
        let mut n = n;
        if self.cwnd < self.ssthresh {
            let step = n.min(self.ssthresh - self.cwnd);
            self.cwnd += step;
            n -= step;
        }
        if self.cwnd >= self.ssthresh {
            self.acked += n;
            while self.acked >= self.cwnd && self.cwnd < self.cap {
                self.acked -= self.cwnd;
                self.cwnd += 1;
            }
        }
        if self.cwnd >= self.cap {
            self.cwnd = self.cap;
            self.acked = 0;
        }
    }

    /// The responder keeps what follows a gap: the cap becomes [`WIDE_CAP`], and a window that
    /// has not been cut since it was at the cap slow-starts up to it (a cut one grows back as
    /// before, to the new cap).
    pub(crate) fn widen(&mut self) {
        if self.cap == WIDE_CAP {
            return;
        }
        if self.ssthresh == self.cap {
            self.ssthresh = WIDE_CAP;
        }
        self.cap = WIDE_CAP;
    }

    /// A loss seen by a NAK or a missing response, `high_psn` one past the highest PSN sent:
    /// halves the window unless this round already did. Returns whether it did.
    pub(crate) fn on_loss(&mut self, high_psn: u32) -> bool {
        if self.cut {
            return false;
        }
        self.ssthresh = (self.cwnd / 2).max(self.min);
        self.cwnd = self.ssthresh;
        self.acked = 0;
        self.recover.get_or_insert(high_psn);
        self.cut = true;
        true
    }

    /// A loss the responder repaired with a one-packet resend (it kept what followed the gap:
    /// `Responder::keep_ahead`), `high_psn` one past the highest PSN sent. Random loss on a clean
    /// path costs such a resend and no window: the round halves the window only once more than
    /// 1/16 of it was lost (as BBRv2 tolerates 2 % loss per round, with room for the clusters
    /// random loss makes in a small window). A queue that overflows loses more than that, and a
    /// go-back-N loss ([`LossWindow::on_loss`]) or a timeout cuts as before. Returns whether it cut.
    pub(crate) fn on_repaired_loss(&mut self, high_psn: u32) -> bool {
        self.recover.get_or_insert(high_psn);
        self.repaired += 1;
        if self.repaired * 16 <= self.cwnd {
            return false;
        }
        self.on_loss(high_psn)
    }

    /// A retransmission timeout: the window falls to the floor and slow-starts back to half of
    /// what it was (or to the threshold an earlier halving of this round already set).
    pub(crate) fn on_timeout(&mut self, high_psn: u32) {
        if !self.cut {
            self.ssthresh = (self.cwnd / 2).max(self.min);
        }
        self.cwnd = self.min;
        self.acked = 0;
        self.recover = Some(high_psn);
        self.cut = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_window_grows_to_256_without_a_loss_and_a_plain_one_stays_at_128() {
        assert_eq!(LossWindow::of(SendWindow::Fixed), None);
        let mut plain = LossWindow::of(SendWindow::Adaptive { min: 4 }).unwrap();
        let mut wide = LossWindow::of(SendWindow::AdaptiveWide { min: 4 }).unwrap();
        assert_eq!((plain.limit(), wide.limit()), (CAP, CAP));
        for round in 1..=4u32 {
            plain.on_ack(round * 100, 100);
            wide.on_ack(round * 100, 100);
        }
        assert_eq!((plain.limit(), wide.limit()), (CAP, WIDE_CAP));
        // A loss halves the wide one as any other.
        assert!(wide.on_loss(1000));
        assert_eq!(wide.limit(), WIDE_CAP / 2);
    }

    #[test]
    fn repaired_losses_cut_only_past_a_sixteenth_of_the_window_per_round() {
        let mut w = LossWindow::new(4);
        // 128: eight repaired losses in a round keep it; the ninth halves it, once.
        for _ in 0..8 {
            assert!(!w.on_repaired_loss(200));
        }
        assert_eq!(w.limit(), 128);
        assert!(w.on_repaired_loss(200));
        assert_eq!(w.limit(), 64);
        assert!(!w.on_repaired_loss(200) && !w.on_loss(200), "one cut per round");
        // A new round counts from zero; a go-back-N loss in it cuts at once.
        w.on_ack(200, 64);
        assert!(!w.on_repaired_loss(300));
        assert!(w.on_loss(300));
        assert_eq!(w.limit(), 32);
        // A timeout in a round with only repaired losses remembers half of the window.
        w.on_ack(300, 32);
        assert!(!w.on_repaired_loss(400));
        w.on_timeout(400);
        assert_eq!(w.limit(), 4);
        w.on_ack(400, 12);
        assert_eq!(w.limit(), 16, "slow start back to half of 32");
    }

    #[test]
    fn halves_once_per_round_falls_to_the_floor_on_timeout_and_grows_back_to_the_cap() {
        let mut w = LossWindow::new(4);
        assert_eq!(w.limit(), 128);
        // A NAK with PSNs 0..200 sent: 64. A second report of the same round changes nothing.
        assert!(w.on_loss(200));
        assert_eq!(w.limit(), 64);
        assert!(!w.on_loss(200));
        w.on_ack(150, 10);
        assert!(!w.on_loss(220), "PSNs before 200 are not acknowledged yet: same round");
        // The round is repaired: the next loss halves again.
        w.on_ack(200, 50);
        assert!(w.on_loss(300));
        assert_eq!(w.limit(), 32);
        // A timeout in the same round: the floor, and slow start back to the threshold the round
        // already set (32), not half of it again.
        w.on_timeout(300);
        assert_eq!(w.limit(), 4);
        w.on_ack(304, 28);
        assert_eq!(w.limit(), 32);
        // A timeout in a new round: the floor, then slow start to half of 32.
        w.on_timeout(400);
        assert_eq!(w.limit(), 4);
        w.on_ack(400, 4);
        assert_eq!(w.limit(), 8);
        w.on_ack(408, 8);
        assert_eq!(w.limit(), 16);
        // Above the threshold: one PSN per window acknowledged.
        w.on_ack(424, 16);
        assert_eq!(w.limit(), 17);
        let mut at = 424u32;
        while w.limit() < 128 {
            at = psn::add(at, w.limit());
            w.on_ack(at, w.limit());
        }
        w.on_ack(psn::add(at, 1000), 1000);
        assert_eq!(w.limit(), 128, "never above the cap");
        // Never below the floor.
        for i in 0..20u32 {
            w.on_ack(2000 + i, 1);
            w.on_loss(2000 + i);
            w.on_timeout(2000 + i);
        }
        assert_eq!(w.limit(), 4);
        let mut tiny = LossWindow::new(0);
        assert_eq!(tiny.limit(), 128);
        tiny.on_timeout(1);
        assert_eq!(tiny.limit(), 1, "a floor of 0 is 1");
    }
}
