//! A packet delivery context (uet-wire.md §2 "PSN, PDC and connection semantics").
//!
//! A PDC joins two fabric endpoints in one delivery mode (RUD or ROD). The initiator opens it: its
//! requests carry SYN, `psn_offset` (so the target learns Start_PSN = psn − psn_offset) and no
//! DPDCID, until an ACK (or any packet) from the target gives it the target's PDCID. Both
//! directions carry sequenced packets: the initiator's requests, and the target's own requests
//! (read data, responses) which start at the same Start_PSN in their own sequence space. Each side
//! has a sending half (`tx`) and a receiving half (`rx`).
//!
//! Close (uet-wire.md "Choices"): the initiator, once everything it sent is acknowledged, sends a
//! sequenced CP CLOSE_CMD with AR; the target acknowledges it once it has received everything before
//! it and its own packets are acknowledged, then frees its state. Either side may ask: the target with
//! CP CLOSE_REQ (repeated every RTO until the CLOSE_CMD comes), or an ACK with REQ = close.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::ack::CreditState;
use wire::uet::pds::ack::{FLAG_P, REQ_CLOSE};
use wire::uet::pds::request::CcRequest;
use wire::uet::pds::request::{FLAG_AR, FLAG_RETX, FLAG_SYN};
use wire::uet::pds::{
    AckCc, AckCcInfo, AckRepr, CpRepr, CtlType, Mode, NackRepr, NextHeader, NsccState, PdsRepr, RequestRepr,
};

use crate::Body;
use crate::credit::{CreditRx, CreditTx, RcccConfig};

use crate::config::{Config, RX_WINDOW};
use crate::psn::{diff, offset16};
use crate::rx::{RxHalf, Verdict};
use crate::tx::{Delivered, Payload, TxHalf, Urgency};
use crate::window::LossWindow;

/// A local PDC identifier (the SPDCID of the packets this side sends). 0 is never used.
pub type PdcId = u16;

/// Which side opened the PDC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// This side sent the SYN.
    Initiator,
    /// The peer did.
    Target,
}

/// SYN requests carry `psn_offset` in 12 bits: at most this many packets go out before the target's
/// PDCID is known.
const SYN_SPAN: u32 = 1 << 12;

#[derive(Debug)]
pub(crate) struct Pdc<A> {
    pub(crate) id: PdcId,
    pub(crate) peer: A,
    /// The peer's PDCID, once known.
    pub(crate) peer_id: Option<u16>,
    pub(crate) mode: Mode,
    pub(crate) role: Role,
    pub(crate) start_psn: u32,
    pub(crate) tx: TxHalf,
    pub(crate) rx: RxHalf,
    /// NSCC, when the endpoint runs it (created with the first transmission).
    pub(crate) nscc: Option<crate::cc::Nscc>,
    /// The loss-adaptive window, when the endpoint runs neither NSCC nor RCCC and
    /// `Config::min_window` is set (created with the first transmission).
    pub(crate) win: Option<LossWindow>,
    /// Falls of the adaptive window on a timeout, not yet counted by the endpoint.
    pub(crate) window_cuts: u64,
    /// With the adaptive window, a tail probe: when the sender can send nothing new and no ACK
    /// has made progress for twice the smoothed RTT, the oldest and the newest unacknowledged
    /// packets go again (one probe per stall).
    probe_at: Option<Duration>,
    probed: bool,
    /// Probes sent, not yet counted by the endpoint.
    pub(crate) probes: u64,
    /// Smoothed RTT (from the newest packet each ACK acknowledges; 1/8 gain).
    srtt: Option<Duration>,
    /// RCCC: this side's credit for sending, and what it grants its peer.
    credit_tx: CreditTx,
    pub(crate) credit_rx: CreditRx,
    /// A CE-marked packet arrived since the last ACK: the next ACK carries M.
    pub(crate) ce_seen: bool,
    /// Close asked for locally (or, on the initiator, by the target).
    pub(crate) closing: bool,
    close_queued: bool,
    /// Target: when to send the next CLOSE_REQ.
    close_req_due: Option<Duration>,
    /// Target: PSN of the CLOSE_CMD received.
    close_psn: Option<u32>,
    /// Target: the ACK that acknowledges the CLOSE_CMD has gone out; the state can go.
    pub(crate) close_done: bool,
    /// A PROBE to answer (its `probe_opaque`).
    probe_reply: Option<u16>,
    /// Secure establishment moved this (initiator's) PDC to another Start_PSN: packets of the
    /// first attempt may still reach the target, which answers them INVALID_SYN.
    restarted: bool,
    /// When the last packet for this PDC arrived (the endpoint's reaper, `Config::idle_timeout`).
    pub(crate) last_rx: Duration,
    /// Target: only SYN packets have arrived so far (`Config::half_open_timeout`).
    pub(crate) half_open: bool,
    /// A transmit poll kept [`Urgency::Held`] packets back, and the endpoint lists this PDC to
    /// release them with its next transmission.
    pub(crate) holding: bool,
}

/// What [`Pdc::poll_transmit`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxKind {
    /// A NACK with this code.
    Nack(wire::uet::pds::NackCode),
    Ack,
    /// CLOSE_REQ.
    Control,
    /// CP CREDIT.
    Credit,
    /// CP CREDIT_REQ.
    CreditReq,
    /// A request or CLOSE_CMD, first transmission.
    Data,
    /// A request or CLOSE_CMD, again.
    Retransmit,
}

/// What one packet did to a PDC, for the endpoint to act on.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The initiator learned the target's PDCID.
    pub(crate) established: bool,
    /// The sequenced packet is new: deliver it.
    pub(crate) deliver: bool,
    /// Packets newly known received by the peer: `(psn, cookie)`.
    pub(crate) acked: Vec<(u32, u64)>,
    /// Our CLOSE_CMD was acknowledged: the PDC is closed.
    pub(crate) closed: bool,
    /// Packets queued for retransmission by this packet.
    pub(crate) retransmits: usize,
    /// Duplicate, out-of-order (ROD) or out-of-window arrival.
    pub(crate) dropped: Option<Verdict>,
    /// A NACK that would end the PDC named a PSN outside its window: ignored.
    pub(crate) nack_ignored: bool,
    /// The adaptive window was halved.
    pub(crate) window_cut: bool,
    /// A CP this PDC does not act on.
    pub(crate) unexpected: bool,
}

impl<A: Copy> Pdc<A> {
    pub(crate) fn new(
        id: PdcId,
        peer: A,
        peer_id: Option<u16>,
        mode: Mode,
        role: Role,
        start_psn: u32,
    ) -> Pdc<A> {
        Pdc {
            id,
            peer,
            peer_id,
            mode,
            role,
            start_psn,
            tx: TxHalf::new(start_psn),
            rx: RxHalf::new(start_psn),
            nscc: None,
            win: None,
            window_cuts: 0,
            probe_at: None,
            probed: false,
            probes: 0,
            srtt: None,
            credit_tx: CreditTx::default(),
            credit_rx: CreditRx::default(),
            ce_seen: false,
            closing: false,
            close_queued: false,
            close_req_due: None,
            close_psn: None,
            close_done: false,
            probe_reply: None,
            restarted: false,
            last_rx: Duration::ZERO,
            half_open: role == Role::Target,
            holding: false,
        }
    }

    /// Queues upper-layer bytes; returns the PSN.
    pub(crate) fn push(
        &mut self,
        next_hdr: NextHeader,
        body: Body,
        cookie: u64,
        urgency: Urgency,
        cfg: &Config,
    ) -> u32 {
        let p = Payload::Data { next_hdr, body, cookie };
        if let Some(cost) = cfg.rccc.as_ref().and_then(|rc| credit_cost(rc, &p)) {
            self.credit_tx.queue(cost);
        }
        self.tx.push_with(p, urgency)
    }

    /// Starts closing: the initiator sends CLOSE_CMD once drained, the target asks with CLOSE_REQ.
    pub(crate) fn close(&mut self, now: Duration) {
        self.closing = true;
        if self.role == Role::Target && self.close_req_due.is_none() {
            self.close_req_due = Some(now);
        }
    }

    fn learn(&mut self, spdcid: u16, out: &mut Outcome) {
        if self.peer_id.is_none() && self.role == Role::Initiator && spdcid != 0 {
            self.peer_id = Some(spdcid);
            out.established = true;
        }
    }

    /// A RUD/ROD request addressed to this PDC.
    pub(crate) fn on_request(&mut self, r: &RequestRepr, now: Duration, cfg: &Config) -> Outcome {
        let mut out = Outcome::default();
        self.learn(r.spdcid, &mut out);
        self.rx.set_clear_psn(r.clear_psn());
        if let Some(cc) = r.cc {
            self.credit_rx.on_target(cc.credit_target, cfg.rccc.is_some(), false);
        }
        let v = self.rx.accept(r.psn, self.mode, r.flags & FLAG_AR != 0, r.flags & FLAG_RETX != 0, now, cfg);
        match v {
            Verdict::New => out.deliver = true,
            other => out.dropped = Some(other),
        }
        out
    }

    /// Whether `psn` comes after this (target) PDC's CLOSE_CMD: the initiator said it had sent
    /// everything, so such a request is answered NACK CLOSING.
    pub(crate) fn after_close(&self, psn: u32) -> bool {
        self.close_psn.is_some_and(|c| diff(psn, c) > 0)
    }

    /// An ACK for this PDC's sending half.
    pub(crate) fn on_ack(&mut self, a: &AckRepr, now: Duration, cfg: &Config) -> Outcome {
        let mut out = Outcome::default();
        self.learn(a.spdcid, &mut out);
        if let AckCc::Cc(info, state) = &a.cc {
            if info.cc_type == CC_TYPE_CREDIT {
                if let Some(rc) = &cfg.rccc {
                    self.credit_tx.on_grant(rc, CreditState::from_bytes(state).credit, now, cfg.rto);
                }
            }
        }
        let sack = a.sack_base_psn().zip(a.cc_info().map(|i| i.sack_bitmap));
        let n = self.tx.on_ack(a.cack_psn, sack, self.mode, &mut sink(&mut out));
        out.retransmits = n;
        self.window_signal(now, n > 0, &mut out);
        if let Some(cc) = &mut self.nscc {
            let (bytes, sent_at) = self.tx.last_acked;
            let rtt = sent_at.map(|t| now.saturating_sub(t));
            cc.on_ack(now, bytes, rtt, a.flags & wire::uet::pds::ack::FLAG_M != 0);
            if n > 0 {
                cc.on_loss(now);
            }
        }
        if a.flags & wire::uet::pds::ack::FLAG_REQ_MASK == REQ_CLOSE && self.role == Role::Initiator {
            self.closing = true;
        }
        if self.role == Role::Target && self.close_psn.is_some() && self.tx.is_empty() {
            self.rx.ack_now = true;
        }
        out
    }

    /// A NACK for this PDC. Returns `Err(code)` for the codes that end it, when its PSN is in the
    /// PDC's window (otherwise it is ignored: it cannot be about a packet this PDC sent).
    pub(crate) fn on_nack(
        &mut self,
        n: &NackRepr,
        now: Duration,
        cfg: &Config,
    ) -> Result<Outcome, wire::uet::pds::NackCode> {
        use wire::uet::pds::NackCode as C;
        let mut out = Outcome::default();
        self.learn(n.spdcid, &mut out);
        match n.nack_code {
            C::RodOoo => {
                let n = self.tx.go_back(n.nack_psn, n.payload.wrapping_sub(1), &mut sink(&mut out));
                out.retransmits = n;
                self.window_signal(now, n > 0, &mut out);
            }
            // Transient: the packet was not taken; send it again now.
            C::Trimmed
            | C::TrimmedLastHop
            | C::NoPktBuffer
            | C::NoResource
            | C::NoBitmap
            | C::NoSesMsgAvail
            | C::NoGtdDelAvail
            | C::PktNotRcvd
            | C::RcvrInferLoss => {
                out.retransmits = usize::from(self.tx.resend(n.nack_psn));
                // A trimmed packet is a loss to NSCC (htsim's quick adapt "on loss, NACK or trim").
                if let (Some(cc), C::Trimmed | C::TrimmedLastHop) = (&mut self.nscc, n.nack_code) {
                    cc.on_loss(now);
                }
                // To the adaptive window, a packet the path or the receiver could not take (not
                // one the SES had no resources for: that is the receiver's pace, not the path's).
                let dropped = !matches!(n.nack_code, C::NoSesMsgAvail | C::NoGtdDelAvail);
                self.window_signal(now, dropped && out.retransmits > 0, &mut out);
            }
            // The retransmit timer resends it when the window has moved.
            C::PsnOorWindow | C::RcvdSesProcg | C::TrimmedAck => {}
            // The codes that follow end (or restart) the PDC: only for a PSN it sent, so that a
            // NACK spoofed without knowing the PDC's sequence space cannot.
            _ if !self.in_window(n.nack_psn) => out.nack_ignored = true,
            // The peer has no such PDC: the close it was asked for (the initiator's CLOSE_CMD, or
            // the target's CLOSE_REQ with nothing of its own outstanding) is done.
            C::InvDpdcid
                if self.closing && (self.close_queued || self.role == Role::Target && self.tx.is_empty()) =>
            {
                out.closed = true
            }
            // A SYN of the attempt before a restart, arriving after the target accepted the new
            // Start_PSN (late, reordered or duplicated): stale, not a failure.
            C::InvalidSyn if self.restarted => {}
            // A repeat of a NACK already followed (for another packet of the first attempt, and
            // perhaps arriving after the PDC is established) names the Start_PSN in use.
            C::NewStartPsn if self.role == Role::Initiator && n.payload == self.start_psn => {}
            // Secure establishment: the target wants this PDC to start at `payload`. Nothing was
            // acknowledged yet (SYN phase): number everything from there and send it again.
            C::NewStartPsn if self.role == Role::Initiator && self.peer_id.is_none() => {
                self.restarted = true;
                self.start_psn = n.payload;
                self.tx.renumber(n.payload);
                self.rx = RxHalf::new(n.payload);
                out.retransmits = self.tx.len();
                // To the target this is a new PDC: RCCC starts over, speculative credit included,
                // with every queued packet still to be paid for.
                if let Some(rc) = &cfg.rccc {
                    self.credit_tx = CreditTx::default();
                    for cost in self.tx.payloads().filter_map(|p| credit_cost(rc, p)) {
                        self.credit_tx.queue(cost);
                    }
                }
            }
            code => return Err(code),
        }
        Ok(out)
    }

    /// A control packet for this PDC.
    pub(crate) fn on_cp(&mut self, c: &CpRepr, now: Duration, cfg: &Config) -> Outcome {
        let mut out = Outcome::default();
        self.learn(c.spdcid, &mut out);
        match c.ctl_type {
            CtlType::CloseCmd => {
                let v = self.rx.accept(c.psn, self.mode, true, c.flags & FLAG_RETX != 0, now, cfg);
                if v == Verdict::New || v == Verdict::Duplicate {
                    self.close_psn = Some(c.psn);
                    self.closing = true;
                    self.rx.ack_now = true;
                } else {
                    out.dropped = Some(v);
                }
            }
            CtlType::CloseReq if self.role == Role::Initiator => self.closing = true,
            CtlType::AckReq | CtlType::Noop => self.rx.ack_now = true,
            CtlType::Probe => self.probe_reply = Some(c.probe_opaque),
            CtlType::ClearCmd => self.rx.set_clear_psn(c.payload),
            CtlType::Credit => {
                if let Some(rc) = &cfg.rccc {
                    self.credit_tx.on_grant(rc, c.payload, now, cfg.rto);
                }
            }
            CtlType::CreditReq => self.credit_rx.on_target(c.payload, cfg.rccc.is_some(), true),
            // CLEAR_REQ, NEGOTIATION, CLOSE_REQ to a target, reserved types: answered NACK
            // UNEXP_EVENT.
            _ => out.unexpected = true,
        }
        out
    }

    /// Retransmit timers: how many packets timed out. `Err` when the retry limit is exceeded.
    pub(crate) fn handle_timeout(&mut self, now: Duration, cfg: &Config) -> Result<usize, ()> {
        // A half-open target PDC's peer may be a spoofed address that never answers.
        let limited;
        let cfg = if self.half_open && cfg.half_open_retries < cfg.max_retries {
            limited = Config { max_retries: cfg.half_open_retries, ..*cfg };
            &limited
        } else {
            cfg
        };
        let r = self.tx.handle_timeout(now, cfg, self.mode);
        if let (Ok(n), Some(cc)) = (&r, &mut self.nscc) {
            if *n > 0 {
                cc.on_loss(now);
            }
        }
        if let (Ok(n), Some(w)) = (&r, &mut self.win) {
            if *n > 0 && w.on_timeout(self.tx.sent_end(), self.tx.expired_seq, self.tx.seq()) {
                self.window_cuts += 1;
            }
        }
        if r.is_ok() && self.probe_at.is_some_and(|t| t <= now) {
            self.probe_at = None;
            self.probed = true;
            if self.tx.probe() > 0 {
                self.probes += 1;
            }
        }
        r
    }

    /// The adaptive window hears of what an ACK or NACK reported: the packets newly known
    /// received (in `out`), and whether it showed a loss. Progress times a round trip and ends
    /// a stall (the probe re-arms).
    fn window_signal(&mut self, now: Duration, lost: bool, out: &mut Outcome) {
        let Some(w) = &mut self.win else { return };
        let n = out.acked.len() as u32;
        w.on_ack(self.tx.una(), n);
        out.window_cut |= lost && w.on_loss(self.tx.sent_end());
        if n > 0 {
            if let Some(sent) = self.tx.last_acked.1 {
                let sample = now.saturating_sub(sent);
                self.srtt = Some(self.srtt.map_or(sample, |s| s - s / 8 + sample / 8));
            }
            self.probe_at = None;
            self.probed = false;
        }
    }

    /// Arms the tail probe when the adaptive window runs, a round trip has been timed, packets are
    /// unacknowledged and nothing else may go (the caller found nothing to send).
    fn arm_probe(&mut self, now: Duration, cfg: &Config) {
        if self.win.is_none() || self.probed || self.probe_at.is_some() || self.tx.sent_end() == self.tx.una()
        {
            return;
        }
        if let Some(srtt) = self.srtt {
            // A receiver acknowledges a packet that asked for no immediate ACK within its
            // coalescing delay (taken to be ours): no stall before then.
            let coalesced = if self.tx.newest_sent_lazy() { cfg.ack_delay + srtt } else { Duration::ZERO };
            let wait = (srtt * 2).max(coalesced).max(Duration::from_micros(10));
            self.probe_at = Some(now + wait.min(cfg.rto / 2));
        }
    }

    /// The smoothed round-trip time, once measured.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The adaptive window's size, when it runs.
    pub(crate) fn window(&self) -> Option<u32> {
        self.win.as_ref().map(LossWindow::limit)
    }

    /// Target: when the endpoint's reaper next acts on this PDC (see `Config::half_open_timeout`
    /// and `Config::idle_timeout`): a half-open PDC is dropped, an idle one asked to close, and one
    /// whose close goes unanswered dropped. `None` while it has packets of its own, whose retry
    /// limit ends it if its peer is gone.
    pub(crate) fn reap_at(&self, cfg: &Config) -> Option<Duration> {
        if self.role != Role::Target || !self.tx.is_empty() {
            return None;
        }
        let after = if self.half_open {
            cfg.half_open_timeout
        } else if self.closing {
            cfg.idle_timeout.saturating_add(cfg.half_open_timeout)
        } else {
            cfg.idle_timeout
        };
        Some(self.last_rx.saturating_add(after))
    }

    /// Whether `psn` is one this PDC sent or is about to send (from the oldest unacknowledged
    /// through the next one; a CP carries the next): a NACK that would end the PDC must name one.
    fn in_window(&self, psn: u32) -> bool {
        diff(psn, self.tx.una()) >= 0 && diff(self.tx.next_psn(), psn) >= 0
    }

    /// Earliest deadline of this PDC.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        [
            self.tx.poll_timeout(),
            self.rx.ack_due,
            self.close_req_due,
            self.credit_tx.poll_timeout(),
            self.probe_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// True if the target has everything up to and including the CLOSE_CMD and nothing of its own
    /// in flight.
    fn close_complete(&self) -> bool {
        self.close_psn.is_some_and(|p| diff(self.rx.expected(), p) > 0) && self.tx.is_empty()
    }

    /// Writes the next packet this PDC wants to send into `buf`: a NACK, an ACK, a CLOSE_REQ,
    /// then a (re)transmission. Returns its length and kind, `None` when it has nothing to send
    /// now, or [`NoRoom`] when `buf` is too small for the packet (which stays due). Packets that
    /// wait for company ([`Urgency::Held`]) go only with `release` (the endpoint sends something
    /// else now) or once this PDC's delayed ACK has gone; until then `holding` is set.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Duration,
        cfg: &Config,
        buf: &mut [u8],
        tail: Option<&mut Bytes>,
        release: bool,
    ) -> Result<Option<(usize, TxKind)>, NoRoom> {
        let peer_id = self.peer_id.unwrap_or(0);
        if let Some(n) = self.rx.nack {
            let repr = NackRepr {
                next_hdr: NextHeader::None,
                flags: 0,
                nack_code: n.code,
                vendor_code: 0,
                nack_psn: n.psn,
                spdcid: self.id,
                dpdcid: peer_id,
                payload: n.payload,
                ccx: None,
            };
            let len = emit(&PdsRepr::Nack(repr), buf).ok_or(NoRoom)?;
            self.rx.nack = None;
            return Ok(Some((len, TxKind::Nack(n.code))));
        }
        if self.rx.ack_ready(now) || self.probe_reply.is_some() {
            let len = emit(&PdsRepr::Ack(self.ack()), buf).ok_or(NoRoom)?;
            self.rx.acked();
            self.ce_seen = false;
            self.probe_reply = None;
            self.credit_rx.announce = false;
            if self.close_complete() {
                self.close_done = true;
            }
            return Ok(Some((len, TxKind::Ack)));
        }
        if self.role == Role::Target
            && self.close_req_due.is_some_and(|t| t <= now)
            && self.close_psn.is_none()
        {
            let len = emit(&PdsRepr::Cp(self.cp(CtlType::CloseReq, 0)), buf).ok_or(NoRoom)?;
            self.close_req_due = Some(now + cfg.rto);
            return Ok(Some((len, TxKind::Control)));
        }
        if self.credit_rx.announce {
            let field = self.credit_rx.field();
            let len = emit(&PdsRepr::Cp(self.cp(CtlType::Credit, field)), buf).ok_or(NoRoom)?;
            self.credit_rx.announce = false;
            return Ok(Some((len, TxKind::Credit)));
        }
        if self.closing && self.role == Role::Initiator && !self.close_queued && self.tx.is_empty() {
            self.tx.push(Payload::Close);
            self.close_queued = true;
        }
        let syn = self.role == Role::Initiator && self.peer_id.is_none();
        // Only when NSCC is configured: `self.nscc = cfg.cc.map(Nscc::new)` on every call was
        // compiled into one store sequence for both cases, writing the whole option (128 bytes,
        // the None niche and leftover registers) on every packet sent.
        if let (None, Some(c)) = (&self.nscc, cfg.cc) {
            self.nscc = Some(crate::cc::Nscc::new(c));
        }
        let mut window = cfg.window.min(RX_WINDOW);
        if let (None, Some(min), None, None) = (&self.win, cfg.min_window, cfg.cc, cfg.rccc) {
            self.win = Some(LossWindow::new(min, window));
        }
        if let Some(cc) = &self.nscc {
            window = window.min(cc.cwnd_packets() as u32);
        }
        // The adaptive window bounds retransmissions too, and asks for an ACK with the packet that
        // fills it once it is below the configured window (the receiver's coalescing would hold
        // the ACK of a window smaller than `ack_every` for `ack_delay`).
        let (mut retx_window, mut ask_at) = (usize::MAX, None);
        if let Some(w) = &self.win {
            window = window.min(w.limit());
            retx_window = window as usize;
            ask_at = (window as usize).checked_sub(1).filter(|_| w.reduced());
        }
        if syn {
            window =
                window.min(SYN_SPAN - diff(self.tx.una(), self.start_psn).clamp(0, SYN_SPAN as i32) as u32);
        }
        // Only the look below may find this PDC blocked on credit (a stale flag would keep a past
        // CREDIT_REQ deadline alive while the window, not credit, holds the sender back).
        self.credit_tx.unblock();
        let Some(idx) = self.tx.next_to_send_within(window as usize, retx_window) else {
            self.arm_probe(now, cfg);
            return Ok(None);
        };
        let retx = self.tx.is_retransmission(idx);
        if !retx && !release && self.rx.ack_due.is_some() && self.tx.only_held_unsent() {
            self.holding = true;
            return Ok(None);
        }
        let (psn, pkt) = self.tx.get(idx);
        // The last packet queued asks for an ACK, unless nobody waits for it (an inject: the
        // receiver's coalescing delay is then no one's latency); a reduced window's edge always.
        let last = (idx + 1 == self.tx.len() && pkt.urgency == Urgency::Prompt) || ask_at == Some(idx);
        // RCCC: every data transmission needs credit (a retransmission adds its cost to the target
        // first), so not even go-back-N can send faster than the receiver grants; without credit,
        // perhaps ask for some. The PDC's first packet goes regardless: it carries SYN and the
        // target, and a CREDIT_REQ could not reach a target that does not know the PDC yet (nor
        // can one be sent until it does).
        let mut credit = None;
        let charged = cfg.rccc.as_ref().and_then(|rc| credit_cost(rc, &pkt.payload).map(|c| (rc, c)));
        if let Some((rc, cost)) = charged {
            if retx {
                self.credit_tx.want_again(psn, cost);
            }
            if !(self.credit_tx.covers(rc, cost) || syn && psn == self.start_psn) {
                if syn || !self.credit_tx.should_ask(rc, now, cfg.rto) {
                    return Ok(None);
                }
                let req = self.cp(CtlType::CreditReq, self.credit_tx.target_field(rc));
                return emit(&PdsRepr::Cp(req), buf).map(|l| Some((l, TxKind::CreditReq))).ok_or(NoRoom);
            }
            credit = Some((cost, self.credit_tx.target_field(rc)));
        }
        let mut flags = if retx {
            FLAG_RETX | FLAG_AR
        } else if last {
            FLAG_AR
        } else {
            0
        };
        let dpdcid = if syn {
            flags |= FLAG_SYN;
            RequestRepr::syn_word(false, diff(psn, self.start_psn) as u16)
        } else {
            peer_id
        };
        let clear_psn_offset = offset16(self.tx.una(), psn);
        let len = match &pkt.payload {
            Payload::Data { next_hdr, body, .. } => {
                let r = RequestRepr {
                    mode: self.mode,
                    next_hdr: *next_hdr,
                    flags,
                    clear_psn_offset,
                    psn,
                    spdcid: self.id,
                    dpdcid,
                    cc: credit.map(|(_, credit_target)| CcRequest { ccc_id: 0, credit_target }),
                };
                emit_body(&PdsRepr::Request(r), body, buf, tail).ok_or(NoRoom)?
            }
            Payload::Close => {
                let isrod = if self.mode == Mode::Rod { wire::uet::pds::cp::FLAG_ISROD } else { 0 };
                let c = CpRepr {
                    ctl_type: CtlType::CloseCmd,
                    flags: (flags & !FLAG_SYN) | isrod | FLAG_AR,
                    probe_opaque: 0,
                    psn,
                    spdcid: self.id,
                    dpdcid: peer_id,
                    payload: 0,
                };
                emit(&PdsRepr::Cp(c), buf).ok_or(NoRoom)?
            }
        };
        if let (Some(rc), Some((cost, _))) = (&cfg.rccc, credit) {
            self.credit_tx.charge(rc, cost, now, cfg.rto);
        }
        self.tx.mark_sent(idx, now, cfg);
        Ok(Some((len, if retx { TxKind::Retransmit } else { TxKind::Data })))
    }

    /// An unsequenced control packet of this PDC.
    fn cp(&self, ctl_type: CtlType, payload: u32) -> CpRepr {
        CpRepr {
            ctl_type,
            flags: 0,
            probe_opaque: 0,
            psn: self.tx.next_psn(),
            spdcid: self.id,
            dpdcid: self.peer_id.unwrap_or(0),
            payload,
        }
    }

    /// The ACK_CC describing the receiving half: cumulative ACK, SACK bitmap from the next expected
    /// PSN, the window as `mpr`, NSCC state with the out-of-order count.
    fn ack(&self) -> AckRepr {
        let cack = self.rx.expected().wrapping_sub(1);
        let mut flags = if self.rx.retx_seen { wire::uet::pds::ack::FLAG_RETX } else { 0 };
        if self.ce_seen {
            flags |= wire::uet::pds::ack::FLAG_M;
        }
        let ack_psn_offset = match self.probe_reply {
            Some(opaque) => {
                flags |= FLAG_P;
                opaque as i16
            }
            None => offset16(self.rx.ack_psn, cack),
        };
        if self.role == Role::Target && self.closing && self.close_psn.is_none() {
            flags |= REQ_CLOSE;
        }
        let credit = self.credit_rx.active;
        let info = AckCcInfo {
            cc_type: if credit { CC_TYPE_CREDIT } else { 0 },
            cc_flags: 0,
            mpr: RX_WINDOW.min(255) as u8,
            sack_psn_offset: 1,
            sack_bitmap: self.rx.sack_bitmap(),
        };
        let state = if credit {
            CreditState { credit: self.credit_rx.field(), ooo_count: self.rx.ooo_count }.to_bytes()
        } else {
            NsccState {
                service_time: 0,
                restore_cwnd: false,
                rcv_cwnd_pend: 0,
                rcvd_bytes: 0,
                ooo_count: self.rx.ooo_count,
            }
            .to_bytes()
        };
        AckRepr {
            next_hdr: NextHeader::None,
            flags,
            ack_psn_offset,
            cack_psn: cack,
            spdcid: self.id,
            dpdcid: self.peer_id.unwrap_or(0),
            cc: AckCc::Cc(info, state),
        }
    }
}

/// ACK_CC `cc_type` of credit (RCCC) state.
const CC_TYPE_CREDIT: u8 = 1;

/// What sending `p` costs in credit, if it is data (CLOSE_CMD is not charged): the RUD_CC header,
/// the body and the headers below.
fn credit_cost(rc: &RcccConfig, p: &Payload) -> Option<u64> {
    match p {
        Payload::Data { body, .. } => Some(16 + body.len() as u64 + rc.overhead),
        Payload::Close => None,
    }
}

/// Collects what the sending half reports into `out`.
fn sink(out: &mut Outcome) -> impl FnMut(Delivered) + '_ {
    move |d| match d {
        Delivered::Data { psn, cookie } => out.acked.push((psn, cookie)),
        Delivered::Close => out.closed = true,
    }
}

/// Writes `pds`, a packet with nothing after its PDS header (ACK, NACK, CP), into `buf`; `None`
/// if it does not fit.
/// A packet is due but the buffer given to the transmit poll cannot hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoRoom;

pub(crate) fn emit(pds: &PdsRepr, buf: &mut [u8]) -> Option<usize> {
    pds.emit(buf).ok()
}

/// [`emit`] with an upper-layer [`Body`] after the header; with `tail`, only the body's header is
/// written and its payload handed back there (see [`Endpoint::poll_transmit_split`]).
///
/// [`Endpoint::poll_transmit_split`]: crate::Endpoint::poll_transmit_split
pub(crate) fn emit_body(
    pds: &PdsRepr,
    body: &Body,
    buf: &mut [u8],
    tail: Option<&mut Bytes>,
) -> Option<usize> {
    let n = emit(pds, buf)?;
    let rest = buf.get_mut(n..)?;
    Some(
        n + match tail {
            Some(t) => {
                let h = body.write_head_to(rest)?;
                *t = body.data().clone();
                h
            }
            None => body.write_to(rest)?,
        },
    )
}
