//! The requester: turns send work requests into packets (roce-wire.md §1.6). On RC with AckReq,
//! end-to-end credits and go-back-N retransmission (the completer, which consumes ACKs, NAKs and
//! responses, is in `completer.rs` and shares this state); on UC and UD a request completes when its
//! last packet is sent; UD packets carry a DETH and go where the request's address handle says.

use super::desc::{Kind, TxDesc, TxPayload};
use super::path::HeaderTemplate;
use super::rtt::RttEstimator;
use super::types::{SendFlags, SendRef, SendWindow, SendWr, WcStatus, WorkCompletion, WrOpcode};
use super::window::LossWindow;
use crate::types::SgList;
use std::collections::VecDeque;
use std::time::Duration;
use wire::ib::aeth::credit_count;
use wire::ib::{
    AtomicEthRepr, BthRepr, DethRepr, IethRepr, ImmDt, Opcode, Operation, RethRepr, RoceRepr, Transport, psn,
};

/// `RXE_MAX_UNACKED_PSNS`: the requester stops when it is this far ahead of the oldest unacked PSN.
pub const MAX_UNACKED_PSNS: i32 = super::window::CAP as i32;
/// The widest an adaptive window gets: against a responder that keeps what follows a gap
/// (`LossWindow::widen`), twice [`MAX_UNACKED_PSNS`].
pub const MAX_WIDE_PSNS: i32 = super::window::WIDE_CAP as i32;
/// Tail probes per stall (see `Requester::probe_tail`).
pub(crate) const MAX_PROBES: u8 = 3;
/// `RXE_MAX_PKT_PER_ACK`: AckReq at least every this many packets.
pub const MAX_PKT_PER_ACK: u32 = 64;

/// Where a UD send goes, resolved at post time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdSend {
    pub(crate) template: HeaderTemplate,
    pub(crate) qpn: u32,
    pub(crate) qkey: u32,
}

/// A send work request on the send queue.
#[derive(Debug)]
pub(crate) struct SendWqe {
    /// The request without its SGEs (`sg_list` is empty: an empty `Vec` owns no memory).
    pub(crate) wr: SendWr,
    /// The request's SGEs.
    pub(crate) sg: SgList,
    pub(crate) ud: Option<UdSend>,
    /// Message sequence number at the responder (for credits), set when first sent.
    pub(crate) ssn: u32,
    /// The data of an INLINE request, copied at post time.
    pub(crate) inline: Option<Vec<u8>>,
    pub(crate) len: u32,
    pub(crate) kind: Kind,
    /// Set when the first packet has been sent (then `first_psn`/`last_psn` are valid).
    pub(crate) sent: bool,
    pub(crate) first_psn: u32,
    pub(crate) last_psn: u32,
}

impl SendWqe {
    /// The entry for `wr`, copied without allocating unless it has more than two SGEs.
    pub(crate) fn new(wr: SendRef<'_>, inline: Option<Vec<u8>>, len: u32, ud: Option<UdSend>) -> SendWqe {
        let kind = Kind::of(&wr.opcode);
        let sg = SgList::new(wr.sg_list);
        let wr =
            SendWr { wr_id: wr.wr_id, opcode: wr.opcode, sg_list: Vec::new(), flags: wr.flags, ud: wr.ud };
        SendWqe { wr, sg, ud, ssn: 0, inline, len, kind, sent: false, first_psn: 0, last_psn: 0 }
    }

    /// True for messages that use a receive WQE at the responder (and so need a credit).
    fn consumes_rwqe(&self) -> bool {
        matches!(self.kind, Kind::Send) || matches!(self.wr.opcode, WrOpcode::RdmaWriteWithImm { .. })
    }

    /// PSNs the request uses: one per packet, READ as many as response packets, atomics one.
    fn npkts(&self, mtu: u32) -> u32 {
        match self.kind {
            Kind::Atomic => 1,
            _ => self.len.div_ceil(mtu).max(1),
        }
    }
}

/// Requester settings taken from the QP attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReqConfig {
    pub(crate) transport: Transport,
    /// The QP's Q_Key (UD).
    pub(crate) qkey: u32,
    pub(crate) qpn: u32,
    /// The QP's protection domain: READ responses and atomic results land only in its regions.
    pub(crate) pd: u32,
    pub(crate) dest_qp: u32,
    pub(crate) mtu: u32,
    /// Local ACK timeout; `None` for timeout 0 (no retransmission timer).
    pub(crate) timeout: Option<Duration>,
    /// Retries allowed without forward progress (`retry_cnt` or the `max_retries` extension).
    pub(crate) retry_limit: u32,
    pub(crate) rnr_retry: u8,
    pub(crate) max_rd_atomic: usize,
    pub(crate) sq_sig_all: bool,
    /// The limit on unacknowledged PSNs (RC).
    pub(crate) window: SendWindow,
}

/// `4.096 us x 2^timeout`, or no timer for 0.
pub fn ack_timeout(code: u8) -> Option<Duration> {
    (code != 0).then(|| Duration::from_nanos(4096u64 << code.min(31)))
}

/// What a requester saw and did (per QP; `Context::stats` sums them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReqCounters {
    /// Packets sent (first transmissions and retransmissions).
    pub packets: u64,
    /// Go-back-N retries started (timeouts, PSN sequence NAKs, lost READ/atomic responses).
    pub retries: u64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Tail probes: the last packet sent again when its ACK is late (see `Requester::probe_tail`).
    pub tail_probes: u64,
    /// RNR NAKs received.
    pub rnr_naks: u64,
    /// PSN sequence error NAKs received.
    pub seq_naks: u64,
    /// Other NAKs received (invalid request, remote access, remote operational).
    pub error_naks: u64,
    /// Times the adaptive send window was cut (halved on a loss round, or to its floor on a
    /// timeout; see [`SendWindow::Adaptive`]).
    pub window_cuts: u64,
}

/// Requester and completer state of one RC QP.
#[derive(Debug)]
pub(crate) struct Requester {
    pub(crate) cfg: ReqConfig,
    pub(crate) sq: VecDeque<SendWqe>,
    /// Inline-data buffers of finished requests, reused by the next INLINE posts.
    pub(crate) spare_inline: Vec<Vec<u8>>,
    /// Index in `sq` of the request being sent.
    pub(crate) next: usize,
    /// Bytes of `sq[next]` already sent.
    pub(crate) offset: u32,
    /// Next PSN to send.
    pub(crate) psn: u32,
    /// Oldest PSN not yet acknowledged.
    pub(crate) comp_psn: u32,
    /// One past the highest PSN ever sent: responses beyond it are bogus.
    pub(crate) high_psn: u32,
    noack: u32,
    pub(crate) retry_left: u32,
    pub(crate) rnr_left: u8,
    pub(crate) retrans_at: Option<Duration>,
    /// When to send a tail probe (RC, everything sent, some of it unacknowledged).
    pub(crate) probe_at: Option<Duration>,
    /// Probes sent since the last forward progress (at most [`MAX_PROBES`] per stall).
    pub(crate) probes: u8,
    pub(crate) rnr_until: Option<Duration>,
    /// The `comp_psn` of the last retry, so one gap does not start many retries.
    pub(crate) retried_at: Option<u32>,
    /// Completions for the send CQ.
    pub(crate) done: VecDeque<WorkCompletion>,
    /// Next message sequence number.
    next_ssn: u32,
    /// Messages below this SSN may start (MSN + credits of the last ACK); `None` = no limit
    /// (credit code 31, what rxe always sends).
    pub(crate) credit_limit: Option<u32>,
    pub(crate) counters: ReqCounters,
    /// The adaptive send window (RC with [`SendWindow::Adaptive`]; `None`: rxe's fixed 128).
    pub(crate) win: Option<LossWindow>,
    /// `comp_psn` when the window last counted acknowledged PSNs.
    pub(crate) win_mark: u32,
    /// Round-trip estimate (from an AckReq packet's first transmission to the response that
    /// acknowledges it) and the retransmission timeout it gives, and the packet being timed (PSN,
    /// when sent).
    pub(crate) rtt: RttEstimator,
    pub(crate) timed: Option<(u32, Duration)>,
    /// The next packet is a tail probe: it asks for an ACK whatever its position.
    probe_pkt: bool,
    /// A probe in go-back-N recovery resends the oldest unacknowledged packet and then the last
    /// one sent, and a resend of lost packets alone goes on where sending was: the send position
    /// (`next`, `offset`, `psn`) to jump to.
    pub(crate) resume: Option<(usize, u32, u32)>,
    /// The PSN after whose transmission `resume` applies (`None`: after the next packet).
    resume_after: Option<u32>,
    /// A loss inside a SEND or a WRITE went out as a resend of the lost packet alone
    /// (`Requester::resend_oldest`): the last PSN resent, and one past the highest PSN sent
    /// before. The ACK that covers it says whether the responder kept what
    /// followed.
    pub(crate) selective: Option<(u32, u32)>,
    /// Whether the responder keeps the packets that follow a gap (softrdma) or drops them
    /// and waits for a go-back-N (rxe); `None` until losses showed it: once it kept something,
    /// or twice it kept nothing (what followed a gap can be lost too).
    pub(crate) peer_places_ahead: Option<bool>,
    /// One-packet resends whose ACK showed nothing kept, while `peer_places_ahead` is `None`.
    pub(crate) kept_nothing: u8,
}

impl Requester {
    pub(crate) fn new(cfg: ReqConfig, sq_psn: u32) -> Requester {
        Requester {
            cfg,
            sq: VecDeque::new(),
            spare_inline: Vec::new(),
            next: 0,
            offset: 0,
            psn: sq_psn,
            comp_psn: sq_psn,
            high_psn: sq_psn,
            noack: 0,
            retry_left: cfg.retry_limit,
            rnr_left: cfg.rnr_retry,
            retrans_at: None,
            probe_at: None,
            probes: 0,
            rnr_until: None,
            retried_at: None,
            done: VecDeque::new(),
            next_ssn: 0,
            // No credits are known before the first ACK: one message may go as a probe.
            credit_limit: Some(0),
            counters: ReqCounters::default(),
            win: (cfg.transport == Transport::Rc).then(|| LossWindow::of(cfg.window)).flatten(),
            win_mark: sq_psn,
            rtt: RttEstimator::default(),
            timed: None,
            probe_pkt: false,
            resume: None,
            resume_after: None,
            selective: None,
            peer_places_ahead: None,
            kept_nothing: 0,
        }
    }

    /// Switches the send window (`modify_qp` at RTS); an adaptive one starts at the cap again.
    pub(crate) fn set_window(&mut self, window: SendWindow) {
        self.cfg.window = window;
        self.win = (self.cfg.transport == Transport::Rc).then(|| LossWindow::of(window)).flatten();
        self.win_mark = self.comp_psn;
    }

    /// Unacknowledged PSNs allowed now: the adaptive window, or rxe's 128.
    pub(crate) fn window(&self) -> u32 {
        self.win.as_ref().map_or(MAX_UNACKED_PSNS as u32, LossWindow::limit)
    }

    /// AckReq at least every this many packets: rxe's 64, or half the window when that is smaller,
    /// so that a full window always holds a packet that asks for an ACK (and two, for an ACK
    /// clock).
    pub(crate) fn ack_every(&self) -> u32 {
        MAX_PKT_PER_ACK.min((self.window() / 2).max(1))
    }

    /// True when the window is full: nothing more may go before an acknowledgement.
    fn window_full(&self) -> bool {
        self.cfg.transport == Transport::Rc && psn::diff(self.psn, self.comp_psn) >= self.window() as i32
    }

    /// Takes the end-to-end credits of an ACK (roce-wire.md §3): the responder accepts messages
    /// below `msn + credits`; code 31 means no limit.
    pub(crate) fn update_credits(&mut self, code: u8, msn: u32) {
        self.credit_limit = credit_count(code).map(|c| psn::add(msn, c));
    }

    /// True while some sent request is not complete.
    pub(crate) fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|w| w.sent)
    }

    /// Resends the oldest unacknowledged packets up to PSN `end`, then goes on from where sending
    /// was.
    pub(crate) fn resend_oldest(&mut self, end: u32) {
        let at = (self.next, self.offset, self.psn);
        self.rewind();
        if psn::diff(at.2, psn::add(end, 1)) > 0 {
            self.resume = Some(at);
            self.resume_after = Some(end);
        }
        self.probe_pkt = true;
    }

    /// Go-back-N: the next packet is the oldest unacknowledged one.
    pub(crate) fn rewind(&mut self) {
        self.next = 0;
        self.noack = 0;
        // What was being timed may be sent again: its ACK would not say which copy it answers
        // (Karn).
        self.timed = None;
        self.resume = None;
        self.resume_after = None;
        self.probe_pkt = false;
        self.psn = self.comp_psn;
        self.offset = match self.sq.front() {
            Some(w) if w.sent && w.kind != Kind::Atomic => {
                let idx = psn::diff(self.comp_psn, w.first_psn).max(0) as u32;
                idx.saturating_mul(self.cfg.mtu).min(w.len)
            }
            _ => 0,
        };
    }

    /// The earliest deadline: retransmission, tail probe or the end of an RNR wait.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        [self.retrans_at, self.probe_at, self.rnr_until].into_iter().flatten().min()
    }

    /// The retransmission timeout now: the local ACK timeout stretched to the measured round trip
    /// (at most 4x, see [`RttEstimator`]); `None` without a timer.
    pub(crate) fn rto(&self) -> Option<Duration> {
        self.cfg.timeout.map(|t| self.rtt.rto(t))
    }

    /// How long the ACK of a tail may be late before a probe: 1/16 of the local ACK timeout, at
    /// most 1 ms. When the requester is held back with more to send (by the window, credits or
    /// the READ/atomic limit) rather than done, ACKs come as a clock, one or two a round trip:
    /// then twice the smoothed round trip once one has been timed (TCP's tail loss probe), at
    /// least 10 us and at most half the timeout.
    fn probe_delay(&self, done: bool) -> Option<Duration> {
        let t = self.cfg.timeout?;
        Some(match self.rtt.srtt() {
            Some(srtt) if !done => (srtt * 2).max(Duration::from_micros(10)).min(t / 2),
            _ => (t / 16).min(Duration::from_millis(1)),
        })
    }

    /// Arms the tail probe if the requester can send nothing more now (everything queued is on the
    /// wire, or the window or another limit holds the rest back), some of it is unacknowledged,
    /// and fewer than [`MAX_PROBES`] went out since the last progress.
    pub(crate) fn arm_probe(&mut self, now: Duration) {
        let done = self.next == self.sq.len();
        let stalled = self.cfg.transport == Transport::Rc
            && self.outstanding()
            && self.rnr_until.is_none()
            && (done || !self.ready());
        // Each probe of a stall waits twice as long as the one before.
        let next = self.probe_delay(done).map(|d| now + d * (1 << self.probes));
        self.probe_at = if stalled && self.probes < MAX_PROBES { next } else { None };
    }

    /// A tail probe (as TCP's tail loss probe): when the last packet's ACK is late and nothing else
    /// may go (everything is sent, or the window is full), send that packet once more, asking for
    /// an ACK, instead of waiting out the whole ACK timeout. The responder answers a duplicate with
    /// an ACK of everything it has, the packet itself (if it was the one lost) with an ACK, and a
    /// gap before it with a PSN sequence NAK, so a lost tail (the last packets of a burst that
    /// overflowed a queue) or a lost ACK is repaired after `probe_delay` rather than the full
    /// timeout, before a peer that has finished tears its QP down. With more than one packet
    /// unacknowledged the oldest goes first: a responder that NAKed a gap stays silent about it
    /// (one NAK per gap) until the packet it expects arrives, so when that NAK was lost, or the
    /// first retransmission (in a queue still full of the burst that overflowed it), only that
    /// packet moves it; the last one then shows whether the tail is missing too. Up to
    /// [`MAX_PROBES`] per stall, each after twice the wait of the one before (a probe, or its
    /// answer, can be lost too: on a path that loses 1 % both ways, a stall that one probe left
    /// unrepaired cost a whole timeout, 67 ms at perftest's default, some 3 times in 20,000
    /// messages); probes do not count as retries. Only when every request sent is a SEND or WRITE (a
    /// READ or atomic request cannot be repeated out of order).
    pub(crate) fn probe_tail(&mut self) {
        let mtu = self.cfg.mtu;
        let plain = self.sq.iter().filter(|w| w.sent).all(|w| matches!(w.kind, Kind::Send | Kind::Write));
        let unacked = psn::diff(self.psn, self.comp_psn);
        if !plain || self.rnr_until.is_some() || !self.outstanding() || unacked <= 0 {
            return;
        }
        // The last packet sent is just before the send position: in the request being sent
        // (a full-MTU FIRST or MIDDLE), or the last packet of the one before it.
        let (index, offset) = if self.offset > 0 {
            (self.next, self.offset.saturating_sub(mtu))
        } else {
            let Some(i) = self.next.checked_sub(1) else { return };
            let w = &self.sq[i];
            (i, (w.npkts(mtu) - 1).saturating_mul(mtu).min(w.len))
        };
        let last = psn::add(self.psn, psn::MASK);
        self.probes += 1;
        self.counters.tail_probes += 1;
        tracing::debug!(
            qpn = self.cfg.qpn,
            oldest = self.comp_psn,
            last,
            "tail probe: resending the oldest and last packets"
        );
        if unacked > 1 {
            self.rewind();
            self.resume = Some((index, offset, last));
        } else {
            (self.next, self.offset, self.psn) = (index, offset, last);
        }
        self.probe_pkt = true;
        // Its ACK would not tell which transmission it answers (Karn).
        self.timed = None;
    }

    fn read_atomic_in_flight(&self) -> usize {
        self.sq.iter().take(self.next).filter(|w| matches!(w.kind, Kind::Read | Kind::Atomic)).count()
    }

    /// Whether a request packet may go now: one is queued and the window, the READ/atomic limit, a
    /// fence, the credits and an RNR wait allow it (what [`poll`](Self::poll) checks first).
    pub(crate) fn ready(&self) -> bool {
        if self.rnr_until.is_some() {
            return false;
        }
        let Some(w) = self.sq.get(self.next) else { return false };
        // The window counts unacknowledged PSNs: RC only (UC and UD are never acknowledged).
        if self.window_full() {
            return false;
        }
        let ordered = matches!(w.kind, Kind::Read | Kind::Atomic);
        if ordered && self.read_atomic_in_flight() >= self.cfg.max_rd_atomic {
            return false;
        }
        if w.wr.flags.contains(SendFlags::FENCE) && self.offset == 0 && self.read_atomic_in_flight() > 0 {
            return false;
        }
        if self.cfg.transport == Transport::Rc && !w.sent && w.consumes_rwqe() {
            // Credits: beyond the limit only as a probe, with nothing else outstanding.
            if let Some(limit) = self.credit_limit {
                if psn::diff(self.next_ssn, limit) >= 0 && self.outstanding() {
                    return false;
                }
            }
        }
        true
    }

    /// The next request packet, if [`ready`](Self::ready).
    pub(crate) fn poll(&mut self, now: Duration) -> Option<TxDesc> {
        if !self.ready() {
            return None;
        }
        let mtu = self.cfg.mtu;
        let psn = self.psn;
        let index = self.next;
        let offset = self.offset;
        let transport = self.cfg.transport;
        let w = &mut self.sq[index];
        if offset == 0 {
            w.first_psn = psn;
            w.last_psn = psn::add(psn, w.npkts(mtu) - 1);
            if !w.sent {
                w.ssn = self.next_ssn;
                self.next_ssn = psn::add(self.next_ssn, 1);
            }
            w.sent = true;
        }
        let dest_qp = w.ud.map_or(self.cfg.dest_qp, |u| u.qpn);
        let mut bth = BthRepr::new(Opcode(0), dest_qp, psn);
        let mut pkt = RoceRepr::new(bth, &[]);
        if let Some(u) = w.ud {
            pkt.deth = Some(DethRepr { qkey: u.qkey, reserved: 0, src_qp: self.cfg.qpn });
        }
        let op = |o: Operation| Opcode::new(transport, o).unwrap_or(Opcode(0));
        let mut payload = TxPayload::None;
        let consumed;
        let message_done;
        match (w.kind, w.wr.opcode) {
            (Kind::Send | Kind::Write, opcode) => {
                let n = (w.len - offset).min(mtu);
                let first = offset == 0;
                let last = offset + n >= w.len;
                use Operation::*;
                let o = match (opcode, first, last) {
                    (WrOpcode::Send, true, true) => SendOnly,
                    (WrOpcode::SendWithImm { imm }, true, true) => {
                        pkt.immdt = Some(ImmDt(imm));
                        SendOnlyImm
                    }
                    (WrOpcode::SendWithInv { invalidate_rkey }, true, true) => {
                        pkt.ieth = Some(IethRepr { rkey: invalidate_rkey });
                        SendOnlyInv
                    }
                    (
                        WrOpcode::Send | WrOpcode::SendWithImm { .. } | WrOpcode::SendWithInv { .. },
                        true,
                        false,
                    ) => SendFirst,
                    (
                        WrOpcode::Send | WrOpcode::SendWithImm { .. } | WrOpcode::SendWithInv { .. },
                        false,
                        false,
                    ) => SendMiddle,
                    (WrOpcode::Send, false, true) => SendLast,
                    (WrOpcode::SendWithImm { imm }, false, true) => {
                        pkt.immdt = Some(ImmDt(imm));
                        SendLastImm
                    }
                    (WrOpcode::SendWithInv { invalidate_rkey }, false, true) => {
                        pkt.ieth = Some(IethRepr { rkey: invalidate_rkey });
                        SendLastInv
                    }
                    (WrOpcode::RdmaWrite { remote_addr, rkey }, true, l) => {
                        pkt.reth = Some(RethRepr { va: remote_addr, rkey, dma_len: w.len });
                        if l { WriteOnly } else { WriteFirst }
                    }
                    (WrOpcode::RdmaWriteWithImm { remote_addr, rkey, imm }, true, l) => {
                        pkt.reth = Some(RethRepr { va: remote_addr, rkey, dma_len: w.len });
                        if l {
                            pkt.immdt = Some(ImmDt(imm));
                            WriteOnlyImm
                        } else {
                            WriteFirst
                        }
                    }
                    (WrOpcode::RdmaWriteWithImm { imm, .. }, false, true) => {
                        pkt.immdt = Some(ImmDt(imm));
                        WriteLastImm
                    }
                    (_, false, true) => WriteLast,
                    (_, false, false) => WriteMiddle,
                    // READ and atomics are not Kind::Send/Write.
                    (_, true, _) => return None,
                };
                bth.opcode = op(o);
                bth.solicited = last && w.wr.flags.contains(SendFlags::SOLICITED);
                self.noack += 1;
                // UC and UD never ask for an ACK (§1.6). A message's last packet asks too, unless
                // another packet goes right behind it (decided below).
                bth.ack_req =
                    transport == Transport::Rc && (self.noack >= self.ack_every() || self.probe_pkt);
                if n > 0 {
                    payload = TxPayload::Wqe { index, offset, len: n };
                }
                consumed = 1;
                message_done = last;
                self.offset += n;
            }
            (Kind::Read, WrOpcode::RdmaRead { remote_addr, rkey }) => {
                bth.opcode = op(Operation::ReadRequest);
                let rest = w.len - offset;
                pkt.reth =
                    Some(RethRepr { va: remote_addr.wrapping_add(u64::from(offset)), rkey, dma_len: rest });
                bth.ack_req = true;
                consumed = rest.div_ceil(mtu).max(1);
                message_done = true;
            }
            (Kind::Atomic, WrOpcode::AtomicCmpAndSwp { remote_addr, rkey, compare, swap }) => {
                bth.opcode = op(Operation::CompareSwap);
                pkt.atomic_eth = Some(AtomicEthRepr { va: remote_addr, rkey, swap_add: swap, compare });
                bth.ack_req = true;
                consumed = 1;
                message_done = true;
            }
            (Kind::Atomic, WrOpcode::AtomicFetchAndAdd { remote_addr, rkey, add }) => {
                bth.opcode = op(Operation::FetchAdd);
                pkt.atomic_eth = Some(AtomicEthRepr { va: remote_addr, rkey, swap_add: add, compare: 0 });
                bth.ack_req = true;
                consumed = 1;
                message_done = true;
            }
            // Kind::of derives the kind from the opcode, so no other pair exists.
            _ => return None,
        }
        let first_transmission = psn::diff(psn, self.high_psn) >= 0;
        self.probe_pkt = false;
        self.counters.packets += 1;
        self.psn = psn::add(psn, consumed);
        if psn::diff(self.psn, self.high_psn) > 0 {
            self.high_psn = self.psn;
        }
        if message_done {
            self.next += 1;
            self.offset = 0;
        }
        if self.resume_after.is_none_or(|end| end == psn) {
            if let Some((next, offset, psn)) = self.resume.take() {
                (self.next, self.offset, self.psn) = (next, offset, psn);
                self.resume_after = None;
                self.probe_pkt = true;
            }
        }
        let reliable = transport == Transport::Rc;
        // A message's last packet asks for an ACK when nothing can follow it now (the queue is
        // empty, or the window, credits, a fence or the READ/atomic limit hold the next back): an
        // ACK covers every earlier PSN, so a burst of messages draws one ACK at its end (and one
        // every `ack_every` packets), where rxe asks at every message's end.
        if reliable && message_done && !bth.ack_req && !self.ready() {
            bth.ack_req = true;
        }
        if bth.ack_req {
            self.noack = 0;
        }
        pkt.bth = bth;
        // Time a first transmission that asks for an ACK, one at a time.
        if bth.ack_req && self.timed.is_none() && first_transmission {
            self.timed = Some((psn, now));
        }
        if reliable && self.retrans_at.is_none() {
            self.retrans_at = self.rto().map(|t| now + t);
        }
        if reliable {
            self.arm_probe(now);
        }
        let template = self.sq[index].ud.map(|u| u.template);
        // UC and UD complete a request when its last packet is on the wire.
        Some(TxDesc { packet: pkt, payload, template, completes: !reliable && message_done })
    }

    /// Completes the oldest request with `status` (a completion is generated if the request is
    /// signaled or failed).
    pub(crate) fn complete_front(&mut self, status: WcStatus) {
        let Some(w) = self.sq.pop_front() else { return };
        if self.next > 0 {
            self.next -= 1;
        } else {
            self.offset = 0;
        }
        if status != WcStatus::Success || self.cfg.sq_sig_all || w.wr.flags.contains(SendFlags::SIGNALED) {
            self.done.push_back(self.wc(&w, status));
        }
        self.retire(w);
    }

    pub(crate) fn wc(&self, w: &SendWqe, status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            wr_id: w.wr.wr_id,
            status,
            opcode: w.wr.opcode.wc_opcode(),
            byte_len: w.len,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.cfg.qpn,
            src_qp: self.cfg.dest_qp,
            src_gid: None,
            solicited: false,
        }
    }

    /// Fails request `index` with `status` and flushes every other one (QP to error).
    pub(crate) fn fail(&mut self, index: usize, status: WcStatus) {
        for (i, w) in std::mem::take(&mut self.sq).into_iter().enumerate() {
            let s = if i == index { status } else { WcStatus::WrFlushErr };
            let wc = self.wc(&w, s);
            self.done.push_back(wc);
        }
        self.next = 0;
        self.offset = 0;
        self.resume = None;
        self.resume_after = None;
        self.retrans_at = None;
        self.probe_at = None;
        self.rnr_until = None;
    }
}

mod inline;
#[cfg(test)]
mod loss_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemTable;
    use crate::types::{Access, Sge, WcOpcode};
    use wire::ib::{AethRepr, NakCode};

    pub(super) const MTU: u32 = 256;

    /// An RC requester (the default adaptive window, timeout code 8, 2 retries, MTU 256) and a
    /// 64 KiB region: (requester, memory, lkey, address).
    pub(super) fn setup(sq_psn: u32) -> (Requester, MemTable, u32, u64) {
        let mut mem = MemTable::default();
        let (key, addr) = mem.register(1, 65536, Access::LOCAL_WRITE).unwrap();
        let cfg = ReqConfig {
            transport: Transport::Rc,
            qkey: 0,
            qpn: 0x11,
            pd: 1,
            dest_qp: 0x12,
            mtu: MTU,
            timeout: ack_timeout(8),
            retry_limit: 2,
            rnr_retry: 7,
            max_rd_atomic: 2,
            sq_sig_all: true,
            window: SendWindow::Adaptive { min: SendWindow::DEFAULT_MIN },
        };
        let mut r = Requester::new(cfg, sq_psn);
        // A peer like rxe: "no credit information" (credits have their own test).
        r.credit_limit = None;
        (r, mem, key, addr)
    }

    pub(super) fn push(r: &mut Requester, wr_id: u64, opcode: WrOpcode, key: u32, addr: u64, len: u32) {
        let sg_list = vec![Sge { addr, length: len, lkey: key }];
        r.sq.push_back(SendWqe::new(SendWr::new(wr_id, opcode, sg_list).borrowed(), None, len, None));
    }

    /// Every packet the requester sends now: (opcode, PSN, AckReq).
    pub(super) fn drain(r: &mut Requester, now: Duration) -> Vec<(u8, u32, bool)> {
        std::iter::from_fn(|| r.poll(now))
            .map(|d| (d.packet.bth.opcode.0, d.packet.bth.psn, d.packet.bth.ack_req))
            .collect()
    }

    pub(super) fn ack(
        r: &mut Requester,
        mem: &mut MemTable,
        now: Duration,
        psn: u32,
        aeth: AethRepr,
    ) -> Result<(), (usize, WcStatus)> {
        let mut p = RoceRepr::new(BthRepr::new(Opcode(0x11), 0x11, psn), &[]);
        p.aeth = Some(aeth);
        r.handle_response(now, Operation::Acknowledge, &p, mem)
    }

    #[test]
    fn segments_by_mtu_across_the_psn_wrap() {
        let (mut r, _, key, addr) = setup(0xFF_FFFF);
        push(&mut r, 1, WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 9 }, key, addr, 600);
        push(&mut r, 2, WrOpcode::RdmaRead { remote_addr: 0x1000, rkey: 9 }, key, addr, 600);
        push(&mut r, 3, WrOpcode::SendWithImm { imm: 7 }, key, addr, 0);
        let pkts = drain(&mut r, Duration::ZERO);
        // WRITE FIRST/MIDDLE/LAST, READ (3 PSNs), SEND_ONLY_IMM. The READ follows the WRITE at
        // once, so the WRITE asks for no ACK: the READ's response acknowledges it.
        assert_eq!(
            pkts,
            vec![
                (0x06, 0xFF_FFFF, false),
                (0x07, 0, false),
                (0x08, 1, false),
                (0x0C, 2, true),
                (0x05, 5, true)
            ]
        );
        assert_eq!((r.sq[1].first_psn, r.sq[1].last_psn), (2, 4));
        assert_eq!(r.high_psn, 6);
    }

    #[test]
    fn window_of_128_unacknowledged_psns() {
        let (mut r, mut mem, key, addr) = setup(100);
        for i in 0..200 {
            push(&mut r, i, WrOpcode::Send, key, addr, 8);
        }
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 128);
        ack(&mut r, &mut mem, Duration::ZERO, 100 + 9, AethRepr::ack(0x1F, 10)).unwrap();
        assert_eq!(r.done.len(), 10);
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 10, "ten more fit once ten are acknowledged");
    }

    #[test]
    fn nak_sequence_error_goes_back_n_and_acks_what_came_before() {
        let (mut r, mut mem, key, addr) = setup(0);
        // rxe's responder: it drops what follows a gap.
        r.peer_places_ahead = Some(false);
        for i in 0..5 {
            push(&mut r, i, WrOpcode::Send, key, addr, 8);
        }
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 5);
        ack(&mut r, &mut mem, Duration::ZERO, 2, AethRepr::nak(NakCode::PsnSequenceError, 2)).unwrap();
        let done: Vec<u64> = r.done.iter().map(|w| w.wr_id).collect();
        assert_eq!(done, vec![0, 1]);
        assert_eq!(drain(&mut r, Duration::ZERO).iter().map(|p| p.1).collect::<Vec<_>>(), vec![2, 3, 4]);
        // The same NAK again (a duplicate on the wire) does not start another retry.
        ack(&mut r, &mut mem, Duration::ZERO, 2, AethRepr::nak(NakCode::PsnSequenceError, 2)).unwrap();
        assert!(drain(&mut r, Duration::ZERO).is_empty());
    }

    #[test]
    fn timeouts_retry_then_fail_with_retry_exceeded() {
        let (mut r, mut mem, key, addr) = setup(0);
        push(&mut r, 1, WrOpcode::Send, key, addr, 600);
        let t = ack_timeout(8).unwrap();
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 3);
        // First the tail probe, at 1/16 of the timeout: the oldest and the last packet once
        // more, not a retry.
        let probe = t / 16;
        assert_eq!(r.poll_timeout(), Some(probe));
        r.handle_timeout(probe).unwrap();
        assert_eq!(drain(&mut r, probe), vec![(0x00, 0, true), (0x02, 2, true)]);
        assert_eq!((r.counters.tail_probes, r.counters.retries, r.retry_left), (1, 0, 2));
        // Two more probes, each after twice the wait of the one before; then the timeout.
        let mut at = probe;
        for k in 1..MAX_PROBES {
            at += probe * (1 << k);
            assert_eq!(r.poll_timeout(), Some(at));
            r.handle_timeout(at).unwrap();
            assert_eq!(drain(&mut r, at), vec![(0x00, 0, true), (0x02, 2, true)]);
        }
        assert_eq!((r.counters.tail_probes, r.counters.retries), (3, 0));
        assert_eq!(r.poll_timeout(), Some(t));
        // retry_limit 2: two timeouts resend everything, the third fails. Each timeout doubles
        // the next one (t, 2t, then 4t at most): the first at t, the second 2t later.
        let mut now = t;
        for wait in [t * 2, t * 4] {
            r.handle_timeout(now).unwrap();
            assert_eq!(drain(&mut r, now).iter().map(|p| p.1).collect::<Vec<_>>(), vec![0, 1, 2]);
            assert_eq!(r.retrans_at, Some(now + wait));
            now += wait;
        }
        // An ACK of the first packet is progress: the budget is full and the back-off over.
        ack(&mut r, &mut mem, now, 0, AethRepr::ack(0x1F, 0)).unwrap();
        assert_eq!(r.retry_left, 2);
        assert_eq!(r.retrans_at, Some(now + t));
        for wait in [t, t * 2] {
            now += wait;
            r.handle_timeout(now).unwrap();
            assert_eq!(drain(&mut r, now).iter().map(|p| p.1).collect::<Vec<_>>(), vec![1, 2]);
        }
        assert_eq!(r.handle_timeout(now + t * 4), Err((0, WcStatus::RetryExcErr)));
    }

    fn resp(op: u8, psn: u32, payload: &[u8]) -> RoceRepr<'_> {
        let mut p = RoceRepr::new(BthRepr::new(Opcode(op), 0x11, psn), payload);
        if op != 0x0E {
            p.aeth = Some(AethRepr::ack(0x1F, 1));
        }
        p
    }

    /// Hands the requester a READ response carrying `data[range]`.
    fn feed(
        r: &mut Requester,
        mem: &mut MemTable,
        data: &[u8],
        op: Operation,
        code: u8,
        psn: u32,
        range: std::ops::Range<usize>,
    ) {
        r.handle_response(Duration::ZERO, op, &resp(code, psn, &data[range]), mem).unwrap();
    }

    #[test]
    fn read_responses_land_in_order_and_gaps_retry_the_rest() {
        let (mut r, mut mem, key, addr) = setup(10);
        push(&mut r, 1, WrOpcode::RdmaRead { remote_addr: 0x8000, rkey: 9 }, key, addr, 600);
        assert_eq!(drain(&mut r, Duration::ZERO), vec![(0x0C, 10, true)]);
        let data: Vec<u8> = (0..600).map(|i| (i % 251) as u8).collect();
        feed(&mut r, &mut mem, &data, Operation::ReadResponseFirst, 0x0D, 10, 0..256);
        // PSN 11 lost: the LAST at 12 is a gap, so the READ is asked for again from PSN 11.
        feed(&mut r, &mut mem, &data, Operation::ReadResponseLast, 0x0F, 12, 512..600);
        let again: Vec<_> = std::iter::from_fn(|| r.poll(Duration::ZERO)).collect();
        assert_eq!(again.len(), 1);
        let reth = again[0].packet.reth.unwrap();
        assert_eq!((again[0].packet.bth.psn, reth.va, reth.dma_len), (11, 0x8000 + 256, 344));
        feed(&mut r, &mut mem, &data, Operation::ReadResponseMiddle, 0x0E, 11, 256..512);
        feed(&mut r, &mut mem, &data, Operation::ReadResponseLast, 0x0F, 12, 512..600);
        let wc = r.done.pop_front().unwrap();
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
            (1, WcStatus::Success, WcOpcode::RdmaRead, 600)
        );
        assert_eq!(&mem.bytes(key).unwrap()[..600], &data[..]);
    }

    #[test]
    fn credits_hold_back_sends_beyond_the_limit_but_allow_a_probe() {
        let (mut r, mut mem, key, addr) = setup(0);
        r.credit_limit = Some(0);
        for i in 0..4 {
            push(&mut r, i, WrOpcode::Send, key, addr, 8);
        }
        push(&mut r, 9, WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 1 }, key, addr, 8);
        // No credits known: one probe.
        assert_eq!(drain(&mut r, Duration::ZERO), vec![(0x04, 0, true)]);
        // ACK: MSN 1, code 2 = two more receive WQEs, so messages 1 and 2 may go.
        ack(&mut r, &mut mem, Duration::ZERO, 0, AethRepr::ack(2, 1)).unwrap();
        assert_eq!(drain(&mut r, Duration::ZERO).iter().map(|p| p.1).collect::<Vec<_>>(), vec![1, 2]);
        // Code 31 (rxe): no limit; the last SEND and the WRITE (no receive WQE needed) go.
        ack(&mut r, &mut mem, Duration::ZERO, 2, AethRepr::ack(0x1F, 3)).unwrap();
        assert_eq!(drain(&mut r, Duration::ZERO).iter().map(|p| p.1).collect::<Vec<_>>(), vec![3, 4]);
    }

    #[test]
    fn tail_probes_only_send_and_write_tails_and_rearm_on_progress() {
        let (mut r, mut mem, key, addr) = setup(0);
        push(&mut r, 1, WrOpcode::Send, key, addr, 8);
        push(&mut r, 2, WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 9 }, key, addr, 300);
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 3);
        let probe = ack_timeout(8).unwrap() / 16;
        r.handle_timeout(probe).unwrap();
        // The oldest unacknowledged packet (the SEND_ONLY) and the WRITE's last (PSN 2,
        // WRITE_LAST), both with AckReq.
        assert_eq!(drain(&mut r, probe), vec![(0x04, 0, true), (0x08, 2, true)]);
        // An ACK of the SEND is progress: the probe re-arms for the rest.
        ack(&mut r, &mut mem, probe * 2, 0, AethRepr::ack(0x1F, 1)).unwrap();
        assert_eq!(r.poll_timeout(), Some(probe * 3));
        // All acknowledged: no probe, no timer.
        ack(&mut r, &mut mem, probe * 2, 2, AethRepr::ack(0x1F, 2)).unwrap();
        assert_eq!(r.poll_timeout(), None);
        // A READ tail is never probed.
        push(&mut r, 3, WrOpcode::RdmaRead { remote_addr: 0x1000, rkey: 9 }, key, addr, 8);
        assert_eq!(drain(&mut r, probe * 2).len(), 1);
        r.handle_timeout(probe * 4).unwrap();
        assert!(drain(&mut r, probe * 4).is_empty());
        assert_eq!(r.counters.tail_probes, 1);
    }

    #[test]
    fn rnr_nak_waits_the_timer_then_resends() {
        let (mut r, mut mem, key, addr) = setup(0);
        push(&mut r, 1, WrOpcode::Send, key, addr, 8);
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 1);
        // Timer code 14 = 1.28 ms.
        ack(&mut r, &mut mem, Duration::ZERO, 0, AethRepr::rnr_nak(14, 0)).unwrap();
        assert!(drain(&mut r, Duration::from_millis(1)).is_empty());
        assert_eq!(r.poll_timeout(), Some(Duration::from_micros(1280)));
        r.handle_timeout(Duration::from_micros(1280)).unwrap();
        assert_eq!(drain(&mut r, Duration::from_micros(1280)), vec![(0x04, 0, true)]);
    }
}
