//! `softrdma perf --perftest`: a peer for perftest's `ib_{write,read,send,atomic}_{bw,lat}` that
//! speaks their TCP exchange (see [`messages`]) and runs their traffic pattern, in either role, so
//! either side can be the stock tool.
//!
//! The exchange sequence, as perftest 4.5 runs it (`../shared/captures/exchange/`):
//!
//! 1. version, cycle buffer, cache line, MTU (both take the larger buffer sizes and the smaller MTU);
//! 2. two handshakes with each side's [`messages::Dest`]; both connect their QP (RTR: min_rnr_timer
//!    12, max_dest_rd_atomic = own OUT_READS; RTS: timeout 14, retry_cnt 7, rnr_retry 7,
//!    max_rd_atomic = the peer's OUT_READS); a third handshake once both are in RTS;
//! 3. SEND and latency tests: a fourth handshake (the SEND receiver has its receives posted);
//! 4. the client runs the traffic; the server takes part in latency tests and SEND tests, and only
//!    answers (in the transport) in WRITE, READ and atomic bandwidth tests;
//! 5. a handshake when each side is done; bandwidth tools other than SEND then exchange the client's
//!    report (five 8-byte fields) and one more handshake; both send `"done"` and close. WRITE
//!    latency skips all of step 5: both just close.
//!
//! Traffic, as perftest makes it: bandwidth tests keep `tx_depth` messages in flight, cycling the
//! remote address through the peer's buffer in cache-line steps when the message fits half a cycle
//! buffer; WRITE latency is a ping-pong in memory (each side writes the iteration number into the
//! last byte of the message and waits for the peer's; perftest 4.5's server starts); SEND latency a ping-pong of messages; READ
//! and atomic latency one operation at a time. Each side's buffer has two halves of
//! max(size, cycle buffer) bytes: the first is its source, the second (whose address it announces)
//! is where the peer writes, reads and runs atomics.

pub mod messages;

use crate::oob::{self, Exchange};
use crate::perf::remote::{Net, XdpQueue, open_context};
use crate::perf::{AtomicOp, Mode, PerfOp};
use engine::datapath::capture::CaptureLog;
use engine::verbs::{
    Access, AddressVector, Context, Cq, Mr, Mtu, Qp, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendWr, Sge, Stats, WcStatus, WorkCompletion, WrOpcode,
};
use messages::{DEST_LEN, DONE, Dest, Report};
use std::time::{Duration, Instant};

/// OUT_READS announced for READ and atomic tests (the engine's max_dest_rd_atomic).
pub const OUT_READS: u16 = 128;
/// A run fails when nothing completes for this long.
const STALL: Duration = Duration::from_secs(60);
const RECV_WRID: u64 = u64::MAX;

/// What to run, with perftest's names and defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// Verb.
    pub op: PerfOp,
    /// `ib_atomic_*`'s `-A`.
    pub atomic: AtomicOp,
    /// `ib_*_bw` or `ib_*_lat`.
    pub mode: Mode,
    /// Server to connect to (client role), or `None` (server role).
    pub server: Option<String>,
    /// TCP port (`-p`, 18515).
    pub tcp_port: u16,
    /// This side's address (the client connects from it, the server listens on it); default: any,
    /// and the exchange connection's local address becomes the GID.
    pub local: Option<std::net::Ipv4Addr>,
    /// Message size (`-s`).
    pub size: usize,
    /// Iterations (`-n`).
    pub iters: u64,
    /// Path MTU this side offers (`-m`; default: the largest the interface carries); the smaller of
    /// both sides' is used.
    pub mtu: Option<Mtu>,
    /// RC local ACK timeout exponent (4.096 us x 2^timeout; perftest uses 14, 67 ms).
    pub timeout: u8,
    /// Messages in flight (`-t`, bandwidth tests).
    pub tx_depth: usize,
    /// Receives kept posted (`-r`, SEND tests).
    pub rx_depth: usize,
    /// Our QP's traffic class (`ah_attr.grh.traffic_class`, as perftest's `--tclass` sets it).
    pub traffic_class: u8,
    /// Datapath, egress faults, capture.
    pub net: Net,
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Client role.
    pub client: bool,
    /// The path MTU both sides agreed on.
    pub mtu: u32,
    /// This side's and the peer's handshake.
    pub me: Option<Dest>,
    /// The peer's handshake.
    pub peer: Option<Dest>,
    /// Bandwidth tests: the client's report (measured here, or received from the client).
    pub report: Option<Report>,
    /// SEND bandwidth server: what it measured receiving.
    pub received: Option<Report>,
    /// Latency client: one sample per iteration, in nanoseconds (round trip / 2 for WRITE and
    /// SEND, the whole operation for READ and atomics, as perftest reports them).
    pub latencies_ns: Vec<u64>,
    /// Counters of this side.
    pub stats: Stats,
    /// Datapath counters.
    pub datapath: Vec<(&'static str, u64)>,
    /// When capturing: the frames in the capture file, or why writing it failed.
    pub captured: Option<Result<u64, String>>,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One round of the engine while the exchange waits (a short nap when there was nothing to do);
/// whether the peer's QP `qp` sent packets meanwhile (a sign of life while its exchange connection
/// is silent). Only packets its QP took from the peer's address count, not any frame that
/// arrived; before the QP exists (`None`) nothing does.
fn tick(ctx: &mut Context, qp: Option<Qp>) -> Result<bool, String> {
    let seen = |ctx: &Context| qp.and_then(|q| ctx.qp_peer_packets(q));
    let before = seen(ctx);
    if ctx.progress().map_err(err)? == 0 {
        std::thread::sleep(Duration::from_micros(20));
    }
    Ok(seen(ctx) != before)
}

/// Most samples (timestamps, latencies) reserved ahead of a run; more grow as they come, so an
/// absurd `--iters` fails as the run goes, not in one allocation before it.
const MAX_RESERVED_SAMPLES: usize = 1 << 20;

/// An empty vector for `iters` samples, reserving at most [`MAX_RESERVED_SAMPLES`].
fn samples<T>(iters: u64) -> Vec<T> {
    Vec::with_capacity(iters.min(MAX_RESERVED_SAMPLES as u64) as usize)
}

struct Side {
    ctx: Context,
    x: Exchange,
    cq: Cq,
    qp: Qp,
    mr: Mr,
    /// Bytes in each half of the buffer.
    half: usize,
    cycle: usize,
    cache_line: usize,
    me: Dest,
    peer: Dest,
    last_progress: Instant,
    /// The peer's packets when `last_progress` was last set.
    rx_seen: u64,
}

impl Side {
    fn xchg(&mut self, mine: &[u8], theirs: &mut [u8]) -> Result<(), String> {
        let (ctx, qp) = (&mut self.ctx, self.qp);
        self.x.xchg(mine, theirs, &mut || tick(ctx, Some(qp)))
    }

    fn hand_shake(&mut self) -> Result<Dest, String> {
        let mut m = [0u8; DEST_LEN];
        self.xchg(&self.me.to_wire(), &mut m)?;
        Dest::from_wire(&m).ok_or_else(|| format!("malformed handshake {:?}", String::from_utf8_lossy(&m)))
    }

    /// Polls the engine once; returns the completions, failing on any error status.
    fn poll(&mut self, wcs: &mut Vec<WorkCompletion>) -> Result<(), String> {
        self.ctx.progress().map_err(err)?;
        wcs.clear();
        self.ctx.poll_cq(self.cq, wcs, 64).map_err(err)?;
        if let Some(bad) = wcs.iter().find(|w| w.status != WcStatus::Success) {
            return Err(format!("completion with status {:?} (wr_id {})", bad.status, bad.wr_id));
        }
        // Alive while completions come or the peer's packets still arrive (a lossy link can take
        // a long time between completions while the peer retransmits).
        let rx = self.ctx.qp_peer_packets(self.qp).unwrap_or(0);
        if !wcs.is_empty() || rx != self.rx_seen {
            self.last_progress = Instant::now();
            self.rx_seen = rx;
        } else if self.last_progress.elapsed() > STALL {
            return Err(format!("nothing completed and nothing received for {} s", STALL.as_secs()));
        }
        Ok(())
    }

    /// Offset of message `n` in a half: perftest cycles through the cycle buffer in cache-line
    /// steps when a message fits half of it.
    fn offset(&self, n: u64, size: usize) -> usize {
        let step = size.div_ceil(self.cache_line) * self.cache_line;
        if size * 2 <= self.cycle && step > 0 { (n as usize % (self.cycle / step)) * step } else { 0 }
    }

    fn post_recv(&mut self, n: u64, size: usize) -> Result<(), String> {
        let off = self.half + self.offset(n, size);
        let sge = Sge { addr: self.mr.addr + off as u64, length: size as u32, lkey: self.mr.lkey };
        self.ctx
            .post_recv(self.qp, &[RecvWr { wr_id: RECV_WRID, sg_list: vec![sge] }])
            .map_err(|(_, e)| err(e))?;
        Ok(())
    }

    /// The work request for message `n` of a test of `o`.
    fn wr(&self, o: &Options, n: u64) -> SendWr {
        let off = self.offset(n, o.size);
        let remote_addr = self.peer.vaddr + off as u64;
        let rkey = self.peer.rkey;
        let len = if o.op == PerfOp::Atomic { 8 } else { o.size };
        let sge = Sge { addr: self.mr.addr + off as u64, length: len as u32, lkey: self.mr.lkey };
        let opcode = match o.op {
            PerfOp::Send => WrOpcode::Send,
            PerfOp::Write => WrOpcode::RdmaWrite { remote_addr, rkey },
            PerfOp::Read => WrOpcode::RdmaRead { remote_addr, rkey },
            PerfOp::Atomic => match o.atomic {
                AtomicOp::FetchAdd => WrOpcode::AtomicFetchAndAdd { remote_addr, rkey, add: 1 },
                AtomicOp::CmpSwap => WrOpcode::AtomicCmpAndSwp { remote_addr, rkey, compare: 0, swap: 1 },
            },
        };
        SendWr::new(n, opcode, vec![sge])
    }

    fn finish(self, mut out: Outcome, capture: Option<CaptureLog>) -> Outcome {
        out.me = Some(self.me);
        out.peer = Some(self.peer);
        out.stats = self.ctx.stats();
        out.datapath = self.ctx.datapath_counters();
        out.captured = capture.as_ref().map(crate::perf::remote::finish_capture);
        out
    }

    /// Runs the engine until byte `at` of the buffer holds `v` (the peer's WRITE landed).
    fn wait_byte(&mut self, at: usize, v: u8, wcs: &mut Vec<WorkCompletion>) -> Result<(), String> {
        while self.ctx.mr_bytes(&self.mr).map_err(err)?[at] != v {
            self.poll(wcs)?;
            if !wcs.is_empty() {
                return Err(format!(
                    "unexpected completion (wr_id {}) while waiting for the peer's write",
                    wcs[0].wr_id
                ));
            }
        }
        self.last_progress = Instant::now();
        Ok(())
    }

    fn post(&mut self, wr: SendWr) -> Result<(), String> {
        self.ctx.post_send(self.qp, &[wr]).map_err(|(_, e)| err(e))
    }
}

/// Runs one side of a perftest-compatible test.
pub fn run(o: &Options) -> Result<Outcome, String> {
    if o.op == PerfOp::Atomic && o.size != 8 {
        return Err("atomics move 8 bytes".into());
    }
    if o.op == PerfOp::Write && o.mode == Mode::Lat && o.size == 0 {
        return Err("WRITE latency needs a message size of at least 1 byte".into());
    }
    let (tcp, local) = oob::meet(o.server.as_deref(), o.tcp_port, o.local)?;
    let client = o.server.is_some();
    let mut x = Exchange::new(tcp, client)?;
    // Until the traffic starts the peer answers at once: a silent one times out after the exchange
    // timeout. Messages are fixed-size, so memory is bounded whatever it sends.
    let run_patience = x.patience;
    x.patience = oob::exchange_timeout();
    let link = o.net.link(local, o.tcp_port);
    let offer = o.mtu.unwrap_or_else(|| {
        crate::devinfo::host_ports()
            .into_iter()
            .find(|p| p.ip == local)
            .and_then(|p| Mtu::for_netdev(p.mtu))
            .unwrap_or(Mtu::Mtu1024)
    });
    let (mut ctx, capture) = open_context(&link, offer).map_err(|e| e.0)?;
    // 1. Versions, system data, MTU.
    let mut peer_version = [0u8; messages::VERSION_LEN];
    x.xchg(&messages::version_msg(), &mut peer_version, &mut || tick(&mut ctx, None))?;
    let peer_version = messages::parse_version(&peer_version);
    let mut word = [0u8; 4];
    x.xchg(&4096u32.to_be_bytes(), &mut word, &mut || tick(&mut ctx, None))?;
    let cycle = (u32::from_be_bytes(word) as usize).clamp(4096, 1 << 20);
    x.xchg(&64u32.to_be_bytes(), &mut word, &mut || tick(&mut ctx, None))?;
    let cache_line = (u32::from_be_bytes(word) as usize).clamp(64, 4096);
    let mut mtu_msg = [0u8; 2];
    x.xchg(&messages::mtu_msg(offer), &mut mtu_msg, &mut || tick(&mut ctx, None))?;
    let peer_mtu = messages::parse_mtu(&mtu_msg)
        .ok_or_else(|| format!("the peer sent a malformed MTU {:?}", String::from_utf8_lossy(&mtu_msg)))?;
    let mtu = if peer_mtu.bytes() < offer.bytes() { peer_mtu } else { offer };

    // 2. Resources and the handshakes.
    let pd = ctx.alloc_pd();
    let half = o.size.max(cycle).div_ceil(cycle) * cycle;
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = ctx.reg_mr(pd, 2 * half, all).map_err(err)?;
    let rx_depth = if o.op == PerfOp::Send { o.rx_depth.min(o.iters as usize).max(1) } else { 1 };
    let tx_depth = if o.mode == Mode::Lat { 2 } else { o.tx_depth.max(1) };
    let cq = ctx.create_cq(tx_depth + rx_depth + 16).map_err(err)?;
    let cap = QpCap {
        max_send_wr: tx_depth as u32,
        max_recv_wr: rx_depth as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp =
        ctx.create_qp(pd, &QpInitAttr { qp_type: QpType::Rc, cap, ..QpInitAttr::rc(cq) }).map_err(err)?;
    ctx.modify_qp(qp, QpState::Init, &QpAttr { qp_access_flags: Some(all), ..QpAttr::default() })
        .map_err(err)?;
    let gid = match ctx.gid() {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        std::net::IpAddr::V6(v6) => v6,
    };
    let out_reads = if matches!(o.op, PerfOp::Read | PerfOp::Atomic) { OUT_READS } else { 1 };
    let me = Dest {
        lid: 0,
        out_reads,
        qpn: qp.qpn(),
        psn: oob::random_psn(),
        rkey: mr.rkey,
        vaddr: mr.addr + half as u64,
        gid,
        srqn: 0,
    };
    let mut s = Side {
        ctx,
        x,
        cq,
        qp,
        mr,
        half,
        cycle,
        cache_line,
        me,
        peer: me,
        last_progress: Instant::now(),
        rx_seen: 0,
    };
    s.peer = s.hand_shake()?;
    s.peer = s.hand_shake()?;
    if s.peer.gid.to_ipv4_mapped().is_none() {
        return Err(format!("the peer's GID {} is not an IPv4 one (use its IPv4 GID index, -x)", s.peer.gid));
    }
    connect(&mut s, o, mtu)?;
    if o.op == PerfOp::Send && (!client || o.mode == Mode::Lat) {
        for n in 0..rx_depth as u64 {
            s.post_recv(n, o.size)?;
        }
    }
    s.hand_shake()?;
    if o.op == PerfOp::Send || o.mode == Mode::Lat {
        s.hand_shake()?;
    }

    s.x.patience = run_patience;

    // 3. The traffic.
    let mut out = Outcome { client, mtu: mtu.bytes(), ..Outcome::default() };
    s.last_progress = Instant::now();
    match (o.mode, client, o.op) {
        (Mode::Bw, true, _) => out.report = Some(bw_client(&mut s, o)?),
        (Mode::Bw, false, PerfOp::Send) => out.received = Some(bw_send_server(&mut s, o, rx_depth as u64)?),
        (Mode::Bw, false, _) => {}
        (Mode::Lat, _, PerfOp::Write) => out.latencies_ns = lat_write(&mut s, o, client)?,
        (Mode::Lat, _, PerfOp::Send) => out.latencies_ns = lat_send(&mut s, o, client, rx_depth as u64)?,
        (Mode::Lat, true, _) => out.latencies_ns = lat_one_by_one(&mut s, o)?,
        (Mode::Lat, false, _) => {}
    }

    // 4. Closing: a handshake, the client's report (bandwidth, not SEND), a handshake, "done".
    // ib_write_lat just closes: keep answering for eight of the peer's ACK timeouts (67 ms at
    // perftest's 14), so that a last write whose ACK was lost gets one.
    if o.mode == Mode::Lat && o.op == PerfOp::Write {
        let until = Instant::now() + Duration::from_millis(540);
        while Instant::now() < until {
            tick(&mut s.ctx, Some(s.qp))?;
        }
        return Ok(s.finish(out, capture));
    }
    s.hand_shake()?;
    if o.mode == Mode::Bw && o.op != PerfOp::Send {
        let mine = out.report.unwrap_or(Report {
            size: o.size as u64,
            iters: 0,
            bw_peak: 0.0,
            bw_avg: 0.0,
            msg_rate: 0.0,
        });
        let fields = mine.fields(peer_version);
        let mut theirs: [Vec<u8>; 5] = Default::default();
        for (m, t) in fields.iter().zip(theirs.iter_mut()) {
            *t = vec![0u8; m.len()];
            s.xchg(m, t)?;
        }
        if !client {
            out.report = Some(Report::from_fields(&theirs));
        }
        s.hand_shake()?;
    }
    let (ctx, qp) = (&mut s.ctx, s.qp);
    s.x.finish(DONE, Duration::from_millis(200), &mut || tick(ctx, Some(qp)));
    Ok(s.finish(out, capture))
}

fn connect(s: &mut Side, o: &Options, mtu: Mtu) -> Result<(), String> {
    let Some(v4) = s.peer.gid.to_ipv4_mapped() else { return Err("the peer's GID is not IPv4".into()) };
    let rtr = QpAttr {
        ah_attr: Some(AddressVector {
            traffic_class: o.traffic_class,
            ..AddressVector::new(std::net::IpAddr::V4(v4))
        }),
        path_mtu: Some(mtu),
        dest_qp_num: Some(s.peer.qpn),
        rq_psn: Some(s.peer.psn),
        max_dest_rd_atomic: Some(s.me.out_reads.min(255) as u8),
        min_rnr_timer: Some(12),
        ..QpAttr::default()
    };
    s.ctx.modify_qp(s.qp, QpState::Rtr, &rtr).map_err(err)?;
    let rts = QpAttr {
        sq_psn: Some(s.me.psn),
        timeout: Some(o.timeout),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(s.peer.out_reads.clamp(1, OUT_READS) as u8),
        ..QpAttr::default()
    };
    s.ctx.modify_qp(s.qp, QpState::Rts, &rts).map_err(err)
}

/// The client of a bandwidth test: `tx_depth` in flight, every message signaled.
fn bw_client(s: &mut Side, o: &Options) -> Result<Report, String> {
    let n = o.iters;
    let depth = o.tx_depth.max(1) as u64;
    let mut posted_at = samples(n);
    let mut completed_at = samples(n);
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut wcs = Vec::new();
    let start = Instant::now();
    while completed < n {
        while posted < n && posted - completed < depth {
            let wr = s.wr(o, posted);
            s.post(wr)?;
            posted_at.push(Instant::now());
            posted += 1;
        }
        s.poll(&mut wcs)?;
        let now = Instant::now();
        completed += wcs.len() as u64;
        completed_at.resize(completed as usize, now);
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let mb = (1u64 << 20) as f64;
    let bytes = o.size as f64 * n as f64;
    Ok(Report {
        size: o.size as u64,
        iters: n,
        bw_peak: o.size as f64 / peak_interval(&posted_at, &completed_at).max(1e-9) / mb,
        bw_avg: bytes / secs / mb,
        msg_rate: n as f64 / secs / 1e6,
    })
}

/// perftest's peak: the shortest time per message over any run of consecutive messages i..=j,
/// (completion of j - post of i) / (j - i + 1), in seconds. Runs longer than 4096 messages are not
/// searched (their time per message is close to the average).
fn peak_interval(posted: &[Instant], completed: &[Instant]) -> f64 {
    let mut best = f64::MAX;
    for (i, p) in posted.iter().enumerate() {
        for (k, c) in completed.iter().skip(i).take(4096).enumerate() {
            best = best.min(c.saturating_duration_since(*p).as_secs_f64() / (k + 1) as f64);
        }
    }
    best
}

/// The server of a SEND bandwidth test: receives `iters` messages, reposting as they complete.
fn bw_send_server(s: &mut Side, o: &Options, posted: u64) -> Result<Report, String> {
    let mut wcs = Vec::new();
    let (mut received, mut next) = (0u64, posted);
    let mut first = None;
    while received < o.iters {
        s.poll(&mut wcs)?;
        for _ in wcs.iter().filter(|w| w.wr_id == RECV_WRID) {
            first.get_or_insert_with(Instant::now);
            received += 1;
            if next < o.iters {
                s.post_recv(next, o.size)?;
                next += 1;
            }
        }
    }
    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64()).max(1e-9);
    let mb = (1u64 << 20) as f64;
    Ok(Report {
        size: o.size as u64,
        iters: received,
        bw_peak: 0.0,
        bw_avg: o.size as f64 * received as f64 / secs / mb,
        msg_rate: received as f64 / secs / 1e6,
    })
}

/// WRITE latency: each side writes the iteration number into the last byte of the message and
/// waits for the peer's write of the same number; in perftest 4.5 the server writes first (newer
/// perftest starts with the client). The client times the round trips between its writes.
fn lat_write(s: &mut Side, o: &Options, client: bool) -> Result<Vec<u64>, String> {
    let poll_at = s.half + o.size - 1;
    let post_at = o.size - 1;
    let mut lat = samples(o.iters);
    let mut wcs = Vec::new();
    let mut sent_at = Instant::now();
    for i in 1..=o.iters {
        let v = i as u8;
        if client {
            s.wait_byte(poll_at, v, &mut wcs)?;
            if i > 1 {
                lat.push((sent_at.elapsed().as_nanos() / 2) as u64);
            }
        }
        s.ctx.mr_bytes_mut(&s.mr).map_err(err)?[post_at] = v;
        sent_at = Instant::now();
        s.post(s.wr(o, 0))?;
        loop {
            s.poll(&mut wcs)?;
            if !wcs.is_empty() {
                break;
            }
        }
        if !client {
            s.wait_byte(poll_at, v, &mut wcs)?;
        }
    }
    Ok(lat)
}

/// SEND latency: a ping-pong of messages; the client sends first, the server answers each message
/// (once its previous answer completed).
fn lat_send(s: &mut Side, o: &Options, client: bool, posted: u64) -> Result<Vec<u64>, String> {
    let n = o.iters;
    let mut lat = samples(n);
    let mut wcs = Vec::new();
    let mut next_recv = posted;
    let (mut scnt, mut rcnt, mut ccnt) = (0u64, 0u64, 0u64);
    let mut t0 = Instant::now();
    while rcnt < n || ccnt < n {
        let may_send = if client { rcnt == scnt } else { rcnt > scnt };
        if scnt < n && ccnt == scnt && may_send {
            t0 = Instant::now();
            s.post(s.wr(o, scnt))?;
            scnt += 1;
        }
        s.poll(&mut wcs)?;
        for wc in &wcs {
            if wc.wr_id != RECV_WRID {
                ccnt += 1;
                continue;
            }
            rcnt += 1;
            if client {
                lat.push((t0.elapsed().as_nanos() / 2) as u64);
            }
            if next_recv < n {
                s.post_recv(next_recv, o.size)?;
                next_recv += 1;
            }
        }
    }
    Ok(lat)
}

/// READ and atomic latency: one operation at a time, timed from post to completion.
fn lat_one_by_one(s: &mut Side, o: &Options) -> Result<Vec<u64>, String> {
    let mut lat = samples(o.iters);
    let mut wcs = Vec::new();
    for i in 0..o.iters {
        let t0 = Instant::now();
        s.post(s.wr(o, i))?;
        loop {
            s.poll(&mut wcs)?;
            if !wcs.is_empty() {
                break;
            }
        }
        lat.push(t0.elapsed().as_nanos() as u64);
    }
    Ok(lat)
}

/// perftest's latency columns: t_min, t_max, t_typical (median), t_avg, t_stdev, 99% and 99.9%
/// percentiles, in microseconds.
pub fn lat_summary(samples_ns: &[u64]) -> Option<[f64; 7]> {
    if samples_ns.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = samples_ns.iter().map(|&n| n as f64 / 1e3).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let avg = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n as f64;
    let pct = |p: f64| v[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    Some([v[0], v[n - 1], v[n / 2], avg, var.sqrt(), pct(0.99), pct(0.999)])
}

fn verb_name(o: &Options) -> &'static str {
    match o.op {
        PerfOp::Send => "Send",
        PerfOp::Write => "RDMA_Write",
        PerfOp::Read => "RDMA_Read",
        PerfOp::Atomic => match o.atomic {
            AtomicOp::FetchAdd => "Atomic FETCH_AND_ADD",
            AtomicOp::CmpSwap => "Atomic CMP_AND_SWAP",
        },
    }
}

/// The result as perftest prints it: the test, both addresses, and the bandwidth or latency table.
pub fn render(o: &Options, out: &Outcome) -> String {
    use std::fmt::Write;
    let line = crate::perf::LINE;
    let mut s = String::new();
    let kind = if o.mode == Mode::Bw { "BW" } else { "Latency" };
    let _ = writeln!(
        s,
        "{line}\n                    {} {kind} Test (perftest peer, {})",
        verb_name(o),
        if out.client { "client" } else { "server" }
    );
    let datapath = match &o.net.xdp {
        None => "kernel UDP".to_string(),
        Some(XdpQueue { dev, queue, .. }) => format!("AF_XDP on {dev} queue {queue}"),
    };
    let _ = writeln!(
        s,
        " Connection type : RC\t\tMtu : {}[B]\t\titerations : {}\t\tdatapath : {datapath}\n Build: {}",
        out.mtu,
        o.iters,
        crate::perf::build_kind()
    );
    for (who, d) in [("local", out.me), ("remote", out.peer)] {
        if let Some(d) = d {
            let _ = writeln!(
                s,
                " {who} address: LID {:04x} QPN 0x{:04x} PSN 0x{:06x} RKey 0x{:06x} VAddr 0x{:014x}\n GID: {}",
                d.lid, d.qpn, d.psn, d.rkey, d.vaddr, d.gid
            );
        }
    }
    let _ = writeln!(s, "{line}");
    match o.mode {
        Mode::Bw => {
            let (r, whose) = match (out.client, out.received) {
                (false, Some(r)) => (Some(r), " (measured receiving)"),
                (false, None) => (out.report, " (the client's report)"),
                (true, _) => (out.report, ""),
            };
            let _ = writeln!(
                s,
                " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]{whose}"
            );
            if let Some(r) = r {
                let _ = writeln!(
                    s,
                    " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
                    r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
                );
            }
        }
        Mode::Lat => {
            let _ = writeln!(
                s,
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            );
            match lat_summary(&out.latencies_ns) {
                Some(v) => {
                    let _ = writeln!(
                        s,
                        " {:<6} {:<11} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<16.2} {:<22.2} {:.2}",
                        o.size,
                        out.latencies_ns.len(),
                        v[0],
                        v[1],
                        v[2],
                        v[3],
                        v[4],
                        v[5],
                        v[6]
                    );
                }
                None => {
                    let _ = writeln!(s, " (the client measures latency)");
                }
            }
        }
    }
    let _ = write!(s, "{line}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary_is_perftests() {
        let s = lat_summary(&[3000, 1000, 2000, 4000]).unwrap();
        assert_eq!((s[0], s[1], s[2]), (1.0, 4.0, 3.0));
        assert!((s[3] - 2.5).abs() < 1e-9);
        assert!((s[4] - 1.118).abs() < 1e-3);
        assert_eq!((s[5], s[6]), (4.0, 4.0));
        assert!(lat_summary(&[]).is_none());
    }

    #[test]
    fn write_latency_of_zero_bytes_is_refused() {
        let o = Options {
            op: PerfOp::Write,
            atomic: AtomicOp::FetchAdd,
            mode: Mode::Lat,
            server: Some("127.0.0.1".into()),
            tcp_port: 9,
            local: None,
            size: 0,
            iters: 10,
            mtu: None,
            timeout: 14,
            tx_depth: 1,
            rx_depth: 1,
            traffic_class: 0,
            net: Net::udp(),
        };
        let e = run(&o).unwrap_err();
        assert!(e.contains("size"), "{e}");
    }

    /// Frames of another QP (here: of another connection of the same host) are no sign that the
    /// exchange's peer is alive; its own QP's are.
    #[test]
    fn only_the_peers_frames_are_a_sign_of_its_life() {
        use engine::simpair::{PairConfig, SimPair};
        let mut p = SimPair::new(&PairConfig { qps: 2, ..PairConfig::default() }).unwrap();
        let ((qa, qb), (other_a, _)) = (p.qps[0], p.qps[1]);
        let mr = p.a.reg_mr(p.pd_a, 4096, Access::LOCAL_WRITE).unwrap();
        let sge = Sge { addr: mr.addr, length: 64, lkey: mr.lkey };
        let deliver = |p: &mut SimPair, qp: Qp| {
            p.a.post_send(qp, &[SendWr::new(1, WrOpcode::Send, vec![sge])]).unwrap();
            p.a.progress().unwrap();
            p.net.advance_to(p.net.now() + Duration::from_millis(1));
        };
        deliver(&mut p, other_a);
        assert!(!tick(&mut p.b, Some(qb)).unwrap(), "another QP's frame counted as the peer's");
        deliver(&mut p, qa);
        assert!(tick(&mut p.b, Some(qb)).unwrap(), "the peer's own frame did not count");
    }

    #[test]
    fn timestamps_reserve_a_bounded_amount() {
        assert!(samples::<Instant>(10_000_000_000_000).capacity() <= MAX_RESERVED_SAMPLES);
        assert_eq!(samples::<u64>(100).capacity(), 100);
    }
}
