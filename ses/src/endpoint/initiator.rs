//! The initiator side of a SES endpoint: operations out (sends, writes, reads, atomics), segmented
//! over a PDC, one request per piece over RUDI, or one UUD datagram; the request headers they carry;
//! and their completion when the target's response arrives.

use std::hash::Hash;

use bytes::Bytes;
use pds::{Body, DeliveryKind, HEAD_MAX, Mode, NextHeader, PdcId, Urgency};
use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{
    AmoDatatype, AmoOpcode, AtomicExt, CasExt, MediumRequest, RequestCommon, ReturnCode, SesExt, SesHeader,
    SesOpcode, SesRepr, SmallRequest, SomField, StandardRequest,
};

use super::Endpoint;
use super::state::{Internal, OutOp, Req, Src};
use super::types::{Addr, Completion, CompletionKind, Error, Opts, Refusal, Status, Taken};
use crate::amo;
use crate::config::{Config, EpType, HeaderForms};
use crate::key;
use crate::mode::{DeliveryMode, OpKind, delivery_mode};

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    fn job_of(&self, opts: &Opts) -> u32 {
        opts.job_id.unwrap_or(self.cfg.job_id) & 0xFF_FFFF
    }

    /// A message id no outstanding operation has, drawn at random: a response can be forged only
    /// by whoever sees the request. Busy when all 65536 are taken.
    fn alloc_msg_id(&mut self) -> Result<u16, Error> {
        if self.ops.len() > usize::from(u16::MAX) {
            return Err(Error::Busy);
        }
        let mut id = self.random() as u16;
        while self.ops.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        Ok(id)
    }

    /// Sends `data` to `dst`: SEND, or TAGGED_SEND with `tag`; the options' `header_data` is
    /// delivered with the receive completion. Completes when the target's response arrives. The
    /// bytes are copied once, when the send is accepted ([`Endpoint::send_bytes`] does not copy).
    pub fn send(&mut self, dst: Addr<A>, data: &[u8], tag: Option<u64>, opts: Opts) -> Result<u16, Error> {
        self.send_src(dst, Src::Slice(data), tag, opts)
    }

    /// [`Endpoint::send`] of bytes the endpoint shares until the send completes: packets carry
    /// slices of `data`, copied only into their frames.
    pub fn send_bytes(
        &mut self,
        dst: Addr<A>,
        data: Bytes,
        tag: Option<u64>,
        opts: Opts,
    ) -> Result<u16, Error> {
        self.send_src(dst, Src::Shared(&data), tag, opts)
    }

    fn send_src(&mut self, dst: Addr<A>, data: Src<'_>, tag: Option<u64>, opts: Opts) -> Result<u16, Error> {
        let Opts { context, ordered, header_data, .. } = opts;
        let job_id = self.job_of(&opts);
        if self.cfg.ep_type == EpType::Dgram {
            return self.send_datagram(dst, data, context, job_id);
        }
        if let Some(r) = self.large_send(dst, data, tag, opts, job_id) {
            return r;
        }
        let opcode = if tag.is_some() { SesOpcode::TaggedSend } else { SesOpcode::Send };
        let mode = delivery_mode(self.cfg.ep_type, self.cfg.profile, OpKind::Message, ordered, 0);
        let req = |msg_id| Req {
            opcode,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: 0,
            key: tag.unwrap_or(0),
            header_data,
            total: data.len(),
            ext: None,
            job_id,
        };
        self.start_pdc_op(dst.fep, mode, CompletionKind::Send, req, data, context, opts.lazy_ack)
    }

    /// Writes `data` at `offset` of the peer's region `key`; the options' `header_data` makes a
    /// completion on the target. The bytes are copied once, when the write is accepted
    /// ([`Endpoint::write_bytes`] does not copy).
    pub fn write(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        data: &[u8],
        opts: Opts,
    ) -> Result<u16, Error> {
        self.write_src(dst, key, offset, Src::Slice(data), opts)
    }

    /// [`Endpoint::write`] of bytes the endpoint shares until the write completes: packets carry
    /// slices of `data`, copied only into their frames.
    pub fn write_bytes(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        data: Bytes,
        opts: Opts,
    ) -> Result<u16, Error> {
        self.write_src(dst, key, offset, Src::Shared(&data), opts)
    }

    fn write_src(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        data: Src<'_>,
        opts: Opts,
    ) -> Result<u16, Error> {
        let Opts { context, ordered, header_data, .. } = opts;
        let job_id = self.job_of(&opts);
        let kind = if header_data.is_some() { OpKind::RmaWithData } else { OpKind::Rma };
        let mode = self.rma_mode(kind, ordered, key)?;
        let req = |msg_id| Req {
            opcode: SesOpcode::Write,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: offset,
            key,
            header_data,
            total: data.len(),
            ext: None,
            job_id,
        };
        if mode == DeliveryMode::Rudi {
            return self.start_rudi_op(dst.fep, CompletionKind::Write, req, data, data.len(), context);
        }
        self.start_pdc_op(dst.fep, mode, CompletionKind::Write, req, data, context, opts.lazy_ack)
    }

    /// Reads `len` bytes at `offset` of the peer's region `key`.
    pub fn read(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        len: usize,
        opts: Opts,
    ) -> Result<u16, Error> {
        let Opts { context, ordered, .. } = opts;
        let job_id = self.job_of(&opts);
        let mode = self.rma_mode(OpKind::Rma, ordered, key)?;
        let req = |msg_id| Req {
            opcode: SesOpcode::Read,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: offset,
            key,
            header_data: None,
            total: len,
            ext: None,
            job_id,
        };
        if mode == DeliveryMode::Rudi {
            return self.start_rudi_op(dst.fep, CompletionKind::Read, req, Src::Slice(&[]), len, context);
        }
        if len > self.cfg.max_message {
            return Err(Error::TooLong);
        }
        self.start_single(dst.fep, mode, CompletionKind::Read, req, &[], len, context, false)
    }

    /// A non-fetching atomic (ATOMIC): `op` on consecutive `dt` elements at `offset` of the peer's
    /// region `key`, one element per operand in `operands` (a batch, in one packet). See [`amo`]
    /// for the supported opcodes, datatypes and byte order. The compare-and-swap opcodes go
    /// through [`Endpoint::compare_atomic`] (refused here with [`Error::Unsupported`]).
    ///
    /// [`amo`]: crate::amo
    #[allow(clippy::too_many_arguments)]
    pub fn atomic(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        op: AmoOpcode,
        dt: AmoDatatype,
        operands: &[u8],
        opts: Opts,
    ) -> Result<u16, Error> {
        let size = amo::element_size(dt).ok_or(Error::Unsupported)?;
        if op.is_compare_swap() {
            return Err(Error::Unsupported);
        }
        if operands.is_empty() || operands.len() % size != 0 {
            return Err(Error::BadOperand);
        }
        let ext = SesExt::Atomic(atomic_ext(op, dt));
        self.start_atomic(dst, key, offset, SesOpcode::Atomic, ext, operands, operands.len(), opts)
    }

    /// A fetching atomic (FETCHING_ATOMIC) on one `dt` element: the completion's `data` holds the
    /// element's value before `op` (READ only fetches; `operand` is then ignored by the target).
    #[allow(clippy::too_many_arguments)]
    pub fn fetch_atomic(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        op: AmoOpcode,
        dt: AmoDatatype,
        operand: &[u8],
        opts: Opts,
    ) -> Result<u16, Error> {
        let size = amo::element_size(dt).ok_or(Error::Unsupported)?;
        if op.is_compare_swap() {
            return Err(Error::Unsupported);
        }
        if operand.len() != size {
            return Err(Error::BadOperand);
        }
        let ext = SesExt::Atomic(atomic_ext(op, dt));
        self.start_atomic(dst, key, offset, SesOpcode::FetchingAtomic, ext, operand, size, opts)
    }

    /// A compare atomic (FETCHING_ATOMIC with the compare-and-swap extension, `op` one of CSWAP,
    /// CSWAP_NE/LE/LT/GE/GT) on one `dt` element; the completion's `data` holds the old value.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_atomic(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        op: AmoOpcode,
        dt: AmoDatatype,
        compare: &[u8],
        swap: &[u8],
        opts: Opts,
    ) -> Result<u16, Error> {
        let size = amo::element_size(dt).ok_or(Error::Unsupported)?;
        // The CAS extension holds operands of at most 16 bytes.
        if !op.is_compare_swap() || size > 16 {
            return Err(Error::Unsupported);
        }
        if compare.len() != size || swap.len() != size {
            return Err(Error::BadOperand);
        }
        let ext = SesExt::CompareSwap(CasExt {
            atomic: atomic_ext(op, dt),
            compare: amo::to_cas_field(compare),
            swap: amo::to_cas_field(swap),
        });
        self.start_atomic(dst, key, offset, SesOpcode::FetchingAtomic, ext, &[], size, opts)
    }

    #[allow(clippy::too_many_arguments)]
    fn start_atomic(
        &mut self,
        dst: Addr<A>,
        key: u64,
        offset: u64,
        opcode: SesOpcode,
        ext: SesExt,
        payload: &[u8],
        len: usize,
        opts: Opts,
    ) -> Result<u16, Error> {
        if payload.len() > self.cfg.max_payload {
            return Err(Error::TooLong);
        }
        let mode = self.rma_mode(OpKind::Atomic, opts.ordered, key)?;
        let job_id = self.job_of(&opts);
        let kind =
            if opcode == SesOpcode::Atomic { CompletionKind::Atomic } else { CompletionKind::FetchAtomic };
        let req = |msg_id| Req {
            opcode,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: offset,
            key,
            header_data: None,
            total: len,
            ext: Some(ext),
            job_id,
        };
        self.start_single(dst.fep, mode, kind, req, payload, len, opts.context, opts.lazy_ack)
    }

    /// A one-packet request over a PDC whose completion carries `len` bytes back (reads,
    /// fetching atomics) or nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_single(
        &mut self,
        peer: A,
        mode: DeliveryMode,
        kind: CompletionKind,
        req: impl Fn(u16) -> Req,
        payload: &[u8],
        len: usize,
        context: u64,
        lazy: bool,
    ) -> Result<u16, Error> {
        let pdc_mode = if mode == DeliveryMode::Rod { Mode::Rod } else { Mode::Rud };
        let pdc = self.pds.connect(peer, pdc_mode).map_err(|_| Error::NoPdc)?;
        let form = form_of(&req(0), &self.cfg, 1);
        let msg_id = self.msg_id_for(pdc, form)?;
        let r = req(msg_id);
        let body = Body::with_head(Bytes::copy_from_slice(payload), |head| {
            request_head(&r, &self.cfg, form, true, true, 0, payload.len(), head)
        });
        self.pds
            .send_on_with(pdc, form.next_header(), body, u64::from(msg_id), urgency(lazy))
            .map_err(|_| Error::Busy)?;
        self.ops.insert(msg_id, out_op(context, kind, peer, Some(pdc), len, 1));
        self.stats.ops_tx.add(r.opcode.into());
        Ok(msg_id)
    }

    /// The message id of a request in `form` on `pdc`: for the compact forms, which carry none,
    /// the low 16 bits of the PSN its packet gets (the target answers with those, see
    /// `target::compact`); else one drawn at random. Busy when the compact form's id is taken
    /// by an operation still outstanding (rare: the caller may retry).
    fn msg_id_for(&mut self, pdc: PdcId, form: Form) -> Result<u16, Error> {
        if form == Form::Standard {
            return self.alloc_msg_id();
        }
        let psn = self.pds.pdc_info(pdc).map(|i| i.next_psn).ok_or(Error::NoPdc)?;
        let id = psn as u16;
        if self.ops.contains_key(&id) { Err(Error::Busy) } else { Ok(id) }
    }

    fn rma_mode(&self, kind: OpKind, ordered: bool, key: u64) -> Result<DeliveryMode, Error> {
        match delivery_mode(self.cfg.ep_type, self.cfg.profile, kind, ordered, key) {
            DeliveryMode::Uud => Err(Error::Unsupported),
            m => Ok(m),
        }
    }

    /// A request segmented over a PDC: one packet per `max_payload` bytes (`lazy`: see
    /// [`Opts::lazy_ack`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_pdc_op(
        &mut self,
        peer: A,
        mode: DeliveryMode,
        kind: CompletionKind,
        req: impl Fn(u16) -> Req,
        data: Src<'_>,
        context: u64,
        lazy: bool,
    ) -> Result<u16, Error> {
        if data.len() > self.cfg.max_message {
            return Err(Error::TooLong);
        }
        let pdc_mode = if mode == DeliveryMode::Rod { Mode::Rod } else { Mode::Rud };
        let pdc = self.pds.connect(peer, pdc_mode).map_err(|_| Error::NoPdc)?;
        let step = self.cfg.max_payload.max(1);
        let packets = data.len().div_ceil(step).max(1);
        let queued = self.pds.pdc_info(pdc).map_or(0, |i| i.unacked);
        if queued + packets > self.pds.config().max_queued {
            return Err(Error::Busy);
        }
        let form = form_of(&req(0), &self.cfg, packets);
        let msg_id = self.msg_id_for(pdc, form)?;
        let r = req(msg_id);
        let data = data.to_bytes();
        for i in 0..packets {
            let off = i * step;
            let chunk = data.slice(off.min(data.len())..(off + step).min(data.len()));
            let body = request_body(&r, &self.cfg, form, i == 0, i + 1 == packets, off, chunk);
            self.pds
                .send_on_with(pdc, form.next_header(), body, u64::from(msg_id), urgency(lazy))
                .expect("room checked");
        }
        self.ops.insert(msg_id, out_op(context, kind, peer, Some(pdc), data.len(), 1));
        self.stats.ops_tx.add(r.opcode.into());
        Ok(msg_id)
    }

    /// An RMA over RUDI: each piece is a whole request of its own (SOM|EOM), retransmitted alone.
    fn start_rudi_op(
        &mut self,
        peer: A,
        kind: CompletionKind,
        req: impl Fn(u16) -> Req,
        data: Src<'_>,
        len: usize,
        context: u64,
    ) -> Result<u16, Error> {
        if len > self.cfg.max_message {
            return Err(Error::TooLong);
        }
        let data = data.to_bytes();
        let msg_id = self.alloc_msg_id()?;
        let base = req(msg_id);
        let step = self.cfg.max_payload.max(1);
        let pieces = len.div_ceil(step).max(1);
        for i in 0..pieces {
            let off = i * step;
            let n = step.min(len - off.min(len));
            let piece = Req { buffer_offset: base.buffer_offset + off as u64, total: n, ..req(msg_id) };
            let chunk = if data.is_empty() { Bytes::new() } else { data.slice(off..off + n) };
            let body = request_body(&piece, &self.cfg, Form::Standard, true, true, 0, chunk);
            let cookie = (u64::from(msg_id) << 32) | off as u64;
            self.pds.rudi_send(peer, NextHeader::ReqStd, body, cookie);
            self.stats.ops_tx.add(base.opcode.into());
        }
        self.ops.insert(msg_id, out_op(context, kind, peer, None, len, pieces));
        Ok(msg_id)
    }

    fn send_datagram(
        &mut self,
        dst: Addr<A>,
        data: Src<'_>,
        context: u64,
        job_id: u32,
    ) -> Result<u16, Error> {
        if data.len() > self.cfg.max_payload {
            return Err(Error::TooLong);
        }
        let msg_id = self.alloc_msg_id()?;
        let r = Req {
            opcode: SesOpcode::DatagramSend,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: 0,
            key: 0,
            header_data: None,
            total: data.len(),
            ext: None,
            job_id,
        };
        self.pds.uud_send(
            dst.fep,
            NextHeader::ReqStd,
            request_body(&r, &self.cfg, Form::Standard, true, true, 0, data.to_bytes()),
        );
        self.stats.ops_tx.add(r.opcode.into());
        self.completions.push_back(Completion::local(
            context,
            CompletionKind::Send,
            Status::Ok,
            data.len(),
            Vec::new(),
        ));
        Ok(msg_id)
    }

    /// A response to operation `msg_id` arrived from `src` as `kind`: it counts only from the
    /// operation's peer, over the operation's PDC (or, for a RUDI operation, as the RUDI response
    /// to one of its requests).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_response(
        &mut self,
        src: A,
        kind: DeliveryKind,
        msg_id: u16,
        rc: ReturnCode,
        list: u8,
        data: &[u8],
        at: usize,
    ) -> Taken {
        let ours = |op: &OutOp<A>| {
            op.peer == src
                && match (op.pdc, kind) {
                    (Some(p), DeliveryKind::Pdc { pdc, .. }) => p == pdc,
                    (None, DeliveryKind::RudiResponse { cookie, .. }) => (cookie >> 32) as u16 == msg_id,
                    _ => false,
                }
        };
        if !self.ops.get(&msg_id).is_some_and(ours) {
            return Err(Refusal::Dropped);
        }
        if self.deferred(msg_id, rc, list) {
            return Ok(());
        }
        let op = self.ops.get_mut(&msg_id).expect("checked");
        if rc != ReturnCode::Ok {
            op.error = Some(rc);
            op.pieces_left = 0;
            op.got = op.total;
        } else if matches!(op.kind, CompletionKind::Read | CompletionKind::FetchAtomic) {
            let Some(end) = at.checked_add(data.len()).filter(|&end| end <= op.total) else {
                return Err(Refusal::Dropped);
            };
            let dst = match op.internal {
                // A rendezvous read's bytes go straight into the receive's buffer, after the
                // eager part (the read is never longer than what fits there).
                Some(Internal::RdvRead(w)) => match self.rdv_waits.get_mut(&w) {
                    Some(wait) => {
                        let base = wait.req.ext.eager_length as usize;
                        wait.posted.buf.bytes_mut().get_mut(base + at..base + end)
                    }
                    None => None,
                },
                _ => {
                    if op.data.len() < op.total {
                        op.data.resize(op.total, 0);
                    }
                    op.data.get_mut(at..end)
                }
            };
            let Some(dst) = dst else { return Err(Refusal::Dropped) };
            wire::copy_payload(dst, data);
            op.got += data.len();
            // Over a PDC the read is answered by as many RSP_DATA as it takes; over RUDI each
            // piece by exactly one.
            if op.pdc.is_none() {
                op.pieces_left = op.pieces_left.saturating_sub(1);
            } else if op.got >= op.total {
                op.pieces_left = 0;
            }
        } else {
            op.pieces_left = op.pieces_left.saturating_sub(1);
        }
        if op.pieces_left > 0 {
            return Ok(());
        }
        let op = self.ops.remove(&msg_id).expect("present");
        let status = op.error.map_or(Status::Ok, Status::Remote);
        self.end_op(op, status);
        Ok(())
    }

    /// An operation ended with `status`: its internal region goes, and its completion (with the
    /// bytes it fetched, on success) goes to the user, or, for the endpoint's own operations, to
    /// the rendezvous / deferral machinery.
    pub(super) fn end_op(&mut self, op: OutOp<A>, status: Status) {
        if let Some(k) = op.cleanup_key {
            self.regions.deregister(k);
            self.rendezvous_keys.remove(&k);
        }
        let ok = status == Status::Ok;
        let fetched = matches!(op.kind, CompletionKind::Read | CompletionKind::FetchAtomic);
        let data = if ok && fetched { op.data } else { Vec::new() };
        match op.internal {
            Some(i) => self.finish_internal(i, if ok { Ok(data) } else { Err(status) }),
            None => {
                let len = if ok { op.total } else { 0 };
                self.completions.push_back(Completion::local(op.context, op.kind, status, len, data));
            }
        }
    }
}

fn atomic_ext(op: AmoOpcode, dt: AmoDatatype) -> AtomicExt {
    AtomicExt { amo_opcode: op, datatype: dt, sem_ctl: 0, reserved: 0 }
}

fn out_op<A>(
    context: u64,
    kind: CompletionKind,
    peer: A,
    pdc: Option<PdcId>,
    total: usize,
    pieces: usize,
) -> OutOp<A> {
    // A read's or fetch's buffer comes with its first response (a rendezvous read's bytes go
    // elsewhere: `on_response`).
    let data = Vec::new();
    OutOp {
        context,
        kind,
        peer,
        pdc,
        total,
        pieces_left: pieces,
        error: None,
        data,
        got: 0,
        internal: None,
        cleanup_key: None,
        restart: None,
    }
}

/// The header form of a request's packets (see [`HeaderForms`] and `ses/README.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// REQ_STD, 44 B.
    Standard,
    /// REQ_SMALL, 20 B: the optimized non-matching header.
    Small,
    /// REQ_MEDIUM, 32 B: the small-message header.
    Medium,
}

impl Form {
    fn next_header(self) -> NextHeader {
        match self {
            Form::Standard => NextHeader::ReqStd,
            Form::Small => NextHeader::ReqSmall,
            Form::Medium => NextHeader::ReqMedium,
        }
    }
}

/// The form of a request of `packets` packets over a PDC. The compact forms carry neither a
/// message id nor a message offset: a request of one packet only, whose `request_length` fits
/// their 14 bits. The optimized header (small) has no memory key, no initiator and no header
/// data: RMA and atomics to an OPTIMIZED key whose RKEY fits the 12-bit resource index, which
/// carries it. The medium one has no `buffer_offset` beside header data: not a WRITE with
/// completion data. A READ is answered by one RSP_DATA_SMALL, so it must fit one packet.
fn form_of(r: &Req, cfg: &Config, packets: usize) -> Form {
    if cfg.forms == HeaderForms::Standard || packets != 1 || r.total > usize::from(COMPACT_MAX) {
        return Form::Standard;
    }
    let optimized = r.key & key::OPTIMIZED != 0 && key::rkey(r.key) <= 0xFFF;
    let rma = match r.opcode {
        SesOpcode::Send | SesOpcode::TaggedSend => return Form::Medium,
        SesOpcode::Write => r.header_data.is_none(),
        SesOpcode::Read => r.total <= cfg.max_payload,
        SesOpcode::Atomic | SesOpcode::FetchingAtomic => true,
        _ => false,
    };
    match (rma, optimized) {
        (false, _) => Form::Standard,
        (true, true) => Form::Small,
        (true, false) => Form::Medium,
    }
}

/// The largest `request_length` of the compact forms (14 bits).
const COMPACT_MAX: u16 = 0x3FFF;

/// The bytes after the PDS header of one request packet: the header in `form` (the standard one:
/// SOM form with header_data on the first packet, segment form after) and the payload, shared.
fn request_body(
    r: &Req,
    cfg: &Config,
    form: Form,
    som: bool,
    eom: bool,
    offset: usize,
    chunk: Bytes,
) -> Body {
    let len = chunk.len();
    Body::with_head(chunk, |head| request_head(r, cfg, form, som, eom, offset, len, head))
}

/// Writes the header (and extension) of a request packet in `form` carrying `len` payload bytes at
/// `offset` into `head`; returns its length.
#[allow(clippy::too_many_arguments)]
fn request_head(
    r: &Req,
    cfg: &Config,
    form: Form,
    som: bool,
    eom: bool,
    offset: usize,
    len: usize,
    head: &mut [u8; HEAD_MAX],
) -> usize {
    let mut flags = 0;
    if som {
        flags |= FLAG_SOM;
    }
    if eom {
        flags |= FLAG_EOM;
    }
    if som && r.header_data.is_some() {
        flags |= FLAG_HD;
    }
    let common = RequestCommon {
        rsvd: 0,
        opcode: r.opcode,
        version: 0,
        flags,
        word2: r.msg_id,
        ri_generation: 0,
        job_id: r.job_id & 0xFF_FFFF,
        pid_word: r.dst.0 & 0x0FFF,
        ri_word: r.dst.1 & 0x0FFF,
    };
    let compact_common = |flags: u8, ri_word: u16| RequestCommon {
        word2: r.total as u16 & COMPACT_MAX,
        flags,
        ri_word,
        ..common
    };
    let header = match form {
        Form::Standard => None,
        Form::Small => Some(SesHeader::Small(SmallRequest {
            common: compact_common(flags & !FLAG_HD, key::rkey(r.key) as u16),
            buffer_offset: r.buffer_offset,
        })),
        Form::Medium => Some(SesHeader::Medium(MediumRequest {
            common: compact_common(flags, common.ri_word),
            data_or_offset: r.header_data.unwrap_or(r.buffer_offset),
            initiator: cfg.initiator,
            match_bits: r.key,
        })),
    };
    if let Some(header) = header {
        let repr = SesRepr { header, ext: r.ext };
        return repr.emit(head).expect("a compact SES header fits, with the opcode's extension");
    }
    let som_field = if som {
        SomField::HeaderData(r.header_data.unwrap_or(0))
    } else {
        SomField::Segment { reserved: 0, payload_length: len as u16, message_offset: offset as u32 }
    };
    let std = StandardRequest {
        common,
        buffer_offset: r.buffer_offset,
        initiator: cfg.initiator,
        memory_key: r.key,
        som_field,
        request_length: r.total as u32,
    };
    let repr = SesRepr { header: SesHeader::Standard(std), ext: r.ext };
    repr.emit(head).expect("an SES header fits, and the extension is the one the opcode calls for")
}

/// How soon a request's packets go: [`Opts::lazy_ack`] ones ask for no immediate ACK.
fn urgency(lazy: bool) -> Urgency {
    if lazy { Urgency::Lazy } else { Urgency::Prompt }
}
