//! The in-process bench: two endpoints on a simulated cable with `qps` connected QP pairs, driven
//! from one thread on virtual time; every delivered message is checked.

use engine::roce::GRH_LEN;
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{
    Access, Mr, QpCap, QpType, RecvWr, SendWr, Sge, UdDest, VerbsError, WcOpcode, WcStatus, WorkCompletion,
    WrOpcode,
};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::baseline;
use super::config::{AtomicOp, BwRow, LatRow, Mode, PerfConfig, PerfError, PerfOp, ring_slots};
use super::pattern::{fill_pattern, stamp, unstamp};
use super::progress::Progress;
use crate::stat::Publisher;

fn post_err((_, e): (usize, VerbsError)) -> PerfError {
    PerfError::Verbs(e)
}

/// Per-QP rings.
struct Lane {
    slots: usize,
    /// Source of SEND/WRITE data (on a) or READ data (on b).
    src: Mr,
    /// Where data lands: b for SEND/WRITE, a for READ and atomics.
    dst: Mr,
    /// The atomic target on b.
    counter: Option<Mr>,
    posted: u64,
    completed: u64,
    received: u64,
    /// UC: the highest message number delivered so far (they must arrive in order).
    last_delivered: Option<u64>,
    /// Messages declared lost: sent, not received, and the network went quiet.
    lost: u64,
    /// UD: which messages arrived (a duplicated frame delivers a message twice).
    seen: Vec<bool>,
    /// With the shared [`Pool`]: the slot of each outstanding message, oldest first (RC
    /// completes in order).
    in_flight: VecDeque<usize>,
    /// In the pool's queue of lanes waiting for a slot.
    waiting: bool,
    /// Wall and virtual time of the outstanding post (latency mode).
    post_time: Option<(Instant, Duration)>,
}

/// RC WRITE and READ: one ring of message slots (source and target) that every lane shares, as
/// many as one QP keeps in flight. Each message takes a free slot and gives it back when its
/// completion was checked; lanes wait for slots in turn and take up to their share
/// (`Lane::slots`) at once, so every QP is served round-robin. The bytes touched and in flight are
/// then the same for 1 QP as for 16,384, and `--qps` measures what the number of QPs costs the
/// engine rather than the memory separate rings would take (1,024 QPs with their own two 64 KiB
/// slots touch 256 MiB, eight times this machine's L3 cache).
struct Pool {
    free: Vec<usize>,
    /// Lanes waiting for a slot, in turn (each at most once).
    waiting: VecDeque<usize>,
}

/// The bench: a connected pair and the lanes.
pub struct Bench {
    cfg: PerfConfig,
    pair: SimPair,
    lanes: Vec<Lane>,
    /// RC WRITE and READ: the slots the lanes share.
    pool: Option<Pool>,
    /// The lane of each QP number (either side's; the engine numbers QPs densely), so a
    /// completion finds its lane in O(1).
    lane_by_qpn: Vec<Option<u32>>,
    /// Lanes that may post again: every lane at the start, then those with a completion or a
    /// receipt since the last posting round (the loop visits no lane without work).
    touched: Vec<usize>,
    /// Requests completed, over all lanes.
    completed: u64,
    size: usize,
    /// The request `post` fills in and posts.
    wr: SendWr,
    wcs: Vec<WorkCompletion>,
    verified: u64,
    errors: u64,
    lat: Vec<(Duration, Duration)>,
    /// UD messages delivered more than once (duplicated frames).
    duplicates: u64,
    /// Time spent in `check` (a Cell: checks run under shared borrows of the memory).
    check_clock: std::cell::Cell<Duration>,
    /// This bench's thread and the number of threads of the run (`--threads`): only the first
    /// shows progress and publishes its devices to `softrdma stat`.
    shard: (usize, usize),
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench").field("size", &self.size).field("verified", &self.verified).finish()
    }
}

impl Bench {
    /// Connects the QPs and registers the rings for messages of `size` bytes.
    pub fn new(cfg: &PerfConfig, size: usize) -> Result<Bench, PerfError> {
        let depth = if cfg.mode == Mode::Lat { 1 } else { cfg.tx_depth.max(1) };
        let slots = ring_slots(depth, size, cfg.mtu.bytes() as usize, cfg.qps);
        let cap = QpCap {
            max_send_wr: slots as u32,
            // One SRQ serves every QP's ring.
            max_recv_wr: (if cfg.srq { slots * cfg.qps } else { slots }) as u32,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let pc = PairConfig {
            qp_type: cfg.qp_type,
            srq: cfg.srq,
            seed: cfg.seed,
            link: cfg.link,
            mtu: cfg.mtu,
            qps: cfg.qps,
            cap,
            retry_cnt: cfg.retries.min(7) as u8,
            max_retries: (cfg.retries > 7).then_some(cfg.retries),
            max_rd_atomic: 16,
            cq_depth: 2 * slots * cfg.qps + 16,
            dcqcn: cfg.dcqcn,
            traffic_class: cfg.traffic_class,
            ..PairConfig::default()
        };
        let mut pair = SimPair::new(&pc)?;
        if cfg.tap {
            pair.net.with(|n| n.enable_tap());
        }
        let ring = slots * size.max(8);
        // UD receives start with the 40-byte GRH area.
        let recv_ring = slots * bench_recv_len(cfg.qp_type, size);
        let lw = Access::LOCAL_WRITE;
        let pooled = cfg.qp_type == QpType::Rc && matches!(cfg.op, PerfOp::Write | PerfOp::Read);
        let pool_slots = ring_slots(depth, size, cfg.mtu.bytes() as usize, 1);
        let shared = if pooled {
            let bytes = pool_slots * size.max(8);
            let (a, b) = (
                pair.a.reg_mr(pair.pd_a, bytes, lw)?,
                pair.b.reg_mr(pair.pd_b, bytes, lw | Access::REMOTE_WRITE | Access::REMOTE_READ)?,
            );
            let (src, dst) = if cfg.op == PerfOp::Read { (b, a) } else { (a, b) };
            let src_ctx = if cfg.op == PerfOp::Read { &mut pair.b } else { &mut pair.a };
            fill_pattern(src_ctx.mr_bytes_mut(&src)?, cfg.seed);
            Some((src, dst))
        } else {
            None
        };
        let mut lanes = Vec::new();
        for q in 0..cfg.qps {
            let (src, dst, counter) = match (cfg.op, shared) {
                (_, Some((src, dst))) => (src, dst, None),
                (PerfOp::Send, None) => {
                    (pair.a.reg_mr(pair.pd_a, ring, lw)?, pair.b.reg_mr(pair.pd_b, recv_ring, lw)?, None)
                }
                (PerfOp::Write, None) => (
                    pair.a.reg_mr(pair.pd_a, ring, lw)?,
                    pair.b.reg_mr(pair.pd_b, ring, lw | Access::REMOTE_WRITE)?,
                    None,
                ),
                (PerfOp::Read, None) => (
                    pair.b.reg_mr(pair.pd_b, ring, Access::REMOTE_READ)?,
                    pair.a.reg_mr(pair.pd_a, ring, lw)?,
                    None,
                ),
                (PerfOp::Atomic, None) => (
                    pair.a.reg_mr(pair.pd_a, 8, lw)?,
                    pair.a.reg_mr(pair.pd_a, slots * 8, lw)?,
                    Some(pair.b.reg_mr(pair.pd_b, 8, lw | Access::REMOTE_ATOMIC)?),
                ),
            };
            if shared.is_none() {
                let src_ctx = if cfg.op == PerfOp::Read { &mut pair.b } else { &mut pair.a };
                fill_pattern(src_ctx.mr_bytes_mut(&src)?, cfg.seed ^ q as u64);
            }
            lanes.push(Lane {
                slots,
                src,
                dst,
                counter,
                posted: 0,
                completed: 0,
                received: 0,
                last_delivered: None,
                lost: 0,
                seen: Vec::new(),
                in_flight: VecDeque::new(),
                waiting: pooled,
                post_time: None,
            });
        }
        let mut lane_by_qpn = Vec::new();
        for (q, (a, b)) in pair.qps.iter().enumerate() {
            for qpn in [a.qpn(), b.qpn()] {
                let i = qpn as usize;
                if lane_by_qpn.len() <= i {
                    lane_by_qpn.resize(i + 1, None);
                }
                lane_by_qpn[i].get_or_insert(q as u32);
            }
        }
        let mut bench = Bench {
            cfg: cfg.clone(),
            pair,
            touched: (0..lanes.len()).collect(),
            pool: pooled
                .then(|| Pool { free: (0..pool_slots).rev().collect(), waiting: (0..lanes.len()).collect() }),
            lanes,
            lane_by_qpn,
            completed: 0,
            size,
            wr: SendWr::new(0, WrOpcode::Send, Vec::with_capacity(1)),
            wcs: Vec::new(),
            verified: 0,
            errors: 0,
            lat: Vec::new(),
            duplicates: 0,
            check_clock: Default::default(),
            shard: (0, 1),
        };
        if cfg.op == PerfOp::Send || (cfg.op == PerfOp::Write && cfg.qp_type == QpType::Uc) {
            for q in 0..cfg.qps {
                for s in 0..slots {
                    bench.post_recv(q, s)?;
                }
            }
        }
        Ok(bench)
    }

    /// Makes this bench thread `index` of `of` sharing one run (see [`super::threads`]).
    pub(super) fn set_shard(&mut self, index: usize, of: usize) {
        self.shard = (index, of);
    }

    /// The simulated pair (for the tap and counters).
    pub fn pair(&mut self) -> &mut SimPair {
        &mut self.pair
    }

    /// Both sides' counters.
    pub fn stats(&self) -> (engine::verbs::Stats, engine::verbs::Stats) {
        (self.pair.a.stats(), self.pair.b.stats())
    }

    fn recv_len(&self) -> usize {
        bench_recv_len(self.cfg.qp_type, self.size)
    }

    /// Posts receive `slot` of lane `q`'s ring (to the SRQ when there is one).
    fn post_recv(&mut self, q: usize, slot: usize) -> Result<(), PerfError> {
        let len = self.recv_len();
        let l = &self.lanes[q];
        let sge = Sge { addr: l.dst.addr + (slot * len) as u64, length: len as u32, lkey: l.dst.lkey };
        let wr = RecvWr { wr_id: (q << 32 | slot) as u64, sg_list: vec![sge] };
        match self.pair.srqs {
            Some((_, srq)) => self.pair.b.post_srq_recv(srq, &[wr]).map_err(post_err),
            None => self.pair.b.post_recv(self.pair.qps[q].1, &[wr]).map_err(post_err),
        }
    }

    fn post(&mut self, q: usize) -> Result<(), PerfError> {
        let size = self.size;
        let l = &mut self.lanes[q];
        let n = l.posted;
        let slot = match &mut self.pool {
            Some(pool) => {
                let slot = pool.free.pop().ok_or(PerfError::Stalled("a post without a free slot"))?;
                l.in_flight.push_back(slot);
                slot
            }
            None => (n % l.slots as u64) as usize,
        };
        let at = slot * size;
        let stamp = stamp(n);
        let k = size.min(8);
        let (qa, _) = self.pair.qps[q];
        let wr = match self.cfg.op {
            PerfOp::Send | PerfOp::Write => {
                self.pair.a.mr_bytes_mut(&l.src)?[at..at + k].copy_from_slice(&stamp[..k]);
                let sge = Sge { addr: l.src.addr + at as u64, length: size as u32, lkey: l.src.lkey };
                let remote_addr = l.dst.addr + at as u64;
                let opcode = match (self.cfg.op, self.cfg.qp_type) {
                    (PerfOp::Send, _) => WrOpcode::Send,
                    // UC has no ACK: the immediate data gives the receiver a completion per
                    // delivered WRITE to check it by.
                    (_, QpType::Uc) => {
                        WrOpcode::RdmaWriteWithImm { remote_addr, rkey: l.dst.rkey, imm: n as u32 }
                    }
                    _ => WrOpcode::RdmaWrite { remote_addr, rkey: l.dst.rkey },
                };
                let ud = self.pair.ahs.map(|(ah, _)| {
                    let remote_qpn = self.pair.qps[q].1.qpn();
                    UdDest { ah, remote_qpn, remote_qkey: 0x8000_0000 }
                });
                (opcode, sge, ud)
            }
            PerfOp::Read => {
                self.pair.b.mr_bytes_mut(&l.src)?[at..at + k].copy_from_slice(&stamp[..k]);
                let sge = Sge { addr: l.dst.addr + at as u64, length: size as u32, lkey: l.dst.lkey };
                let opcode = WrOpcode::RdmaRead { remote_addr: l.src.addr + at as u64, rkey: l.src.rkey };
                (opcode, sge, None)
            }
            PerfOp::Atomic => {
                let c = l.counter.ok_or(PerfError::Stalled("atomic lane without a counter"))?;
                let sge = Sge { addr: l.dst.addr + (slot * 8) as u64, length: 8, lkey: l.dst.lkey };
                let opcode = match self.cfg.atomic {
                    AtomicOp::FetchAdd => {
                        WrOpcode::AtomicFetchAndAdd { remote_addr: c.addr, rkey: c.rkey, add: 1 }
                    }
                    AtomicOp::CmpSwap => WrOpcode::AtomicCmpAndSwp {
                        remote_addr: c.addr,
                        rkey: c.rkey,
                        compare: n,
                        swap: n + 1,
                    },
                };
                (opcode, sge, None)
            }
        };
        // One request, rebuilt in place for each post: its SGE list allocates once.
        let (opcode, sge, ud) = wr;
        let wr = &mut self.wr;
        (wr.wr_id, wr.opcode, wr.ud) = (n, opcode, ud);
        wr.sg_list.clear();
        wr.sg_list.push(sge);
        self.pair.a.post_send(qa, std::slice::from_ref(&self.wr)).map_err(post_err)?;
        if self.cfg.mode == Mode::Lat {
            l.post_time = Some((Instant::now(), self.pair.net.now()));
        }
        l.posted += 1;
        Ok(())
    }

    /// Checks message `n` of lane `q` landed in `dst_slot` of `dst` intact.
    fn check(&self, q: usize, n: u64, dst_bytes: &[u8], slot: usize) -> bool {
        let t0 = Instant::now();
        let ok = self.compare(q, n, dst_bytes, slot);
        self.check_clock.set(self.check_clock.get() + t0.elapsed());
        ok
    }

    fn compare(&self, q: usize, n: u64, dst_bytes: &[u8], slot: usize) -> bool {
        let l = &self.lanes[q];
        let size = self.size;
        let src_ctx = if self.cfg.op == PerfOp::Read { &self.pair.b } else { &self.pair.a };
        let Ok(src) = src_ctx.mr_bytes(&l.src) else { return false };
        let at = slot * size;
        let k = size.min(8);
        dst_bytes[..k] == stamp(n)[..k] && dst_bytes[k..size] == src[at + k..at + size]
    }

    fn lane_of(&self, wc: &WorkCompletion) -> Option<usize> {
        self.lane_by_qpn.get(wc.qp_num as usize).copied().flatten().map(|q| q as usize)
    }

    /// Polls both CQs, checking data; returns completions of requests (per lane).
    fn poll(&mut self) -> Result<(), PerfError> {
        let size = self.size;
        let mut wcs = std::mem::take(&mut self.wcs);
        // Receives first, so their buffers are posted again before the sender needs them.
        wcs.clear();
        self.pair.b.poll_cq(self.pair.cq_b, &mut wcs, 256)?;
        let reliable = self.cfg.qp_type == QpType::Rc;
        let skip = if self.cfg.qp_type == QpType::Ud { GRH_LEN } else { 0 };
        let rlen = self.recv_len();
        for wc in &wcs {
            // The sending lane, and the lane and slot whose buffer the WQE named (with an SRQ,
            // any QP's message can land in any lane's buffer).
            let Some(q) = self.lane_of(wc) else { continue };
            let (bq, slot) = ((wc.wr_id >> 32) as usize, (wc.wr_id & 0xFFFF_FFFF) as usize);
            if bq >= self.lanes.len() {
                self.errors += 1;
                continue;
            }
            self.lanes[q].received += 1;
            self.touched.push(q);
            if wc.status != WcStatus::Success {
                self.errors += 1;
                continue;
            }
            // A WRITE_WITH_IMM names its message in the immediate data and left it in the target
            // slot; a SEND left it in the receive buffer, stamped.
            let write_imm = wc.opcode == WcOpcode::RecvRdmaWithImm;
            let (n, data) = if write_imm {
                let n = u64::from(wc.imm_data.unwrap_or(u32::MAX));
                let at = (n % self.lanes[q].slots as u64) as usize * size;
                (n, self.pair.b.mr_bytes(&self.lanes[q].dst)?.get(at..at + size).unwrap_or(&[]))
            } else {
                let buf = &self.pair.b.mr_bytes(&self.lanes[bq].dst)?[slot * rlen..(slot + 1) * rlen];
                let data = &buf[skip..skip + size];
                // RC delivers in order: message n is the n-th receive. UC and UD may lose messages,
                // so the stamp says which one arrived (perf asks for >= 8 bytes there).
                let n = if reliable { self.lanes[q].received - 1 } else { unstamp(data) };
                (n, data)
            };
            let len_ok =
                if write_imm { wc.byte_len as usize == size } else { wc.byte_len as usize == skip + size };
            let mut ok = len_ok
                && data.len() == size
                && n < self.lanes[q].posted
                && self.check(q, n, data, (n % self.lanes[q].slots as u64) as usize);
            if self.cfg.qp_type == QpType::Uc {
                ok &= self.lanes[q].last_delivered.is_none_or(|last| n > last);
                self.lanes[q].last_delivered = Some(n);
            }
            if ok && self.cfg.qp_type == QpType::Ud {
                // A duplicate is correct data, counted apart; it is not a new message.
                let seen = &mut self.lanes[q].seen;
                if seen.len() <= n as usize {
                    seen.resize(n as usize + 1, false);
                }
                if std::mem::replace(&mut seen[n as usize], true) {
                    self.lanes[q].received -= 1;
                    self.duplicates += 1;
                    self.post_recv(bq, slot)?;
                    continue;
                }
            }
            if ok {
                self.verified += 1
            } else {
                self.errors += 1
            }
            if self.latency_at_receiver() {
                if let Some((t0, v0)) = self.lanes[q].post_time.take() {
                    self.lat.push((t0.elapsed(), self.pair.net.now().saturating_sub(v0)));
                }
            }
            self.post_recv(bq, slot)?;
        }
        wcs.clear();
        self.pair.a.poll_cq(self.pair.cq_a, &mut wcs, 256)?;
        for wc in &wcs {
            let Some(q) = self.lane_of(wc) else { continue };
            let n = wc.wr_id;
            // The oldest outstanding message's slot (RC completes in order), back to the pool below.
            let slot = match &self.pool {
                Some(_) => self.lanes[q].in_flight.pop_front(),
                None => Some((n % self.lanes[q].slots as u64) as usize),
            };
            let l = &self.lanes[q];
            let ok = wc.status == WcStatus::Success
                && match self.cfg.op {
                    PerfOp::Send => true,
                    // UC: checked when the WRITE_WITH_IMM's completion arrives at the receiver.
                    PerfOp::Write if self.cfg.qp_type == QpType::Uc => true,
                    PerfOp::Write | PerfOp::Read => {
                        let side = if self.cfg.op == PerfOp::Read { &self.pair.a } else { &self.pair.b };
                        let dst = side.mr_bytes(&l.dst)?;
                        let data = slot.and_then(|s| Some((s, dst.get(s * size..(s + 1) * size)?)));
                        data.is_some_and(|(s, d)| self.check(q, n, d, s))
                    }
                    PerfOp::Atomic => {
                        let dst = self.pair.a.mr_bytes(&l.dst)?;
                        let at = slot.map_or(usize::MAX, |s| s * 8);
                        let orig = dst.get(at..at.saturating_add(8)).and_then(|b| b.try_into().ok());
                        orig.map(u64::from_ne_bytes) == Some(n)
                    }
                };
            match (self.cfg.op, ok) {
                // A SEND (and a UC WRITE_WITH_IMM) is checked when it is received.
                (PerfOp::Send, true) => {}
                (PerfOp::Write, true) if self.cfg.qp_type == QpType::Uc => {}
                (_, true) => self.verified += 1,
                (_, false) => self.errors += 1,
            }
            // Latency ends at the requester's completion, except on UC/UD where that is only "sent".
            let at_rx = self.latency_at_receiver();
            if let Some((t0, v0)) = self.lanes[q].post_time.take_if(|_| !at_rx) {
                self.lat.push((t0.elapsed(), self.pair.net.now().saturating_sub(v0)));
            }
            self.lanes[q].completed += 1;
            self.completed += 1;
            self.touched.push(q);
            if let (Some(pool), Some(slot)) = (&mut self.pool, slot) {
                pool.free.push(slot);
            }
        }
        self.wcs = wcs;
        Ok(())
    }
}

impl Bench {
    /// Whether the receiver checks the data (SEND; WRITE_WITH_IMM on UC) rather than the requester.
    fn checked_at_receiver(&self) -> bool {
        self.cfg.op == PerfOp::Send || (self.cfg.op == PerfOp::Write && self.cfg.qp_type == QpType::Uc)
    }

    /// UC and UD complete a request when it is sent, so latency is measured to its receipt.
    fn latency_at_receiver(&self) -> bool {
        self.cfg.qp_type != QpType::Rc && self.checked_at_receiver()
    }

    fn all_done(&self, iters: u64) -> bool {
        if self.completed < iters * self.lanes.len() as u64 {
            return false;
        }
        let rx = self.checked_at_receiver();
        self.lanes.iter().all(|l| l.completed >= iters && (!rx || l.received + l.lost >= iters))
    }

    /// One step of both sides. On UC and UD a quiet network with receives missing means they were
    /// lost: they are counted and the step returns false (RC would be stalled, an error).
    fn step(&mut self) -> Result<bool, PerfError> {
        if !self.pair.step()? {
            if self.cfg.qp_type != QpType::Rc && self.lanes.iter().all(|l| l.completed >= l.posted) {
                self.poll()?;
                if self.checked_at_receiver() {
                    for l in &mut self.lanes {
                        l.lost = l.posted - l.received;
                    }
                    // Lanes held back by their receive ring may post again.
                    self.touched.extend(0..self.lanes.len());
                }
                return Ok(false);
            }
            return Err(PerfError::Stalled("work outstanding but no frame or timer pending"));
        }
        self.poll()?;
        Ok(true)
    }

    /// Both devices' counters for `softrdma stat`.
    fn devices(&self) -> Vec<serde_json::Value> {
        vec![crate::stat::device("sim0", &self.pair.a), crate::stat::device("sim1", &self.pair.b)]
    }

    /// Messages sent and never delivered (unreliable transports).
    fn lost(&self) -> u64 {
        self.lanes.iter().map(|l| l.lost).sum()
    }

    /// Posts what the lanes may: with the [`Pool`], free slots to the waiting lanes in turn, each
    /// lane as many as its share of the ring; otherwise each lane with a completion or a receipt
    /// since the last round, up to its ring. No lane without work is visited.
    fn post_round(&mut self, iters: u64, depth: u64, paced: bool) -> Result<(), PerfError> {
        // UC and UD have no flow control: a sender also stays within the receive ring.
        let can = |l: &Lane| {
            l.posted < iters
                && l.posted - l.completed < depth
                && !(paced && l.posted - l.received - l.lost >= l.slots as u64)
        };
        let mut ready = std::mem::take(&mut self.touched);
        ready.sort_unstable();
        ready.dedup();
        if let Some(pool) = &mut self.pool {
            // Lanes that completed a message line up behind those already waiting.
            for &q in &ready {
                let l = &mut self.lanes[q];
                if !l.waiting && can(l) {
                    l.waiting = true;
                    pool.waiting.push_back(q);
                }
            }
            while let Some(q) =
                self.pool.as_mut().filter(|p| !p.free.is_empty()).and_then(|p| p.waiting.pop_front())
            {
                self.lanes[q].waiting = false;
                // The lane at the head posts what its share allows (as perftest fills each QP's
                // depth); one that runs out of free slots keeps its turn.
                while can(&self.lanes[q]) && self.pool.as_ref().is_some_and(|p| !p.free.is_empty()) {
                    self.post(q)?;
                }
                if can(&self.lanes[q]) {
                    self.lanes[q].waiting = true;
                    if let Some(pool) = &mut self.pool {
                        pool.waiting.push_front(q);
                    }
                }
            }
        } else {
            for &q in &ready {
                while can(&self.lanes[q]) {
                    self.post(q)?;
                }
            }
        }
        ready.clear();
        self.touched = ready;
        Ok(())
    }

    /// Bandwidth mode: `tx_depth` messages in flight per QP until `iters` complete on each.
    pub fn run_bw(&mut self) -> Result<BwRow, PerfError> {
        let iters = self.cfg.iters;
        let depth = self.lanes.first().map_or(1, |l| l.slots) as u64;
        let total = iters * self.lanes.len() as u64;
        let window = (total / 20).max(1);
        let v0 = self.pair.net.now();
        let start = Instant::now();
        let (mut mark_t, mut mark_n, mut peak) = (start, 0u64, 0f64);
        let mut timeline = super::config::Timeline::default();
        let paced = self.cfg.qp_type != QpType::Rc && self.checked_at_receiver();
        let mut progress = match self.shard {
            (_, 1) => Progress::new(format!("size {}", self.size), total, self.size),
            (i, n) => Progress::new(format!("size {}, thread {} of {n}", self.size, i + 1), total, self.size),
        };
        if self.shard.0 != 0 {
            progress.hide();
        }
        let mut stats = (self.shard.0 == 0).then(|| Publisher::new("perf (in-process)"));
        while !self.all_done(iters) {
            if let Some(stats) = &mut stats {
                stats.maybe(|| self.devices());
            }
            self.post_round(iters, depth, paced)?;
            self.step()?;
            let done = self.completed;
            progress.update(done);
            if done >= mark_n + window {
                let now = Instant::now();
                let rate =
                    ((done - mark_n) * self.size as u64) as f64 / (now - mark_t).as_secs_f64().max(1e-9);
                peak = peak.max(rate);
                timeline.push((now - start).as_secs_f64(), super::report::mb(rate));
                (mark_t, mark_n) = (now, done);
            }
        }
        let wall = start.elapsed();
        progress.finish();
        let check_time = self.check_clock.get();
        let bytes = total * self.size as u64;
        let avg = bytes as f64 / wall.as_secs_f64().max(1e-9);
        let baseline =
            self.cfg.baseline.then(|| baseline::run(self.size, self.cfg.mtu.bytes() as usize, total, 0));
        Ok(BwRow {
            size: self.size,
            iters,
            bytes,
            wall,
            virtual_time: self.pair.net.now() - v0,
            peak: peak.max(avg),
            verified: self.verified,
            errors: self.errors,
            lost: self.lost(),
            duplicates: self.duplicates,
            check_time,
            baseline,
            timeline,
        })
    }

    /// Latency mode: one message at a time, `iters` times on QP 0.
    pub fn run_lat(&mut self) -> Result<LatRow, PerfError> {
        let mut wall = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|_| PerfError::Stalled("histogram"))?;
        let mut virt = wall.clone();
        let mut progress = Progress::new(format!("size {}", self.size), self.cfg.iters, self.size);
        let mut stats = Publisher::new("perf (in-process)");
        for _ in 0..self.cfg.iters {
            stats.maybe(|| self.devices());
            progress.update(self.lanes[0].completed);
            // One lane, posted here: the posting round's list is not needed.
            self.touched.clear();
            self.post(0)?;
            let target = self.lanes[0].posted;
            while self.lanes[0].completed < target
                || (self.checked_at_receiver() && self.lanes[0].received + self.lanes[0].lost < target)
            {
                if !self.step()? {
                    // Lost on an unreliable transport: nothing more will come.
                    self.lanes[0].post_time = None;
                    break;
                }
            }
        }
        progress.finish();
        for (w, v) in self.lat.drain(..) {
            wall.saturating_record(w.as_nanos().max(1) as u64);
            virt.saturating_record(v.as_nanos().max(1) as u64);
        }
        let one_packet = self.size <= self.cfg.mtu.bytes() as usize;
        let baseline = (self.cfg.baseline && self.cfg.qp_type == QpType::Rc && one_packet)
            .then(|| baseline::round_trip(self.size, self.cfg.iters.max(10_000), true));
        Ok(LatRow {
            size: self.size,
            wall_ns: wall,
            virtual_ns: virt,
            verified: self.verified,
            errors: self.errors,
            lost: self.lost(),
            baseline,
        })
    }
}

/// Bytes of one receive buffer: the message, after the GRH area on UD.
fn bench_recv_len(qp_type: QpType, size: usize) -> usize {
    if qp_type == QpType::Ud { size + GRH_LEN } else { size }
}
