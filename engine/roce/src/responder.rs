//! The responder: checks PSNs, executes SEND, WRITE, READ and atomics against the memory table,
//! and queues ACKs, NAKs, READ responses and atomic ACKs (roce-wire.md §1.7). RC as rxe does it;
//! UC without any response (a gap or an error loses the message); UD single-packet SENDs with a Q_Key
//! check and the 40-byte GRH area in front of the data (§1.8).
//!
//! Receive WQEs come from the queue the caller passes in: the QP's own receive queue or its SRQ. A
//! message keeps the WQE it started with until it ends.

use super::desc::{TxDesc, TxPayload};
use super::mem::{MemTable, sge_len};
use super::types::MAX_MSG_SIZE;
use super::types::{Access, RecvWr, WcOpcode, WcStatus, WorkCompletion};
use crate::types::SgList;
use ahead::{Ahead, Current, Keep, MAX_DMA_LEN, Slot};
pub use hold::{DEVICE_HOLD_PACKETS, HoldPool, HoldStats};
use std::collections::VecDeque;
use std::net::IpAddr;
use wire::ib::aeth::{CREDITS_INVALID, credit_code_for};
use wire::ib::{
    AethKind, AethRepr, AtomicAckEthRepr, BthRepr, NakCode, Opcode, Operation, RoceRepr, Transport, psn,
};

/// Replies waiting to be sent; duplicates beyond this are dropped (the requester retries).
const MAX_REPLIES: usize = 1024;
/// Bytes of GRH area in front of UD receive data.
pub const GRH_LEN: usize = 40;

/// A receive work request on a receive queue or SRQ.
#[derive(Debug)]
pub struct RecvWqe {
    /// Returned in the completion.
    pub(crate) wr_id: u64,
    /// Where the data goes.
    pub(crate) sg: SgList,
    pub(crate) len: u64,
}

impl RecvWqe {
    /// A receive WQE for `wr` (its SGEs are checked by whoever posts it), copied without
    /// allocating unless it has more than two SGEs.
    pub fn new(wr: &RecvWr) -> RecvWqe {
        RecvWqe { wr_id: wr.wr_id, sg: SgList::new(&wr.sg_list), len: sge_len(&wr.sg_list) }
    }
}

/// Responder settings taken from the QP attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RespConfig {
    pub(crate) transport: Transport,
    pub(crate) qpn: u32,
    pub(crate) dest_qp: u32,
    pub(crate) pd: u32,
    pub(crate) mtu: u32,
    pub(crate) access: Access,
    pub(crate) max_dest_rd_atomic: usize,
    pub(crate) min_rnr_timer: u8,
    /// The Q_Key UD packets must carry.
    pub(crate) qkey: u32,
    /// Receive WQEs come from an SRQ: ACKs carry no credits.
    pub(crate) srq: bool,
}

/// What a UD receive needs from the headers below BTH.
#[derive(Debug, Clone, Copy)]
pub struct RxMeta<'a> {
    /// Source address of the IP header.
    pub src: IpAddr,
    /// The IP header as received (IPv4 with options, or IPv6).
    pub ip_header: &'a [u8],
}

/// A message being received across several packets.
#[derive(Debug)]
enum InProgress {
    None,
    Send { wqe: RecvWqe, offset: u64 },
    Write { va: u64, rkey: u32, remaining: u32, total: u32 },
}

/// What a READ or atomic left behind, to answer its duplicates (responder resources).
#[derive(Debug, Clone, Copy)]
enum Resource {
    Read { first_psn: u32, last_psn: u32, va: u64, rkey: u32, len: u32 },
    Atomic { psn: u32, orig: u64 },
}

/// A queued response.
#[derive(Debug, Clone, Copy)]
enum Reply {
    Ack { psn: u32, aeth: AethRepr },
    AtomicAck { psn: u32, msn: u32, orig: u64 },
    Read { psn: u32, va: u64, rkey: u32, remaining: u32, first: bool, msn: u32 },
}

/// A responder failure: the NAK is queued; the QP goes to the error state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RespFatal;

/// Counters of packets the responder dropped on purpose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RespDrops {
    /// UD packets whose Q_Key did not match.
    pub qkey: u64,
    /// UD or UC messages dropped for want of a receive WQE.
    pub no_wqe: u64,
    /// UC messages dropped after a PSN gap or an error.
    pub uc_aborted: u64,
    /// PSN sequence error NAKs sent (RC).
    pub seq_naks_sent: u64,
    /// RNR NAKs sent (RC).
    pub rnr_naks_sent: u64,
    /// Duplicate requests seen (RC).
    pub duplicates: u64,
    /// Request packets kept after a gap, before it was filled (RC, `Responder::keep_ahead`).
    pub placed_ahead: u64,
    /// Request packets after a gap dropped because the device's [`HoldPool`] was spent (RC); the
    /// requester sends them again.
    pub not_held: u64,
    /// RC or UC packets (CNPs included) from an address other than the connected peer's.
    pub foreign_source: u64,
}

/// Responder state of one QP.
#[derive(Debug)]
pub(crate) struct Responder {
    pub(crate) cfg: RespConfig,
    /// Expected PSN.
    pub(crate) epsn: u32,
    /// Messages completed (24 bits).
    pub(crate) msn: u32,
    nak_sent: bool,
    /// RC request packets that came after a gap, kept and counted as received once the gap is
    /// filled (`ahead.rs`).
    ahead: Ahead,
    /// UC: the rest of the current message is being dropped.
    uc_drop: bool,
    cur: InProgress,
    resources: VecDeque<Resource>,
    replies: VecDeque<Reply>,
    /// A reply the requester is stalled on was queued: a gap's NAK, or the ACK once it is filled
    /// (see [`Responder::take_urgent`]).
    urgent: bool,
    /// Completions for the receive CQ.
    pub(crate) done: VecDeque<WorkCompletion>,
    pub(crate) drops: RespDrops,
}

fn family(op: Operation) -> Option<(Kind, bool, bool)> {
    use Operation::*;
    // (kind, first packet of a message, last packet of a message)
    Some(match op {
        SendFirst => (Kind::Send, true, false),
        SendMiddle => (Kind::Send, false, false),
        SendLast | SendLastImm | SendLastInv => (Kind::Send, false, true),
        SendOnly | SendOnlyImm | SendOnlyInv => (Kind::Send, true, true),
        WriteFirst => (Kind::Write, true, false),
        WriteMiddle => (Kind::Write, false, false),
        WriteLast | WriteLastImm => (Kind::Write, false, true),
        WriteOnly | WriteOnlyImm => (Kind::Write, true, true),
        ReadRequest => (Kind::Read, true, true),
        CompareSwap | FetchAdd => (Kind::Atomic, true, true),
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Send,
    Write,
    Read,
    Atomic,
}

impl Responder {
    pub(crate) fn new(cfg: RespConfig, rq_psn: u32, pool: HoldPool) -> Responder {
        Responder {
            cfg,
            epsn: rq_psn,
            msn: 0,
            nak_sent: false,
            urgent: false,
            ahead: Ahead::new(pool),
            uc_drop: false,
            cur: InProgress::None,
            resources: VecDeque::new(),
            replies: VecDeque::new(),
            done: VecDeque::new(),
            drops: RespDrops::default(),
        }
    }

    /// The pool packets held after a gap come from.
    pub(crate) fn hold_pool(&self) -> &HoldPool {
        self.ahead.pool()
    }

    fn queue(&mut self, r: Reply) {
        if self.replies.len() < MAX_REPLIES {
            self.replies.push_back(r);
        }
    }

    /// An ACK with the credits the queue allows (roce-wire.md §3): the receive WQEs still posted,
    /// or "no credit information" with an SRQ.
    ///
    /// ACKs are cumulative (one acknowledges every request up to its PSN; IBTA lets a responder
    /// coalesce them), so an ACK still waiting behind the one queued now says nothing the new one
    /// does not: the new one takes its place. A burst of requests that arrives before the
    /// responder's next transmission draws one ACK, not one per AckReq, and no ACK waits longer
    /// than it did.
    fn ack(&mut self, psn: u32, rq: &VecDeque<RecvWqe>) {
        let credits = if self.cfg.srq { CREDITS_INVALID } else { credit_code_for(rq.len() as u32) };
        let aeth = AethRepr::ack(credits, self.msn);
        if let Some(Reply::Ack { psn: queued, aeth: before }) = self.replies.back_mut() {
            if matches!(before.kind(), AethKind::Ack { .. }) && psn::diff(psn, *queued) >= 0 {
                (*queued, *before) = (psn, aeth);
                return;
            }
        }
        self.queue(Reply::Ack { psn, aeth });
    }

    /// An error in a request. RC: NAK `code`, drop everything else queued, and fail (the QP goes to
    /// the error state). UC: the message is dropped silently and its receive WQE goes back.
    fn reject(&mut self, psn: u32, code: NakCode, rq: &mut VecDeque<RecvWqe>) -> Result<(), RespFatal> {
        if self.cfg.transport == Transport::Uc {
            self.abort_uc(rq);
            return Ok(());
        }
        self.replies.clear();
        self.replies.push_back(Reply::Ack { psn, aeth: AethRepr::nak(code, self.msn) });
        self.ahead.clear();
        Err(RespFatal)
    }

    /// UC: gives up the message in progress; its receive WQE returns to the head of the queue.
    fn abort_uc(&mut self, rq: &mut VecDeque<RecvWqe>) {
        if let InProgress::Send { wqe, .. } = std::mem::replace(&mut self.cur, InProgress::None) {
            rq.push_front(wqe);
        }
        self.uc_drop = true;
        self.drops.uc_aborted += 1;
    }

    /// Fails the receive WQE of the message in progress with `status` (RC errors).
    fn fail_recv(&mut self, status: WcStatus) {
        if let InProgress::Send { wqe, .. } = std::mem::replace(&mut self.cur, InProgress::None) {
            let wc = self.wc(wqe.wr_id, status, WcOpcode::Recv, 0);
            self.done.push_back(wc);
        }
    }

    fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.cfg.qpn,
            src_qp: self.cfg.dest_qp,
            src_gid: None,
            solicited: false,
        }
    }

    /// Flushes the receive queue passed in (the QP's own; an SRQ keeps its WQEs) and the message in
    /// progress (QP to error), and forgets queued responses except a final NAK.
    pub(crate) fn flush(&mut self, rq: Option<&mut VecDeque<RecvWqe>>) {
        self.ahead.clear();
        let in_progress = match std::mem::replace(&mut self.cur, InProgress::None) {
            InProgress::Send { wqe, .. } => Some(wqe),
            _ => None,
        };
        let own = rq.map(std::mem::take).unwrap_or_default();
        for w in in_progress.into_iter().chain(own) {
            let wc = self.wc(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0);
            self.done.push_back(wc);
        }
        self.replies.retain(|r| matches!(r, Reply::Ack { aeth, .. } if aeth.syndrome >= 0x60));
    }

    /// Handles a request packet (RC or UC) with receive WQEs from `rq`.
    pub(crate) fn handle_request(
        &mut self,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let Some((kind, first, last)) = family(op) else { return Ok(()) };
        let p = pkt.bth.psn;
        let d = psn::diff(p, self.epsn);
        if self.cfg.transport == Transport::Uc {
            // UC (§1.7): duplicates are dropped; after a gap the message in progress is lost and
            // the responder waits for the next FIRST or ONLY.
            if d < 0 {
                return Ok(());
            }
            if d > 0 && !self.uc_drop {
                self.abort_uc(rq);
            }
            if self.uc_drop {
                if !first {
                    self.epsn = psn::add(p, 1);
                    return Ok(());
                }
                self.uc_drop = false;
            }
            self.epsn = p;
        } else if d > 0 {
            self.keep_ahead(op, d, pkt, mem);
            // One NAK per gap, carrying the expected PSN; then silence until it arrives.
            if !self.nak_sent {
                self.nak_sent = true;
                self.drops.seq_naks_sent += 1;
                let aeth = AethRepr::nak(NakCode::PsnSequenceError, self.msn);
                self.queue(Reply::Ack { psn: self.epsn, aeth });
                self.urgent = true;
            }
            return Ok(());
        } else if d < 0 {
            self.duplicate(kind, p, pkt, rq);
            return Ok(());
        }
        let done = self.in_order((kind, first, last), op, pkt, mem, rq);
        // The request moved the expected PSN: on over the packets kept ahead it made contiguous.
        if done.is_ok() && !self.ahead.is_empty() && self.epsn != p {
            return self.take_ahead(p, mem, rq);
        }
        done
    }

    /// Handles a request packet at the expected PSN, of family `(kind, first, last)`.
    fn in_order(
        &mut self,
        (kind, first, last): (Kind, bool, bool),
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let p = pkt.bth.psn;
        let in_sequence = match self.cur {
            InProgress::None => first,
            InProgress::Send { .. } => !first && kind == Kind::Send,
            InProgress::Write { .. } => !first && kind == Kind::Write,
        };
        if !in_sequence {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        let need = match kind {
            Kind::Send => Access::NONE,
            Kind::Write => Access::REMOTE_WRITE,
            Kind::Read => Access::REMOTE_READ,
            Kind::Atomic => Access::REMOTE_ATOMIC,
        };
        if !self.cfg.access.contains(need) {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        let n = pkt.payload.len() as u32;
        let mtu = self.cfg.mtu;
        let length_ok = match (first, last) {
            (_, false) => n == mtu,
            (false, true) => (1..=mtu).contains(&n),
            (true, true) => n <= mtu,
        };
        if !length_ok {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        match kind {
            Kind::Send => self.send(op, first, last, pkt, mem, rq),
            Kind::Write => self.write(op, first, last, pkt, mem, rq),
            Kind::Read => self.read(pkt, mem, rq),
            Kind::Atomic => self.atomic(op, pkt, mem, rq),
        }
    }

    /// Finishes a SEND or WRITE packet that was accepted: the next PSN, and an ACK if asked for.
    fn accepted(&mut self, p: u32, ack_req: bool, rq: &VecDeque<RecvWqe>) {
        self.epsn = psn::add(p, 1);
        self.nak_sent = false;
        if ack_req && self.cfg.transport == Transport::Rc {
            self.ack(p, rq);
        }
    }

    /// RC: keeps a request packet that came `d` PSNs after the expected one (`ahead.rs`). The NAK
    /// for the gap goes out as before.
    fn keep_ahead(&mut self, op: Operation, d: i32, pkt: &RoceRepr<'_>, mem: &mut MemTable) {
        let Ok(d) = u32::try_from(d) else { return };
        let cur = match self.cur {
            InProgress::Write { va, rkey, remaining, .. } => Some(Current { va, rkey, remaining }),
            _ => None,
        };
        match self.ahead.keep((self.cfg.pd, self.cfg.mtu), d, cur, op, pkt, mem) {
            Keep::Kept => self.drops.placed_ahead += 1,
            Keep::PoolSpent => self.drops.not_held += 1,
            Keep::No => {}
        }
    }

    /// After a request at `from` moved the expected PSN: moves it over the packets kept ahead that
    /// are now contiguous, as if they came in order (a held one is handled in order now), and
    /// acknowledges them.
    fn take_ahead(
        &mut self,
        from: u32,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        // Taken out while packets are handled in order (which may clear it: an error), put back
        // after.
        let empty = Ahead::new(self.ahead.pool().clone());
        let mut ahead = std::mem::replace(&mut self.ahead, empty);
        let done = self.take_kept(&mut ahead, from, mem, rq);
        self.urgent = true;
        if done.is_err() {
            ahead.clear();
        }
        self.ahead = ahead;
        done
    }

    /// [`Responder::take_ahead`] with the kept packets taken out of `self`.
    fn take_kept(
        &mut self,
        ahead: &mut Ahead,
        from: u32,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        ahead.skip(psn::diff(self.epsn, from).max(0) as u32);
        let mut ack = false;
        while let Some(slot) = ahead.next() {
            let at = self.epsn;
            match slot {
                &Slot::Written { last } => {
                    let mtu = self.cfg.mtu;
                    let InProgress::Write { va, rkey, remaining, total } = self.cur else {
                        // Written packets belong to the WRITE in progress, which only they end.
                        ahead.clear();
                        return Ok(());
                    };
                    self.cur = if last {
                        self.msn = psn::add(self.msn, 1);
                        InProgress::None
                    } else {
                        InProgress::Write {
                            va: va.wrapping_add(u64::from(mtu)),
                            rkey,
                            remaining: remaining.saturating_sub(mtu),
                            total,
                        }
                    };
                    self.epsn = psn::add(at, 1);
                    self.nak_sent = false;
                    ack = true;
                }
                Slot::Held(held) => {
                    // Only request packets are kept (`handle_request` returns before the rest).
                    let Some(family) = family(held.op) else {
                        ahead.clear();
                        return Ok(());
                    };
                    // An error leaves it kept: the caller clears what is.
                    self.in_order(family, held.op, &held.packet(), mem, rq)?;
                    if self.epsn == at {
                        // Not taken (no receive WQE: an RNR NAK): the requester goes back to it
                        // and sends what follows again.
                        ahead.clear();
                        return Ok(());
                    }
                    // A READ response or atomic ACK acknowledges it; a SEND or WRITE is acknowledged
                    // with the rest.
                    ack = matches!(family.0, Kind::Send | Kind::Write);
                }
            }
            ahead.skip(psn::diff(self.epsn, at).max(0) as u32);
        }
        if ack {
            self.ack(psn::add(self.epsn, psn::MASK), rq);
        }
        Ok(())
    }

    /// No receive WQE for a message: RNR NAK on RC; UC drops the message.
    fn no_wqe(&mut self, p: u32, rq: &mut VecDeque<RecvWqe>) -> Result<(), RespFatal> {
        if self.cfg.transport == Transport::Uc {
            self.drops.no_wqe += 1;
            self.abort_uc(rq);
            return Ok(());
        }
        let aeth = AethRepr::rnr_nak(self.cfg.min_rnr_timer, self.msn);
        self.drops.rnr_naks_sent += 1;
        self.queue(Reply::Ack { psn: p, aeth });
        Ok(())
    }

    fn send(
        &mut self,
        op: Operation,
        first: bool,
        last: bool,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let p = pkt.bth.psn;
        let (wqe, offset) = match std::mem::replace(&mut self.cur, InProgress::None) {
            InProgress::Send { wqe, offset } => (wqe, offset),
            _ if first => match rq.pop_front() {
                Some(w) => (w, 0),
                None => return self.no_wqe(p, rq),
            },
            // in_sequence guarantees a FIRST/ONLY when nothing is in progress.
            _ => return Ok(()),
        };
        self.cur = InProgress::Send { wqe, offset };
        let InProgress::Send { wqe, .. } = &self.cur else { return Ok(()) };
        let end = offset + pkt.payload.len() as u64;
        // Longer than the receive buffer or than any message may be (rxe's RESPST_ERR_LENGTH).
        if end > wqe.len || end > MAX_MSG_SIZE {
            self.fail_recv(WcStatus::LocLenErr);
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        if mem.scatter(self.cfg.pd, wqe.sg.as_slice(), offset, pkt.payload).is_err() {
            self.fail_recv(WcStatus::LocProtErr);
            return self.reject(p, NakCode::RemoteOperationalError, rq);
        }
        let offset = end;
        if last {
            let mut invalidated = None;
            if matches!(op, Operation::SendLastInv | Operation::SendOnlyInv) {
                let rkey = pkt.ieth.map(|i| i.rkey).unwrap_or(0);
                // An unknown key, another PD's, or a region without REMOTE_INVALIDATE: rxe's
                // RESPST_ERR_INVALIDATE_RKEY, an invalid request.
                if mem.invalidate(self.cfg.pd, rkey).is_err() {
                    self.fail_recv(WcStatus::LocQpOpErr);
                    return self.reject(p, NakCode::InvalidRequest, rq);
                }
                invalidated = Some(rkey);
            }
            let InProgress::Send { wqe, .. } = std::mem::replace(&mut self.cur, InProgress::None) else {
                return Ok(());
            };
            // At most MAX_MSG_SIZE (8 MiB), so it fits.
            let mut wc = self.wc(wqe.wr_id, WcStatus::Success, WcOpcode::Recv, offset as u32);
            wc.imm_data = pkt.immdt.map(|i| i.0);
            wc.invalidated_rkey = invalidated;
            wc.solicited = pkt.bth.solicited;
            self.done.push_back(wc);
            self.msn = psn::add(self.msn, 1);
        } else if let InProgress::Send { offset: o, .. } = &mut self.cur {
            *o = offset;
        }
        self.accepted(p, pkt.bth.ack_req, rq);
        Ok(())
    }

    fn write(
        &mut self,
        op: Operation,
        first: bool,
        last: bool,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let p = pkt.bth.psn;
        let (mut va, rkey, mut remaining, total) = match (first, &self.cur, pkt.reth) {
            (true, _, Some(reth)) => {
                if reth.dma_len > MAX_DMA_LEN {
                    return self.reject(p, NakCode::InvalidRequest, rq);
                }
                if reth.dma_len > 0
                    && mem
                        .check_remote(
                            self.cfg.pd,
                            reth.rkey,
                            reth.va,
                            u64::from(reth.dma_len),
                            Access::REMOTE_WRITE,
                        )
                        .is_err()
                {
                    return self.reject(p, NakCode::RemoteAccessError, rq);
                }
                (reth.va, reth.rkey, reth.dma_len, reth.dma_len)
            }
            (false, &InProgress::Write { va, rkey, remaining, total }, _) => (va, rkey, remaining, total),
            _ => return self.reject(p, NakCode::InvalidRequest, rq),
        };
        let imm = matches!(op, Operation::WriteLastImm | Operation::WriteOnlyImm);
        if imm && rq.is_empty() {
            return self.no_wqe(p, rq);
        }
        let n = pkt.payload.len() as u32;
        if n > remaining || (last && n != remaining) {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        if n > 0 {
            match mem.remote_mut(self.cfg.pd, rkey, va, n as usize, Access::REMOTE_WRITE) {
                Ok(dst) => wire::copy_payload(dst, pkt.payload),
                Err(_) => return self.reject(p, NakCode::RemoteAccessError, rq),
            }
        }
        va = va.wrapping_add(u64::from(n));
        remaining -= n;
        if last {
            if imm {
                if let Some(w) = rq.pop_front() {
                    let mut wc = self.wc(w.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, total);
                    wc.imm_data = pkt.immdt.map(|i| i.0);
                    wc.solicited = pkt.bth.solicited;
                    self.done.push_back(wc);
                }
            }
            self.msn = psn::add(self.msn, 1);
            self.cur = InProgress::None;
        } else {
            self.cur = InProgress::Write { va, rkey, remaining, total };
        }
        self.accepted(p, pkt.bth.ack_req, rq);
        Ok(())
    }

    fn push_resource(&mut self, r: Resource) {
        // rxe reuses the oldest resource when all are taken.
        if self.resources.len() >= self.cfg.max_dest_rd_atomic.max(1) {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    fn read(
        &mut self,
        pkt: &RoceRepr<'_>,
        mem: &MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let p = pkt.bth.psn;
        let Some(reth) = pkt.reth else { return self.reject(p, NakCode::InvalidRequest, rq) };
        if reth.dma_len > MAX_DMA_LEN {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        if reth.dma_len > 0
            && mem
                .check_remote(self.cfg.pd, reth.rkey, reth.va, u64::from(reth.dma_len), Access::REMOTE_READ)
                .is_err()
        {
            return self.reject(p, NakCode::RemoteAccessError, rq);
        }
        let npkts = reth.dma_len.div_ceil(self.cfg.mtu).max(1);
        let last_psn = psn::add(p, npkts - 1);
        self.push_resource(Resource::Read {
            first_psn: p,
            last_psn,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
        });
        // The MSN counts the READ when it arrives (§1.7).
        self.msn = psn::add(self.msn, 1);
        self.epsn = psn::add(p, npkts);
        self.nak_sent = false;
        let msn = self.msn;
        self.queue(Reply::Read {
            psn: p,
            va: reth.va,
            rkey: reth.rkey,
            remaining: reth.dma_len,
            first: true,
            msn,
        });
        Ok(())
    }

    fn atomic(
        &mut self,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) -> Result<(), RespFatal> {
        let p = pkt.bth.psn;
        let Some(a) = pkt.atomic_eth else { return self.reject(p, NakCode::InvalidRequest, rq) };
        if a.va % 8 != 0 {
            return self.reject(p, NakCode::InvalidRequest, rq);
        }
        let Ok(target) = mem.remote_mut(self.cfg.pd, a.rkey, a.va, 8, Access::REMOTE_ATOMIC) else {
            return self.reject(p, NakCode::RemoteAccessError, rq);
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(target);
        let orig = u64::from_ne_bytes(word);
        let new = match op {
            Operation::CompareSwap if orig == a.compare => a.swap_add,
            Operation::CompareSwap => orig,
            _ => orig.wrapping_add(a.swap_add),
        };
        target.copy_from_slice(&new.to_ne_bytes());
        self.push_resource(Resource::Atomic { psn: p, orig });
        self.msn = psn::add(self.msn, 1);
        self.epsn = psn::add(p, 1);
        self.nak_sent = false;
        let msn = self.msn;
        self.queue(Reply::AtomicAck { psn: p, msn, orig });
        Ok(())
    }

    /// A request older than the expected PSN (§1.7 "Duplicate requests").
    fn duplicate(&mut self, kind: Kind, p: u32, pkt: &RoceRepr<'_>, rq: &VecDeque<RecvWqe>) {
        self.drops.duplicates += 1;
        match kind {
            Kind::Send | Kind::Write => self.ack(psn::add(self.epsn, psn::MASK), rq),
            Kind::Read => {
                let Some(reth) = pkt.reth else { return };
                let found = self.resources.iter().find_map(|r| match *r {
                    Resource::Read { first_psn, last_psn, va, rkey, len }
                        if psn::diff(p, first_psn) >= 0 && psn::diff(p, last_psn) <= 0 =>
                    {
                        Some((first_psn, va, rkey, len))
                    }
                    _ => None,
                });
                let Some((first_psn, va, rkey, len)) = found else { return };
                // The original range passed the memory check, so `va + len` does not overflow; the
                // duplicate's range is the peer's and may.
                let end = va + u64::from(len);
                let subset = reth.rkey == rkey
                    && reth.va >= va
                    && reth.va.checked_add(u64::from(reth.dma_len)).is_some_and(|e| e <= end);
                if subset {
                    let msn = self.msn;
                    self.queue(Reply::Read {
                        psn: p,
                        va: reth.va,
                        rkey,
                        remaining: reth.dma_len,
                        first: p == first_psn,
                        msn,
                    });
                }
            }
            Kind::Atomic => {
                let orig = self.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn, orig } if psn == p => Some(orig),
                    _ => None,
                });
                if let Some(orig) = orig {
                    let msn = self.msn;
                    self.queue(Reply::AtomicAck { psn: p, msn, orig });
                }
            }
        }
    }

    /// True if a response is waiting.
    pub(crate) fn has_reply(&self) -> bool {
        !self.replies.is_empty()
    }

    /// Whether a reply the requester is stalled on was queued since the last call: the NAK of a
    /// gap (the requester sends on until its window is full of PSNs behind it) or the ACK that
    /// follows once the gap is filled (the window opens only then). Worth sending before the rest
    /// of a batch of received frames is handled.
    pub(crate) fn take_urgent(&mut self) -> bool {
        std::mem::take(&mut self.urgent) && self.has_reply()
    }

    /// The next response packet.
    pub(crate) fn poll(&mut self) -> Option<TxDesc> {
        let op = |o: Operation| Opcode::new(Transport::Rc, o).unwrap_or(Opcode(0));
        let dest = self.cfg.dest_qp;
        let mtu = self.cfg.mtu;
        let reply = self.replies.front_mut()?;
        match *reply {
            Reply::Ack { psn, aeth } => {
                self.replies.pop_front();
                let mut pkt = RoceRepr::new(BthRepr::new(op(Operation::Acknowledge), dest, psn), &[]);
                pkt.aeth = Some(aeth);
                Some(TxDesc { packet: pkt, payload: TxPayload::None, template: None, completes: false })
            }
            Reply::AtomicAck { psn, msn, orig } => {
                self.replies.pop_front();
                let mut pkt = RoceRepr::new(BthRepr::new(op(Operation::AtomicAcknowledge), dest, psn), &[]);
                pkt.aeth = Some(AethRepr::ack(CREDITS_INVALID, msn));
                pkt.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                Some(TxDesc { packet: pkt, payload: TxPayload::None, template: None, completes: false })
            }
            Reply::Read { psn: p, va, rkey, remaining, first, msn } => {
                let n = remaining.min(mtu);
                let last = remaining <= mtu;
                let o = match (first, last) {
                    (true, true) => Operation::ReadResponseOnly,
                    (true, false) => Operation::ReadResponseFirst,
                    (false, true) => Operation::ReadResponseLast,
                    (false, false) => Operation::ReadResponseMiddle,
                };
                let mut pkt = RoceRepr::new(BthRepr::new(op(o), dest, p), &[]);
                if o != Operation::ReadResponseMiddle {
                    pkt.aeth = Some(AethRepr::ack(CREDITS_INVALID, msn));
                }
                if last {
                    self.replies.pop_front();
                } else if let Reply::Read { psn, va, remaining, first, .. } = reply {
                    *psn = psn::add(*psn, 1);
                    *va = va.wrapping_add(u64::from(n));
                    *remaining -= n;
                    *first = false;
                }
                let payload = if n > 0 { TxPayload::Remote { rkey, va, len: n } } else { TxPayload::None };
                Some(TxDesc { packet: pkt, payload, template: None, completes: false })
            }
        }
    }

    /// A READ response could not read its memory (the region went away): NAK and fail.
    pub(crate) fn read_failed(&mut self, psn: u32) -> RespFatal {
        self.replies.clear();
        self.replies.push_back(Reply::Ack { psn, aeth: AethRepr::nak(NakCode::RemoteAccessError, self.msn) });
        RespFatal
    }

    /// Handles a UD packet (SEND_ONLY or SEND_ONLY_IMM with DETH): Q_Key check, one receive WQE,
    /// the 40-byte GRH area (for IPv4: 20 zero bytes, then the IPv4 header, as rxe writes it), then
    /// the payload. PSNs are not checked. Nothing is ever sent back.
    pub(crate) fn handle_ud(
        &mut self,
        op: Operation,
        pkt: &RoceRepr<'_>,
        meta: &RxMeta<'_>,
        mem: &mut MemTable,
        rq: &mut VecDeque<RecvWqe>,
    ) {
        let Some(deth) = pkt.deth else { return };
        if !matches!(op, Operation::SendOnly | Operation::SendOnlyImm) {
            return;
        }
        if deth.qkey != self.cfg.qkey {
            self.drops.qkey += 1;
            return;
        }
        let Some(w) = rq.pop_front() else {
            self.drops.no_wqe += 1;
            return;
        };
        let mut grh = [0u8; GRH_LEN];
        let h = meta.ip_header;
        match h.first().map(|b| b >> 4) {
            Some(4) if h.len() >= 20 => grh[20..].copy_from_slice(&h[..20]),
            Some(6) if h.len() >= 40 => grh.copy_from_slice(&h[..40]),
            _ => {}
        }
        let total = GRH_LEN + pkt.payload.len();
        let mut wc = self.wc(w.wr_id, WcStatus::Success, WcOpcode::Recv, total as u32);
        if total as u64 > w.len {
            wc.status = WcStatus::LocLenErr;
            wc.byte_len = 0;
        } else if mem.scatter(self.cfg.pd, w.sg.as_slice(), 0, &grh).is_err()
            || mem.scatter(self.cfg.pd, w.sg.as_slice(), GRH_LEN as u64, pkt.payload).is_err()
        {
            wc.status = WcStatus::LocProtErr;
            wc.byte_len = 0;
        }
        wc.imm_data = pkt.immdt.map(|i| i.0);
        wc.src_qp = deth.src_qp;
        wc.src_gid = Some(meta.src);
        wc.solicited = pkt.bth.solicited;
        self.done.push_back(wc);
    }
}

mod ahead;
mod hold;
#[cfg(test)]
mod tests;
