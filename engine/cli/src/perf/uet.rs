//! `softrdma perf` over UET: SEND / TAGGED_SEND / WRITE / READ in a delivery mode (RUD, ROD, RUDI,
//! UUD), every message checked, in the table format of the RoCE runs. Both sides in this process on
//! the simulated network ([`UetBench`]), or one side per process over kernel UDP or AF_XDP
//! ([`serve`], [`run_client`]), meeting on TCP like the RoCE runs of [`super::remote`].
//!
//! The initiator ([`Initiator`]) posts operations and checks READ data; the target ([`Target`])
//! holds the receive buffers and the RMA region (slot `s` starts as message `s`) and checks every
//! received message. A WRITE is checked in this process at each completion (the slot holds exactly
//! that message); between processes the server checks at the end that each slot holds the last
//! message written to it.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use ahash::AHashMap as HashMap;
use bytes::Bytes;
use hdrhistogram::Histogram;
use nicsim::LinkConfig;
use serde_json::{Value, json};
use ses::key::IDEMPOTENT_SAFE;
use ses::{Access, Addr, Completion, CompletionKind, DeliveryMode, EpType, JobScope, Opts, RecvSpec, Status};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

use super::remote::{Backend, Link, RemoteError};
use super::{BwRow, LatRow, PerfError};
use engine::datapath::Datapath;
use engine::datapath::afxdp::{AfXdpPort, XdpMode};
use engine::datapath::sim::{SimNet, SimPort};
use engine::datapath::udp::{RxIcrc, UdpPort};
use engine::datapath::wrap::{Capture, CaptureLog, Faulty};
use engine::uet::UetNode;

/// UET operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UetOp {
    /// SEND.
    Send,
    /// TAGGED_SEND.
    Tsend,
    /// WRITE.
    Write,
    /// READ.
    Read,
    /// FETCHING_ATOMIC SUM on a UINT64 (fetch-and-add).
    FetchAdd,
    /// FETCHING_ATOMIC CSWAP on a UINT64 with the compare-and-swap extension.
    CmpSwap,
}

impl UetOp {
    fn is_atomic(self) -> bool {
        matches!(self, UetOp::FetchAdd | UetOp::CmpSwap)
    }

    fn uses_region(self) -> bool {
        !matches!(self, UetOp::Send | UetOp::Tsend)
    }
}

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct UetPerfConfig {
    /// Operation.
    pub op: UetOp,
    /// Delivery mode.
    pub transport: DeliveryMode,
    /// Bandwidth or latency.
    pub lat: bool,
    /// Message size.
    pub size: usize,
    /// Messages.
    pub iters: u64,
    /// Operations in flight (bandwidth mode).
    pub depth: usize,
    /// Payload bytes per packet.
    pub max_payload: usize,
    /// The simulated link, both directions (in-process runs).
    pub link: LinkConfig,
    /// Seed of the network and the endpoints.
    pub seed: u64,
    /// PDS retry limit.
    pub max_retries: u32,
    /// Seal every packet with TSS.
    pub tss: bool,
    /// Congestion control of the PDCs.
    pub cc: UetCc,
    /// The line rate congestion control assumes, bits per second.
    pub cc_bps: u64,
    /// The unloaded round-trip time congestion control assumes.
    pub cc_rtt: Duration,
}

/// Congestion control of a UET perf run (`pds::cc` NSCC, `pds::credit` RCCC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UetCc {
    /// The PDS window alone.
    #[default]
    None,
    /// Sender windows from delay and ECN; senders mark ECT(0).
    Nscc,
    /// Receiver-granted credit.
    Rccc,
}

impl UetPerfConfig {
    /// Why the combination cannot run, if it cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        match (self.transport, self.op) {
            (DeliveryMode::Rudi, UetOp::Send | UetOp::Tsend) => {
                Err("RUDI carries idempotent RMA: write or read")
            }
            (DeliveryMode::Uud, UetOp::Write | UetOp::Read) => Err("UUD carries datagram sends: send"),
            (DeliveryMode::Uud, UetOp::Tsend) => Err("UUD carries untagged datagram sends: send"),
            (DeliveryMode::Rudi | DeliveryMode::Uud, UetOp::FetchAdd | UetOp::CmpSwap) => {
                Err("atomics are not idempotent: rud or rod")
            }
            (_, UetOp::FetchAdd | UetOp::CmpSwap) if self.size != 8 => Err("atomics move 8 bytes (UINT64)"),
            (DeliveryMode::Rudi | DeliveryMode::Uud, _) if self.cc != UetCc::None => {
                Err("congestion control runs on PDCs: rud or rod")
            }
            (DeliveryMode::Uud, _) if self.size > self.max_payload => {
                Err("a UUD datagram must fit one packet")
            }
            _ if self.size > 1 << 30 => Err("messages are at most 1 GiB"),
            _ if self.max_payload == 0 || self.max_payload > 16383 => {
                Err("payload per packet is 1 to 16383 bytes")
            }
            _ => Ok(()),
        }
    }

    /// Puts a node of this run in the run's secure domain (`--tss`) and has it mark ECT(0) when
    /// NSCC runs.
    fn secure_and_mark<D: Datapath>(&self, node: &mut UetNode<D>) {
        if self.tss {
            node.enable_tss(tss_domain(self.seed));
        }
        node.set_ecn(self.cc == UetCc::Nscc);
    }

    /// Operations kept in flight: one in latency mode; `depth`, but, as the RC runs do, no more
    /// messages than the PDS window carries plus two (see [`super::window_slots`]).
    pub fn depth(&self) -> usize {
        if self.lat {
            return 1;
        }
        let window = self.ses_config().pds.window as usize;
        super::window_slots(window, self.depth.max(1), self.size, self.max_payload)
    }

    fn key(&self) -> u64 {
        if self.transport == DeliveryMode::Rudi { KEY | IDEMPOTENT_SAFE } else { KEY }
    }

    fn receives(&self) -> bool {
        matches!(self.op, UetOp::Send | UetOp::Tsend)
    }

    fn ses_config(&self) -> ses::Config {
        let mut pds = pds::Config { max_retries: self.max_retries, ..pds::Config::default() };
        let mtu = (self.max_payload + 128) as u64;
        match self.cc {
            UetCc::None => {}
            UetCc::Nscc => {
                let mss = mtu as usize;
                pds.cc = Some(pds::cc::NsccConfig { link_bps: self.cc_bps, base_rtt: self.cc_rtt, mss });
                // NSCC needs an RTT sample per packet: ACK each (see pds::cc).
                pds.ack_every = 1;
            }
            UetCc::Rccc => {
                let mut rc = pds::credit::RcccConfig::new(self.cc_bps, self.cc_rtt, mtu);
                if self.tss {
                    // The TSS header of a domain without SSI, and the ICV.
                    rc.overhead += (12 + wire::uet::tss::ICV_LEN) as u64;
                }
                pds.rccc = Some(rc);
            }
        }
        let ep_type = if self.transport == DeliveryMode::Uud { EpType::Dgram } else { EpType::Rdm };
        ses::Config { pds, ep_type, max_payload: self.max_payload, initiator: 1, ..ses::Config::default() }
    }

    fn to_json(self) -> Value {
        json!({
            "op": format!("{:?}", self.op),
            "transport": format!("{:?}", self.transport),
            "lat": self.lat,
            "size": self.size,
            "iters": self.iters,
            "depth": self.depth,
            "max_payload": self.max_payload,
            "seed": self.seed,
            "max_retries": self.max_retries,
            "tss": self.tss,
            "cc": format!("{:?}", self.cc),
            "cc_bps": self.cc_bps,
            "cc_rtt_ns": self.cc_rtt.as_nanos() as u64,
        })
    }

    fn from_json(v: &Value) -> Result<UetPerfConfig, RemoteError> {
        let n = |k: &str| v[k].as_u64().ok_or_else(|| RemoteError(format!("the client's test lacks {k}")));
        let op = match v["op"].as_str() {
            Some("Send") => UetOp::Send,
            Some("Tsend") => UetOp::Tsend,
            Some("Write") => UetOp::Write,
            Some("Read") => UetOp::Read,
            Some("FetchAdd") => UetOp::FetchAdd,
            Some("CmpSwap") => UetOp::CmpSwap,
            _ => return Err(RemoteError("the client asked for an unknown operation".into())),
        };
        let transport = match v["transport"].as_str() {
            Some("Rud") => DeliveryMode::Rud,
            Some("Rod") => DeliveryMode::Rod,
            Some("Rudi") => DeliveryMode::Rudi,
            Some("Uud") => DeliveryMode::Uud,
            _ => return Err(RemoteError("the client asked for an unknown transport".into())),
        };
        let cfg = UetPerfConfig {
            op,
            transport,
            lat: v["lat"].as_bool().unwrap_or(false),
            size: n("size")? as usize,
            iters: n("iters")?,
            depth: n("depth")? as usize,
            max_payload: n("max_payload")? as usize,
            link: LinkConfig::default(),
            seed: n("seed")?,
            max_retries: n("max_retries")? as u32,
            tss: v["tss"].as_bool().unwrap_or(false),
            cc: match v["cc"].as_str() {
                None | Some("None") => UetCc::None,
                Some("Nscc") => UetCc::Nscc,
                Some("Rccc") => UetCc::Rccc,
                Some(_) => {
                    return Err(RemoteError("the client asked for an unknown congestion control".into()));
                }
            },
            cc_bps: v["cc_bps"].as_u64().unwrap_or(100_000_000_000),
            cc_rtt: Duration::from_nanos(v["cc_rtt_ns"].as_u64().unwrap_or(20_000)),
        };
        cfg.check().map_err(|e| RemoteError(e.into()))?;
        Ok(cfg)
    }
}

const TAG: u64 = 0x5EED_0000_0000_0001;
const KEY: u64 = 0x1000;

/// The bytes of message `i` (the first 8 carry `i` when they fit; shorter ones are all alike).
fn message(i: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    // Under 8 bytes the index does not fit: every such message is message 0's pattern, as `check`
    // expects (it made every sub-8-byte UET message count as an error).
    let d = ramp_start(if size >= 8 { i } else { 0 });
    buf.reserve(size);
    while buf.len() < size {
        let n = (size - buf.len()).min(RAMP_RUN);
        buf.extend_from_slice(&RAMP[d..d + n]);
    }
    if size >= 8 {
        buf[..8].copy_from_slice(&i.to_le_bytes());
    }
}

/// Bytes of a message written or checked at once (a multiple of 256).
const RAMP_RUN: usize = 4096;

/// `RAMP[j] = 131 j mod 256`: byte k of message i is `131 k + 7919 i (mod 256)`, which (131 being
/// odd) is `RAMP[d + k mod 256]` with `d = 7919 i / 131 (mod 256)`, so messages are written and
/// checked [`RAMP_RUN`] bytes at a time by copying and comparing slices of this table.
static RAMP: [u8; 256 + RAMP_RUN] = {
    let mut t = [0u8; 256 + RAMP_RUN];
    let mut j = 0;
    while j < t.len() {
        t[j] = (j as u8).wrapping_mul(131);
        j += 1;
    }
    t
};

/// Where message `i`'s pattern starts in [`RAMP`] (43 is the inverse of 131 modulo 256).
fn ramp_start(i: u64) -> usize {
    usize::from((i.wrapping_mul(7919) as u8).wrapping_mul(43))
}

/// The index a received message claims, if it is intact (0 for messages under 8 bytes).
fn check(data: &[u8], size: usize) -> Option<u64> {
    if data.len() != size {
        return None;
    }
    let i = if size >= 8 { u64::from_le_bytes(data[..8].try_into().ok()?) } else { 0 };
    let d = ramp_start(i);
    let skip = if size >= 8 { 8 } else { 0 };
    let intact = data.chunks(RAMP_RUN).enumerate().all(|(n, chunk)| {
        let from = if n == 0 { skip } else { 0 };
        chunk[from..] == RAMP[d + from..d + chunk.len()]
    });
    intact.then_some(i)
}

/// Whether `data` is message `i` intact (any intact message under 8 bytes, which all look alike).
fn is_message(data: &[u8], size: usize, i: u64) -> bool {
    check(data, size).is_some_and(|got| got == i || size < 8)
}

/// Runs `f`, adding its wall-clock time to `clock`: the harness's own work (making and checking
/// messages), which the engine-time rates leave out, as the RC runs do (`BwRow::check_time`).
fn timed<R>(clock: &mut Duration, f: impl FnOnce() -> R) -> R {
    let t0 = Instant::now();
    let r = f();
    *clock += t0.elapsed();
    r
}

fn ses_error(e: ses::Error) -> PerfError {
    match e {
        ses::Error::Busy => PerfError::Stalled("UET send queue full"),
        ses::Error::TooLong => PerfError::Stalled("message too long"),
        ses::Error::Unsupported => PerfError::Stalled("operation not supported on this endpoint"),
        ses::Error::NoPdc => PerfError::Stalled("no PDC"),
        ses::Error::BadOperand => PerfError::Stalled("atomic operand does not fit the datatype"),
    }
}

/// The side that posts operations.
#[derive(Debug)]
pub struct Initiator<D> {
    node: UetNode<D>,
    cfg: UetPerfConfig,
    dst: Addr<Ipv4Addr>,
    /// Region slots not in use by an RMA in flight (RUD completes out of order, so a slot is
    /// reused only once its own operation is done).
    free: Vec<usize>,
    slot_of: HashMap<u64, usize>,
    /// The last message written to each slot.
    last_write: Vec<Option<u64>>,
    /// Atomics: each slot's value as this side's completed operations made it (a slot starts as
    /// its index and operation `i` adds `i + 1`); every fetched value must equal it.
    expected: Vec<u64>,
    verified: u64,
    errors: u64,
    /// Time spent making and checking messages.
    harness: Duration,
    /// The buffers of the messages in flight: the application's until their operation completes
    /// (the endpoint shares them until then).
    buffers: HashMap<u64, Bytes>,
    /// Buffers of completed messages, for the next ones (as a verbs application reuses its
    /// registered memory rather than allocating a buffer per message).
    spare: Vec<Vec<u8>>,
}

impl<D: Datapath> Initiator<D> {
    fn new(node: UetNode<D>, cfg: UetPerfConfig, target: Ipv4Addr) -> Initiator<D> {
        let dst = Addr { fep: target, pid_on_fep: 0, resource_index: 0 };
        let free = (0..cfg.depth()).rev().collect();
        let last_write = vec![None; cfg.depth()];
        let expected = (0..cfg.depth() as u64).collect();
        Initiator {
            node,
            cfg,
            dst,
            free,
            slot_of: HashMap::new(),
            last_write,
            expected,
            verified: 0,
            errors: 0,
            harness: Duration::ZERO,
            buffers: HashMap::new(),
            spare: Vec::new(),
        }
    }

    fn post(&mut self, i: u64) -> Result<(), PerfError> {
        let size = self.cfg.size;
        let slot = if self.cfg.op.uses_region() {
            let slot = self.free.pop().ok_or(PerfError::Stalled("no free slot"))?;
            self.slot_of.insert(i, slot);
            slot
        } else {
            0
        };
        let opts = Opts { context: i, ordered: self.cfg.transport == DeliveryMode::Rod, ..Opts::default() };
        let (dst, key) = (self.dst, self.cfg.key());
        // Each message is made in a buffer of its own that the endpoint shares until it completes
        // (as a verbs application posts from its memory): no copy before the frame.
        let mut made = || {
            timed(&mut self.harness, || {
                let mut m = self.spare.pop().unwrap_or_default();
                message(i, size, &mut m);
                let m = Bytes::from(m);
                self.buffers.insert(i, m.clone());
                m
            })
        };
        let r = match self.cfg.op {
            UetOp::Send | UetOp::Tsend => {
                let tag = (self.cfg.op == UetOp::Tsend).then_some(TAG);
                let m = made();
                self.node.ses().send_bytes(dst, m, tag, opts)
            }
            UetOp::Write => {
                let m = made();
                self.node.ses().write_bytes(dst, key, (slot * size) as u64, m, opts)
            }
            UetOp::Read => self.node.ses().read(dst, key, (slot * size) as u64, size, opts),
            UetOp::FetchAdd => {
                let add = (i + 1).to_le_bytes();
                self.node.ses().fetch_atomic(
                    dst,
                    key,
                    (slot * 8) as u64,
                    AmoOpcode::Sum,
                    AmoDatatype::Uint64,
                    &add,
                    opts,
                )
            }
            UetOp::CmpSwap => {
                let (old, new) = (self.expected[slot], self.expected[slot].wrapping_add(i + 1));
                let (c, w) = (old.to_le_bytes(), new.to_le_bytes());
                self.node.ses().compare_atomic(
                    dst,
                    key,
                    (slot * 8) as u64,
                    AmoOpcode::Cswap,
                    AmoDatatype::Uint64,
                    &c,
                    &w,
                    opts,
                )
            }
        };
        r.map(|_| ()).map_err(ses_error)
    }

    /// Takes a completion: frees its slot, checks READ data. Returns `(index, slot)`.
    fn complete(&mut self, c: &Completion<Ipv4Addr>) -> (u64, Option<usize>) {
        if let Some(m) = self.buffers.remove(&c.context) {
            // Back to the spares once the endpoint holds no part of it (it may still, if the
            // operation failed with packets queued).
            timed(&mut self.harness, || self.spare.extend(m.try_into_mut().ok().map(Vec::from)));
        }
        let slot = self.slot_of.remove(&c.context);
        if let Some(s) = slot {
            self.free.push(s);
        }
        if c.status != Status::Ok {
            self.errors += 1;
            return (c.context, slot);
        }
        match (self.cfg.op, slot) {
            (UetOp::Read, Some(s))
                if timed(&mut self.harness, || is_message(&c.data, self.cfg.size, s as u64)) =>
            {
                self.verified += 1
            }
            (UetOp::Read, _) => self.errors += 1,
            (UetOp::Write, Some(s)) => self.last_write[s] = Some(c.context),
            (UetOp::FetchAdd | UetOp::CmpSwap, Some(s)) => {
                let old = c.data.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
                if old == Some(self.expected[s]) {
                    self.expected[s] = self.expected[s].wrapping_add(c.context + 1);
                    self.verified += 1;
                } else {
                    self.errors += 1;
                }
            }
            _ => {}
        }
        (c.context, slot)
    }
}

/// The side that receives messages and holds the RMA region.
#[derive(Debug)]
pub struct Target<D> {
    node: UetNode<D>,
    cfg: UetPerfConfig,
    posted: u64,
    received: u64,
    verified: u64,
    errors: u64,
    /// Time spent checking messages.
    harness: Duration,
}

impl<D: Datapath> Target<D> {
    fn new(mut node: UetNode<D>, cfg: UetPerfConfig) -> Result<Target<D>, PerfError> {
        if cfg.op.uses_region() {
            let mut region = vec![0u8; cfg.size * cfg.depth()];
            let mut m = Vec::new();
            for slot in 0..cfg.depth() {
                message(slot as u64, cfg.size, &mut m);
                region[slot * cfg.size..(slot + 1) * cfg.size].copy_from_slice(&m);
            }
            let key = cfg.key();
            node.ses()
                .regions
                .register(key, region, Access::ALL, JobScope::Any)
                .map_err(|_| PerfError::Stalled("key"))?;
        }
        let mut t =
            Target { node, cfg, posted: 0, received: 0, verified: 0, errors: 0, harness: Duration::ZERO };
        // UUD has no flow control: every datagram gets a receive up front.
        let first = if cfg.transport == DeliveryMode::Uud { cfg.iters } else { cfg.depth() as u64 };
        if cfg.receives() {
            for _ in 0..first.min(cfg.iters) {
                t.post_recv();
            }
        }
        Ok(t)
    }

    fn post_recv(&mut self) {
        let tag = (self.cfg.op == UetOp::Tsend).then_some((TAG, 0));
        let (size, ctx) = (self.cfg.size, self.posted);
        self.node.ses().post_recv(RecvSpec { tag, ..RecvSpec::any() }, size, ctx);
        self.posted += 1;
    }

    /// Takes a completion: checks the message and posts the next receive.
    fn complete(&mut self, c: &Completion<Ipv4Addr>) {
        if c.kind != CompletionKind::Recv {
            return;
        }
        self.received += 1;
        let size = self.cfg.size;
        if c.status == Status::Ok && timed(&mut self.harness, || check(&c.data, size).is_some()) {
            self.verified += 1;
        } else {
            self.errors += 1;
        }
        if self.posted < self.cfg.iters {
            self.post_recv();
        }
    }

    /// The UINT64 in region slot `slot` (atomics).
    fn slot_value(&mut self, slot: usize) -> Option<u64> {
        let key = self.cfg.key();
        let r = self.node.ses().regions.get(key)?;
        r.data.get(slot * 8..slot * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// Whether region slot `slot` holds message `i`.
    fn slot_holds(&mut self, slot: usize, i: u64) -> bool {
        let (size, key) = (self.cfg.size, self.cfg.key());
        let regions = &self.node.ses().regions;
        let data = regions.get(key).and_then(|r| r.data.get(slot * size..(slot + 1) * size));
        timed(&mut self.harness, || data.is_some_and(|d| is_message(d, size, i)))
    }

    fn drain(&mut self) {
        while let Some(c) = self.node.ses().poll_completion() {
            self.complete(&c);
        }
    }
}

/// The secure domain of a `--tss` run: cluster key mode, a test key both sides derive from the
/// run's seed (a real deployment gets its keys from the control plane).
pub fn tss_domain(seed: u64) -> tss::SecureDomain {
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(i as u32 * 7) >> 3) as u8;
    }
    tss::SecureDomain::new(tss::Config { mode: tss::KeyMode::Cluster, ..tss::Config::default() }, key)
}

/// The TSS baseline of issue 10: packets of the run's payload size sealed and opened with the
/// chosen AEAD in a plain loop on this thread, in slices a run (or the floor loop) takes between
/// its own steps. This machine's single-thread speed wanders by tens of percent from one second to
/// the next; a baseline measured before or after the run, however often repeated, compares two
/// different machines. Interleaved slices of about a megabyte see the speed the run sees, and
/// both sides are then counted the same way: bytes over the time they took.
pub struct AeadBaseline {
    key: tss::aead::SealingKey,
    buf: Vec<u8>,
    tsc: u64,
    /// Bytes sealed and opened so far.
    pub bytes: u64,
    /// Time that took.
    pub elapsed: Duration,
}

impl AeadBaseline {
    /// Bytes a run moves between two slices of its baseline.
    pub const SLICE: u64 = 1 << 20;

    /// A baseline in `packet`-byte packets.
    pub fn new(packet: usize) -> AeadBaseline {
        let key = tss::aead::SealingKey::new(&[0x42; 32], [0; 12]);
        AeadBaseline { key, buf: vec![0x5A; packet.max(1)], tsc: 0, bytes: 0, elapsed: Duration::ZERO }
    }

    /// Seals and opens whole packets until the baseline has covered `total` bytes.
    pub fn catch_up(&mut self, total: u64) {
        let t0 = Instant::now();
        let aad = [0u8; 24];
        while self.bytes < total {
            seal_and_open(&self.key, self.tsc, &aad, &mut self.buf);
            self.tsc += 1;
            self.bytes += self.buf.len() as u64;
        }
        self.elapsed += t0.elapsed();
    }

    /// MB/s over the slices so far.
    pub fn rate(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    /// The baseline as a bandwidth row reports it.
    fn report(&self) -> super::baseline::Baseline {
        let packets = self.bytes / self.buf.len() as u64;
        super::baseline::Baseline { bytes: self.bytes, packets, elapsed: self.elapsed, intact: true }
    }
}

/// Seals `buf` in place under `tsc`, appends the ICV, opens it again and drops the ICV: `buf` ends
/// as it began (the baseline's unit of work).
fn seal_and_open(key: &tss::aead::SealingKey, tsc: u64, aad: &[u8], buf: &mut Vec<u8>) {
    let tag = key.seal_in_place(1, tsc, aad, buf);
    buf.extend_from_slice(&tag);
    let n = key.open(1, tsc, aad, buf).expect("what was just sealed opens");
    buf.truncate(n);
}

/// What the floor loop ([`tss_floor`]) reached, in MB/s of message bytes.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Over the whole loop, making and checking the messages included.
    pub all: f64,
    /// Over its engine time (without making and checking the messages, as a run's engine rate
    /// counts).
    pub engine: f64,
    /// The AEAD baseline, in slices interleaved with the loop's messages.
    pub baseline: f64,
}

/// The most a TSS write run could reach on this thread: per message what any engine must do with
/// no protocol at all - the message made and checked as the run does, each packet sealed from it
/// into one (cache-hot) frame, opened there, and copied into the target's memory (a receiver
/// cannot open into that memory: what fails to authenticate must never land). The AEAD baseline
/// runs interleaved with it: `engine / baseline` bounds the share of the baseline a run can reach.
pub fn tss_floor(bytes: usize, packet: usize, size: usize) -> Floor {
    let key = tss::aead::SealingKey::new(&[0x42; 32], [0; 12]);
    let (packet, size) = (packet.max(1), size.max(1));
    let icv = tss::aead::ICV_LEN;
    let (mut msg, mut frame, mut dst) = (Vec::new(), vec![0u8; packet + icv], vec![0u8; size]);
    let mut base = AeadBaseline::new(packet);
    let aad = [0u8; 24];
    let start = Instant::now();
    let (mut done, mut tsc, mut i, mut harness) = (0usize, 0u64, 0u64, Duration::ZERO);
    while done < bytes.max(1) {
        timed(&mut harness, || message(i, size, &mut msg));
        for (chunk, out) in msg.chunks(packet).zip(dst.chunks_mut(packet)) {
            let sealed = &mut frame[..chunk.len() + icv];
            assert!(key.seal_scatter(1, tsc, &aad, &mut [], chunk, sealed), "sized for it");
            let n = key.open(1, tsc, &aad, sealed).expect("what was just sealed opens");
            out.copy_from_slice(&sealed[..n]);
            tsc += 1;
        }
        let intact = timed(&mut harness, || check(&dst, size).is_some());
        assert!(intact, "the floor loop delivers intact messages");
        done += size;
        i += 1;
        if done as u64 >= base.bytes + AeadBaseline::SLICE {
            base.catch_up(done as u64);
        }
    }
    base.catch_up(done as u64);
    let wall = start.elapsed().saturating_sub(base.elapsed);
    let rate = |t: Duration| done as f64 / t.as_secs_f64().max(1e-9) / 1e6;
    Floor { all: rate(wall), engine: rate(wall.saturating_sub(harness)), baseline: base.rate() }
}

/// Both sides on a simulated cable in this process.
pub struct UetBench {
    net: SimNet,
    a: Initiator<SimPort>,
    b: Target<SimPort>,
    last: Option<BwRow>,
}

impl std::fmt::Debug for UetBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UetBench").field("cfg", &self.a.cfg).finish_non_exhaustive()
    }
}

impl UetBench {
    /// Builds the two nodes.
    pub fn new(cfg: UetPerfConfig) -> Result<UetBench, PerfError> {
        cfg.check().map_err(PerfError::Stalled)?;
        let (net, pa, pb) = SimNet::pair(cfg.seed, cfg.link, cfg.link);
        let scfg = cfg.ses_config();
        // Every frame the run can hold at once, made before it starts: both PDS windows in
        // flight and each node's receive and send batches.
        let frames = 2 * (scfg.pds.window as usize + 2 * engine::uet::BATCH);
        net.with(|n| n.reserve_frames(frames));
        let mut a =
            UetNode::new(pa, ses::Endpoint::new(scfg, cfg.seed * 2), true).map_err(PerfError::Stalled)?;
        let mut b =
            UetNode::new(pb, ses::Endpoint::new(scfg, cfg.seed * 2 + 1), true).map_err(PerfError::Stalled)?;
        cfg.secure_and_mark(&mut a);
        cfg.secure_and_mark(&mut b);
        let target = b.ip();
        Ok(UetBench { net, a: Initiator::new(a, cfg, target), b: Target::new(b, cfg)?, last: None })
    }

    /// The last bandwidth run's row.
    pub fn last_bw(&self) -> Option<&BwRow> {
        self.last.as_ref()
    }

    /// The links' queue report (see [`super::link_report`]).
    pub fn link_report(&self) -> String {
        super::link_report(&self.net, ["the initiator", "the target"])
    }

    /// Records every frame either node sends (before the link's impairments).
    pub fn enable_tap(&mut self) {
        self.net.with(|n| n.enable_tap());
    }

    /// The frames recorded since [`UetBench::enable_tap`].
    pub fn take_tap(&mut self) -> Vec<nicsim::TapRecord> {
        self.net.with(|n| n.take_tap())
    }

    /// One round of both nodes, then virtual time moves to the next event if nothing moved;
    /// `false` when nothing can happen any more.
    fn step(&mut self) -> bool {
        if self.a.node.progress() | self.b.node.progress() {
            return true;
        }
        let next = [self.net.next_event(), self.a.node.poll_timeout(), self.b.node.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        self.net.advance_to(t.max(self.net.now() + Duration::from_nanos(1)));
        true
    }

    /// Takes the initiator's completions (checking WRITEs against the target's region); returns
    /// how many.
    fn initiator_completions(&mut self) -> u64 {
        let mut n = 0;
        while let Some(c) = self.a.node.ses().poll_completion() {
            let ok = c.status == Status::Ok;
            if let (_, Some(slot)) = self.a.complete(&c) {
                if self.a.cfg.op == UetOp::Write && ok {
                    if self.b.slot_holds(slot, c.context) {
                        self.a.verified += 1;
                    } else {
                        self.a.errors += 1;
                    }
                }
            }
            n += 1;
        }
        n
    }

    /// After a run of atomics: every slot of the target's region holds the sum the initiator's
    /// fetched values led it to expect (an atomic applied twice or lost shows here).
    fn check_atomic_region(&mut self) {
        if !self.a.cfg.op.is_atomic() {
            return;
        }
        for (slot, &want) in self.a.expected.iter().enumerate() {
            if self.b.slot_value(slot) == Some(want) {
                self.b.verified += 1;
            } else {
                self.b.errors += 1;
            }
        }
    }

    fn totals(&mut self) -> (u64, u64) {
        self.check_atomic_region();
        (self.a.verified + self.b.verified, self.a.errors + self.b.errors)
    }

    /// Bandwidth: `depth` operations in flight until `iters` complete (and, for sends, are
    /// received and checked).
    pub fn run_bw(&mut self) -> Result<BwRow, PerfError> {
        let cfg = self.a.cfg;
        let (iters, depth) = (cfg.iters, cfg.depth() as u64);
        let uud = cfg.transport == DeliveryMode::Uud;
        let (mut posted, mut completed, mut lost) = (0u64, 0u64, 0u64);
        let v0 = self.net.now();
        let harness0 = self.a.harness + self.b.harness;
        let mut base = cfg.tss.then(|| AeadBaseline::new(cfg.max_payload));
        let start = Instant::now();
        while completed < iters || (cfg.receives() && self.b.received + lost < iters) {
            while posted < iters
                && posted - completed < depth
                && (!uud || posted - self.b.received - lost < depth)
            {
                self.a.post(posted)?;
                posted += 1;
            }
            let moved = self.step();
            completed += self.initiator_completions();
            self.b.drain();
            if !moved {
                if !uud {
                    return Err(PerfError::Stalled("UET run made no progress"));
                }
                // UUD: what has not arrived when the network falls silent is lost.
                lost = posted - self.b.received;
            }
            if let Some(base) = base.as_mut() {
                let done = completed * cfg.size as u64;
                if done >= base.bytes + AeadBaseline::SLICE {
                    base.catch_up(done);
                }
            }
        }
        if let Some(base) = base.as_mut() {
            base.catch_up(iters * cfg.size as u64);
        }
        // The baseline's slices are not the run's time.
        let wall = start.elapsed().saturating_sub(base.as_ref().map_or(Duration::ZERO, |b| b.elapsed));
        let (verified, errors) = self.totals();
        let mut row = BwRow::measured(cfg.size, iters, wall, self.net.now() - v0, verified, errors, lost);
        row.check_time = self.a.harness + self.b.harness - harness0;
        row.baseline = base.map(|b| b.report());
        self.last = Some(row);
        Ok(row)
    }

    /// Latency: one operation at a time, post to completion (sends: until received too).
    pub fn run_lat(&mut self) -> Result<LatRow, PerfError> {
        let cfg = self.a.cfg;
        let mut wall = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|_| PerfError::Stalled("histogram"))?;
        let mut virt = wall.clone();
        let mut lost = 0;
        for i in 0..cfg.iters {
            let (t0, v0, seen) = (Instant::now(), self.net.now(), self.b.received);
            self.a.post(i)?;
            let mut sent = false;
            while !(sent && (!cfg.receives() || self.b.received > seen)) {
                let moved = self.step();
                sent |= self.initiator_completions() > 0;
                self.b.drain();
                if !moved {
                    if cfg.transport != DeliveryMode::Uud {
                        return Err(PerfError::Stalled("UET run made no progress"));
                    }
                    lost += 1;
                    break;
                }
            }
            wall.saturating_record(t0.elapsed().as_nanos().max(1) as u64);
            virt.saturating_record((self.net.now() - v0).as_nanos().max(1) as u64);
        }
        let (verified, errors) = self.totals();
        Ok(LatRow { size: cfg.size, wall_ns: wall, virtual_ns: virt, verified, errors, lost })
    }

    /// PDS counters of both sides and the nodes' frame counters.
    pub fn counters(&mut self) -> [String; 2] {
        [counters_line("initiator", &mut self.a.node), counters_line("target", &mut self.b.node)]
    }
}

/// One line of a node's frame and PDS counters.
pub fn counters_line<D: Datapath>(name: &str, n: &mut UetNode<D>) -> String {
    let f = n.stats();
    let p = *n.ses().pds().stats();
    let s = *n.ses().stats();
    let tss = n.tss().map_or(String::new(), |d| {
        let t = d.stats();
        format!(
            "; TSS sealed {} opened {} auth failures {} replays {} old epochs {}",
            t.sealed, t.opened, t.auth_failures, t.replays, t.old_epochs
        )
    });
    format!(
        " {name}: frames tx {} rx {} (bad {}); PDS packets tx {} retransmits {} (SACK/NACK {}, timer {}) ACKs {} NACKs {}; rx duplicates {} out-of-order drops {}; SES rendezvous sent {} read {}, deferred {} restarted {}{tss}",
        f.tx_frames,
        f.rx_frames,
        f.rx_bad,
        p.tx_packets,
        p.tx_retransmits,
        p.fast_retransmits,
        p.timeouts,
        p.tx_acks,
        p.tx_nacks,
        p.rx_duplicates,
        p.rx_out_of_order,
        s.rendezvous_sent,
        s.rendezvous_reads,
        s.deferred,
        s.restarts
    )
}

/// What a two-process run found (the client's view, with the server's checks).
#[derive(Default)]
pub struct RemoteOutcome {
    /// Bandwidth row (bandwidth mode).
    pub bw: Option<BwRow>,
    /// Latency row (latency mode).
    pub lat: Option<LatRow>,
    /// Messages checked on both sides.
    pub verified: u64,
    /// Failed checks and error completions on both sides.
    pub errors: u64,
    /// UUD datagrams that never arrived.
    pub lost: u64,
    /// This side's counters.
    pub counters: String,
    /// Frames this side sent and received, when capturing.
    pub capture: Option<CaptureLog>,
}

fn err(e: impl std::fmt::Display) -> RemoteError {
    RemoteError(e.to_string())
}

fn send_json(s: &mut TcpStream, v: &Value) -> Result<(), RemoteError> {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(err)
}

/// Reads whole JSON lines from a non-blocking stream into `buf`; returns those complete.
fn poll_json(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Vec<Value>, RemoteError> {
    let mut chunk = [0u8; 4096];
    let mut closed = false;
    loop {
        match std::io::Read::read(stream, &mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(err(e)),
        }
    }
    let mut out = Vec::new();
    while let Some(at) = buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = buf.drain(..=at).collect();
        out.push(
            serde_json::from_slice(&line)
                .map_err(|e| RemoteError(format!("bad message from the peer: {e}")))?,
        );
    }
    if closed && out.is_empty() {
        return Err(RemoteError("the peer closed the connection".into()));
    }
    Ok(out)
}

/// Runs `f` with this side's UET node on `link`'s datapath (UDP port 4793, or AF_XDP steering
/// UDP 4793), with its egress faults and capture.
fn with_node<R>(
    link: &Link,
    cfg: &UetPerfConfig,
    seed: u64,
    f: &mut dyn FnMut(UetNodeAny) -> Result<R, RemoteError>,
) -> Result<R, RemoteError> {
    let port = wire::uet::UDP_PORT;
    let ses = ses::Endpoint::new(cfg.ses_config(), seed);
    match &link.backend {
        Backend::Udp => {
            let p = UdpPort::bind(link.local, port, RxIcrc::Verify)
                .map_err(|e| RemoteError(format!("binding {}:{port}: {e}", link.local)))?;
            let dp = Capture::new(Faulty::new(p, link.tx_faults, link.seed));
            let log = link.capture.then(|| dp.log());
            // The kernel checked the UDP checksum (and sends none we could check): accept 0.
            let mut node = UetNode::new(dp, ses, false).map_err(err)?;
            cfg.secure_and_mark(&mut node);
            f(UetNodeAny::Udp(Box::new(node), log))
        }
        Backend::AfXdp { dev, queue, driver } => {
            let mode = if *driver { XdpMode::Driver } else { XdpMode::Generic };
            let p = AfXdpPort::open_port(dev, *queue, link.local, mode, port)
                .map_err(|e| RemoteError(format!("AF_XDP on {dev} queue {queue}: {e}")))?;
            let dp = Capture::new(Faulty::new(p, link.tx_faults, link.seed));
            let log = link.capture.then(|| dp.log());
            let mut node = UetNode::new(dp, ses, true).map_err(err)?;
            cfg.secure_and_mark(&mut node);
            f(UetNodeAny::AfXdp(Box::new(node), log))
        }
    }
}

/// A node on one of the real datapaths.
enum UetNodeAny {
    /// Kernel UDP.
    Udp(Box<UetNode<Capture<Faulty<UdpPort>>>>, Option<CaptureLog>),
    /// AF_XDP.
    AfXdp(Box<UetNode<Capture<Faulty<AfXdpPort>>>>, Option<CaptureLog>),
}

impl std::fmt::Debug for UetNodeAny {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UetNodeAny::Udp(..) => "UetNodeAny::Udp",
            UetNodeAny::AfXdp(..) => "UetNodeAny::AfXdp",
        })
    }
}

/// Waits for one client on `link`'s TCP port, takes its test, serves it, and reports its checks.
pub fn serve(link: &Link) -> Result<(UetPerfConfig, RemoteOutcome), RemoteError> {
    let (mut stream, mut reader) = super::remote::accept_one(link)?;
    let mut line = String::new();
    reader.read_line(&mut line).map_err(err)?;
    let hello: Value =
        serde_json::from_str(&line).map_err(|e| RemoteError(format!("bad test from the client: {e}")))?;
    let cfg = UetPerfConfig::from_json(&hello["uet"])?;
    let out = with_node(link, &cfg, cfg.seed * 2 + 1, &mut |any| match any {
        UetNodeAny::Udp(node, log) => serve_on(*node, log, cfg, &mut stream),
        UetNodeAny::AfXdp(node, log) => serve_on(*node, log, cfg, &mut stream),
    })?;
    Ok((cfg, out))
}

fn serve_on<D: Datapath>(
    node: UetNode<D>,
    capture: Option<CaptureLog>,
    cfg: UetPerfConfig,
    stream: &mut TcpStream,
) -> Result<RemoteOutcome, RemoteError> {
    let mut t = Target::new(node, cfg).map_err(err)?;
    send_json(stream, &json!({"ready": true}))?;
    stream.set_nonblocking(true).map_err(err)?;
    let mut buf = Vec::new();
    let mut last_heard = Instant::now();
    let done = loop {
        let moved = t.node.progress();
        t.drain();
        if let Some(v) = poll_json(stream, &mut buf)?.into_iter().find(|v| v.get("done").is_some()) {
            break v;
        }
        // Busy polling, as the RoCE runs do: a yield would hand the core to any other busy
        // process for a whole time slice (milliseconds of latency).
        if moved {
            last_heard = Instant::now();
        } else if last_heard.elapsed() > Duration::from_secs(60) {
            return Err(RemoteError("nothing happened for 60 s".into()));
        }
    };
    // Datagrams in flight when the client finished may still arrive; answer retransmissions.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        t.node.progress();
        t.drain();
    }
    if cfg.op == UetOp::Write || cfg.op.is_atomic() {
        // Writes: the last message written to each slot; atomics: each slot's expected value.
        for pair in done["done"]["last"].as_array().into_iter().flatten() {
            let (slot, i) = (pair[0].as_u64().unwrap_or(u64::MAX) as usize, pair[1].as_u64().unwrap_or(0));
            let ok = if cfg.op.is_atomic() { t.slot_value(slot) == Some(i) } else { t.slot_holds(slot, i) };
            if ok {
                t.verified += 1;
            } else {
                t.errors += 1;
            }
        }
    }
    let lost = if cfg.receives() { cfg.iters.saturating_sub(t.received) } else { 0 };
    let result = json!({"verified": t.verified, "errors": t.errors, "received": t.received, "lost": lost});
    stream.set_nonblocking(false).map_err(err)?;
    send_json(stream, &json!({ "result": result }))?;
    let counters = counters_line("server", &mut t.node);
    Ok(RemoteOutcome {
        verified: t.verified,
        errors: t.errors,
        lost,
        counters,
        capture,
        ..RemoteOutcome::default()
    })
}

/// Connects to a server, gives it the test, runs it and collects both sides' checks.
pub fn run_client(host: &str, link: &Link, cfg: &UetPerfConfig) -> Result<RemoteOutcome, RemoteError> {
    let stream = super::remote::connect_retry(host, link.tcp_port)?;
    let server_ip = match stream.peer_addr().map_err(err)?.ip() {
        std::net::IpAddr::V4(v4) => v4,
        std::net::IpAddr::V6(_) => return Err(RemoteError("UET runs use IPv4".into())),
    };
    let mut stream = stream;
    send_json(&mut stream, &json!({ "uet": cfg.to_json() }))?;
    let mut reader = BufReader::new(stream.try_clone().map_err(err)?);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(err)?;
    if !line.contains("ready") {
        return Err(RemoteError(format!("the server did not start the test: {}", line.trim())));
    }
    with_node(link, cfg, cfg.seed * 2, &mut |any| match any {
        UetNodeAny::Udp(node, log) => client_on(*node, log, *cfg, server_ip, &mut stream),
        UetNodeAny::AfXdp(node, log) => client_on(*node, log, *cfg, server_ip, &mut stream),
    })
}

fn client_on<D: Datapath>(
    node: UetNode<D>,
    capture: Option<CaptureLog>,
    cfg: UetPerfConfig,
    server: Ipv4Addr,
    stream: &mut TcpStream,
) -> Result<RemoteOutcome, RemoteError> {
    let mut a = Initiator::new(node, cfg, server);
    let (iters, depth) = (cfg.iters, cfg.depth() as u64);
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).map_err(err)?;
    let start = Instant::now();
    let mut last_progress = Instant::now();
    let mut posted_at = Instant::now();
    while completed < iters {
        while posted < iters && posted - completed < depth {
            a.post(posted).map_err(err)?;
            posted += 1;
            posted_at = Instant::now();
        }
        let moved = a.node.progress();
        while let Some(c) = a.node.ses().poll_completion() {
            a.complete(&c);
            completed += 1;
            if cfg.lat {
                hist.saturating_record(posted_at.elapsed().as_nanos().max(1) as u64);
            }
            last_progress = Instant::now();
        }
        if !moved && last_progress.elapsed() > Duration::from_secs(60) {
            return Err(RemoteError(format!("nothing completed for 60 s ({completed} of {iters})")));
        }
    }
    let wall = start.elapsed();
    let last: Vec<Value> = if cfg.op.is_atomic() {
        a.expected.iter().enumerate().map(|(s, v)| json!([s, v])).collect()
    } else {
        a.last_write.iter().enumerate().filter_map(|(s, i)| i.map(|i| json!([s, i]))).collect()
    };
    send_json(stream, &json!({"done": {"last": last}}))?;
    stream.set_nonblocking(true).map_err(err)?;
    let mut buf = Vec::new();
    let result = loop {
        a.node.progress();
        if let Some(v) = poll_json(stream, &mut buf)?.into_iter().find(|v| v.get("result").is_some()) {
            break v["result"].clone();
        }
        if start.elapsed() > wall + Duration::from_secs(60) {
            return Err(RemoteError("the server did not report".into()));
        }
        std::thread::yield_now();
    };
    let n = |k: &str| result[k].as_u64().unwrap_or(0);
    let verified = a.verified + n("verified");
    let errors = a.errors + n("errors");
    let lost = n("lost");
    let mut out = RemoteOutcome {
        verified,
        errors,
        lost,
        counters: counters_line("client", &mut a.node),
        capture,
        ..RemoteOutcome::default()
    };
    if cfg.lat {
        out.lat =
            Some(LatRow { size: cfg.size, wall_ns: hist.clone(), virtual_ns: hist, verified, errors, lost });
    } else {
        out.bw = Some(BwRow::measured(cfg.size, iters, wall, Duration::ZERO, verified, errors, lost));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tss_floor_loop_runs_and_checks_its_messages() {
        // Small sizes: the loop's own check asserts every message arrives intact.
        for f in [tss_floor(300_000, 1000, 3000), tss_floor(10_000, 4096, 7)] {
            assert!(f.all > 0.0 && f.engine >= f.all && f.baseline > 0.0, "{f:?}");
        }
    }

    #[test]
    fn messages_follow_the_pattern_and_check_finds_any_changed_byte() {
        let mut m = Vec::new();
        for (i, size) in [(0u64, 3usize), (5, 7), (1, 8), (77, 255), (12345, 1000), (u64::MAX, 70000)] {
            message(i, size, &mut m);
            let pattern = if size >= 8 { i } else { 0 };
            for (k, b) in m.iter().enumerate() {
                let want = if size >= 8 && k < 8 {
                    i.to_le_bytes()[k]
                } else {
                    (k as u64).wrapping_mul(131).wrapping_add(pattern.wrapping_mul(7919)) as u8
                };
                assert_eq!(*b, want, "message {i} byte {k}");
            }
            assert_eq!(check(&m, size), Some(if size >= 8 { i } else { 0 }));
            for k in [0, size / 2, size - 1] {
                m[k] ^= 0x10;
                assert_eq!(check(&m, size).filter(|&got| got == i || size < 8), None, "byte {k} of {size}");
                m[k] ^= 0x10;
            }
            assert_eq!(check(&m[..size - 1], size), None);
        }
    }

    fn cfg(op: UetOp, transport: DeliveryMode, link: LinkConfig) -> UetPerfConfig {
        UetPerfConfig {
            op,
            transport,
            lat: false,
            size: 5000,
            iters: 200,
            depth: 16,
            max_payload: 2048,
            link,
            seed: 3,
            max_retries: 20,
            tss: false,
            cc: UetCc::None,
            cc_bps: 100_000_000_000,
            cc_rtt: Duration::from_micros(8),
        }
    }

    #[test]
    fn every_operation_and_mode_verifies_its_data_over_a_lossy_link() {
        let lossy = LinkConfig { loss: 0.05, corrupt: 0.02, duplicate: 0.02, ..LinkConfig::default() };
        for (op, t) in [
            (UetOp::Send, DeliveryMode::Rud),
            (UetOp::Tsend, DeliveryMode::Rod),
            (UetOp::Write, DeliveryMode::Rud),
            (UetOp::Write, DeliveryMode::Rudi),
            (UetOp::Read, DeliveryMode::Rod),
            (UetOp::Read, DeliveryMode::Rudi),
            (UetOp::FetchAdd, DeliveryMode::Rud),
            (UetOp::CmpSwap, DeliveryMode::Rod),
        ] {
            let size = if op.is_atomic() { 8 } else { 5000 };
            let c = UetPerfConfig { size, ..cfg(op, t, lossy) };
            // Atomics are also checked slot by slot in the target's region at the end.
            let extra = if op.is_atomic() { c.depth as u64 } else { 0 };
            let r = UetBench::new(c).unwrap().run_bw().unwrap();
            assert_eq!((r.verified, r.errors, r.lost), (200 + extra, 0, 0), "{op:?} {t:?}");
            let l = UetBench::new(UetPerfConfig { iters: 20, lat: true, ..c }).unwrap().run_lat().unwrap();
            let extra = if op.is_atomic() { 1 } else { 0 };
            assert_eq!((l.verified, l.errors, l.wall_ns.len()), (20 + extra, 0, 20), "{op:?} {t:?}");
        }
    }

    /// Messages under 8 bytes cannot carry their index: they were all counted as errors.
    #[test]
    fn tiny_messages_verify() {
        for (op, t, size) in [
            (UetOp::Send, DeliveryMode::Rud, 1),
            (UetOp::Send, DeliveryMode::Uud, 7),
            (UetOp::Write, DeliveryMode::Rod, 4),
            (UetOp::Read, DeliveryMode::Rud, 5),
        ] {
            let c = UetPerfConfig { size, ..cfg(op, t, LinkConfig::default()) };
            let r = UetBench::new(c).unwrap().run_bw().unwrap();
            assert_eq!((r.verified, r.errors), (200, 0), "{op:?} {t:?} {size}");
        }
    }

    #[test]
    fn message_buffers_are_reused_once_their_operation_completes() {
        for op in [UetOp::Write, UetOp::Send] {
            let mut b = UetBench::new(cfg(op, DeliveryMode::Rud, LinkConfig::default())).unwrap();
            let r = b.run_bw().unwrap();
            assert_eq!((r.verified, r.errors), (200, 0), "{op:?}");
            // 200 messages, at most `depth` buffers ever made: each completed one came back.
            assert!(b.a.buffers.is_empty(), "{op:?}: {} still held", b.a.buffers.len());
            assert!((1..=16).contains(&b.a.spare.len()), "{op:?}: {} spare", b.a.spare.len());
        }
    }

    #[test]
    fn tss_sealed_runs_verify_their_data() {
        let lossy = LinkConfig { loss: 0.05, corrupt: 0.02, duplicate: 0.02, ..LinkConfig::default() };
        let c = UetPerfConfig { tss: true, ..cfg(UetOp::Send, DeliveryMode::Rud, lossy) };
        let mut b = UetBench::new(c).unwrap();
        let r = b.run_bw().unwrap();
        assert_eq!((r.verified, r.errors), (200, 0));
        let counters = b.counters();
        assert!(counters[1].contains("TSS sealed"), "{}", counters[1]);
        assert!(b.b.node.tss().unwrap().stats().opened > 200);
        let base = r.baseline.expect("a sealed run measures its AEAD baseline");
        assert!(base.bytes >= 200 * 5000 && base.elapsed > Duration::ZERO, "{base:?}");
        let mut clear = UetBench::new(cfg(UetOp::Send, DeliveryMode::Rud, LinkConfig::default())).unwrap();
        assert!(!clear.a.cfg.tss && clear.run_bw().unwrap().baseline.is_none(), "no seal, no baseline");
    }

    #[test]
    fn datagrams_fit_one_packet_and_lose_only_whole_messages() {
        let mut c = cfg(UetOp::Send, DeliveryMode::Uud, LinkConfig { loss: 0.1, ..LinkConfig::default() });
        c.size = 1500;
        let r = UetBench::new(c).unwrap().run_bw().unwrap();
        assert_eq!(r.errors, 0);
        assert!(r.lost > 0 && r.verified + r.lost == 200, "{} verified, {} lost", r.verified, r.lost);
        c.size = 3000;
        assert!(UetBench::new(c).is_err());
        assert!(
            UetBench::new(UetPerfConfig { op: UetOp::Send, transport: DeliveryMode::Rudi, ..c }).is_err()
        );
    }

    #[test]
    fn the_test_travels_as_json() {
        let c = cfg(UetOp::Tsend, DeliveryMode::Rod, LinkConfig::default());
        let back = UetPerfConfig::from_json(&c.to_json()).unwrap();
        assert_eq!(
            (back.op, back.transport, back.size, back.iters, back.depth),
            (c.op, c.transport, 5000, 200, 16)
        );
        let mut bad = c.to_json();
        bad["transport"] = json!("Rudi");
        assert!(UetPerfConfig::from_json(&bad).is_err(), "tsend over RUDI is refused");
    }
}
