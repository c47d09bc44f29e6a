//! `softrdma perf`: perftest-style bandwidth and latency runs of two endpoints over the simulated
//! network in one process, checking every delivered byte.
//!
//! Each QP has a ring of message slots on both sides. Source slots are filled with a pattern once;
//! before message `n` is posted its slot gets `n` stamped in its first 8 bytes. When message `n`
//! completes (the receive for SEND, the requester's completion for WRITE, READ and atomics) the
//! delivered slot must hold the stamp `n` and the source pattern after it, byte for byte.

pub mod baseline;
pub mod remote;
pub mod uet;

use engine::roce::GRH_LEN;
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{
    Access, Mr, Mtu, QpCap, QpType, RecvWr, SendWr, Sge, UdDest, VerbsError, WcOpcode, WcStatus,
    WorkCompletion, WrOpcode,
};
use hdrhistogram::Histogram;
pub use nicsim::LinkConfig;
use std::time::{Duration, Instant};

/// The operation measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfOp {
    /// SEND / RECV.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// 64-bit atomics.
    Atomic,
}

impl PerfOp {
    fn title(self) -> &'static str {
        match self {
            PerfOp::Send => "Send",
            PerfOp::Write => "RDMA_Write",
            PerfOp::Read => "RDMA_Read",
            PerfOp::Atomic => "Atomic",
        }
    }
}

/// Which atomic `perf atomic` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// FETCH_AND_ADD of 1: the returned values count up.
    FetchAdd,
    /// CMP_AND_SWP of n -> n+1: every swap succeeds.
    CmpSwap,
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keep `tx_depth` messages in flight per QP.
    Bw,
    /// One message at a time.
    Lat,
}

/// A perf run.
#[derive(Debug, Clone)]
pub struct PerfConfig {
    /// Operation.
    pub op: PerfOp,
    /// Transport: RC, or UC (SEND, WRITE) and UD (SEND), which may lose messages.
    pub qp_type: QpType,
    /// Receives come from a shared receive queue on the receiving side (RC, UD).
    pub srq: bool,
    /// Which atomic.
    pub atomic: AtomicOp,
    /// Message sizes, one table row each.
    pub sizes: Vec<usize>,
    /// Messages per QP and size.
    pub iters: u64,
    /// QP pairs.
    pub qps: usize,
    /// Bandwidth or latency.
    pub mode: Mode,
    /// Path MTU.
    pub mtu: Mtu,
    /// The simulated cable (both directions).
    pub link: LinkConfig,
    /// Seed of the impairments.
    pub seed: u64,
    /// Messages in flight per QP (bw mode).
    pub tx_depth: usize,
    /// Retries without progress: 0..=7 is verbs' `retry_cnt`, more uses the `max_retries` extension.
    pub retries: u32,
    /// Keep every frame the tap sees (for `--pcap`).
    pub tap: bool,
    /// Also run the TX+RX baseline (bw mode).
    pub baseline: bool,
    /// DCQCN on both sides (RC).
    pub dcqcn: Option<engine::roce::dcqcn::DcqcnConfig>,
}

/// One bandwidth row.
#[derive(Debug, Clone, Copy)]
pub struct BwRow {
    /// Message size.
    pub size: usize,
    /// Messages per QP.
    pub iters: u64,
    /// Payload bytes over all QPs.
    pub bytes: u64,
    /// Wall-clock time.
    pub wall: Duration,
    /// Virtual time on the simulated network.
    pub virtual_time: Duration,
    /// Best rate over a window of completions, bytes per second.
    pub peak: f64,
    /// Messages checked.
    pub verified: u64,
    /// Messages that failed a check or completed with an error.
    pub errors: u64,
    /// Messages an unreliable transport lost (sent but never delivered).
    pub lost: u64,
    /// UD messages delivered a second time by a duplicated frame (checked, not counted as new).
    pub duplicates: u64,
    /// Wall-clock time spent comparing delivered bytes (part of `wall`).
    pub check_time: Duration,
    /// The baseline at the same size and byte count, if run.
    pub baseline: Option<baseline::Baseline>,
}

impl BwRow {
    /// A row from totals alone: `iters` messages of `size` bytes in `wall` (peak = average, no
    /// baseline, no check time).
    pub fn measured(
        size: usize,
        iters: u64,
        wall: Duration,
        virtual_time: Duration,
        verified: u64,
        errors: u64,
        lost: u64,
    ) -> BwRow {
        let bytes = iters * size as u64;
        BwRow {
            size,
            iters,
            bytes,
            wall,
            virtual_time,
            peak: bytes as f64 / wall.as_secs_f64().max(1e-9),
            verified,
            errors,
            lost,
            duplicates: 0,
            check_time: Duration::ZERO,
            baseline: None,
        }
    }

    /// Average payload bytes per wall-clock second.
    pub fn average(&self) -> f64 {
        self.bytes as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Payload bytes per second of engine time: wall-clock minus the time spent checking data.
    pub fn engine_rate(&self) -> f64 {
        self.bytes as f64 / self.wall.saturating_sub(self.check_time).as_secs_f64().max(1e-9)
    }
}

/// One latency row.
#[derive(Debug, Clone)]
pub struct LatRow {
    /// Message size.
    pub size: usize,
    /// Wall-clock nanoseconds from post to completion.
    pub wall_ns: Histogram<u64>,
    /// Virtual nanoseconds from post to completion.
    pub virtual_ns: Histogram<u64>,
    /// Messages checked.
    pub verified: u64,
    /// Errors.
    pub errors: u64,
    /// Messages an unreliable transport lost.
    pub lost: u64,
}

/// Why a perf run stopped.
#[derive(Debug)]
pub enum PerfError {
    /// A verbs call failed.
    Verbs(VerbsError),
    /// Work is outstanding but nothing can happen any more.
    Stalled(&'static str),
}

impl std::fmt::Display for PerfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PerfError::Verbs(e) => write!(f, "{e}"),
            PerfError::Stalled(why) => write!(f, "stalled: {why}"),
        }
    }
}

impl std::error::Error for PerfError {}

impl From<VerbsError> for PerfError {
    fn from(e: VerbsError) -> Self {
        PerfError::Verbs(e)
    }
}

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
    /// Wall and virtual time of the outstanding post (latency mode).
    post_time: Option<(Instant, Duration)>,
}

/// Mixed into message stamps so a stamp never starts with an EtherType followed by two zero bytes,
/// which Wireshark's InfiniBand dissector would take for EtherType-encapsulated payload.
const STAMP_KEY: u64 = 0x5A5A_5A5A_5A5A_5A5A;

/// The first 8 bytes of message `n`.
pub(crate) fn stamp(n: u64) -> [u8; 8] {
    (n ^ STAMP_KEY).to_le_bytes()
}

/// The message number a buffer's first 8 bytes name (`u64::MAX ^ key` if it is shorter).
pub(crate) fn unstamp(data: &[u8]) -> u64 {
    u64::from_le_bytes(data.get(..8).and_then(|d| d.try_into().ok()).unwrap_or([0xFF; 8])) ^ STAMP_KEY
}

/// The queue report of a simulated pair's two link directions (when they have a rate): frames
/// offered, tail drops, CE marks and the queue's p99, toward `names[0]`'s port 0 and `names[1]`'s
/// port 1.
pub fn link_report(net: &engine::datapath::sim::SimNet, names: [&str; 2]) -> String {
    net.with(|n| {
        let mut out = String::new();
        for (i, name) in names.iter().enumerate() {
            let port = nicsim::PortId(i);
            let (Some(st), q) = (n.ingress_stats(port), n.ingress_queue_quantile(port, 0.99)) else {
                continue;
            };
            out += &format!(
                " link toward {name}: frames {} tail drops {} ({:.3} %) trimmed {} CE marks {} queue p99 {} B\n",
                st.offered,
                st.tail_dropped,
                100.0 * st.tail_dropped as f64 / st.offered.max(1) as f64,
                st.trimmed,
                st.ecn_marked,
                q.unwrap_or(0)
            );
        }
        out.trim_end().to_string()
    })
}

fn fill_pattern(bytes: &mut [u8], salt: u64) {
    let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// The bench: a connected pair and the lanes.
pub struct Bench {
    cfg: PerfConfig,
    pair: SimPair,
    lanes: Vec<Lane>,
    size: usize,
    wcs: Vec<WorkCompletion>,
    verified: u64,
    errors: u64,
    lat: Vec<(Duration, Duration)>,
    /// UD messages delivered more than once (duplicated frames).
    duplicates: u64,
    /// Time spent in `check` (a Cell: checks run under shared borrows of the memory).
    check_clock: std::cell::Cell<Duration>,
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
        let slots = ring_slots(depth, size, cfg.mtu.bytes() as usize);
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
            ..PairConfig::default()
        };
        let mut pair = SimPair::new(&pc)?;
        if cfg.tap {
            pair.net.with(|n| n.enable_tap());
        }
        let ring = slots * size.max(8);
        // UD receives start with the 40-byte GRH area.
        let recv_ring = slots * bench_recv_len(cfg.qp_type, size);
        let mut lanes = Vec::new();
        for q in 0..cfg.qps {
            let lw = Access::LOCAL_WRITE;
            let (src, dst, counter) = match cfg.op {
                PerfOp::Send => {
                    (pair.a.reg_mr(pair.pd_a, ring, lw)?, pair.b.reg_mr(pair.pd_b, recv_ring, lw)?, None)
                }
                PerfOp::Write => (
                    pair.a.reg_mr(pair.pd_a, ring, lw)?,
                    pair.b.reg_mr(pair.pd_b, ring, lw | Access::REMOTE_WRITE)?,
                    None,
                ),
                PerfOp::Read => (
                    pair.b.reg_mr(pair.pd_b, ring, Access::REMOTE_READ)?,
                    pair.a.reg_mr(pair.pd_a, ring, lw)?,
                    None,
                ),
                PerfOp::Atomic => (
                    pair.a.reg_mr(pair.pd_a, 8, lw)?,
                    pair.a.reg_mr(pair.pd_a, slots * 8, lw)?,
                    Some(pair.b.reg_mr(pair.pd_b, 8, lw | Access::REMOTE_ATOMIC)?),
                ),
            };
            let src_ctx = if cfg.op == PerfOp::Read { &mut pair.b } else { &mut pair.a };
            fill_pattern(src_ctx.mr_bytes_mut(&src)?, cfg.seed ^ q as u64);
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
                post_time: None,
            });
        }
        let mut bench = Bench {
            cfg: cfg.clone(),
            pair,
            lanes,
            size,
            wcs: Vec::new(),
            verified: 0,
            errors: 0,
            lat: Vec::new(),
            duplicates: 0,
            check_clock: Default::default(),
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
        let slot = (n % l.slots as u64) as usize;
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
                let mut wr = SendWr::new(n, opcode, vec![sge]);
                if let Some((ah, _)) = self.pair.ahs {
                    let remote_qpn = self.pair.qps[q].1.qpn();
                    wr.ud = Some(UdDest { ah, remote_qpn, remote_qkey: 0x8000_0000 });
                }
                wr
            }
            PerfOp::Read => {
                self.pair.b.mr_bytes_mut(&l.src)?[at..at + k].copy_from_slice(&stamp[..k]);
                let sge = Sge { addr: l.dst.addr + at as u64, length: size as u32, lkey: l.dst.lkey };
                let opcode = WrOpcode::RdmaRead { remote_addr: l.src.addr + at as u64, rkey: l.src.rkey };
                SendWr::new(n, opcode, vec![sge])
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
                SendWr::new(n, opcode, vec![sge])
            }
        };
        self.pair.a.post_send(qa, &[wr]).map_err(post_err)?;
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
        self.pair.qps.iter().position(|(a, b)| wc.qp_num == a.qpn() || wc.qp_num == b.qpn())
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
            let l = &self.lanes[q];
            let slot = (n % l.slots as u64) as usize;
            let ok = wc.status == WcStatus::Success
                && match self.cfg.op {
                    PerfOp::Send => true,
                    // UC: checked when the WRITE_WITH_IMM's completion arrives at the receiver.
                    PerfOp::Write if self.cfg.qp_type == QpType::Uc => true,
                    PerfOp::Write => {
                        let dst = self.pair.b.mr_bytes(&l.dst)?;
                        self.check(q, n, &dst[slot * size..(slot + 1) * size], slot)
                    }
                    PerfOp::Read => {
                        let dst = self.pair.a.mr_bytes(&l.dst)?;
                        self.check(q, n, &dst[slot * size..(slot + 1) * size], slot)
                    }
                    PerfOp::Atomic => {
                        let dst = self.pair.a.mr_bytes(&l.dst)?;
                        let orig =
                            u64::from_ne_bytes(dst[slot * 8..slot * 8 + 8].try_into().unwrap_or([0xFF; 8]));
                        orig == n
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
                }
                return Ok(false);
            }
            return Err(PerfError::Stalled("work outstanding but no frame or timer pending"));
        }
        self.poll()?;
        Ok(true)
    }

    /// Messages sent and never delivered (unreliable transports).
    fn lost(&self) -> u64 {
        self.lanes.iter().map(|l| l.lost).sum()
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
        let paced = self.cfg.qp_type != QpType::Rc && self.checked_at_receiver();
        while !self.all_done(iters) {
            for q in 0..self.lanes.len() {
                while self.lanes[q].posted < iters && self.lanes[q].posted - self.lanes[q].completed < depth {
                    // UC and UD have no flow control: keep the sender within the receive ring.
                    let l = &self.lanes[q];
                    if paced && l.posted - l.received - l.lost >= l.slots as u64 {
                        break;
                    }
                    self.post(q)?;
                }
            }
            self.step()?;
            let done: u64 = self.lanes.iter().map(|l| l.completed).sum();
            if done >= mark_n + window {
                let now = Instant::now();
                let rate =
                    ((done - mark_n) * self.size as u64) as f64 / (now - mark_t).as_secs_f64().max(1e-9);
                peak = peak.max(rate);
                (mark_t, mark_n) = (now, done);
            }
        }
        let wall = start.elapsed();
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
        })
    }

    /// Latency mode: one message at a time, `iters` times on QP 0.
    pub fn run_lat(&mut self) -> Result<LatRow, PerfError> {
        let mut wall = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|_| PerfError::Stalled("histogram"))?;
        let mut virt = wall.clone();
        for _ in 0..self.cfg.iters {
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
        for (w, v) in self.lat.drain(..) {
            wall.saturating_record(w.as_nanos().max(1) as u64);
            virt.saturating_record(v.as_nanos().max(1) as u64);
        }
        Ok(LatRow {
            size: self.size,
            wall_ns: wall,
            virtual_ns: virt,
            verified: self.verified,
            errors: self.errors,
            lost: self.lost(),
        })
    }
}

/// Message slots per QP ring: `depth`, but no more than the messages the 128-PSN window lets be in
/// flight plus two, and at least 2, so rings of large messages stay cache-sized (perftest also
/// reuses one small buffer). In-flight messages never exceed the slots, so no slot is reused before
/// its message was checked.
pub fn ring_slots(depth: usize, size: usize, mtu: usize) -> usize {
    window_slots(engine::roce::MAX_UNACKED_PSNS as usize, depth, size, mtu)
}

/// Messages to keep in flight: `depth`, but no more than a window of `window` packets of `payload`
/// bytes holds of `size`-byte messages, plus two (more would only wait in a queue, holding memory
/// that is cold by the time it is sent), and at least 2 unless `depth` is 1.
pub fn window_slots(window: usize, depth: usize, size: usize, payload: usize) -> usize {
    let in_window = (window * payload).div_ceil(size.max(1));
    depth.min(in_window + 2).max(2.min(depth))
}

/// Bytes of one receive buffer: the message, after the GRH area on UD.
fn bench_recv_len(qp_type: QpType, size: usize) -> usize {
    if qp_type == QpType::Ud { size + GRH_LEN } else { size }
}

/// Sizes perftest's `-a` runs: 2 bytes to 8 MiB in powers of two.
pub fn all_sizes() -> Vec<usize> {
    (1..=23).map(|s| 1usize << s).collect()
}

/// Messages to run at `size` when sweeping every size: at most ~256 MiB per QP, at least 16.
pub fn sweep_iters(iters: u64, size: usize) -> u64 {
    iters.min(((256u64 << 20) / size.max(1) as u64).max(16))
}

/// The rule above and below every `softrdma perf` header and table, perftest's width.
pub const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// Which build this binary is. The compiler's layout of the protocol code moves a run's share of
/// its baseline by several points (issue 10: `perf write --transport rud --tss` reads about 5 points
/// higher in the profile-guided build of `scripts/pgo.sh`), so the headers say which it is.
pub fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "debug (not representative of speed)"
    } else if env!("SOFTRDMA_PGO") == "1" {
        "release, profile-guided (scripts/pgo.sh)"
    } else {
        "release, not profile-guided (scripts/pgo.sh builds with it)"
    }
}

/// The header perftest prints above a table.
pub fn header(cfg: &PerfConfig) -> String {
    let l = &cfg.link;
    let mode = if cfg.mode == Mode::Bw { "BW" } else { "Latency" };
    let transport = match (cfg.qp_type, cfg.srq) {
        (QpType::Rc, false) => "RC",
        (QpType::Rc, true) => "RC with SRQ",
        (QpType::Uc, _) => "UC",
        (QpType::Ud, false) => "UD",
        (QpType::Ud, true) => "UD with SRQ",
    };
    let op = match (cfg.op, cfg.atomic) {
        (PerfOp::Atomic, AtomicOp::FetchAdd) => "Atomic FETCH_AND_ADD",
        (PerfOp::Atomic, AtomicOp::CmpSwap) => "Atomic CMP_AND_SWAP",
        (o, _) => o.title(),
    };
    format!(
        "{LINE}\n                    {op} {mode} Test\n Transport: {transport} over nicsim (in-process, one thread)   \
         Number of qps: {}   MTU: {}   tx depth: {} (at most what the 128-PSN window holds + 2)\n Link: latency {:?} each way, loss {}, reorder {}, \
         dup {}, corrupt {}, seed {}\n Build: {}\n{LINE}",
        cfg.qps,
        cfg.mtu.bytes(),
        if cfg.mode == Mode::Bw { cfg.tx_depth } else { 1 },
        l.latency,
        l.loss,
        l.reorder,
        l.duplicate,
        l.corrupt,
        cfg.seed,
        build_kind()
    )
}

fn mb(bytes_per_sec: f64) -> f64 {
    bytes_per_sec / (1u64 << 20) as f64
}

/// Column titles of the bandwidth table.
pub const BW_COLUMNS: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   BW average[Gb/sec]";

/// One bandwidth table line.
pub fn bw_line(r: &BwRow) -> String {
    let avg = r.average();
    let msgs = r.bytes as f64 / r.size.max(1) as f64;
    format!(
        " {:<10} {:<14} {:<18.2} {:<20.2} {:<15.6} {:.2}",
        r.size,
        r.iters,
        mb(r.peak),
        mb(avg),
        msgs / r.wall.as_secs_f64().max(1e-9) / 1e6,
        avg * 8.0 / 1e9
    )
}

/// The baseline comparison under a bandwidth line.
pub fn baseline_line(r: &BwRow) -> Option<String> {
    let b = r.baseline?;
    let base = b.bytes_per_sec();
    let share = r.check_time.as_secs_f64() / r.wall.as_secs_f64().max(1e-9) * 100.0;
    Some(format!(
        " baseline (one thread, plain loop: headers + copy + ICRC, then ICRC check + copy): {:.2} MB/sec \
         ({:.2} Gb/sec{})\n engine / baseline: {:.3} (engine time: wall-clock minus the {share:.1}% spent \
         checking delivered bytes; {:.3} with the checks)",
        mb(base),
        base * 8.0 / 1e9,
        if b.intact { "" } else { ", DATA NOT INTACT" },
        r.engine_rate() / base,
        r.average() / base
    ))
}

/// Column titles of the latency table.
pub const LAT_COLUMNS: &str =
    " #bytes #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  99%[usec]  99.9%[usec]";

/// One latency table line (wall-clock times, post to completion).
pub fn lat_line(r: &LatRow) -> String {
    let h = &r.wall_ns;
    let us = |ns: u64| ns as f64 / 1000.0;
    format!(
        " {:<6} {:<12} {:<12.2} {:<12.2} {:<16.2} {:<12.2} {:<10.2} {:.2}",
        r.size,
        h.len(),
        us(h.min()),
        us(h.max()),
        us(h.value_at_quantile(0.5)),
        h.mean() / 1000.0,
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999))
    )
}

/// One line of a side's counters, for the end of a run.
pub fn counters_line(side: &str, st: &engine::verbs::Stats) -> String {
    let (r, d) = (&st.requests, &st.drops);
    format!(
        " {side}: frames tx {} ({} B) rx {} ({} B) (bad {}, unknown {}); requests {} retries {} timeouts {} tail probes {}; \
         NAKs in: seq {} rnr {} error {}; NAKs out: seq {} rnr {}; duplicates {}; dropped: qkey {} no-wqe {} uc {}",
        st.tx_frames,
        st.tx_bytes,
        st.rx_frames,
        st.rx_bytes,
        st.rx_bad,
        st.rx_unknown,
        r.packets,
        r.retries,
        r.timeouts,
        r.tail_probes,
        r.seq_naks,
        r.rnr_naks,
        r.error_naks,
        d.seq_naks_sent,
        d.rnr_naks_sent,
        d.duplicates,
        d.qkey,
        d.no_wqe,
        d.uc_aborted
    )
}
