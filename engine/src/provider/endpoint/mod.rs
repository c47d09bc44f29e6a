//! Domain, endpoint and memory regions (`../shared/spec/uet-libfabric.md`) on a [`Fabric`]
//! (`fabric.rs`).

use ses::key::{IDEMPOTENT_SAFE, OPTIMIZED, RKEY_MASK};
use ses::{
    Access, Addr, Completion, CompletionKind, EpType, JobScope, Opts, Profile, RecvSpec, Source, Status,
};
use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::rc::{Rc, Weak};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

use super::UserMem;
use super::control::FALLBACK_JOB_ID;
use super::errno::{FiErrno, FiError, errno_of_status};
use super::fabric::{Fabric, FabricInner, Member};
use super::info::{Info, RMA_SIZE_RANGE, caps};
use super::objects::{
    AddressVector, AvInner, CompletionQueue, Counter, CqEntry, CqErrEntry, EqEvent, EventQueue,
    FI_ADDR_UNSPEC, FiAddr, JobSink, UetAddr, bind, cq_flags,
};
use super::shared::{self, DomainKey, DomainRegion, DomainShared, RegionSink, Spec};
use super::stat::StatNode;
use crate::datapath::Datapath;
use crate::uet::UetNode;
use frame::UserBuf;

mod recv;

/// How long an endpoint holds the ACK of packets that ask for none (injects: nobody waits for
/// their completion; the middle of a burst, which `pds::Config::ack_every` bounds). Sent in the
/// call that delivers them, those ACKs would lie on the path of the program's answer; held for
/// a few round trips, one ACK covers several exchanges of a ping-pong. Well below the
/// retransmission timeout (`pds::Config::rto`, 5 ms).
pub const ACK_DELAY: std::time::Duration = std::time::Duration::from_micros(200);

/// How an endpoint gets its JobID (`auth_key_size` of the endpoint attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobIdMethod {
    /// `auth_key_size` 0 (default): the control plane's JobID for the process, else the fallback.
    Indirect,
    /// `auth_key_size` 3: this JobID, which must be assigned to the process.
    Direct(u32),
    /// `FI_AV_AUTH_KEY`: per destination, from the AV's auth keys (the endpoint's own JobID as in
    /// the indirect method for regions and receives bound to "the endpoint").
    Av,
}

/// Endpoint attributes.
#[derive(Debug, Clone, Copy)]
pub struct EpAttr {
    /// The JobID method.
    pub job_id: JobIdMethod,
    /// Message ordering requested (FI_ORDER_SAS etc.): ROD.
    pub ordered: bool,
    /// This endpoint's rank: the `initiator` of its requests (AV index at the peers).
    pub rank: Option<u32>,
}

impl Default for EpAttr {
    fn default() -> Self {
        EpAttr { job_id: JobIdMethod::Indirect, ordered: false, rank: None }
    }
}

/// Remote access of a memory region.
pub type MrAccess = Access;

/// Which JobIDs a region or receive buffer is exposed to (`auth_key_size` of `fi_mr_regattr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrAuth {
    /// 0: any JobID.
    Any,
    /// 3: the endpoint's JobID.
    Endpoint,
    /// FI_AV_AUTH_KEY: the JobID of this AV address's auth key.
    Av(FiAddr),
}

impl Fabric {
    /// `fi_domain` for `process` (the identity the control plane assigns JobIDs to).
    pub fn domain(&self, info: &Info, process: u32) -> Domain {
        Domain { fabric: self.clone(), info: info.clone(), process, shared: Rc::default() }
    }
}

/// `fi_domain`: opens the objects of one process.
#[derive(Debug, Clone)]
pub struct Domain {
    fabric: Fabric,
    info: Info,
    process: u32,
    /// Its endpoints and the regions registered on it ([`Domain::mr_reg_domain`]).
    shared: Rc<RefCell<DomainShared>>,
}

impl Domain {
    fn weak(&self) -> Weak<RefCell<FabricInner>> {
        Rc::downgrade(&self.fabric.inner)
    }

    /// `fi_cq_open`.
    pub fn cq_open(&self) -> CompletionQueue {
        CompletionQueue::new(self.weak())
    }

    /// `fi_cntr_open`.
    pub fn cntr_open(&self) -> Counter {
        Counter::new(self.weak())
    }

    /// `fi_eq_open`.
    pub fn eq_open(&self) -> EventQueue {
        EventQueue::default()
    }

    /// `fi_av_open` (FI_AV_TABLE; UNSPEC and MAP behave the same).
    pub fn av_open(&self) -> AddressVector {
        AddressVector {
            inner: Rc::new(RefCell::new(AvInner::default())),
            process: self.process,
            fabric: self.weak(),
        }
    }

    /// `fi_endpoint`: an endpoint of the info's profile and type on a fresh address of the
    /// fabric. The JobID comes from `attr.job_id`: FI_EACCES when the control plane assigned the
    /// process none (and the fallback is disabled) or not the one asked for; with the fallback
    /// JobID, FI_EINVAL when `UET_PROVIDER_INITIATOR_ID` is unset.
    pub fn endpoint(&self, attr: EpAttr) -> Result<Endpoint, FiError> {
        let mut f = self.fabric.inner.borrow_mut();
        let assigned = f.control.jobs_of(self.process).first().copied();
        let (job, fallback) = match attr.job_id {
            JobIdMethod::Direct(j) if f.control.may_use(self.process, j) => (j, false),
            JobIdMethod::Direct(j) => {
                return Err(FiError::new(
                    FiErrno::EACCES,
                    format!("JobID {j} is not assigned to this process"),
                ));
            }
            JobIdMethod::Indirect | JobIdMethod::Av => match assigned {
                Some(j) => (j, false),
                None if f.control.fallback() => (FALLBACK_JOB_ID, true),
                None => {
                    return Err(FiError::new(
                        FiErrno::EACCES,
                        "no JobID assigned and the fallback is disabled",
                    ));
                }
            },
        };
        let initiator = match (fallback, self.info.config.initiator_id) {
            (true, None) => {
                return Err(FiError::new(
                    FiErrno::EINVAL,
                    "the fallback JobID needs UET_PROVIDER_INITIATOR_ID, which is unset",
                ));
            }
            (true, Some(id)) => attr.rank.unwrap_or(id),
            (false, _) => attr.rank.unwrap_or(0),
        };
        let (allocated, pid_on_fep) = f.control.allocate()?;
        let port = f.open_port(allocated)?;
        let ip = port.ip;
        let c = &self.info.config;
        let cfg = ses::Config {
            ep_type: self.info.ep_type,
            profile: self.info.profile,
            job_id: job,
            pid_on_fep,
            resource_index: self.info.service.start_index,
            initiator,
            max_payload: port.max_payload,
            max_eager: c.max_eager,
            msg_rendezvous_size: c.msg_rendezvous_size,
            tag_rendezvous_size: c.tag_rendezvous_size,
            pds: pds::Config { ack_delay: ACK_DELAY, ..pds::Config::default() },
            ..ses::Config::default()
        };
        let seed = f.seed.wrapping_mul(31).wrapping_add(u64::from(ip.to_bits()));
        let mut node = UetNode::new(port.dp, ses::Endpoint::new(cfg, seed), port.require_checksum)
            .map_err(|e| FiError::new(FiErrno::EINVAL, e))?;
        // The domain's traffic class, for its data and its acknowledgements (provider::tclass).
        let tc = crate::uet::TrafficClass { data: self.info.tclass, control: self.info.tclass };
        node.set_traffic_class(tc).map_err(|e| FiError::new(FiErrno::EINVAL, e))?;
        if let Some(b) = f.control.security() {
            node.enable_tss(tss::SecureDomain::new(b.config, b.key, b.epoch));
        }
        let profiles = match self.info.profile {
            Profile::AiBase => 0b001,
            Profile::AiFull => 0b011,
            Profile::Hpc => 0b101,
        };
        let name = UetAddr { ip, pid_on_fep, resource_index: cfg.resource_index, initiator, profiles };
        let inner = Rc::new(RefCell::new(EpInner {
            stat_name: super::stat::endpoint_name(f.endpoints.len(), &self.info),
            fabric: self.weak(),
            node,
            info: self.info.clone(),
            attr,
            name,
            job,
            max_rma: RMA_SIZE_RANGE.0,
            tx_cq: None,
            rx_cq: None,
            cntrs: Vec::new(),
            mr_cntrs: Vec::new(),
            eq: None,
            av: None,
            pending: HashMap::new(),
            next: 0,
            multi: HashMap::new(),
        }));
        let member: Weak<RefCell<dyn Member>> = Rc::downgrade(&inner) as _;
        f.endpoints.push(member);
        drop(f);
        self.shared.borrow_mut().add_endpoint(Rc::downgrade(&inner) as Weak<dyn RegionSink>)?;
        Ok(Endpoint { inner })
    }

    /// `fi_mr_reg` on the domain (a program without FI_MR_ENDPOINT): the memory `view` gives
    /// (a fresh view of the same bytes each call) exposed to any JobID with `access`, on every
    /// endpoint of the domain, now and opened later, under the program's key or one chosen here
    /// (`key`); requests address it from `base` (0: offsets; its address: virtual addresses).
    pub fn mr_reg_domain(
        &self,
        view: impl Fn() -> Option<UserBuf> + 'static,
        access: MrAccess,
        key: DomainKey,
        base: u64,
    ) -> Result<DomainRegion, FiError> {
        shared::register(&self.shared, view, access, key, base)
    }

    /// `fi_mr_regattr` + `fi_mr_bind` to `ep`: `buf` exposed under the user's `key` (RKEY bits
    /// 0-46) with `flags` (IDEMPOTENT_SAFE, OPTIMIZED) to the JobIDs `auth` names. `buf` is the
    /// endpoint's own `Vec<u8>`, or the program's memory registered in place
    /// ([`UserMem`]).
    pub fn mr_reg(
        &self,
        ep: &Endpoint,
        buf: impl ses::Memory + 'static,
        access: MrAccess,
        key: u64,
        flags: u64,
        auth: MrAuth,
    ) -> Result<MemoryRegion, FiError> {
        if key & !RKEY_MASK != 0 || flags & !(IDEMPOTENT_SAFE | OPTIMIZED) != 0 {
            return Err(FiError::new(
                FiErrno::EINVAL,
                "a key is an RKEY (48 bits) plus IDEMPOTENT_SAFE / OPTIMIZED",
            ));
        }
        let mut e = ep.inner.borrow_mut();
        let scope = match auth {
            MrAuth::Any => JobScope::Any,
            MrAuth::Endpoint => JobScope::Job(e.job),
            MrAuth::Av(a) => JobScope::Job(e.av_job(a)?),
        };
        let full = key | flags;
        e.node.ses().regions.register(full, buf, access, scope).map_err(|err| match err {
            ses::key::KeyError::InUse => FiError::new(FiErrno::EBUSY, "key in use"),
            _ => FiError::new(FiErrno::EKEYREJECTED, format!("key {key:#x} not usable: {err:?}")),
        })?;
        if let Some(eq) = &e.eq {
            eq.push(EqEvent::MrComplete { key: full });
        }
        Ok(MemoryRegion { key: full, ep: Rc::downgrade(&ep.inner) })
    }
}

/// A registered region.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    key: u64,
    ep: Weak<RefCell<EpInner>>,
}

impl MemoryRegion {
    /// `fi_mr_key`: the key peers use (with its flags).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The region's bytes now.
    pub fn data(&self) -> Vec<u8> {
        self.ep
            .upgrade()
            .and_then(|e| e.borrow_mut().node.ses().regions.get(self.key).map(|r| r.data.bytes().to_vec()))
            .unwrap_or_default()
    }

    /// `fi_mr_bind` of a counter: counts remote accesses to the region. Refused (FI_EINVAL) for
    /// IDEMPOTENT_SAFE regions: their accesses may arrive over RUDI, possibly more than once.
    pub fn bind_cntr(&self, cntr: &Counter) -> Result<(), FiError> {
        if self.key & IDEMPOTENT_SAFE != 0 {
            return Err(FiError::new(
                FiErrno::EINVAL,
                "a counter cannot be bound to an IDEMPOTENT_SAFE region",
            ));
        }
        let ep = self.ep.upgrade().ok_or_else(|| FiError::new(FiErrno::EINVAL, "endpoint closed"))?;
        let mut e = ep.borrow_mut();
        let seen = e.node.ses().regions.get(self.key).map_or(0, |r| r.accesses);
        e.mr_cntrs.push((self.key, cntr.clone(), seen));
        Ok(())
    }

    /// `fi_close`: deregisters.
    pub fn close(self) {
        if let Some(e) = self.ep.upgrade() {
            e.borrow_mut().node.ses().regions.deregister(self.key);
        }
    }
}

/// What a pending operation completes as.
#[derive(Debug, Clone, Copy)]
struct Pending {
    context: u64,
    flags: u64,
    inject: bool,
}

/// A multi-receive buffer ([`Endpoint::recv_multi`]) while it is posted.
struct Multi {
    spec: RecvSpec<Ipv4Addr>,
    /// The buffer's length, the bytes taken so far, and the space below which it is released.
    len: usize,
    taken: usize,
    min: usize,
    /// The buffer from a byte on (see [`MultiRecv::slice`]).
    slice: Box<dyn FnMut(usize) -> Option<UserBuf>>,
}

/// A receive buffer that takes message after message (`fi_recvmsg` with FI_MULTI_RECV).
pub struct MultiRecv {
    /// Its length.
    pub len: usize,
    /// Released once less than this many bytes remain (FI_OPT_MIN_MULTI_RECV).
    pub min: usize,
    /// The program's buffer from byte `offset` (below `len`) to its end: the receive posted
    /// there takes the next message.
    pub slice: Box<dyn FnMut(usize) -> Option<UserBuf>>,
}

pub(super) struct EpInner {
    /// Its name for `softrdma stat`, and its fabric, told when it closes (`stat.rs`).
    stat_name: String,
    fabric: Weak<RefCell<FabricInner>>,
    node: UetNode<Box<dyn Datapath>>,
    info: Info,
    attr: EpAttr,
    name: UetAddr,
    job: u32,
    max_rma: usize,
    tx_cq: Option<CompletionQueue>,
    rx_cq: Option<CompletionQueue>,
    cntrs: Vec<(Counter, u64)>,
    mr_cntrs: Vec<(u64, Counter, u64)>,
    eq: Option<EventQueue>,
    av: Option<AddressVector>,
    pending: HashMap<u64, Pending>,
    next: u64,
    /// Multi-receive buffers by context.
    multi: HashMap<u64, Multi>,
}

impl std::fmt::Debug for EpInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpInner").field("name", &self.name).field("job", &self.job).finish_non_exhaustive()
    }
}

fn ses_err(e: ses::Error) -> FiError {
    let errno = match e {
        ses::Error::TooLong => FiErrno::EMSGSIZE,
        ses::Error::Busy | ses::Error::NoPdc => FiErrno::EAGAIN,
        ses::Error::Unsupported => FiErrno::EOPNOTSUPP,
        ses::Error::BadOperand => FiErrno::EINVAL,
    };
    FiError::new(errno, e.to_string())
}

impl RegionSink for RefCell<EpInner> {
    fn add_region(&self, r: &Spec, mem: UserBuf) -> Result<(), ses::key::KeyError> {
        self.borrow_mut().node.ses().regions.register_at(r.key, UserMem(mem), r.access, JobScope::Any, r.base)
    }

    fn remove_region(&self, key: u64) {
        self.borrow_mut().node.ses().regions.deregister(key);
    }

    fn event(&self, e: EqEvent) {
        if let Some(eq) = &self.borrow().eq {
            eq.push(e);
        }
    }
}

impl JobSink for RefCell<EpInner> {
    fn authorize_job(&self, job_id: u32) {
        self.borrow_mut().node.ses().authorize_job(job_id);
    }
}

impl Member for EpInner {
    fn progress(&mut self) -> bool {
        EpInner::progress(self)
    }

    fn node(&self) -> &UetNode<Box<dyn Datapath>> {
        &self.node
    }

    fn stat(&mut self) -> StatNode<'_> {
        StatNode { name: &self.stat_name, node: &mut self.node }
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        super::fabric::stat_closing(&self.fabric, &self.stat_name, &mut self.node);
    }
}

impl EpInner {
    fn progress(&mut self) -> bool {
        let mut moved = self.node.progress();
        while let Some(c) = self.node.ses().poll_completion() {
            moved = true;
            self.dispatch(c);
        }
        for i in 0..self.mr_cntrs.len() {
            let key = self.mr_cntrs[i].0;
            let now = self.node.ses().regions.get(key).map_or(0, |r| r.accesses);
            let (_, cntr, seen) = &mut self.mr_cntrs[i];
            for _ in *seen..now {
                cntr.count(true, 0);
            }
            *seen = now.max(*seen);
        }
        moved
    }

    fn source(&self, src: Option<Source<Ipv4Addr>>) -> FiAddr {
        let (Some(s), Some(av)) = (src, &self.av) else { return FI_ADDR_UNSPEC };
        let av = av.inner.borrow();
        av.entries
            .iter()
            .position(|e| !e.removed && e.addr.ip == s.fep && e.addr.initiator == s.initiator)
            .map_or(FI_ADDR_UNSPEC, |i| i as FiAddr)
    }

    fn dispatch(&mut self, c: Completion<Ipv4Addr>) {
        let mut offset = 0;
        let (flags, inject, context) = match c.kind {
            CompletionKind::Recv if self.multi.contains_key(&c.context) => {
                let ok = c.status == Status::Ok;
                let (at, released) = self.multi_taken(c.context, c.len, ok).unwrap_or((0, true));
                offset = at;
                let last = if released { cq_flags::MULTI_RECV } else { 0 };
                let data = if c.header_data.is_some() { cq_flags::REMOTE_CQ_DATA } else { 0 };
                (cq_flags::RECV | cq_flags::MSG | data | last, false, c.context)
            }
            CompletionKind::Recv => {
                let tagged = if c.tag.is_some() { cq_flags::TAGGED } else { cq_flags::MSG };
                let data = if c.header_data.is_some() { cq_flags::REMOTE_CQ_DATA } else { 0 };
                (cq_flags::RECV | tagged | data, false, c.context)
            }
            CompletionKind::RemoteWrite => {
                (cq_flags::RMA | cq_flags::REMOTE_WRITE | cq_flags::REMOTE_CQ_DATA, false, 0)
            }
            _ => match self.pending.remove(&c.context) {
                Some(p) => (p.flags, p.inject, p.context),
                None => return,
            },
        };
        let ok = c.status == Status::Ok;
        let rx = flags & (cq_flags::RECV | cq_flags::REMOTE_WRITE) != 0;
        for (cntr, on) in &self.cntrs {
            if on & flags != 0 {
                cntr.count(ok, c.len);
            }
        }
        if let Status::Failed(e) = c.status {
            if let Some(eq) = &self.eq {
                eq.push(EqEvent::Error { err: FiErrno::EIO, what: format!("PDC failed: {e:?}") });
            }
        }
        let cq = if rx { &self.rx_cq } else { &self.tx_cq };
        let Some(cq) = cq else { return };
        if ok {
            if inject {
                return;
            }
            let src = self.source(c.src);
            cq.push(Ok(CqEntry {
                op_context: context,
                flags,
                len: c.len,
                buf: c.data,
                data: c.header_data,
                tag: c.tag,
                src,
                offset,
            }));
        } else {
            let (err, prov_errno) = errno_of_status(c.status);
            cq.push(Err(CqErrEntry { op_context: context, flags, len: c.len, err, prov_errno, buf: c.data }));
        }
    }

    fn av_entry(&self, a: FiAddr) -> Result<(UetAddr, Option<u32>), FiError> {
        let av = self.av.as_ref().ok_or_else(|| FiError::new(FiErrno::EINVAL, "no AV bound"))?;
        let av = av.inner.borrow();
        let e = av.live(a).ok_or_else(|| FiError::new(FiErrno::EINVAL, format!("no AV entry {a}")))?;
        Ok((e.addr, e.job))
    }

    fn av_job(&self, a: FiAddr) -> Result<u32, FiError> {
        self.av_entry(a)?.1.ok_or_else(|| FiError::new(FiErrno::ENOKEY, "the address has no auth key"))
    }

    /// The destination and options of an operation to AV address `dest`.
    fn target(
        &mut self,
        dest: FiAddr,
        context: u64,
        flags: u64,
        inject: bool,
    ) -> Result<(Addr<Ipv4Addr>, Opts), FiError> {
        let (a, job) = self.av_entry(dest)?;
        let job_id = match self.attr.job_id {
            JobIdMethod::Av => Some(job.ok_or_else(|| {
                FiError::new(FiErrno::ENOKEY, "the AV JobID method needs addresses inserted with an auth key")
            })?),
            _ => None,
        };
        self.next += 1;
        self.pending.insert(self.next, Pending { context, flags, inject });
        let addr = Addr { fep: a.ip, pid_on_fep: a.pid_on_fep, resource_index: a.resource_index };
        // An inject's completion is nobody's: its packets leave the target's ACK to coalescing.
        let opts = Opts {
            context: self.next,
            ordered: self.attr.ordered,
            header_data: None,
            job_id,
            lazy_ack: inject,
        };
        Ok((addr, opts))
    }

    fn check_caps(&self, need: u64, what: &str) -> Result<(), FiError> {
        if self.info.caps & need == need {
            Ok(())
        } else {
            Err(FiError::new(
                FiErrno::EOPNOTSUPP,
                format!("{what}: not in the {:?} profile", self.info.profile),
            ))
        }
    }

    /// Starts an operation to AV address `dest` that completes with `flags`: `f` hands it to the
    /// SES; a refusal there forgets the pending completion.
    fn start(
        &mut self,
        dest: FiAddr,
        context: u64,
        flags: u64,
        inject: bool,
        f: impl FnOnce(&mut ses::Endpoint<Ipv4Addr>, Addr<Ipv4Addr>, Opts) -> Result<u16, ses::Error>,
    ) -> Result<(), FiError> {
        let (dst, opts) = self.target(dest, context, flags, inject)?;
        f(self.node.ses(), dst, opts).map(|_| ()).map_err(|e| {
            self.pending.remove(&self.next);
            ses_err(e)
        })
    }
}

/// `fi_endpoint`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    inner: Rc<RefCell<EpInner>>,
}

impl Endpoint {
    fn ep(&self) -> RefMut<'_, EpInner> {
        self.inner.borrow_mut()
    }

    /// `fi_getname`.
    pub fn getname(&self) -> UetAddr {
        self.inner.borrow().name
    }

    /// The endpoint's own JobID.
    pub fn job_id(&self) -> u32 {
        self.inner.borrow().job
    }

    /// `fi_ep_bind` of a CQ for transmit and/or receive completions ([`bind`] flags).
    pub fn bind_cq(&self, cq: &CompletionQueue, flags: u64) {
        let mut e = self.ep();
        if flags & bind::TRANSMIT != 0 {
            e.tx_cq = Some(cq.clone());
        }
        if flags & bind::RECV != 0 {
            e.rx_cq = Some(cq.clone());
        }
    }

    /// `fi_ep_bind` of a counter, for the completions whose [`cq_flags`] intersect `flags`.
    pub fn bind_cntr(&self, cntr: &Counter, flags: u64) {
        self.ep().cntrs.push((cntr.clone(), flags));
    }

    /// `fi_ep_bind` of an event queue.
    pub fn bind_eq(&self, eq: &EventQueue) {
        self.ep().eq = Some(eq.clone());
    }

    /// `fi_ep_bind` of an address vector: its auth keys' JobIDs are served from now on.
    pub fn bind_av(&self, av: &AddressVector) {
        let mut e = self.ep();
        let jobs = av.inner.borrow().auth_keys.clone();
        for j in jobs {
            e.node.ses().authorize_job(j);
        }
        let ep: Weak<RefCell<EpInner>> = Rc::downgrade(&self.inner);
        av.inner.borrow_mut().endpoints.push(ep);
        e.av = Some(av.clone());
    }

    /// `fi_setopt(FI_OPT_MAX_MSG_SIZE)` for RMA: between 1 GiB and 4 GiB - 1.
    pub fn set_max_rma_size(&self, n: usize) -> Result<(), FiError> {
        if !(RMA_SIZE_RANGE.0..=RMA_SIZE_RANGE.1).contains(&n) {
            return Err(FiError::new(FiErrno::EINVAL, "the RMA size limit is 1 GiB to 4 GiB - 1"));
        }
        self.ep().max_rma = n;
        Ok(())
    }

    /// `fi_sendmsg` / `fi_tsendmsg`: a send with any of a tag, completion data and FI_INJECT (no
    /// completion on success; a failure still completes, with `context`).
    pub fn sendmsg(
        &self,
        buf: &[u8],
        dest: FiAddr,
        tag: Option<u64>,
        data: Option<u64>,
        context: u64,
        inject: bool,
    ) -> Result<(), FiError> {
        let mut e = self.ep();
        if tag.is_some() {
            e.check_caps(caps::TAGGED, "tagged send")?;
        }
        if inject && buf.len() > e.info.limits.inject_size {
            return Err(FiError::new(FiErrno::EMSGSIZE, "inject is limited to one packet"));
        }
        let flags = cq_flags::SEND | if tag.is_some() { cq_flags::TAGGED } else { cq_flags::MSG };
        e.start(dest, context, flags, inject, |ses, dst, opts| {
            ses.send(dst, buf, tag, Opts { header_data: data, ..opts })
        })
    }

    /// `fi_send`.
    pub fn send(&self, buf: &[u8], dest: FiAddr, context: u64) -> Result<(), FiError> {
        self.sendmsg(buf, dest, None, None, context, false)
    }

    /// `fi_senddata`: with completion data for the receiver.
    pub fn senddata(&self, buf: &[u8], data: u64, dest: FiAddr, context: u64) -> Result<(), FiError> {
        self.sendmsg(buf, dest, None, Some(data), context, false)
    }

    /// `fi_inject`: the buffer is reusable at once; no completion on success, an error
    /// completion if the message cannot be delivered.
    pub fn inject(&self, buf: &[u8], dest: FiAddr) -> Result<(), FiError> {
        self.sendmsg(buf, dest, None, None, 0, true)
    }

    /// `fi_tsend`.
    pub fn tsend(&self, buf: &[u8], dest: FiAddr, tag: u64, context: u64) -> Result<(), FiError> {
        self.sendmsg(buf, dest, Some(tag), None, context, false)
    }

    /// `fi_tsenddata`.
    pub fn tsenddata(
        &self,
        buf: &[u8],
        data: u64,
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<(), FiError> {
        self.sendmsg(buf, dest, Some(tag), Some(data), context, false)
    }

    /// `fi_tinject`.
    pub fn tinject(&self, buf: &[u8], dest: FiAddr, tag: u64) -> Result<(), FiError> {
        self.sendmsg(buf, dest, Some(tag), None, 0, true)
    }

    fn rma_check(&self, e: &EpInner, len: usize) -> Result<(), FiError> {
        e.check_caps(caps::RMA, "RMA")?;
        if len > e.max_rma {
            return Err(FiError::new(FiErrno::EMSGSIZE, "longer than the RMA size limit"));
        }
        Ok(())
    }

    /// `fi_write`.
    pub fn write(
        &self,
        buf: &[u8],
        dest: FiAddr,
        key: u64,
        offset: u64,
        context: u64,
    ) -> Result<(), FiError> {
        self.write_common(buf, None, dest, key, offset, context, false)
    }

    /// `fi_writedata`: the target gets a completion with `data`.
    pub fn writedata(
        &self,
        buf: &[u8],
        data: u64,
        dest: FiAddr,
        key: u64,
        offset: u64,
        context: u64,
    ) -> Result<(), FiError> {
        self.write_common(buf, Some(data), dest, key, offset, context, false)
    }

    /// `fi_inject_write` / `fi_inject_writedata`: `buf` is reusable on return, and the write
    /// completes here only if it fails (an error entry with context 0).
    pub fn inject_write(
        &self,
        buf: &[u8],
        data: Option<u64>,
        dest: FiAddr,
        key: u64,
        offset: u64,
    ) -> Result<(), FiError> {
        self.write_common(buf, data, dest, key, offset, 0, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_common(
        &self,
        buf: &[u8],
        data: Option<u64>,
        dest: FiAddr,
        key: u64,
        offset: u64,
        context: u64,
        inject: bool,
    ) -> Result<(), FiError> {
        let mut e = self.ep();
        self.rma_check(&e, buf.len())?;
        e.start(dest, context, cq_flags::RMA | cq_flags::WRITE, inject, |ses, dst, opts| {
            ses.write(dst, key, offset, buf, Opts { header_data: data, ..opts })
        })
    }

    /// `fi_read`: the completion's `buf` holds the bytes.
    pub fn read(&self, len: usize, dest: FiAddr, key: u64, offset: u64, context: u64) -> Result<(), FiError> {
        let mut e = self.ep();
        self.rma_check(&e, len)?;
        e.start(dest, context, cq_flags::RMA | cq_flags::READ, false, |ses, dst, opts| {
            ses.read(dst, key, offset, len, opts)
        })
    }

    /// `fi_atomic`: `op` on consecutive `dt` elements, one per operand (batched).
    #[allow(clippy::too_many_arguments)]
    pub fn atomic(
        &self,
        operands: &[u8],
        dest: FiAddr,
        key: u64,
        offset: u64,
        dt: AmoDatatype,
        op: AmoOpcode,
        context: u64,
    ) -> Result<(), FiError> {
        self.atomic_op(dest, context, cq_flags::WRITE, false, |ses, dst, opts| {
            ses.atomic(dst, key, offset, op, dt, operands, opts)
        })
    }

    /// `fi_inject_atomic`: as [`atomic`](Self::atomic), completing here only if it fails.
    pub fn inject_atomic(
        &self,
        operands: &[u8],
        dest: FiAddr,
        key: u64,
        offset: u64,
        dt: AmoDatatype,
        op: AmoOpcode,
    ) -> Result<(), FiError> {
        self.atomic_op(dest, 0, cq_flags::WRITE, true, |ses, dst, opts| {
            ses.atomic(dst, key, offset, op, dt, operands, opts)
        })
    }

    /// `fi_fetch_atomic`: one element; the completion's `buf` holds its old value.
    #[allow(clippy::too_many_arguments)]
    pub fn fetch_atomic(
        &self,
        operand: &[u8],
        dest: FiAddr,
        key: u64,
        offset: u64,
        dt: AmoDatatype,
        op: AmoOpcode,
        context: u64,
    ) -> Result<(), FiError> {
        self.atomic_op(dest, context, cq_flags::READ, false, |ses, dst, opts| {
            ses.fetch_atomic(dst, key, offset, op, dt, operand, opts)
        })
    }

    /// `fi_compare_atomic`: one element; the completion's `buf` holds its old value.
    #[allow(clippy::too_many_arguments)]
    pub fn compare_atomic(
        &self,
        compare: &[u8],
        swap: &[u8],
        dest: FiAddr,
        key: u64,
        offset: u64,
        dt: AmoDatatype,
        op: AmoOpcode,
        context: u64,
    ) -> Result<(), FiError> {
        self.atomic_op(dest, context, cq_flags::READ, false, |ses, dst, opts| {
            ses.compare_atomic(dst, key, offset, op, dt, compare, swap, opts)
        })
    }

    /// An atomic (`flags`: WRITE for non-fetching, READ for fetching ones) in a profile that has them.
    fn atomic_op(
        &self,
        dest: FiAddr,
        context: u64,
        flags: u64,
        inject: bool,
        f: impl FnOnce(&mut ses::Endpoint<Ipv4Addr>, Addr<Ipv4Addr>, Opts) -> Result<u16, ses::Error>,
    ) -> Result<(), FiError> {
        let mut e = self.ep();
        e.check_caps(caps::ATOMIC, "atomic")?;
        e.start(dest, context, cq_flags::ATOMIC | flags, inject, f)
    }

    /// Sends what was posted, at once (a program under manual progress may wait elsewhere before
    /// it reads a queue again); receiving waits for the next round of progress.
    pub fn transmit(&self) {
        self.ep().node.transmit();
    }

    /// The endpoint type.
    pub fn ep_type(&self) -> EpType {
        self.inner.borrow().info.ep_type
    }
}
