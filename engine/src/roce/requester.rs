//! The RC requester: turns send work requests into packets, with go-back-N retransmission
//! (roce-wire.md §1.6). The completer, which consumes ACKs, NAKs and responses, is in
//! `completer.rs` and shares this state.

use super::{Kind, TxDesc, TxPayload};
use crate::verbs::{SendFlags, SendWr, WcStatus, WorkCompletion, WrOpcode};
use std::collections::VecDeque;
use std::time::Duration;
use wire::ib::{
    AtomicEthRepr, BthRepr, IethRepr, ImmDt, Opcode, Operation, RethRepr, RoceRepr, Transport, psn,
};

/// `RXE_MAX_UNACKED_PSNS`: the requester stops when it is this far ahead of the oldest unacked PSN.
pub const MAX_UNACKED_PSNS: i32 = 128;
/// `RXE_MAX_PKT_PER_ACK`: AckReq at least every this many packets.
pub const MAX_PKT_PER_ACK: u32 = 64;

/// A send work request on the send queue.
#[derive(Debug)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
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
    pub(crate) fn new(wr: SendWr, inline: Option<Vec<u8>>, len: u32) -> SendWqe {
        let kind = Kind::of(&wr.opcode);
        SendWqe { wr, inline, len, kind, sent: false, first_psn: 0, last_psn: 0 }
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
    pub(crate) qpn: u32,
    pub(crate) dest_qp: u32,
    pub(crate) mtu: u32,
    /// Local ACK timeout; `None` for timeout 0 (no retransmission timer).
    pub(crate) timeout: Option<Duration>,
    /// Retries allowed without forward progress (`retry_cnt` or the `max_retries` extension).
    pub(crate) retry_limit: u32,
    pub(crate) rnr_retry: u8,
    pub(crate) max_rd_atomic: usize,
    pub(crate) sq_sig_all: bool,
}

/// `4.096 us x 2^timeout`, or no timer for 0.
pub fn ack_timeout(code: u8) -> Option<Duration> {
    (code != 0).then(|| Duration::from_nanos(4096u64 << code.min(31)))
}

/// Requester and completer state of one RC QP.
#[derive(Debug)]
pub(crate) struct Requester {
    pub(crate) cfg: ReqConfig,
    pub(crate) sq: VecDeque<SendWqe>,
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
    pub(crate) rnr_until: Option<Duration>,
    /// The `comp_psn` of the last retry, so one gap does not start many retries.
    pub(crate) retried_at: Option<u32>,
    /// Completions for the send CQ.
    pub(crate) done: VecDeque<WorkCompletion>,
}

impl Requester {
    pub(crate) fn new(cfg: ReqConfig, sq_psn: u32) -> Requester {
        Requester {
            cfg,
            sq: VecDeque::new(),
            next: 0,
            offset: 0,
            psn: sq_psn,
            comp_psn: sq_psn,
            high_psn: sq_psn,
            noack: 0,
            retry_left: cfg.retry_limit,
            rnr_left: cfg.rnr_retry,
            retrans_at: None,
            rnr_until: None,
            retried_at: None,
            done: VecDeque::new(),
        }
    }

    /// True while some sent request is not complete.
    pub(crate) fn outstanding(&self) -> bool {
        self.sq.front().is_some_and(|w| w.sent)
    }

    /// Go-back-N: the next packet is the oldest unacknowledged one.
    pub(crate) fn rewind(&mut self) {
        self.next = 0;
        self.noack = 0;
        self.psn = self.comp_psn;
        self.offset = match self.sq.front() {
            Some(w) if w.sent && w.kind != Kind::Atomic => {
                let idx = psn::diff(self.comp_psn, w.first_psn).max(0) as u32;
                idx.saturating_mul(self.cfg.mtu).min(w.len)
            }
            _ => 0,
        };
    }

    /// The earliest deadline: retransmission or the end of an RNR wait.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        match (self.retrans_at, self.rnr_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn read_atomic_in_flight(&self) -> usize {
        self.sq.iter().take(self.next).filter(|w| matches!(w.kind, Kind::Read | Kind::Atomic)).count()
    }

    /// The next request packet, if the window, the READ/atomic limit, a fence or an RNR wait allow one.
    pub(crate) fn poll(&mut self, now: Duration) -> Option<TxDesc> {
        if self.rnr_until.is_some() {
            return None;
        }
        let mtu = self.cfg.mtu;
        let w = self.sq.get(self.next)?;
        if psn::diff(self.psn, self.comp_psn) >= MAX_UNACKED_PSNS {
            return None;
        }
        let ordered = matches!(w.kind, Kind::Read | Kind::Atomic);
        if ordered && self.read_atomic_in_flight() >= self.cfg.max_rd_atomic {
            return None;
        }
        if w.wr.flags.contains(SendFlags::FENCE) && self.offset == 0 && self.read_atomic_in_flight() > 0 {
            return None;
        }
        let psn = self.psn;
        let index = self.next;
        let offset = self.offset;
        let w = &mut self.sq[index];
        if offset == 0 {
            w.first_psn = psn;
            w.last_psn = psn::add(psn, w.npkts(mtu) - 1);
            w.sent = true;
        }
        let mut bth = BthRepr::new(Opcode(0), self.cfg.dest_qp, psn);
        let mut pkt = RoceRepr::new(bth, &[]);
        let op = |o: Operation| Opcode::new(Transport::Rc, o).unwrap_or(Opcode(0));
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
                bth.ack_req = last || self.noack >= MAX_PKT_PER_ACK;
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
        if bth.ack_req {
            self.noack = 0;
        }
        pkt.bth = bth;
        self.psn = psn::add(psn, consumed);
        if psn::diff(self.psn, self.high_psn) > 0 {
            self.high_psn = self.psn;
        }
        if message_done {
            self.next += 1;
            self.offset = 0;
        }
        if self.retrans_at.is_none() {
            self.retrans_at = self.cfg.timeout.map(|t| now + t);
        }
        Some(TxDesc { packet: pkt, payload })
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
        self.retrans_at = None;
        self.rnr_until = None;
    }
}
