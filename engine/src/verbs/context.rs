//! An opened device and the objects on it, plus the progress engine.

use super::error::VerbsError;
use super::mem::MemTable;
use super::types::{Access, QpAttr, QpCap, QpState, RecvWr, SendWr, WorkCompletion};
use crate::datapath::Datapath;
use crate::roce::path::canonical;
use crate::roce::{CqSide, QpConfig, RcQp};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;
use wire::uet::UetConfig;

/// A protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pd(u32);

/// A completion queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cq(u32);

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

/// What a QP is created with (`ibv_qp_init_attr`; the type is RC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// CQ for send completions.
    pub send_cq: Cq,
    /// CQ for receive completions.
    pub recv_cq: Cq,
    /// Queue sizes.
    pub cap: QpCap,
    /// Complete every send request, signaled or not.
    pub sq_sig_all: bool,
}

/// Datapath counters of a context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Frames dropped as malformed (bad ICRC, checksum, length...).
    pub rx_bad: u64,
    /// RoCE frames for another address or an unknown QP.
    pub rx_unknown: u64,
}

#[derive(Debug)]
struct CqState {
    depth: usize,
    entries: VecDeque<WorkCompletion>,
    overrun: bool,
}

#[derive(Debug)]
struct QpEntry {
    qp: RcQp,
    send_cq: u32,
    recv_cq: u32,
}

/// First QP number handed out (QP0 and QP1 are special in verbs; rxe also starts at 17).
const FIRST_QPN: u32 = 0x11;
/// Frames received per progress call before timers and transmission get a turn.
const RX_BUDGET: usize = 256;
/// Frames one QP sends per progress call.
const TX_BUDGET: usize = 64;

/// An opened device. See the module documentation.
pub struct Context {
    dp: Box<dyn Datapath>,
    mem: MemTable,
    pds: Vec<bool>,
    cqs: Vec<Option<CqState>>,
    qps: Vec<Option<QpEntry>>,
    stats: Stats,
    uet: UetConfig,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("gid", &self.dp.gid()).field("qps", &self.qps.len()).finish()
    }
}

impl Context {
    /// Opens the device behind a datapath.
    pub fn open(dp: impl Datapath + 'static) -> Context {
        Context {
            dp: Box::new(dp),
            mem: MemTable::default(),
            pds: Vec::new(),
            cqs: Vec::new(),
            qps: Vec::new(),
            stats: Stats::default(),
            uet: UetConfig::default(),
        }
    }

    /// The device's GID (as an IP address).
    pub fn gid(&self) -> IpAddr {
        self.dp.gid()
    }

    /// The device's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.dp.mac()
    }

    /// Datapath counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> Pd {
        self.pds.push(true);
        Pd(self.pds.len() as u32 - 1)
    }

    fn pd_ok(&self, pd: Pd) -> Result<(), VerbsError> {
        match self.pds.get(pd.0 as usize) {
            Some(true) => Ok(()),
            _ => Err(VerbsError::InvalidHandle("PD")),
        }
    }

    /// Frees a protection domain with no regions or QPs.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), VerbsError> {
        self.pd_ok(pd)?;
        if self.mem.pd_in_use(pd.0) || self.qps.iter().flatten().any(|e| e.qp.pd() == pd.0) {
            return Err(VerbsError::Busy("PD"));
        }
        self.pds[pd.0 as usize] = false;
        Ok(())
    }

    /// Registers `length` bytes of zeroed, page-aligned memory (`ibv_reg_mr`).
    pub fn reg_mr(&mut self, pd: Pd, length: usize, access: Access) -> Result<Mr, VerbsError> {
        self.pd_ok(pd)?;
        if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE)
            || access.contains(Access::REMOTE_ATOMIC) && !access.contains(Access::LOCAL_WRITE)
        {
            // ibv_reg_mr: remote write or atomic access requires local write.
            return Err(VerbsError::InvalidAttr("access: REMOTE_WRITE/ATOMIC need LOCAL_WRITE"));
        }
        let (key, addr) = self.mem.register(pd.0, length, access).ok_or(VerbsError::OutOfResources)?;
        Ok(Mr { lkey: key, rkey: key, addr, length })
    }

    /// Deregisters a region; later use of its keys fails.
    pub fn dereg_mr(&mut self, mr: &Mr) -> Result<(), VerbsError> {
        self.mem.deregister(mr.lkey).map_err(VerbsError::Memory)
    }

    /// The region's memory.
    pub fn mr_bytes(&self, mr: &Mr) -> Result<&[u8], VerbsError> {
        self.mem.bytes(mr.lkey).map_err(VerbsError::Memory)
    }

    /// The region's memory, writable.
    pub fn mr_bytes_mut(&mut self, mr: &Mr) -> Result<&mut [u8], VerbsError> {
        self.mem.bytes_mut(mr.lkey).map_err(VerbsError::Memory)
    }

    /// Creates a completion queue of `depth` entries.
    pub fn create_cq(&mut self, depth: usize) -> Result<Cq, VerbsError> {
        if depth == 0 {
            return Err(VerbsError::InvalidAttr("cq depth"));
        }
        self.cqs.push(Some(CqState { depth, entries: VecDeque::new(), overrun: false }));
        Ok(Cq(self.cqs.len() as u32 - 1))
    }

    fn cq_mut(&mut self, cq: Cq) -> Result<&mut CqState, VerbsError> {
        self.cqs.get_mut(cq.0 as usize).and_then(Option::as_mut).ok_or(VerbsError::InvalidHandle("CQ"))
    }

    /// Destroys a CQ no QP uses.
    pub fn destroy_cq(&mut self, cq: Cq) -> Result<(), VerbsError> {
        self.cq_mut(cq)?;
        if self.qps.iter().flatten().any(|e| e.send_cq == cq.0 || e.recv_cq == cq.0) {
            return Err(VerbsError::Busy("CQ"));
        }
        self.cqs[cq.0 as usize] = None;
        Ok(())
    }

    /// Moves up to `max` completions into `out` (`ibv_poll_cq`); returns how many.
    pub fn poll_cq(
        &mut self,
        cq: Cq,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        let c = self.cq_mut(cq)?;
        if c.overrun {
            return Err(VerbsError::CqOverrun);
        }
        let n = max.min(c.entries.len());
        out.extend(c.entries.drain(..n));
        Ok(n)
    }

    /// Creates an RC QP in the RESET state (`ibv_create_qp`).
    pub fn create_qp(&mut self, pd: Pd, init: &QpInitAttr) -> Result<Qp, VerbsError> {
        self.pd_ok(pd)?;
        self.cq_mut(init.send_cq)?;
        self.cq_mut(init.recv_cq)?;
        let c = init.cap;
        if c.max_send_wr == 0 || c.max_send_wr > 16384 || c.max_recv_wr > 16384 {
            return Err(VerbsError::InvalidAttr("cap: work queue depth must be 1..=16384"));
        }
        if c.max_send_sge > 32 || c.max_recv_sge > 32 || c.max_inline_data > 4096 {
            return Err(VerbsError::InvalidAttr("cap: at most 32 SGEs and 4096 inline bytes"));
        }
        let qpn = FIRST_QPN + self.qps.len() as u32;
        if qpn > 0xFF_FFFF {
            return Err(VerbsError::OutOfResources);
        }
        let cfg =
            QpConfig { qpn, pd: pd.0, cap: c, sq_sig_all: init.sq_sig_all, mac: self.mac(), gid: self.gid() };
        self.qps.push(Some(QpEntry { qp: RcQp::new(cfg), send_cq: init.send_cq.0, recv_cq: init.recv_cq.0 }));
        Ok(Qp(qpn))
    }

    fn entry(&mut self, qp: Qp) -> Result<&mut QpEntry, VerbsError> {
        let i = qp.0.checked_sub(FIRST_QPN).ok_or(VerbsError::InvalidHandle("QP"))?;
        self.qps.get_mut(i as usize).and_then(Option::as_mut).ok_or(VerbsError::InvalidHandle("QP"))
    }

    /// Destroys a QP (outstanding work is dropped without completions, as `ibv_destroy_qp`).
    pub fn destroy_qp(&mut self, qp: Qp) -> Result<(), VerbsError> {
        self.entry(qp)?;
        self.qps[(qp.0 - FIRST_QPN) as usize] = None;
        Ok(())
    }

    /// Changes a QP's state and attributes (`ibv_modify_qp`). The peer's MAC is resolved here
    /// unless `ah_attr.dmac` gives it.
    pub fn modify_qp(&mut self, qp: Qp, state: QpState, attr: &QpAttr) -> Result<(), VerbsError> {
        let mut attr = *attr;
        if let Some(av) = &mut attr.ah_attr {
            if av.dmac.is_none() {
                av.dmac = self.dp.resolve(av.dgid);
            }
        }
        self.entry(qp)?.qp.modify(state, &attr)?;
        self.flush_completions();
        Ok(())
    }

    /// The QP's state and attributes (`ibv_query_qp`).
    pub fn query_qp(&mut self, qp: Qp) -> Result<(QpState, QpAttr), VerbsError> {
        let e = self.entry(qp)?;
        Ok((e.qp.state(), e.qp.attr()))
    }

    /// Posts send requests (`ibv_post_send`). They are checked one by one; on the first bad one
    /// the call returns its index and error, and the ones before it stay posted.
    pub fn post_send(&mut self, qp: Qp, wrs: &[SendWr]) -> Result<(), (usize, VerbsError)> {
        self.post(qp, wrs, RcQp::post_send)
    }

    /// Posts receive requests (`ibv_post_recv`), with the same partial-failure rule as `post_send`.
    pub fn post_recv(&mut self, qp: Qp, wrs: &[RecvWr]) -> Result<(), (usize, VerbsError)> {
        self.post(qp, wrs, RcQp::post_recv)
    }

    fn post<W>(
        &mut self,
        qp: Qp,
        wrs: &[W],
        post_one: fn(&mut RcQp, &W, &MemTable) -> Result<(), VerbsError>,
    ) -> Result<(), (usize, VerbsError)> {
        let i = qp.0.wrapping_sub(FIRST_QPN) as usize;
        let Some(Some(e)) = self.qps.get_mut(i) else { return Err((0, VerbsError::InvalidHandle("QP"))) };
        let posted = wrs
            .iter()
            .enumerate()
            .try_for_each(|(n, wr)| post_one(&mut e.qp, wr, &self.mem).map_err(|err| (n, err)));
        if e.qp.state() == QpState::Error {
            // Requests posted in the error state complete at once, with a flush error.
            self.flush_completions();
        }
        posted
    }

    /// The earliest timer of any QP.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.qps.iter().flatten().filter_map(|e| e.qp.poll_timeout()).min()
    }

    /// True if some QP has a frame to send now.
    pub fn wants_transmit(&self) -> bool {
        self.qps.iter().flatten().any(|e| e.qp.wants_transmit())
    }

    /// One round of the progress engine: receive, run due timers, transmit, deliver completions.
    /// Returns how many frames and timers it handled (0: nothing to do until a frame arrives or
    /// [`next_deadline`](Self::next_deadline)).
    pub fn progress(&mut self) -> Result<usize, VerbsError> {
        let now = self.dp.now();
        let mut work = 0;
        for _ in 0..RX_BUDGET {
            let Some(frame) = self.dp.receive() else { break };
            work += 1;
            self.receive(now, frame.as_slice());
            self.dp.recycle(frame);
        }
        for e in self.qps.iter_mut().flatten() {
            if e.qp.poll_timeout().is_some_and(|t| t <= now) {
                e.qp.handle_timeout(now);
                work += 1;
            }
        }
        for e in self.qps.iter_mut().flatten() {
            for _ in 0..TX_BUDGET {
                if !e.qp.wants_transmit() {
                    break;
                }
                let mut frame = self.dp.alloc();
                match e.qp.poll_transmit(now, &self.mem, frame.buffer_mut()) {
                    Some(n) => {
                        frame.set_len(n);
                        self.dp.transmit(frame).map_err(VerbsError::Datapath)?;
                        self.stats.tx_frames += 1;
                        work += 1;
                    }
                    None => {
                        self.dp.recycle(frame);
                        break;
                    }
                }
            }
        }
        self.flush_completions();
        Ok(work)
    }

    fn receive(&mut self, now: Duration, frame: &[u8]) {
        self.stats.rx_frames += 1;
        let Ok(f) = wire::FrameRepr::parse_verified(frame, &self.uet) else {
            self.stats.rx_bad += 1;
            return;
        };
        let Some(pkt) = f.roce() else {
            self.stats.rx_unknown += 1;
            return;
        };
        let to_us =
            f.ethernet.dst_addr.0 == self.dp.mac() && canonical(f.ip.dst_addr()) == canonical(self.dp.gid());
        let index = pkt.bth.dest_qp.wrapping_sub(FIRST_QPN) as usize;
        match self.qps.get_mut(index) {
            Some(Some(e)) if to_us => e.qp.handle_packet(now, f.ip.src_addr(), pkt, &mut self.mem),
            _ => self.stats.rx_unknown += 1,
        }
    }

    fn flush_completions(&mut self) {
        for e in self.qps.iter_mut().flatten() {
            while let Some((side, wc)) = e.qp.poll_completion() {
                let cq = if side == CqSide::Send { e.send_cq } else { e.recv_cq };
                if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
                    if c.entries.len() >= c.depth {
                        c.overrun = true;
                    } else {
                        c.entries.push_back(wc);
                    }
                }
            }
        }
    }
}
