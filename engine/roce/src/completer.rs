//! The RC completer: consumes ACKs, NAKs, READ responses and atomic ACKs, completes send work
//! requests in order, and starts retries (roce-wire.md §1.5, §1.6).

use super::desc::Kind;
use super::mem::MemTable;
use super::requester::Requester;
use super::types::WcStatus;
use std::time::Duration;
use wire::ib::aeth::rnr_timer_us;
use wire::ib::{AethKind, NakCode, Operation, RoceRepr, psn};

/// A completer failure: request `index` fails with `status` and the QP goes to the error state.
pub(crate) type Fatal = (usize, WcStatus);

/// rnr_retry 7 means "retry forever" (IBTA; roce-wire.md §3).
const RNR_FOREVER: u8 = 7;

impl Requester {
    /// Handles a response packet (any RC response opcode) at time `now`.
    pub(crate) fn handle_response(
        &mut self,
        now: Duration,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
    ) -> Result<(), Fatal> {
        let p = pkt.bth.psn;
        if psn::diff(p, self.high_psn) >= 0 || psn::diff(p, self.comp_psn) < 0 {
            // Never sent, or older than everything outstanding: a late duplicate.
            return Ok(());
        }
        if let Some(aeth) = pkt.aeth {
            if let AethKind::Ack { credits } = aeth.kind() {
                self.update_credits(credits, aeth.msn);
            }
        }
        match op {
            Operation::Acknowledge => self.acknowledge(now, p, pkt),
            Operation::ReadResponseFirst
            | Operation::ReadResponseMiddle
            | Operation::ReadResponseLast
            | Operation::ReadResponseOnly => self.read_response(now, p, op, pkt.payload, mem),
            Operation::AtomicAcknowledge => {
                let orig = pkt.atomic_ack_eth.map(|a| a.orig).unwrap_or(0);
                self.atomic_ack(now, p, orig, mem)
            }
            _ => Ok(()),
        }
    }

    fn acknowledge(&mut self, now: Duration, p: u32, pkt: &RoceRepr<'_>) -> Result<(), Fatal> {
        let Some(aeth) = pkt.aeth else { return Ok(()) };
        match aeth.kind() {
            AethKind::Ack { .. } => {
                if self.ack_upto(now, p) {
                    // The ACK covers a READ or atomic whose response never came.
                    self.retry_once(now, Cause::MissingResponse)?;
                }
                let sent_before = self.selective.map_or(self.high_psn, |(_, high)| high);
                self.selective_answered(now, p, sent_before)
            }
            AethKind::RnrNak { timer } => {
                self.counters.rnr_naks += 1;
                let lost = self.ack_upto(now, psn::add(p, psn::MASK));
                if lost {
                    return self.retry_once(now, Cause::MissingResponse);
                }
                if self.rnr_left == 0 {
                    tracing::warn!(
                        qpn = self.cfg.qpn,
                        psn = p,
                        "RNR NAK with no RNR retries left: RNR_RETRY_EXC_ERR"
                    );
                    return Err((0, WcStatus::RnrRetryExcErr));
                }
                tracing::debug!(
                    qpn = self.cfg.qpn,
                    psn = p,
                    wait_us = rnr_timer_us(timer),
                    "RNR NAK: resending from the PSN after the wait"
                );
                if self.rnr_left != RNR_FOREVER {
                    self.rnr_left -= 1;
                }
                self.rnr_until = Some(now + Duration::from_micros(u64::from(rnr_timer_us(timer))));
                self.retrans_at = None;
                self.probe_at = None;
                self.retried_at = Some(self.comp_psn);
                self.rewind();
                Ok(())
            }
            AethKind::Nak(NakCode::PsnSequenceError) => {
                self.counters.seq_naks += 1;
                // Implicitly acknowledges every PSN before it (§1.6), then go back N, or resend
                // only the lost packet to a responder that keeps what followed it.
                self.ack_upto(now, psn::add(p, psn::MASK));
                if self.selective.is_some_and(|(end, _)| psn::diff(p, end) > 0) {
                    // The resend went in and `p` is missing: as an ACK of the PSN before it, and
                    // `p` was sent.
                    return self.selective_answered(now, psn::add(p, psn::MASK), self.high_psn);
                }
                if self.may_resend_alone() {
                    return self.retry_selective(now);
                }
                self.retry_once(now, Cause::SequenceNak)
            }
            AethKind::Nak(code) => {
                self.counters.error_naks += 1;
                self.ack_upto(now, psn::add(p, psn::MASK));
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                tracing::warn!(qpn = self.cfg.qpn, psn = p, nak = ?code, ?status, "NAK: the request fails");
                Err((0, status))
            }
            AethKind::Reserved(_) => Ok(()),
        }
    }

    /// Completes SEND/WRITE requests whose PSNs are all at or before `a` and moves `comp_psn`.
    /// Returns true if a READ or atomic is covered without its response (lost: retry).
    pub(crate) fn ack_upto(&mut self, now: Duration, a: u32) -> bool {
        if psn::diff(a, self.comp_psn) < 0 {
            return false;
        }
        let before = self.comp_psn;
        let mut lost = false;
        while let Some(w) = self.sq.front() {
            if !w.sent {
                break;
            }
            match w.kind {
                Kind::Send | Kind::Write => {
                    if psn::diff(w.last_psn, a) <= 0 {
                        self.comp_psn = psn::add(w.last_psn, 1);
                        self.complete_front(WcStatus::Success);
                    } else {
                        if psn::diff(a, w.first_psn) >= 0 {
                            self.comp_psn = psn::add(a, 1);
                        }
                        break;
                    }
                }
                Kind::Read | Kind::Atomic => {
                    lost = psn::diff(w.last_psn, a) <= 0;
                    break;
                }
            }
        }
        if self.comp_psn != before {
            self.progressed(now);
        }
        lost
    }

    fn read_response(
        &mut self,
        now: Duration,
        p: u32,
        op: Operation,
        payload: &[u8],
        mem: &mut MemTable,
    ) -> Result<(), Fatal> {
        if self.ack_upto(now, psn::add(p, psn::MASK)) {
            return self.retry_once(now, Cause::MissingResponse);
        }
        let mtu = self.cfg.mtu;
        let Some(w) = self.sq.front() else { return Ok(()) };
        if w.kind != Kind::Read || !w.sent || psn::diff(p, w.first_psn) < 0 {
            return Ok(());
        }
        if psn::diff(p, w.last_psn) > 0 || p != self.comp_psn {
            // A response beyond this READ, or a gap inside it: responses were lost.
            return self.retry_once(now, Cause::ReadResponseGap);
        }
        let offset = psn::diff(p, w.first_psn) as u32 * mtu;
        let expected = (w.len - offset.min(w.len)).min(mtu);
        let at_end = p == w.last_psn;
        let opcode_fits = match op {
            Operation::ReadResponseLast | Operation::ReadResponseOnly => at_end,
            _ => !at_end,
        };
        if !opcode_fits || payload.len() != expected as usize {
            // Not what this position needs: ignore it, the timer recovers.
            return Ok(());
        }
        mem.scatter(self.cfg.pd, w.sg.as_slice(), u64::from(offset), payload)
            .map_err(|_| (0, WcStatus::LocProtErr))?;
        self.comp_psn = psn::add(p, 1);
        if at_end {
            self.complete_front(WcStatus::Success);
        }
        self.progressed(now);
        Ok(())
    }

    fn atomic_ack(&mut self, now: Duration, p: u32, orig: u64, mem: &mut MemTable) -> Result<(), Fatal> {
        if self.ack_upto(now, psn::add(p, psn::MASK)) {
            return self.retry_once(now, Cause::MissingResponse);
        }
        let Some(w) = self.sq.front() else { return Ok(()) };
        if w.kind != Kind::Atomic || !w.sent || w.first_psn != p || p != self.comp_psn {
            return Ok(());
        }
        mem.scatter(self.cfg.pd, w.sg.as_slice(), 0, &orig.to_ne_bytes())
            .map_err(|_| (0, WcStatus::LocProtErr))?;
        self.comp_psn = psn::add(p, 1);
        self.complete_front(WcStatus::Success);
        self.progressed(now);
        Ok(())
    }

    /// Forward progress: retry budgets are full again, the requester never resends what is now
    /// acknowledged, and the timer restarts if anything is still outstanding.
    fn progressed(&mut self, now: Duration) {
        let acked = psn::diff(self.comp_psn, self.win_mark).max(0) as u32;
        self.win_mark = self.comp_psn;
        if let Some(w) = &mut self.win {
            w.on_ack(self.comp_psn, acked);
        }
        if let Some((_, sent)) = self.timed.filter(|&(p, _)| psn::diff(self.comp_psn, p) > 0) {
            let sample = now.saturating_sub(sent);
            self.rtt.sample(sample);
            self.timed = None;
        }
        self.rtt.on_progress();
        self.retry_left = self.cfg.retry_limit;
        self.rnr_left = self.cfg.rnr_retry;
        self.retried_at = None;
        if psn::diff(self.psn, self.comp_psn) < 0 {
            self.rewind();
        }
        self.retrans_at = if self.outstanding() { self.rto().map(|t| now + t) } else { None };
        self.probes = 0;
        self.arm_probe(now);
    }

    /// Whether the loss at `comp_psn` may be repaired by resending it alone: it is in a SEND or a
    /// WRITE and something was sent after it, nothing but SENDs and WRITEs is in flight, no resend
    /// is going on, and the responder is not known to drop what follows a gap.
    fn may_resend_alone(&self) -> bool {
        self.peer_places_ahead != Some(false)
            && self.selective.is_none()
            && self.resume.is_none()
            && self.rnr_until.is_none()
            && self.psn == self.high_psn
            && self.retried_at != Some(self.comp_psn)
            && self.sq.front().is_some_and(|w| w.sent && matches!(w.kind, Kind::Send | Kind::Write))
            && psn::diff(self.high_psn, psn::add(self.comp_psn, 1)) > 0
            && self.sq.iter().filter(|w| w.sent).all(|w| matches!(w.kind, Kind::Send | Kind::Write))
    }

    /// Whether PSN `p` belongs to a SEND or a WRITE that was sent (what a responder can keep after
    /// a gap).
    fn in_a_message(&self, p: u32) -> bool {
        self.sq.iter().take_while(|w| w.sent).any(|w| {
            matches!(w.kind, Kind::Send | Kind::Write)
                && psn::diff(p, w.first_psn) >= 0
                && psn::diff(w.last_psn, p) >= 0
        })
    }

    /// Resends the loss at `comp_psn` alone (when [`Requester::may_resend_alone`]), then goes on
    /// where sending was (counted as a retry). Against a responder known to keep what follows a
    /// gap, the window treats it as a repaired loss.
    fn retry_selective(&mut self, now: Duration) -> Result<(), Fatal> {
        let (end, high) = (self.comp_psn, self.high_psn);
        let cut = match (&mut self.win, self.peer_places_ahead) {
            (Some(w), Some(true)) => w.on_repaired_loss(high),
            (Some(w), _) => w.on_loss(high),
            (None, _) => false,
        };
        if cut {
            self.counters.window_cuts += 1;
        }
        self.spend_retry(Cause::SequenceNak)?;
        tracing::debug!(
            qpn = self.cfg.qpn,
            psn = self.comp_psn,
            up_to = end,
            cause = %Cause::SequenceNak,
            "retransmitting from the oldest unacknowledged PSN, alone (the responder keeps what follows)"
        );
        self.selective = Some((end, high));
        self.resend_oldest(end);
        self.resent(now);
        Ok(())
    }

    /// `a` is acknowledged after a resend that ended at `end`: when `a` reaches `end`, the
    /// responder got the resend, and what it acknowledges beyond `end` it had kept. The PSN after
    /// `a` is then missing if it was sent before `sent_before` (everything sent before the resend
    /// arrived before it; a NAK names a missing PSN whenever it was sent): a responder that keeps
    /// what follows a gap is missing that packet (another loss), which goes alone too; one that
    /// does not (rxe) dropped everything after `end`, which goes again (go back N from there).
    fn selective_answered(&mut self, now: Duration, a: u32, sent_before: u32) -> Result<(), Fatal> {
        let Some((end, _)) = self.selective else { return Ok(()) };
        if psn::diff(a, end) < 0 {
            return Ok(());
        }
        self.selective = None;
        let next = psn::add(end, 1);
        if psn::diff(a, end) > 0 {
            self.peer_places_ahead = Some(true);
            if let Some(w) = &mut self.win {
                w.widen();
            }
        } else if self.peer_places_ahead.is_none() && self.in_a_message(next) {
            // Nothing after the resend was kept though it could have been: the responder drops
            // such packets (rxe), or they were lost too. Twice: the QP goes back N from then on.
            self.kept_nothing += 1;
            if self.kept_nothing >= 2 {
                self.peer_places_ahead = Some(false);
            }
        }
        if psn::diff(sent_before, psn::add(a, 1)) <= 0 || !self.outstanding() {
            return Ok(());
        }
        if self.peer_places_ahead == Some(true) && self.may_resend_alone() {
            return self.retry_selective(now);
        }
        self.retried_at = Some(self.comp_psn);
        self.rewind();
        Ok(())
    }

    /// Starts a go-back-N retry for a loss (a PSN sequence NAK, a missing READ/atomic response)
    /// unless one already started at this `comp_psn`; the adaptive window halves once per round.
    fn retry_once(&mut self, now: Duration, cause: Cause) -> Result<(), Fatal> {
        if self.retried_at == Some(self.comp_psn) {
            return Ok(());
        }
        if self.win.as_mut().is_some_and(|w| w.on_loss(self.high_psn)) {
            self.counters.window_cuts += 1;
        }
        self.retry(now, cause)
    }

    /// A counted go-back-N retry: fails the oldest request once `retry_cnt` retries are spent.
    pub(crate) fn retry(&mut self, now: Duration, cause: Cause) -> Result<(), Fatal> {
        self.selective = None;
        self.spend_retry(cause)?;
        tracing::debug!(
            qpn = self.cfg.qpn,
            psn = self.comp_psn,
            up_to = psn::add(self.psn, psn::MASK),
            %cause,
            window = self.win.as_ref().map(|w| w.limit()),
            "retransmitting from the oldest unacknowledged PSN (go-back-N)"
        );
        self.rewind();
        self.resent(now);
        Ok(())
    }

    /// Counts a retry and takes it from the `retry_cnt` budget: RETRY_EXC_ERR once it is spent.
    fn spend_retry(&mut self, cause: Cause) -> Result<(), Fatal> {
        self.counters.retries += 1;
        if self.retry_left == 0 {
            tracing::warn!(qpn = self.cfg.qpn, psn = self.comp_psn, %cause, "retry count exceeded: RETRY_EXC_ERR");
            return Err((0, WcStatus::RetryExcErr));
        }
        if self.retry_left != u32::MAX {
            self.retry_left -= 1;
        }
        Ok(())
    }

    /// A retry from `comp_psn` went out: it is the one for this `comp_psn`, the timer restarts,
    /// and the probe re-arms when the tail is on the wire again.
    fn resent(&mut self, now: Duration) {
        self.retried_at = Some(self.comp_psn);
        self.retrans_at = self.rto().map(|t| now + t);
        self.probe_at = None;
        self.probes = 0;
    }

    /// Timer expiry: the end of an RNR wait, or a retransmission timeout.
    pub(crate) fn handle_timeout(&mut self, now: Duration) -> Result<(), Fatal> {
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
            if self.outstanding() {
                self.retrans_at = self.rto().map(|t| now + t);
            }
        }
        if self.retrans_at.is_some_and(|t| t <= now) {
            self.retrans_at = None;
            self.counters.timeouts += u64::from(self.outstanding());
            if self.outstanding() {
                if let Some(w) = &mut self.win {
                    w.on_timeout(self.high_psn);
                    self.counters.window_cuts += 1;
                }
                // A timeout always retries, even at a comp_psn that already saw one, and the
                // next one waits longer.
                self.rtt.on_timeout();
                self.retried_at = None;
                self.retry(now, Cause::Timeout)?;
            }
        }
        if self.probe_at.is_some_and(|t| t <= now) {
            self.probe_at = None;
            self.probe_tail();
        }
        Ok(())
    }
}

/// Why a requester goes back N, as its log says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A PSN sequence error NAK: the responder saw a gap.
    SequenceNak,
    /// The retransmission timer expired.
    Timeout,
    /// An ACK or NAK covered a READ or atomic whose response never came.
    MissingResponse,
    /// READ responses arrived with a gap.
    ReadResponseGap,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cause::SequenceNak => "PSN sequence NAK",
            Cause::Timeout => "retransmission timeout",
            Cause::MissingResponse => "READ/atomic response missing",
            Cause::ReadResponseGap => "gap in READ responses",
        })
    }
}
