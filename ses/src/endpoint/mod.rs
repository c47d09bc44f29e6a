//! A SES endpoint over a PDS endpoint: operations in, packets out, responses and completions.

use std::collections::{BTreeMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use ahash::{AHashMap as HashMap, AHashSet as HashSet};
use bytes::Bytes;
use pds::{Body, DeliveryKind, HEAD_MAX, Mode, NextHeader, PdcError, PdcId, SendError};
use wire::FixedHeader;
use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{
    AmoDatatype, AmoOpcode, AtomicExt, CasExt, RendezvousExt, RequestCommon, Response, ResponseData,
    ResponseHead, ResponseOpcode, ReturnCode, SesExt, SesHeader, SesOpcode, SesRepr, SomField,
    StandardRequest,
};

use crate::amo;
use crate::config::{Config, EpType, Profile};
use crate::key::{Access, JobScope, Regions, Want};
use crate::matching::{MsgInfo, Posted, Queues, RecvSpec, Source};
use crate::mode::{DeliveryMode, OpKind, delivery_mode};

mod large;

use large::{Internal, LIST_OVERFLOW, Later, RdvWait, Restart};

/// A SES endpoint address: the fabric endpoint and the target's PIDonFEP and resource index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Addr<A> {
    /// Fabric endpoint (what the PDS addresses).
    pub fep: A,
    /// PIDonFEP of the target process.
    pub pid_on_fep: u16,
    /// Resource index of the target service.
    pub resource_index: u16,
}

/// Options of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Opts {
    /// Returned in the completion.
    pub context: u64,
    /// The operation's ordering class is on: ROD.
    pub ordered: bool,
    /// Completion data for the target (sends and writes; ignored by reads).
    pub header_data: Option<u64>,
    /// The JobID to put in the request (the destination's auth key with the AV JobID method);
    /// `None`: the endpoint's own (`Config::job_id`).
    pub job_id: Option<u32>,
}

/// What a completion completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompletionKind {
    /// A send (tagged or not) this side started.
    Send,
    /// A write this side started.
    Write,
    /// A read this side started (`data` holds the bytes read).
    Read,
    /// A posted receive got a message (`data`, `src`, `tag`, `header_data`).
    Recv,
    /// A peer wrote to a region with completion data (`header_data`, `src`, `len`).
    RemoteWrite,
    /// A non-fetching atomic this side started.
    Atomic,
    /// A fetching or compare atomic this side started (`data` holds the old value).
    FetchAtomic,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done.
    Ok,
    /// The target answered with this return code.
    Remote(ReturnCode),
    /// A receive got a message longer than its buffer: the first `len` bytes were placed.
    Truncated,
    /// The PDC carrying it failed.
    Failed(PdcError),
    /// A RUDI request got no response.
    Timeout,
    /// A receive cancelled.
    Cancelled,
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion<A> {
    /// The context given with the operation or receive.
    pub context: u64,
    /// What completed.
    pub kind: CompletionKind,
    /// How.
    pub status: Status,
    /// Bytes moved.
    pub len: usize,
    /// Received or read bytes (`len` of them).
    pub data: Vec<u8>,
    /// The sender, for receives and remote writes.
    pub src: Option<Source<A>>,
    /// The message tag, for tagged receives.
    pub tag: Option<u64>,
    /// Completion data, when the sender gave some.
    pub header_data: Option<u64>,
}

impl<A> Completion<A> {
    fn local(context: u64, kind: CompletionKind, status: Status, len: usize, data: Vec<u8>) -> Completion<A> {
        Completion { context, kind, status, len, data, src: None, tag: None, header_data: None }
    }
}

/// Why an operation was refused before anything was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// Longer than `max_message`, or (UUD) than one packet.
    TooLong,
    /// The PDC's send queue has no room for the message now; retry after progress.
    Busy,
    /// The operation does not exist on this endpoint type (RMA on DGRAM, ...).
    Unsupported,
    /// The PDS refused (PDC limit).
    NoPdc,
    /// Atomic operands of the wrong length for the datatype (or empty).
    BadOperand,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::TooLong => "message too long",
            Error::Busy => "send queue full",
            Error::Unsupported => "operation not supported on this endpoint",
            Error::NoPdc => "no PDC available",
            Error::BadOperand => "atomic operand length does not fit the datatype",
        })
    }
}

impl std::error::Error for Error {}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests answered with a return code other than OK.
    pub errors_sent: u64,
    /// Messages kept as unexpected.
    pub unexpected: u64,
    /// Packets the SES could not use (bad header, inconsistent lengths, stray responses).
    pub dropped: u64,
    /// Sends this side started as rendezvous.
    pub rendezvous_sent: u64,
    /// Rendezvous reads this side issued as the target.
    pub rendezvous_reads: u64,
    /// Deferrable sends this side kept on its overflow list (target).
    pub deferred: u64,
    /// Deferrable sends this side restarted on an RTR (initiator).
    pub restarts: u64,
}

/// Where a response goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply<A> {
    Pdc(PdcId),
    Rudi(A, u32),
    None,
}

/// Where an arriving message's bytes go.
#[derive(Debug)]
enum Dest<A> {
    Recv(Posted<A>),
    Unexpected(u64),
    Rma {
        key: u64,
        base: u64,
    },
    Discard(ReturnCode),
    /// A deferrable send kept on the overflow list: its bytes are dropped, the answer says so.
    Deferred,
}

#[derive(Debug)]
struct InMsg<A> {
    dest: Dest<A>,
    info: MsgInfo<A>,
    total: usize,
    received: usize,
    header_data: Option<u64>,
    job_id: u32,
}

#[derive(Debug)]
struct Unexpected<A> {
    id: u64,
    info: MsgInfo<A>,
    data: Vec<u8>,
    complete: bool,
    header_data: Option<u64>,
    later: Later<A>,
}

#[derive(Debug)]
struct OutOp<A> {
    context: u64,
    kind: CompletionKind,
    peer: A,
    pdc: Option<PdcId>,
    total: usize,
    /// Responses still expected (RUDI operations are one request per piece).
    pieces_left: usize,
    error: Option<ReturnCode>,
    data: Vec<u8>,
    got: usize,
    /// The endpoint's own operation (rendezvous read, RTR): no user completion.
    internal: Option<Internal>,
    /// An internal region to drop when the operation ends (rendezvous send).
    cleanup_key: Option<u64>,
    /// A deferrable send's message, kept for its restart.
    restart: Option<Box<Restart<A>>>,
}

/// The SES of one endpoint. See the crate documentation.
#[derive(Debug)]
pub struct Endpoint<A> {
    cfg: Config,
    pds: pds::Endpoint<A>,
    /// Registered memory.
    pub regions: Regions,
    queues: Queues<A>,
    unexpected: VecDeque<Unexpected<A>>,
    unexpected_bytes: usize,
    next_unexpected: u64,
    inbound: HashMap<(A, PdcId, u16), InMsg<A>>,
    ops: HashMap<u16, OutOp<A>>,
    next_msg_id: u16,
    completions: VecDeque<Completion<A>>,
    stats: Stats,
    /// JobIDs served besides the endpoint's own.
    jobs: HashSet<u32>,
    /// Receives waiting for the read of a rendezvous.
    rdv_waits: HashMap<u16, RdvWait<A>>,
    next_internal_key: u64,
    /// Receives reserved for restarting deferred sends, by target token (with the initiator).
    reserved: HashMap<u32, (A, Posted<A>)>,
    next_token: u32,
    /// Responses waiting for room on their PDC, in order per PDC: a PDC whose send queue is full
    /// holds back only its own.
    backlog: BTreeMap<PdcId, VecDeque<(NextHeader, Bytes)>>,
}

/// A message's bytes as the caller gave them: borrowed, copied once when the operation is
/// accepted, or shared, never copied before each packet's payload goes into its frame.
#[derive(Debug, Clone, Copy)]
enum Src<'a> {
    Slice(&'a [u8]),
    Shared(&'a Bytes),
}

impl Src<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Src::Slice(s) => s,
            Src::Shared(b) => b,
        }
    }

    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn to_bytes(self) -> Bytes {
        match self {
            Src::Slice(s) => Bytes::copy_from_slice(s),
            Src::Shared(b) => b.clone(),
        }
    }
}

/// A request packet to build.
struct Req {
    opcode: SesOpcode,
    msg_id: u16,
    dst: (u16, u16),
    buffer_offset: u64,
    key: u64,
    header_data: Option<u64>,
    total: usize,
    ext: Option<SesExt>,
    job_id: u32,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// An endpoint; `seed` goes to the PDS (Start_PSNs).
    pub fn new(cfg: Config, seed: u64) -> Endpoint<A> {
        let mut pds = pds::Endpoint::new(cfg.pds, seed);
        // Operations complete on their SES responses, never on PDS acknowledgements.
        pds.set_ack_events(false);
        Endpoint {
            cfg,
            pds,
            regions: Regions::default(),
            queues: Queues::new(),
            unexpected: VecDeque::new(),
            unexpected_bytes: 0,
            next_unexpected: 0,
            inbound: HashMap::new(),
            ops: HashMap::new(),
            next_msg_id: (seed as u16) | 1,
            completions: VecDeque::new(),
            stats: Stats::default(),
            jobs: HashSet::new(),
            rdv_waits: HashMap::new(),
            next_internal_key: 0,
            reserved: HashMap::new(),
            next_token: 0,
            backlog: BTreeMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The PDS underneath (counters, PDC state, close).
    pub fn pds(&mut self) -> &mut pds::Endpoint<A> {
        &mut self.pds
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Operations waiting for their response.
    pub fn outstanding(&self) -> usize {
        self.ops.len()
    }

    /// Receives posted and not matched yet.
    pub fn posted_count(&self) -> usize {
        self.queues.len()
    }

    /// Messages kept as unexpected.
    pub fn unexpected_count(&self) -> usize {
        self.unexpected.len()
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion<A>> {
        self.completions.pop_front()
    }

    fn job_of(&self, opts: &Opts) -> u32 {
        opts.job_id.unwrap_or(self.cfg.job_id) & 0xFF_FFFF
    }

    /// Also serves requests carrying `job_id` (a JobID of the AV method's auth keys); requests
    /// whose JobID is neither this nor the endpoint's own are answered BAD_JOB_ID, untouched.
    pub fn authorize_job(&mut self, job_id: u32) {
        self.jobs.insert(job_id & 0xFF_FFFF);
    }

    /// Stops serving `job_id` (not the endpoint's own).
    pub fn revoke_job(&mut self, job_id: u32) {
        self.jobs.remove(&(job_id & 0xFF_FFFF));
    }

    fn job_authorized(&self, job_id: u32) -> bool {
        job_id == self.cfg.job_id & 0xFF_FFFF || self.jobs.contains(&job_id)
    }

    fn alloc_msg_id(&mut self) -> u16 {
        while self.ops.contains_key(&self.next_msg_id) {
            self.next_msg_id = self.next_msg_id.wrapping_add(1);
        }
        let id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        id
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
        self.start_pdc_op(dst.fep, mode, CompletionKind::Send, req, data, context)
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
        self.start_pdc_op(dst.fep, mode, CompletionKind::Write, req, data, context)
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
        self.start_single(dst.fep, mode, CompletionKind::Read, req, &[], len, context)
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
        self.start_single(dst.fep, mode, kind, req, payload, len, opts.context)
    }

    /// A one-packet request over a PDC whose completion carries `len` bytes back (reads,
    /// fetching atomics) or nothing.
    #[allow(clippy::too_many_arguments)]
    fn start_single(
        &mut self,
        peer: A,
        mode: DeliveryMode,
        kind: CompletionKind,
        req: impl Fn(u16) -> Req,
        payload: &[u8],
        len: usize,
        context: u64,
    ) -> Result<u16, Error> {
        let msg_id = self.alloc_msg_id();
        let pdc_mode = if mode == DeliveryMode::Rod { Mode::Rod } else { Mode::Rud };
        let pdc = self.pds.connect(peer, pdc_mode).map_err(|_| Error::NoPdc)?;
        let r = req(msg_id);
        let body = Body::with_head(Bytes::copy_from_slice(payload), |head| {
            request_head(&r, &self.cfg, true, true, 0, payload.len(), head)
        });
        self.pds.send_on(pdc, NextHeader::ReqStd, body, u64::from(msg_id)).map_err(|_| Error::Busy)?;
        self.ops.insert(msg_id, out_op(context, kind, peer, Some(pdc), len, 1));
        Ok(msg_id)
    }

    fn rma_mode(&self, kind: OpKind, ordered: bool, key: u64) -> Result<DeliveryMode, Error> {
        match delivery_mode(self.cfg.ep_type, self.cfg.profile, kind, ordered, key) {
            DeliveryMode::Uud => Err(Error::Unsupported),
            m => Ok(m),
        }
    }

    /// A request segmented over a PDC: one packet per `max_payload` bytes.
    fn start_pdc_op(
        &mut self,
        peer: A,
        mode: DeliveryMode,
        kind: CompletionKind,
        req: impl Fn(u16) -> Req,
        data: Src<'_>,
        context: u64,
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
        let msg_id = self.alloc_msg_id();
        let r = req(msg_id);
        let data = data.to_bytes();
        for i in 0..packets {
            let off = i * step;
            let chunk = data.slice(off.min(data.len())..(off + step).min(data.len()));
            let body = request_body(&r, &self.cfg, i == 0, i + 1 == packets, off, chunk);
            self.pds.send_on(pdc, NextHeader::ReqStd, body, u64::from(msg_id)).expect("room checked");
        }
        self.ops.insert(msg_id, out_op(context, kind, peer, Some(pdc), data.len(), 1));
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
        let msg_id = self.alloc_msg_id();
        let base = req(msg_id);
        let step = self.cfg.max_payload.max(1);
        let pieces = len.div_ceil(step).max(1);
        for i in 0..pieces {
            let off = i * step;
            let n = step.min(len - off.min(len));
            let piece = Req { buffer_offset: base.buffer_offset + off as u64, total: n, ..req(msg_id) };
            let chunk = if data.is_empty() { Bytes::new() } else { data.slice(off..off + n) };
            let body = request_body(&piece, &self.cfg, true, true, 0, chunk);
            let cookie = (u64::from(msg_id) << 32) | off as u64;
            self.pds.rudi_send(peer, NextHeader::ReqStd, body, cookie);
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
        let msg_id = self.alloc_msg_id();
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
            request_body(&r, &self.cfg, true, true, 0, data.to_bytes()),
        );
        self.completions.push_back(Completion::local(
            context,
            CompletionKind::Send,
            Status::Ok,
            data.len(),
            Vec::new(),
        ));
        Ok(msg_id)
    }

    /// Posts a receive buffer of `len` bytes for messages `spec` accepts. An unexpected message it
    /// matches is taken at once.
    pub fn post_recv(&mut self, spec: RecvSpec<A>, len: usize, context: u64) {
        let posted = Posted { spec, buf: vec![0; len], context };
        let Some(i) = self.unexpected.iter().position(|u| spec.accepts(&u.info)) else {
            self.queues.post(posted);
            return;
        };
        let u = self.unexpected.remove(i).expect("found");
        self.unexpected_bytes -= u.data.len();
        match u.later {
            Later::Nothing => {}
            Later::Rendezvous(req) => {
                return self.start_rdv_read(posted, u.info, u.header_data, &u.data, req);
            }
            Later::Deferred { init_token, job_id } => {
                return self.restart_deferred(posted, u.info.src.fep, init_token, job_id);
            }
        }
        if u.complete {
            let mut posted = posted;
            let n = posted.buf.len().min(u.data.len());
            wire::copy_payload(&mut posted.buf[..n], &u.data[..n]);
            self.finish_recv(posted, u.info, u.data.len(), u.header_data);
            return;
        }
        // Still arriving: the receive takes its place, with what has come so far.
        let msg = self.inbound.values_mut().find(|m| matches!(m.dest, Dest::Unexpected(id) if id == u.id));
        let Some(msg) = msg else {
            // Not reachable while `forget_pdc` keeps both in step; never a panic if it were.
            self.queues.post(posted);
            return;
        };
        let mut posted = posted;
        let n = posted.buf.len().min(u.data.len());
        wire::copy_payload(&mut posted.buf[..n], &u.data[..n]);
        msg.dest = Dest::Recv(posted);
    }

    /// Cancels a posted receive (a completion with [`Status::Cancelled`] follows); false if no
    /// receive with that context is waiting.
    pub fn cancel_recv(&mut self, context: u64) -> bool {
        let Some(p) = self.queues.cancel(context) else { return false };
        self.completions.push_back(Completion::local(
            p.context,
            CompletionKind::Recv,
            Status::Cancelled,
            0,
            Vec::new(),
        ));
        true
    }

    /// A receive that could not get its message (a rendezvous whose read failed).
    fn finish_recv_status(
        &mut self,
        p: Posted<A>,
        info: MsgInfo<A>,
        status: Status,
        header_data: Option<u64>,
    ) {
        self.completions.push_back(Completion {
            context: p.context,
            kind: CompletionKind::Recv,
            status,
            len: 0,
            data: Vec::new(),
            src: Some(info.src),
            tag: info.tag,
            header_data,
        });
    }

    /// A receive whose buffer holds the (first `buf.len()` bytes of the) message is done.
    fn finish_recv(&mut self, p: Posted<A>, info: MsgInfo<A>, total: usize, header_data: Option<u64>) {
        let mut buf = p.buf;
        let len = total.min(buf.len());
        buf.truncate(len);
        let status = if total > len { Status::Truncated } else { Status::Ok };
        self.completions.push_back(Completion {
            context: p.context,
            kind: CompletionKind::Recv,
            status,
            len,
            data: buf,
            src: Some(info.src),
            tag: info.tag,
            header_data,
        });
    }

    /// Feeds one received UET packet (the PDS header onwards; CRC already checked).
    pub fn handle_packet(&mut self, now: Duration, src: A, buf: &[u8]) -> Result<(), wire::Error> {
        self.handle_packet_ecn(now, src, buf, false)
    }

    /// [`handle_packet`](Self::handle_packet) for a packet whose IP header was marked CE.
    pub fn handle_packet_ecn(
        &mut self,
        now: Duration,
        src: A,
        buf: &[u8],
        ce: bool,
    ) -> Result<(), wire::Error> {
        let d = self.pds.handle_packet_ecn(now, src, buf, ce)?;
        if let Some(d) = d {
            let (reply, piece) = match d.kind {
                DeliveryKind::Pdc { pdc, .. } => (Reply::Pdc(pdc), 0),
                DeliveryKind::RudiRequest { pkt_id } => (Reply::Rudi(src, pkt_id), 0),
                DeliveryKind::RudiResponse { cookie, .. } => (Reply::None, (cookie & 0xFFFF_FFFF) as usize),
                DeliveryKind::Uud => (Reply::None, 0),
            };
            // Sends and writes first, their header parsed inline (see parse_plain_standard).
            let plain = if d.next_hdr == NextHeader::ReqStd && carries_requests(d.kind) {
                SesRepr::parse_plain_standard(d.body)
            } else {
                None
            };
            if let Some(r) = plain {
                self.on_request(src, reply, &r, None, &d.body[StandardRequest::LEN..]);
                self.drain_pds_events();
                return Ok(());
            }
            match SesRepr::parse(d.body, d.next_hdr) {
                Ok(Some(ses)) => {
                    let payload = &d.body[ses.buffer_len()..];
                    self.on_ses(src, reply, d.kind, ses, payload, piece);
                }
                _ => self.stats.dropped += 1,
            }
        }
        self.drain_pds_events();
        Ok(())
    }

    fn on_ses(
        &mut self,
        src: A,
        reply: Reply<A>,
        kind: DeliveryKind,
        ses: SesRepr,
        payload: &[u8],
        piece: usize,
    ) {
        match (ses.header, kind) {
            (SesHeader::Standard(r), k) if carries_requests(k) => {
                self.on_request(src, reply, &r, ses.ext, payload)
            }
            (SesHeader::Response(r), DeliveryKind::Pdc { .. } | DeliveryKind::RudiResponse { .. }) => {
                self.on_response(src, r.message_id, r.head.return_code, r.head.list, &[], 0)
            }
            (SesHeader::ResponseData(r), DeliveryKind::Pdc { .. } | DeliveryKind::RudiResponse { .. }) => {
                let plen = usize::from(r.payload_length());
                if plen != payload.len() {
                    self.stats.dropped += 1;
                    return;
                }
                let at = piece + r.message_offset as usize;
                self.on_response(src, r.read_req_message_id, r.head.return_code, r.head.list, payload, at)
            }
            _ => self.stats.dropped += 1,
        }
    }

    fn on_request(
        &mut self,
        src: A,
        reply: Reply<A>,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
    ) {
        let c = &r.common;
        let total = r.request_length as usize;
        let (offset, header_data) = match r.som_field {
            SomField::HeaderData(h) => (0, (c.has(FLAG_HD)).then_some(h)),
            SomField::Segment { payload_length, message_offset, .. } => {
                if usize::from(payload_length) != payload.len() {
                    self.stats.dropped += 1;
                    return;
                }
                (message_offset as usize, None)
            }
        };
        if offset.checked_add(payload.len()).is_none_or(|end| end > total) {
            self.stats.dropped += 1;
            return;
        }
        let pdc = match reply {
            Reply::Pdc(p) => p,
            _ => 0,
        };
        let key = (src, pdc, r.message_id());
        let info = MsgInfo {
            src: Source { fep: src, initiator: r.initiator },
            tag: is_tagged(c.opcode).then_some(r.memory_key),
            job_id: c.job_id,
        };
        match c.opcode {
            SesOpcode::Read => return self.serve_read(reply, r),
            SesOpcode::Atomic | SesOpcode::FetchingAtomic => {
                return self.serve_atomic(reply, r, ext, payload);
            }
            SesOpcode::RendezvousSend | SesOpcode::RendezvousTsend => {
                return self.on_rendezvous(src, reply, r, ext, payload, info);
            }
            SesOpcode::DeferrableRtr => return self.on_rtr(src, reply, r),
            _ => {}
        }
        // One lookup per packet; the first packet of a message decides where its bytes go.
        let m = match self.inbound.get_mut(&key) {
            Some(m) => m,
            None => {
                let dest = self.destination(c, r, &info, total);
                let m = InMsg { dest, info, total, received: 0, header_data: None, job_id: c.job_id };
                self.inbound.entry(key).or_insert(m)
            }
        };
        if m.total != total {
            // Every packet of a message carries the same request_length; one that does not is not
            // part of it.
            self.stats.dropped += 1;
            return;
        }
        m.header_data = m.header_data.or(header_data);
        match &mut m.dest {
            Dest::Recv(p) => {
                let end = (offset + payload.len()).min(p.buf.len());
                if offset < end {
                    wire::copy_payload(&mut p.buf[offset..end], &payload[..end - offset]);
                }
            }
            Dest::Unexpected(id) => {
                let id = *id;
                let slot = self.unexpected.iter_mut().find(|u| u.id == id);
                match slot.and_then(|u| u.data.get_mut(offset..offset + payload.len())) {
                    Some(dst) => wire::copy_payload(dst, payload),
                    None => self.stats.dropped += 1,
                }
            }
            Dest::Rma { key, base } => {
                // Checked on the first packet; the region may have been deregistered (or replaced
                // by a smaller one) since: then the rest of the write is refused, never a panic.
                let at = *base as usize + offset;
                match self.regions.get_mut(*key).and_then(|r| r.data.get_mut(at..at + payload.len())) {
                    Some(dst) => wire::copy_payload(dst, payload),
                    None => m.dest = Dest::Discard(ReturnCode::BadMkey),
                }
            }
            Dest::Discard(_) | Dest::Deferred => {}
        }
        m.received += payload.len();
        if m.received < m.total {
            return;
        }
        let m = self.inbound.remove(&key).expect("present");
        let rc = match m.dest {
            Dest::Recv(p) => {
                let truncated = m.total > p.buf.len();
                self.finish_recv(p, m.info, m.total, m.header_data);
                if truncated { ReturnCode::TooLong } else { ReturnCode::Ok }
            }
            Dest::Unexpected(id) => {
                if let Some(u) = self.unexpected.iter_mut().find(|u| u.id == id) {
                    u.complete = true;
                    u.header_data = m.header_data;
                }
                ReturnCode::Ok
            }
            Dest::Rma { key, .. } => {
                if let Some(r) = self.regions.get_mut(key) {
                    r.accesses += 1;
                }
                if let Some(h) = m.header_data {
                    self.completions.push_back(Completion {
                        context: 0,
                        kind: CompletionKind::RemoteWrite,
                        status: Status::Ok,
                        len: m.total,
                        data: Vec::new(),
                        src: Some(m.info.src),
                        tag: None,
                        header_data: Some(h),
                    });
                }
                ReturnCode::Ok
            }
            Dest::Discard(rc) => rc,
            Dest::Deferred => {
                return self.respond_list(
                    reply,
                    r.message_id(),
                    m.job_id,
                    ReturnCode::NoMatch,
                    0,
                    LIST_OVERFLOW,
                );
            }
        };
        if c.opcode != SesOpcode::DatagramSend {
            self.respond(reply, r.message_id(), m.job_id, rc, m.total as u32);
        }
    }

    /// Decides, on the first packet of a message to arrive, where its bytes go.
    fn destination(
        &mut self,
        c: &RequestCommon,
        r: &StandardRequest,
        info: &MsgInfo<A>,
        total: usize,
    ) -> Dest<A> {
        if let Err(rc) = self.check_target(c, total) {
            return Dest::Discard(rc);
        }
        match c.opcode {
            SesOpcode::Send | SesOpcode::TaggedSend | SesOpcode::DatagramSend => match self.queues.take(info)
            {
                Some(p) => Dest::Recv(p),
                None => self.unexpected_dest(info, total, c.opcode == SesOpcode::DatagramSend),
            },
            SesOpcode::DeferrableSend | SesOpcode::DeferrableTsend => self.deferrable_dest(r, info, total),
            SesOpcode::Write => {
                match self.regions.check(r.memory_key, c.job_id, r.buffer_offset, total as u64, Want::Write) {
                    Ok(()) => Dest::Rma { key: r.memory_key, base: r.buffer_offset },
                    Err(rc) => Dest::Discard(rc),
                }
            }
            _ => Dest::Discard(ReturnCode::UnsupportedOp),
        }
    }

    /// The checks every request to this endpoint passes first: JobID, PIDonFEP, resource index,
    /// length.
    fn check_target(&self, c: &RequestCommon, len: usize) -> Result<(), ReturnCode> {
        if !self.job_authorized(c.job_id) {
            Err(ReturnCode::BadJobId)
        } else if c.pid_on_fep() != self.cfg.pid_on_fep {
            Err(ReturnCode::BadPid)
        } else if c.resource_index() != self.cfg.resource_index {
            Err(ReturnCode::BadIndex)
        } else if len > self.cfg.max_message {
            Err(ReturnCode::TooLong)
        } else {
            Ok(())
        }
    }

    /// A message no receive takes: kept as unexpected while the byte budget allows (datagrams
    /// never are), else refused with NO_MATCH.
    fn unexpected_dest(&mut self, info: &MsgInfo<A>, total: usize, datagram: bool) -> Dest<A> {
        if datagram || self.unexpected_bytes + total > self.cfg.unexpected_bytes {
            return Dest::Discard(ReturnCode::NoMatch);
        }
        self.unexpected_bytes += total;
        self.stats.unexpected += 1;
        Dest::Unexpected(self.push_unexpected(*info, vec![0; total], false, None, Later::Nothing))
    }

    /// Files a message on the unexpected (overflow) list, after those already there; its id.
    fn push_unexpected(
        &mut self,
        info: MsgInfo<A>,
        data: Vec<u8>,
        complete: bool,
        header_data: Option<u64>,
        later: Later<A>,
    ) -> u64 {
        self.next_unexpected += 1;
        let id = self.next_unexpected;
        self.unexpected.push_back(Unexpected { id, info, data, complete, header_data, later });
        id
    }

    fn serve_read(&mut self, reply: Reply<A>, r: &StandardRequest) {
        let c = &r.common;
        let len = r.request_length as usize;
        // A rendezvous read of one of this endpoint's own send buffers is authorized by that
        // buffer's JobID alone (the send may have used an auth key's JobID the endpoint does not
        // otherwise serve).
        let own_rendezvous = r.memory_key & crate::key::INTERNAL != 0;
        let first = match self.check_target(c, len) {
            Err(ReturnCode::BadJobId) if own_rendezvous => Ok(()),
            other => other,
        };
        let check = first.and_then(|()| {
            self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Read)
        });
        if let Err(rc) = check {
            return self.respond(reply, r.message_id(), c.job_id, rc, 0);
        }
        let step = self.cfg.max_payload.max(1);
        let region = &self.regions.get(r.memory_key).expect("checked").data;
        let base = r.buffer_offset as usize;
        let mut packets = Vec::new();
        for off in (0..len.max(1)).step_by(step) {
            let n = step.min(len - off.min(len));
            let bytes = &region[base + off..base + off + n];
            packets.push(data_response(r.message_id(), c.job_id, len, off, bytes));
        }
        for p in packets {
            self.reply(reply, NextHeader::RspData, p);
        }
        if let Some(region) = self.regions.get_mut(r.memory_key) {
            region.accesses += 1;
        }
    }

    /// ATOMIC and FETCHING_ATOMIC: one packet, applied when it arrives (the PDS delivers each
    /// packet once), answered with RSP (non-fetching) or RSP_DATA holding the old value.
    fn serve_atomic(&mut self, reply: Reply<A>, r: &StandardRequest, ext: Option<SesExt>, payload: &[u8]) {
        let c = &r.common;
        match self.atomic_at_target(r, ext, payload) {
            Ok(old) if c.opcode == SesOpcode::FetchingAtomic => {
                let rsp = data_response(r.message_id(), c.job_id, old.len(), 0, &old);
                self.reply(reply, NextHeader::RspData, rsp);
            }
            Ok(_) => self.respond(reply, r.message_id(), c.job_id, ReturnCode::Ok, r.request_length),
            Err(rc) => self.respond(reply, r.message_id(), c.job_id, rc, 0),
        }
    }

    fn atomic_at_target(
        &mut self,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
    ) -> Result<Vec<u8>, ReturnCode> {
        let c = &r.common;
        let len = r.request_length as usize;
        self.check_target(c, len)?;
        let fetching = c.opcode == SesOpcode::FetchingAtomic;
        let (a, cas) = match ext {
            Some(SesExt::Atomic(a)) => (a, None),
            Some(SesExt::CompareSwap(x)) => (x.atomic, Some(x)),
            _ => return Err(ReturnCode::UnsupportedOp),
        };
        amo::check(a.amo_opcode, a.datatype, fetching)?;
        let size = amo::element_size(a.datatype).ok_or(ReturnCode::AmoUnsupportedDt)?;
        let single = c.has(FLAG_SOM) && c.has(FLAG_EOM);
        let operands_ok = if cas.is_some() { payload.is_empty() } else { payload.len() == len };
        if !single || !operands_ok || len == 0 || len % size != 0 || (fetching && len != size) {
            return Err(ReturnCode::AmoUnsupportedSize);
        }
        self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Write)?;
        if fetching {
            self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Read)?;
        }
        if r.buffer_offset % size as u64 != 0 {
            return Err(ReturnCode::AmoUnaligned);
        }
        let at = r.buffer_offset as usize;
        let region = self.regions.get_mut(r.memory_key).expect("checked");
        region.accesses += 1;
        let target = &mut region.data[at..at + len];
        match cas {
            Some(x) => amo::compare_swap(
                a.amo_opcode,
                a.datatype,
                target,
                &amo::from_cas_field(&x.compare, size),
                &amo::from_cas_field(&x.swap, size),
            ),
            None => {
                let mut old = Vec::new();
                amo::apply(a.amo_opcode, a.datatype, target, payload, Some(&mut old))?;
                Ok(old)
            }
        }
    }

    fn respond(&mut self, reply: Reply<A>, msg_id: u16, job_id: u32, rc: ReturnCode, modified: u32) {
        self.respond_list(reply, msg_id, job_id, rc, modified, 0);
    }

    fn respond_list(
        &mut self,
        reply: Reply<A>,
        msg_id: u16,
        job_id: u32,
        rc: ReturnCode,
        modified: u32,
        list: u8,
    ) {
        if rc != ReturnCode::Ok {
            self.stats.errors_sent += 1;
        }
        let head = ResponseHead { list, opcode: ResponseOpcode::Response, version: 0, return_code: rc };
        let rsp = Response { head, message_id: msg_id, ri_generation: 0, job_id, modified_length: modified };
        let mut v = vec![0; Response::LEN];
        rsp.emit(&mut v).expect("sized");
        self.reply(reply, NextHeader::Rsp, Bytes::from(v));
    }

    fn reply(&mut self, reply: Reply<A>, nh: NextHeader, bytes: Bytes) {
        match reply {
            Reply::Pdc(pdc) => {
                let queue = self.backlog.entry(pdc).or_default();
                queue.push_back((nh, bytes));
                if !flush_pdc(&mut self.pds, pdc, queue) {
                    self.backlog.remove(&pdc);
                }
            }
            Reply::Rudi(peer, pkt_id) => self.pds.rudi_respond(peer, pkt_id, nh, bytes),
            Reply::None => {}
        }
    }

    /// Queues waiting responses on their PDCs while the PDCs have room (a large READ answered at
    /// once can be more packets than a PDC's send queue holds: the rest wait here, never dropped).
    fn flush_backlog(&mut self) {
        let pds = &mut self.pds;
        self.backlog.retain(|&pdc, queue| flush_pdc(pds, pdc, queue));
    }

    fn on_response(&mut self, src: A, msg_id: u16, rc: ReturnCode, list: u8, data: &[u8], at: usize) {
        if self.ops.get(&msg_id).is_none_or(|op| op.peer != src) {
            self.stats.dropped += 1;
            return;
        }
        if self.deferred(msg_id, rc, list) {
            return;
        }
        let op = self.ops.get_mut(&msg_id).expect("checked");
        if rc != ReturnCode::Ok {
            op.error = Some(rc);
            op.pieces_left = 0;
            op.got = op.total;
        } else if matches!(op.kind, CompletionKind::Read | CompletionKind::FetchAtomic) {
            match at.checked_add(data.len()).filter(|&end| end <= op.total) {
                Some(end) => {
                    wire::copy_payload(&mut op.data[at..end], data);
                    op.got += data.len();
                }
                None => {
                    self.stats.dropped += 1;
                    return;
                }
            }
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
            return;
        }
        let op = self.ops.remove(&msg_id).expect("present");
        let status = op.error.map_or(Status::Ok, Status::Remote);
        self.end_op(op, status);
    }

    /// An operation ended with `status`: its internal region goes, and its completion (with the
    /// bytes it fetched, on success) goes to the user, or, for the endpoint's own operations, to
    /// the rendezvous / deferral machinery.
    fn end_op(&mut self, op: OutOp<A>, status: Status) {
        if let Some(k) = op.cleanup_key {
            self.regions.deregister(k);
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

    fn drain_pds_events(&mut self) {
        while let Some(e) = self.pds.poll_event() {
            match e {
                pds::Event::Failed { pdc, error, .. } => {
                    let mut dead: Vec<u16> =
                        self.ops.iter().filter(|(_, o)| o.pdc == Some(pdc)).map(|(&id, _)| id).collect();
                    dead.sort_unstable();
                    for id in dead {
                        let op = self.ops.remove(&id).expect("listed");
                        self.end_op(op, Status::Failed(error));
                    }
                    self.forget_pdc(pdc);
                }
                pds::Event::RudiFailed { cookie, .. } => {
                    if let Some(op) = self.ops.remove(&((cookie >> 32) as u16)) {
                        self.end_op(op, Status::Timeout);
                    }
                }
                pds::Event::Closed { pdc, .. } => self.forget_pdc(pdc),
                pds::Event::Established { .. } | pds::Event::Accepted { .. } | pds::Event::Acked { .. } => {}
            }
        }
    }

    /// Drops the partly received messages of a PDC that failed or closed: an unexpected one is
    /// discarded with its bytes, a receive it had taken is posted again (at the back of its queue).
    fn forget_pdc(&mut self, pdc: PdcId) {
        let gone: Vec<_> = self.inbound.keys().filter(|k| k.1 == pdc).copied().collect();
        for key in gone {
            match self.inbound.remove(&key).map(|m| m.dest) {
                Some(Dest::Unexpected(id)) => {
                    if let Some(i) = self.unexpected.iter().position(|u| u.id == id) {
                        let u = self.unexpected.remove(i).expect("found");
                        self.unexpected_bytes -= u.data.len();
                    }
                }
                Some(Dest::Recv(p)) => self.queues.post(p),
                _ => {}
            }
        }
    }

    /// Writes the next packet to send into `buf` (see [`pds::Endpoint::poll_transmit`]).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<pds::Transmit<A>> {
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        self.pds.poll_transmit(now, buf)
    }

    /// [`poll_transmit`](Self::poll_transmit) with the payload left where it is (see
    /// [`pds::Endpoint::poll_transmit_split`]): the headers are written, the payload returned.
    pub fn poll_transmit_split(
        &mut self,
        now: Duration,
        buf: &mut [u8],
    ) -> Option<(pds::Transmit<A>, Bytes)> {
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        self.pds.poll_transmit_split(now, buf)
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.pds.poll_timeout()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.pds.handle_timeout(now);
        self.drain_pds_events();
    }
}

/// Queues `queue`'s responses on `pdc` in order while it has room; whether some still wait. A
/// response whose PDC failed or closed has nobody to go to and is dropped.
fn flush_pdc<A: Copy + Eq + Hash + Ord + std::fmt::Debug>(
    pds: &mut pds::Endpoint<A>,
    pdc: PdcId,
    queue: &mut VecDeque<(NextHeader, Bytes)>,
) -> bool {
    while let Some((nh, bytes)) = queue.pop_front() {
        match pds.send_on(pdc, nh, bytes.clone(), 0) {
            Ok(_) | Err(SendError::UnknownPdc | SendError::Closing | SendError::NoPdcAvailable) => {}
            Err(SendError::QueueFull) => {
                queue.push_front((nh, bytes));
                return true;
            }
        }
    }
    false
}

/// One RSP_DATA packet: `bytes` at `offset` of a `total`-byte answer to request `msg_id`.
fn data_response(msg_id: u16, job_id: u32, total: usize, offset: usize, bytes: &[u8]) -> Bytes {
    let head = ResponseHead {
        list: 0,
        opcode: ResponseOpcode::ResponseWData,
        version: 0,
        return_code: ReturnCode::Ok,
    };
    let rsp = ResponseData {
        head,
        message_id: msg_id,
        reserved: 0,
        job_id,
        read_req_message_id: msg_id,
        length_word: bytes.len() as u16,
        modified_length: total as u32,
        message_offset: offset as u32,
    };
    let mut v = vec![0; ResponseData::LEN + bytes.len()];
    rsp.emit(&mut v).expect("sized");
    v[ResponseData::LEN..].copy_from_slice(bytes);
    Bytes::from(v)
}

/// The request opcodes whose `memory_key` slot carries match bits.
fn is_tagged(op: SesOpcode) -> bool {
    matches!(op, SesOpcode::TaggedSend | SesOpcode::RendezvousTsend | SesOpcode::DeferrableTsend)
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
    let fetches = matches!(kind, CompletionKind::Read | CompletionKind::FetchAtomic);
    let data = if fetches { vec![0; total] } else { Vec::new() };
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

/// Whether a PDS delivery of this kind can carry a SES request (a PDC's packets, RUDI requests,
/// UUD datagrams), not only responses.
fn carries_requests(kind: DeliveryKind) -> bool {
    matches!(kind, DeliveryKind::Pdc { .. } | DeliveryKind::RudiRequest { .. } | DeliveryKind::Uud)
}

/// The bytes after the PDS header of one request packet: the standard header (SOM form with
/// header_data on the first packet, segment form after) and the payload, shared.
fn request_body(r: &Req, cfg: &Config, som: bool, eom: bool, offset: usize, chunk: Bytes) -> Body {
    let len = chunk.len();
    Body::with_head(chunk, |head| request_head(r, cfg, som, eom, offset, len, head))
}

/// Writes the standard header (and extension) of a request packet carrying `len` payload bytes at
/// `offset` into `head`; returns its length.
fn request_head(
    r: &Req,
    cfg: &Config,
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
