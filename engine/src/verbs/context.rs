//! An opened device and the objects on it, plus the progress engine.

use super::VerbsError;
use super::cq::{Channel, CqState, signal};
use super::stats::Stats;
use super::tx::offer;
use crate::datapath::Datapath;
use crate::progress::Sleep;
use crate::roce::Path;
use crate::roce::types::{Access, AddressVector, Ah, QpAttr, QpCap, QpState, QpType};
use crate::roce::{CqSide, HoldPool, LIMITS, MemTable, QpConfig, QueuePair, RecvWqe, RxMeta};
use frame::Frame;
use rustix::fd::BorrowedFd;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;
use wire::ib::Mtu;
use wire::uet::UetConfig;

mod cm;
mod counters;
mod cq;
mod link;
mod memory;
mod post;

/// A protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pd(u32);

/// A completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cq(u32);

/// A shared receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Srq(u32);

/// A completion channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompChannel(u32);

/// Asynchronous events (`ibv_get_async_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AsyncEvent {
    /// A QP went to the error state on its own (a transport error; not a `modify_qp`).
    QpFatal(Qp),
    /// An armed SRQ has fewer receive WQEs than its limit (the limit is disarmed).
    SrqLimitReached(Srq),
    /// The port's link came up.
    PortActive,
    /// The port's link went down.
    PortError,
}

/// A queue pair; its number is the QPN peers send to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Qp(u32);

impl Qp {
    /// The QP number.
    pub fn qpn(self) -> u32 {
        self.0
    }
}

/// A registered memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mr {
    /// Local key (for SGEs).
    pub lkey: u32,
    /// Remote key (for peers' RETH and AtomicETH).
    pub rkey: u32,
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub length: usize,
}

/// What a QP is created with (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: Cq,
    /// CQ for receive completions.
    pub recv_cq: Cq,
    /// Take receive WQEs from this SRQ instead of the QP's own queue.
    pub srq: Option<Srq>,
    /// Queue sizes (`max_recv_wr` and `max_recv_sge` do not apply with an SRQ).
    pub cap: QpCap,
    /// Complete every send request, signaled or not.
    pub sq_sig_all: bool,
}

impl QpInitAttr {
    /// An RC QP with default capacities, completing on `cq`.
    pub fn rc(cq: Cq) -> QpInitAttr {
        QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap: QpCap::default(),
            sq_sig_all: false,
        }
    }
}

/// What an SRQ is created with (`ibv_srq_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive WQEs it holds.
    pub max_wr: u32,
    /// SGEs per receive WQE.
    pub max_sge: u32,
    /// Raise [`AsyncEvent::SrqLimitReached`] when fewer WQEs remain (0: not armed).
    pub srq_limit: u32,
}

#[derive(Debug)]
struct QpEntry {
    qp: QueuePair,
    send_cq: u32,
    recv_cq: u32,
    srq: Option<u32>,
    /// The QP's error state has been reported (or was asked for).
    error_known: bool,
}

#[derive(Debug)]
struct SrqState {
    pd: u32,
    attr: SrqAttr,
    wqes: VecDeque<RecvWqe>,
}

#[derive(Debug)]
struct AhState {
    pd: u32,
    path: Path,
}

/// First QP number handed out (QP0 and QP1 are special in verbs; rxe also starts at 17).
const FIRST_QPN: u32 = 0x11;
/// Frames received per progress call before timers and transmission get a turn (sooner after a
/// gap's NAK, or the ACK ending its repair: the peer's window is full; the rest waits).
const RX_BUDGET: usize = 256;
/// Frames one QP sends per progress call.
const TX_BUDGET: usize = 64;

/// `ibv_reg_mr`'s rule: remote write or atomic access requires local write.
fn check_mr_access(access: Access) -> Result<(), VerbsError> {
    if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE)
        || access.contains(Access::REMOTE_ATOMIC) && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(VerbsError::InvalidAttr("access: REMOTE_WRITE/ATOMIC need LOCAL_WRITE"));
    }
    Ok(())
}

/// A context moves between threads (a [`Device`](super::Device) shares it behind a lock).
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Context>();
};

/// An opened device. See the module documentation.
pub struct Context {
    dp: Box<dyn Datapath + Send>,
    mem: MemTable,
    /// Where the RC QPs hold request packets that came after a gap: one bound for the device.
    hold: HoldPool,
    pds: Vec<bool>,
    cqs: Vec<Option<CqState>>,
    channels: Vec<Option<Channel>>,
    qps: Vec<Option<QpEntry>>,
    srqs: Vec<Option<SrqState>>,
    ahs: Vec<Option<AhState>>,
    events: VecDeque<AsyncEvent>,
    link_up: bool,
    /// A frame the datapath handed back ([`TxError::Full`]): it goes first, before any QP makes
    /// another.
    pending: Option<Frame>,
    stats: Stats,
    uet: UetConfig,
    /// DCQCN for the RC QPs created from now on.
    dcqcn: Option<crate::roce::dcqcn::DcqcnConfig>,
    /// QP1 and the connection manager.
    cm: super::cm::CmPort,
    /// The QPs a progress round visits, and their timers.
    sched: super::sched::Sched,
    /// Where peers receive RoCEv2 when an address vector does not say ([`Context::set_peer_udp_port`]).
    peer_udp_port: u16,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("gid", &self.dp.gid()).field("qps", &self.qps.len()).finish()
    }
}

impl Context {
    /// Opens the device behind a datapath.
    pub fn open(dp: impl Datapath + Send + 'static) -> Context {
        let link_up = dp.link_up();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let cm = super::cm::CmPort::new(dp.mac(), seed ^ u64::from(std::process::id()));
        Context {
            cm,
            sched: Default::default(),
            dp: Box::new(dp),
            mem: MemTable::default(),
            hold: HoldPool::new(crate::roce::DEVICE_HOLD_PACKETS),
            pds: Vec::new(),
            cqs: Vec::new(),
            channels: Vec::new(),
            qps: Vec::new(),
            srqs: Vec::new(),
            ahs: Vec::new(),
            events: VecDeque::from([if link_up { AsyncEvent::PortActive } else { AsyncEvent::PortError }]),
            link_up,
            pending: None,
            dcqcn: None,
            stats: Stats::default(),
            uet: UetConfig::default(),
            peer_udp_port: wire::ROCEV2_UDP_PORT,
        }
    }

    /// The UDP port peers receive RoCEv2 on when an address vector does not say
    /// (`AddressVector::udp_dport`): 4791, unless this device receives on another, whose peers
    /// (softrdma processes agreeing on the port, as `SOFTRDMA_UDP_PORT` asks) receive there too.
    /// The QPs' and address handles' frames, and the connection manager's MADs, go to it.
    /// [`Context::open_link`] sets the link's port.
    pub fn set_peer_udp_port(&mut self, port: u16) {
        self.peer_udp_port = port;
    }

    /// `av` with the peers' port ([`Context::set_peer_udp_port`]) where it names none.
    fn with_peer_port(&self, mut av: AddressVector) -> AddressVector {
        if av.udp_dport.is_none() && self.peer_udp_port != wire::ROCEV2_UDP_PORT {
            av.udp_dport = Some(self.peer_udp_port);
        }
        av
    }

    /// The port MTU (the largest path MTU, and the UD message limit).
    pub fn port_mtu(&self) -> Mtu {
        self.dp.port_mtu()
    }

    /// The next asynchronous event (`ibv_get_async_event`); the first is the port state at open.
    pub fn poll_async_event(&mut self) -> Option<AsyncEvent> {
        self.events.pop_front()
    }

    /// The device's GID (as an IP address).
    pub fn gid(&self) -> IpAddr {
        self.dp.gid()
    }

    /// The device's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.dp.mac()
    }

    /// The datapath's own counters (sockets, rings, injected faults), named.
    pub fn datapath_counters(&self) -> Vec<(&'static str, u64)> {
        self.dp.counters()
    }

    /// Creates a shared receive queue (`ibv_create_srq`).
    pub fn create_srq(&mut self, pd: Pd, attr: &SrqAttr) -> Result<Srq, VerbsError> {
        self.pd_ok(pd)?;
        if attr.max_wr == 0
            || attr.max_wr > LIMITS.max_srq_wr
            || attr.max_sge > LIMITS.max_sge
            || attr.srq_limit > attr.max_wr
        {
            return Err(VerbsError::InvalidAttr("srq: max_wr 1..=16384, max_sge <= 32, srq_limit <= max_wr"));
        }
        self.srqs.push(Some(SrqState { pd: pd.0, attr: *attr, wqes: VecDeque::new() }));
        Ok(Srq(self.srqs.len() as u32 - 1))
    }

    fn srq_mut(&mut self, srq: Srq) -> Result<&mut SrqState, VerbsError> {
        self.srqs.get_mut(srq.0 as usize).and_then(Option::as_mut).ok_or(VerbsError::InvalidHandle("SRQ"))
    }

    /// Arms (or with 0 disarms) the SRQ limit event (`ibv_modify_srq` with `IBV_SRQ_LIMIT`).
    pub fn modify_srq_limit(&mut self, srq: Srq, limit: u32) -> Result<(), VerbsError> {
        let s = self.srq_mut(srq)?;
        if limit > s.attr.max_wr {
            return Err(VerbsError::InvalidAttr("srq_limit above max_wr"));
        }
        s.attr.srq_limit = limit;
        Ok(())
    }

    /// Receive WQEs an SRQ holds now.
    pub fn srq_len(&mut self, srq: Srq) -> Result<usize, VerbsError> {
        Ok(self.srq_mut(srq)?.wqes.len())
    }

    /// Destroys an SRQ no QP uses.
    pub fn destroy_srq(&mut self, srq: Srq) -> Result<(), VerbsError> {
        self.srq_mut(srq)?;
        if self.qps.iter().flatten().any(|e| e.srq == Some(srq.0)) {
            return Err(VerbsError::Busy("SRQ"));
        }
        self.srqs[srq.0 as usize] = None;
        Ok(())
    }

    /// Creates an address handle for UD sends (`ibv_create_ah`); the MAC is resolved now unless
    /// `av.dmac` gives it.
    pub fn create_ah(&mut self, pd: Pd, av: &AddressVector) -> Result<Ah, VerbsError> {
        self.pd_ok(pd)?;
        let av = &self.with_peer_port(*av);
        let dmac = av.dmac.or_else(|| self.dp.resolve(av.dgid)).ok_or(VerbsError::Unreachable)?;
        let path = Path {
            src_mac: self.mac(),
            dst_mac: dmac,
            src_ip: self.gid().to_canonical(),
            dst_ip: av.dgid.to_canonical(),
            src_port: 0,
            dst_port: av.dst_port(),
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
            flow_label: av.flow_label,
        };
        self.ahs.push(Some(AhState { pd: pd.0, path }));
        Ok(Ah::from_index(self.ahs.len() as u32 - 1))
    }

    /// Destroys an address handle.
    pub fn destroy_ah(&mut self, ah: Ah) -> Result<(), VerbsError> {
        match self.ahs.get_mut(ah.index() as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                Ok(())
            }
            _ => Err(VerbsError::InvalidHandle("AH")),
        }
    }

    /// Creates a QP in the RESET state (`ibv_create_qp`).
    pub fn create_qp(&mut self, pd: Pd, init: &QpInitAttr) -> Result<Qp, VerbsError> {
        self.pd_ok(pd)?;
        self.cq_mut(init.send_cq)?;
        self.cq_mut(init.recv_cq)?;
        if let Some(srq) = init.srq {
            if self.srq_mut(srq)?.pd != pd.0 {
                return Err(VerbsError::InvalidAttr("srq: another protection domain"));
            }
            if init.qp_type == QpType::Uc {
                return Err(VerbsError::InvalidAttr("srq: RC and UD QPs only"));
            }
        }
        let c = init.cap;
        if c.max_send_wr == 0 || c.max_send_wr > LIMITS.max_qp_wr || c.max_recv_wr > LIMITS.max_qp_wr {
            return Err(VerbsError::InvalidAttr("cap: work queue depth must be 1..=16384"));
        }
        if c.max_send_sge > LIMITS.max_sge
            || c.max_recv_sge > LIMITS.max_sge
            || c.max_inline_data > LIMITS.max_inline_data
        {
            return Err(VerbsError::InvalidAttr("cap: at most 32 SGEs and 4096 inline bytes"));
        }
        let qpn = FIRST_QPN + self.qps.len() as u32;
        if qpn > 0xFF_FFFF {
            return Err(VerbsError::OutOfResources);
        }
        let cfg = QpConfig {
            qp_type: init.qp_type,
            srq: init.srq.is_some(),
            port_mtu: self.port_mtu(),
            fixed_src_port: self.dp.udp_src_port(),
            qpn,
            pd: pd.0,
            cap: c,
            sq_sig_all: init.sq_sig_all,
            mac: self.mac(),
            gid: self.gid(),
            dcqcn: self.dcqcn,
        };
        self.qps.push(Some(QpEntry {
            qp: QueuePair::with_hold_pool(cfg, self.hold.clone()),
            send_cq: init.send_cq.0,
            recv_cq: init.recv_cq.0,
            srq: init.srq.map(|s| s.0),
            error_known: false,
        }));
        Ok(Qp(qpn))
    }

    /// A QP for a verb; the next progress round visits it.
    fn entry(&mut self, qp: Qp) -> Result<&mut QpEntry, VerbsError> {
        let i = qp.0.checked_sub(FIRST_QPN).ok_or(VerbsError::InvalidHandle("QP"))? as usize;
        let e = self.qps.get_mut(i).and_then(Option::as_mut).ok_or(VerbsError::InvalidHandle("QP"))?;
        self.sched.touch(i);
        Ok(e)
    }

    /// Destroys a QP (outstanding work is dropped without completions, as `ibv_destroy_qp`).
    pub fn destroy_qp(&mut self, qp: Qp) -> Result<(), VerbsError> {
        self.entry(qp)?;
        self.qps[(qp.0 - FIRST_QPN) as usize] = None;
        Ok(())
    }

    /// Changes a QP's state and attributes (`ibv_modify_qp`). The peer's MAC is resolved here
    /// unless `ah_attr.dmac` gives it. A QP moved to RESET takes its completions not yet polled
    /// out of its CQs, as the kernel's mlx5 and its user-space provider do (`mlx5_cq_clean`):
    /// a program that resets a QP after an error (rdma-core's `test_mr` does) finds none of the
    /// flushed ones when it polls again.
    pub fn modify_qp(&mut self, qp: Qp, state: QpState, attr: &QpAttr) -> Result<(), VerbsError> {
        let mut attr = *attr;
        attr.ah_attr = attr.ah_attr.map(|av| self.with_peer_port(av));
        if let Some(av) = &mut attr.ah_attr {
            if av.dmac.is_none() {
                av.dmac = self.dp.resolve(av.dgid);
            }
        }
        let e = self.entry(qp)?;
        e.qp.modify(state, &attr)?;
        // Errors asked for are not async events; a reset QP may fail again later.
        e.error_known = state == QpState::Error;
        let cqs = [e.send_cq, e.recv_cq];
        self.flush_qp((qp.0 - FIRST_QPN) as usize);
        if state == QpState::Reset {
            for cq in cqs {
                if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                    c.entries.retain(|wc| wc.qp_num != qp.0);
                }
            }
        }
        Ok(())
    }

    /// Runs DCQCN on the RC QPs created from now on (`None`: off): their frames are ECT(0), they
    /// answer CE-marked requests with CNPs and pace themselves by the CNPs they get.
    pub fn set_dcqcn(&mut self, cfg: Option<crate::roce::dcqcn::DcqcnConfig>) {
        self.dcqcn = cfg;
    }

    /// The QP's state and attributes (`ibv_query_qp`).
    pub fn query_qp(&mut self, qp: Qp) -> Result<(QpState, QpAttr), VerbsError> {
        let e = self.entry(qp)?;
        Ok((e.qp.state(), e.qp.attr()))
    }

    /// The earliest time the device has something to do with no frame arriving: a QP's timer, or
    /// now while a frame waits for room in the datapath.
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.pending.is_some() {
            return Some(self.dp.now());
        }
        self.qp_deadline()
    }

    /// The earliest timer of any QP: the armed ones, and those of QPs touched since the last round.
    fn qp_deadline(&self) -> Option<Duration> {
        let touched = self.active_qps().filter_map(|e| e.qp.poll_timeout()).min();
        let qps = match (self.sched.deadline(), touched) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (qps, self.cm.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True if some QP has a frame to send now, or a frame waits for room in the datapath.
    pub fn wants_transmit(&self) -> bool {
        self.pending.is_some() || self.cm_wants_transmit() || self.active_qps().any(|e| e.qp.wants_transmit())
    }

    /// The QPs on the active list: only they can have frames to send (see `sched`).
    fn active_qps(&self) -> impl Iterator<Item = &QpEntry> {
        self.sched.active().iter().filter_map(|&i| self.qps.get(i as usize).and_then(Option::as_ref))
    }

    /// One round of the progress engine: receive, run due timers, transmit, deliver completions.
    /// Returns how many frames and timers it handled (0: nothing to do until a frame arrives or
    /// [`next_deadline`](Self::next_deadline)).
    pub fn progress(&mut self) -> Result<usize, VerbsError> {
        let now = self.dp.now();
        let mut work = 0;
        let up = self.dp.link_up();
        if up != self.link_up {
            self.link_up = up;
            self.events.push_back(if up { AsyncEvent::PortActive } else { AsyncEvent::PortError });
        }
        for _ in 0..RX_BUDGET {
            let Some(frame) = self.dp.receive() else { break };
            work += 1;
            let urgent = self.receive(now, frame.as_slice(), frame.icrc_checked());
            self.dp.recycle(frame);
            if urgent {
                break;
            }
        }
        for i in self.sched.due(now) {
            let Some(Some(e)) = self.qps.get_mut(i) else { continue };
            if e.qp.poll_timeout().is_some_and(|t| t <= now) {
                e.qp.handle_timeout(now);
                work += 1;
            }
        }
        // A frame the datapath handed back goes first; while it cannot, no QP makes another. A
        // frame it refused for good ends this round's transmissions; the round still flushes,
        // delivers completions and raises events before the error is returned.
        let mut failed = None;
        let mut room = match self.pending.take() {
            Some(frame) => match offer(&mut *self.dp, &mut self.stats, &mut self.pending, frame, true) {
                Ok(sent) => {
                    work += usize::from(sent);
                    sent
                }
                Err(e) => {
                    failed = Some(e);
                    false
                }
            },
            None => true,
        };
        match self.cm_progress(now, room) {
            Ok((w, r)) => {
                work += w;
                room = r;
            }
            Err(e) => {
                failed = Some(e);
                room = false;
            }
        }
        let active = self.sched.round();
        for &i in &active {
            let Some(Some(e)) = self.qps.get_mut(i as usize) else { continue };
            for _ in 0..TX_BUDGET {
                if !room || !e.qp.wants_transmit() {
                    break;
                }
                let mut frame = self.dp.alloc();
                match e.qp.poll_transmit(now, &self.mem, frame.buffer_mut()) {
                    Some(n) => {
                        frame.set_len(n);
                        work += 1;
                        match offer(&mut *self.dp, &mut self.stats, &mut self.pending, frame, false) {
                            Ok(r) => room = r,
                            Err(e) => {
                                failed = Some(e);
                                room = false;
                            }
                        }
                    }
                    None => {
                        self.dp.recycle(frame);
                        break;
                    }
                }
            }
        }
        self.dp.flush();
        for &i in &active {
            let i = i as usize;
            self.flush_qp(i);
            if let Some(Some(e)) = self.qps.get_mut(i) {
                if e.qp.state() == QpState::Error && !e.error_known {
                    e.error_known = true;
                    self.events.push_back(AsyncEvent::QpFatal(Qp(e.qp.qpn())));
                }
                self.sched.keep(i, e.qp.wants_transmit(), e.qp.poll_timeout());
            }
        }
        self.sched.recycle(active);
        self.check_srq_limits();
        match failed {
            Some(e) => Err(e),
            None => Ok(work),
        }
    }

    /// Raises SRQ-limit events (QP-fatal ones are raised for the QPs a round visits).
    fn check_srq_limits(&mut self) {
        for (i, s) in self.srqs.iter_mut().enumerate() {
            if let Some(s) = s {
                if s.attr.srq_limit > 0 && (s.wqes.len() as u32) < s.attr.srq_limit {
                    s.attr.srq_limit = 0;
                    self.events.push_back(AsyncEvent::SrqLimitReached(Srq(i as u32)));
                }
            }
        }
    }

    /// Handles a frame (ICRC checked already if `icrc_checked`); true if a reply is urgent.
    fn receive(&mut self, now: Duration, frame: &[u8], icrc_checked: bool) -> bool {
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame.len() as u64;
        // Ethernet, IP and UDP, then the RoCE headers straight from the UDP payload: no whole-frame
        // repr (which holds either transport's headers and is moved by memcpy) on the data path.
        let Ok(u) = wire::FrameRepr::parse_udp(frame) else {
            self.stats.rx_bad += 1;
            return false;
        };
        let ip_at = u.ethernet.buffer_len();
        if u.udp.dst_port != wire::ROCEV2_UDP_PORT {
            // Not RoCE: UET (parsed, then not ours) or nothing this device knows.
            match wire::FrameRepr::parse_verified(frame, &self.uet) {
                Ok(_) => self.stats.rx_unknown += 1,
                Err(_) => self.stats.rx_bad += 1,
            }
            return false;
        }
        let (Ok(packet), true) = (
            wire::ib::packet::RoceRepr::parse(&frame[u.payload.clone()]),
            icrc_checked || wire::ib::icrc::verify(&frame[ip_at..u.payload.end]).is_ok(),
        ) else {
            self.stats.rx_bad += 1;
            return false;
        };
        let pkt = &packet;
        let to_us = u.ethernet.dst_addr.0 == self.dp.mac()
            && u.ip.dst_addr().to_canonical() == self.dp.gid().to_canonical();
        if pkt.bth.dest_qp == super::gsi::GSI_QPN {
            match to_us {
                true => self.cm_receive(now, u.ip.src_addr(), u.ethernet.src_addr.0, pkt),
                false => self.stats.rx_unknown += 1,
            }
            return false;
        }
        let index = pkt.bth.dest_qp.wrapping_sub(FIRST_QPN) as usize;
        let meta = RxMeta { src: u.ip.src_addr(), ip_header: &frame[ip_at..ip_at + u.ip.buffer_len()] };
        match self.qps.get_mut(index) {
            Some(Some(e)) if to_us => {
                self.sched.touch(index);
                let srq = e
                    .srq
                    .and_then(|s| self.srqs.get_mut(s as usize))
                    .and_then(Option::as_mut)
                    .map(|s| &mut s.wqes);
                e.qp.handle_packet(now, &meta, pkt, &mut self.mem, srq);
                return e.qp.take_urgent_reply();
            }
            _ => self.stats.rx_unknown += 1,
        }
        false
    }

    /// Moves QP `i`'s completions to their CQs.
    fn flush_qp(&mut self, i: usize) {
        let Some(Some(e)) = self.qps.get_mut(i) else { return };
        while let Some((side, wc)) = e.qp.poll_completion() {
            let cq = if side == CqSide::Send { e.send_cq } else { e.recv_cq };
            if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                if let Some(ch) = c.push(wc) {
                    signal(&mut self.channels, ch, cq);
                }
            }
        }
    }
}

impl Sleep for Context {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.dp.wait_fd()
    }

    fn tx_blocked(&self) -> bool {
        self.pending.is_some() || self.dp.tx_waiting()
    }

    fn next_work_in(&self) -> Option<Duration> {
        // Frames to send: work now, unless the datapath is full (its descriptor turns writable).
        if self.pending.is_none() && self.wants_transmit() {
            return Some(Duration::ZERO);
        }
        let qp = self.qp_deadline().map(|t| t.saturating_sub(self.dp.now())).into_iter();
        qp.chain(self.dp.flush_retry_in()).min()
    }
}
