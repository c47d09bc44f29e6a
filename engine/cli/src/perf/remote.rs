//! `softrdma perf` with one side per process over a real datapath (`--backend udp`): the sides meet
//! on TCP (port 18515 by default, as the rdma-core tools do), exchange QP numbers, PSNs, GIDs,
//! R_Keys and addresses as JSON lines, run the test, and check the data.
//!
//! The client decides the test (operation, transport, size, iterations, QPs, MTU, seed); the server
//! takes it from the client's hello. Both build their rings from the seed, so each side knows what
//! the other's memory holds: the server checks every SEND (and UC WRITE_WITH_IMM) it receives, the
//! client every READ response and atomic result; for RC WRITE, which has no receive-side signal,
//! the server checks at the end that every target slot holds the last message written to it.

use super::cm;
use super::hello::{PeerQps, RunMsg, parse_client_hello, parse_run_msg, parse_server_hello};
pub use super::hello::{RemoteError, Test};
pub use super::link::{
    Backend, CaptureFile, Link, Net, Role, XdpQueue, finish_capture, open_context, open_error,
};
use super::progress::Progress;
use super::{AtomicOp, Mode, PerfOp, fill_pattern, ring_slots, stamp, unstamp};
use crate::oob::{MAX_LINE, exchange_timeout, read_line_within};
use crate::stat::Publisher;
use engine::datapath::capture::CaptureLog;
use engine::progress::Waiter;
use engine::roce::SendWindow;
use engine::roce::dcqcn::DcqcnConfig;
use engine::simpair::{PairConfig, connect};
use engine::verbs::{
    Access, AddressVector, Ah, Context, Cq, Mr, Pd, Qp, QpCap, QpInitAttr, QpType, RecvWr, SendWr, Sge,
    UdDest, WcOpcode, WcStatus, WrOpcode,
};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Default TCP port of the out-of-band exchange (the rdma-core tools' 18515).
pub const DEFAULT_TCP_PORT: u16 = 18515;
/// UD receives start with the GRH area.
const GRH: usize = engine::roce::GRH_LEN;
/// The longest an idle side sleeps ([`Link::wait`]) before it looks at its loop again.
pub const MAX_WAIT: Duration = Duration::from_millis(10);
/// How often a client looks at the exchange connection during a run in which the server says
/// nothing (RC, UET), to notice a server that went away.
pub const WATCH_SERVER_EVERY: Duration = Duration::from_millis(100);
/// The server gives up on a client that sent no frame and no byte for this long during the run
/// (the UET runs' 60 s).
const SERVER_IDLE: Duration = Duration::from_secs(60);
/// How often a server reads the client's connection when it did not sleep on it (after a sleep it
/// always reads): a read that finds nothing is a system call, which an emulated CPU pays dearly
/// for (read every round, it was 8 % of the server's time over AF_XDP in the one-vCPU VMs of
/// `vm-bench.sh`, and 10 % of a spinning one's).
const READ_EVERY: Duration = Duration::from_millis(1);

/// What a remote run found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Payload bytes the client sent or read.
    pub bytes: u64,
    /// Wall-clock time of the client's run.
    pub wall: Duration,
    /// Messages checked (by either side).
    pub verified: u64,
    /// Messages that failed a check or completed with an error.
    pub errors: u64,
    /// Messages an unreliable transport lost.
    pub lost: u64,
    /// Latency mode: wall-clock time from post to completion of each request, in nanoseconds.
    pub latencies: Vec<u64>,
    /// With `Link::capture`: the frames in the capture file (complete when the run returned), or
    /// why writing it failed.
    pub captured: Option<Result<u64, String>>,
    /// This side's counters at the end.
    pub stats: engine::verbs::Stats,
    /// The datapath's own counters at the end.
    pub datapath: Vec<(&'static str, u64)>,
}

fn err(e: impl std::fmt::Display) -> RemoteError {
    RemoteError(e.to_string())
}

struct Lane {
    qp: Qp,
    /// Client: SEND/WRITE source, READ/atomic destination. Server: receive ring, WRITE target, READ
    /// source, atomic counter.
    mr: Mr,
    /// What the client's source ring holds (for the server's checks and the client's READ checks).
    pattern: Vec<u8>,
    posted: u64,
    completed: u64,
    received: u64,
}

struct Side {
    ctx: Context,
    capture: Option<CaptureLog>,
    /// The UDP port this side receives on.
    udp_port: u16,
    pd: Pd,
    cq: Cq,
    lanes: Vec<Lane>,
    /// Messages a lane keeps in flight (the client's ring, [`ring_slots`]); both sides agree.
    slots: usize,
    /// Receives a lane keeps posted: twice `slots` on the server (see [`open_side`]).
    recv_slots: usize,
    /// The peer's QP number for each lane.
    peer_qpns: Vec<u32>,
}

fn op_name(op: PerfOp) -> &'static str {
    match op {
        PerfOp::Send => "send",
        PerfOp::Write => "write",
        PerfOp::Read => "read",
        PerfOp::Atomic => "atomic",
    }
}

fn qp_name(t: QpType) -> &'static str {
    match t {
        QpType::Rc => "rc",
        QpType::Uc => "uc",
        QpType::Ud => "ud",
    }
}

fn recv_len(t: &Test) -> usize {
    if t.qp_type == QpType::Ud { t.size + GRH } else { t.size }
}

/// Whether the server sees a completion per message (SEND, UC WRITE_WITH_IMM).
fn server_checks(t: &Test) -> bool {
    t.op == PerfOp::Send || (t.op == PerfOp::Write && t.qp_type == QpType::Uc)
}

/// Whether the server reports what each lane received over TCP: the flow control of UC and UD,
/// which have none of their own. RC's receive credits do that, and its client reads no reports.
fn reports_receives(t: &Test) -> bool {
    t.qp_type != QpType::Rc
}

fn send_line(s: &mut TcpStream, v: &Value) -> Result<(), RemoteError> {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(err)
}

/// One line from the peer within `timeout` (at most [`MAX_LINE`] bytes).
fn read_line(r: &mut BufReader<TcpStream>, timeout: Duration, who: &str) -> Result<Vec<u8>, RemoteError> {
    read_line_within(r, timeout, who).map_err(RemoteError)
}

fn open_side(link: &Link, t: &Test, server: bool) -> Result<Side, RemoteError> {
    let (mut ctx, capture) = open_context(link, t.mtu)?;
    ctx.set_dcqcn(t.dcqcn_bps.map(DcqcnConfig::datacenter));
    let pd = ctx.alloc_pd();
    let depth = if t.mode == Mode::Lat { 1 } else { t.depth };
    let slots = ring_slots(depth, t.size, t.mtu.bytes() as usize, t.qps);
    // The server keeps twice the client's in-flight messages posted as receives (perftest's
    // rx_depth is 4x its tx_depth): an ACK's credits count the receives still posted when it
    // leaves, before the server reposts those that just completed, and a repair after a loss
    // completes a burst of messages at once. With only `slots` posted, the credits would hold the
    // client back before its window does.
    let recv_slots = if server { 2 * slots } else { slots };
    let cq = ctx.create_cq(2 * (slots + recv_slots) * t.qps + 64).map_err(err)?;
    let cap = QpCap {
        max_send_wr: slots as u32,
        max_recv_wr: recv_slots as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let ring = slots * t.size.max(8);
    let mut lanes = Vec::new();
    for q in 0..t.qps {
        let qp =
            ctx.create_qp(pd, &QpInitAttr { qp_type: t.qp_type, cap, ..QpInitAttr::rc(cq) }).map_err(err)?;
        let len = if server { recv_slots * recv_len(t).max(8) } else { ring };
        let mr = ctx.reg_mr(pd, len, all).map_err(err)?;
        let mut pattern = vec![0u8; ring];
        fill_pattern(&mut pattern, t.seed ^ q as u64);
        // The client's SEND/WRITE source and the server's READ source hold the pattern.
        let holds_pattern =
            if server { t.op == PerfOp::Read } else { matches!(t.op, PerfOp::Send | PerfOp::Write) };
        if holds_pattern {
            ctx.mr_bytes_mut(&mr).map_err(err)?[..ring].copy_from_slice(&pattern);
        }
        lanes.push(Lane { qp, mr, pattern, posted: 0, completed: 0, received: 0 });
    }
    Ok(Side {
        ctx,
        capture,
        udp_port: link.udp_port,
        pd,
        cq,
        lanes,
        slots,
        recv_slots,
        peer_qpns: Vec::new(),
    })
}

/// The first PSN of each of `lanes` lanes.
fn psns(lanes: usize, psn_base: u32) -> Vec<u32> {
    (0..lanes as u32).map(|i| psn_base.wrapping_add(1000 * i) & 0xFF_FFFF).collect()
}

fn hello(side: &Side, psn_base: u32) -> Value {
    json!({
        "gid": side.ctx.gid().to_string(),
        "qpns": side.lanes.iter().map(|l| l.qp.qpn()).collect::<Vec<_>>(),
        "psns": psns(side.lanes.len(), psn_base),
        "rkeys": side.lanes.iter().map(|l| l.mr.rkey).collect::<Vec<_>>(),
        "addrs": side.lanes.iter().map(|l| l.mr.addr).collect::<Vec<_>>(),
        "udp_port": side.udp_port,
    })
}

/// A peer's region: (R_Key, address).
type RemoteMr = (u32, u64);

/// Connects every lane's QP to the peer's, returns the peer's (rkey, addr) per lane and, on UD, an
/// address handle.
fn connect_all(
    side: &mut Side,
    my_psns: &[u32],
    peer: &PeerQps,
    t: &Test,
) -> Result<(Vec<RemoteMr>, Option<Ah>), RemoteError> {
    // The hello parsers checked every list has one entry per lane.
    let PeerQps { gid, ref qpns, ref psns, ref rkeys, ref addrs, udp_port: udp_dport } = *peer;
    if qpns.len() != side.lanes.len() || my_psns.len() != qpns.len() {
        return Err(RemoteError("the peer has a different number of QPs".into()));
    }
    // 4.096 us x 2^14 = 67 ms, perftest's default, stretched up to 4x as the measured round trip
    // grows. Losses are repaired by NAKs and tail probes long before a timeout. 2^12 (16.8 ms)
    // fired spuriously between two one-vCPU emulated VMs, whose first round trip (code the
    // emulator has not translated yet) and occasional stalls run past 17 ms: each such timeout
    // resent the window and cut it to 4 packets (1,000 x 64 KiB: 1-3 per run, median 20.4 MB/s;
    // with 2^14 none, 24.1 MB/s, over 7 alternating runs).
    let cfg = PairConfig {
        qp_type: t.qp_type,
        mtu: t.mtu,
        timeout: 14,
        retry_cnt: 7,
        max_retries: Some(1000),
        udp_dport,
        traffic_class: t.traffic_class,
        // The peer is softrdma, whose responder keeps what follows a lost packet: the window may
        // grow to 256 at once (DCQCN paces a QP by rate instead). Between the one-vCPU VMs, 64 KiB
        // WRITEs ran 12 % (UDP) and 7 % (AF_XDP) faster than with 128 (medians, 3 of 3 pairs won).
        send_window: t
            .dcqcn_bps
            .is_none()
            .then_some(SendWindow::AdaptiveWide { min: SendWindow::DEFAULT_MIN }),
        ..PairConfig::default()
    };
    for (i, lane) in side.lanes.iter().enumerate() {
        connect(&mut side.ctx, lane.qp, qpns[i], gid, my_psns[i], psns[i], &cfg).map_err(err)?;
    }
    side.peer_qpns = qpns.clone();
    let ah = if t.qp_type == QpType::Ud {
        Some(
            side.ctx
                .create_ah(
                    side.pd,
                    &AddressVector { udp_dport, traffic_class: t.traffic_class, ..AddressVector::new(gid) },
                )
                .map_err(err)?,
        )
    } else {
        None
    };
    Ok((rkeys.iter().zip(addrs).map(|(&k, &a)| (k, a)).collect(), ah))
}

fn post_recv(side: &mut Side, q: usize, slot: usize, t: &Test) -> Result<(), RemoteError> {
    let len = recv_len(t);
    let l = &side.lanes[q];
    let sg_list = if t.op == PerfOp::Send {
        vec![Sge { addr: l.mr.addr + (slot * len) as u64, length: len as u32, lkey: l.mr.lkey }]
    } else {
        vec![]
    };
    side.ctx.post_recv(l.qp, &[RecvWr { wr_id: (q << 32 | slot) as u64, sg_list }]).map_err(|(_, e)| err(e))
}

/// Whether `data` is message `n` of lane `pattern`: the stamp, then the slot's pattern.
fn is_message(pattern: &[u8], size: usize, slots: usize, n: u64, data: &[u8]) -> bool {
    let at = (n % slots as u64) as usize * size;
    let k = size.min(8);
    data.len() == size && data[..k] == stamp(n)[..k] && data[k..] == pattern[at + k..at + size]
}

/// Waits on `link`'s TCP port for one client ([`crate::oob::meet`]): its stream, and a line
/// reader over it.
pub fn accept_one(link: &Link) -> Result<(TcpStream, BufReader<TcpStream>), RemoteError> {
    let (stream, _) = crate::oob::meet(None, link.tcp_port, Some(link.local)).map_err(RemoteError)?;
    let reader = BufReader::new(stream.try_clone().map_err(err)?);
    Ok((stream, reader))
}

/// This side's device as `softrdma stat` names it.
fn device_name(link: &Link) -> String {
    match &link.xdp {
        None => format!("udp {}:{}", link.local, link.udp_port),
        Some(XdpQueue { dev, queue, .. }) => format!("afxdp {dev} queue {queue} ({})", link.local),
    }
}

/// Listens on `link`'s exchange port for clients (one connection per thread of a client's run).
pub fn listen(link: &Link) -> Result<TcpListener, RemoteError> {
    TcpListener::bind((link.local, link.tcp_port))
        .map_err(|e| RemoteError(format!("listening on TCP port {}: {e}", link.tcp_port)))
}

/// Waits for a client's exchange on `listener`: its stream, a line reader over it, and its hello.
pub fn accept_hello(listener: &TcpListener) -> Result<Accepted, RemoteError> {
    let (stream, _) = listener.accept().map_err(|e| RemoteError(format!("accepting a client: {e}")))?;
    hello_of(stream)
}

/// Reads the hello of a client whose exchange `stream` was just accepted.
pub fn hello_of(stream: TcpStream) -> Result<Accepted, RemoteError> {
    let from = stream.peer_addr().map_err(err)?;
    stream.set_nodelay(true).map_err(err)?;
    tracing::info!(%from, "exchange: connected");
    let mut reader = BufReader::new(stream.try_clone().map_err(err)?);
    let (t, peer) = parse_client_hello(&read_line(&mut reader, exchange_timeout(), "client")?)?;
    Ok(Accepted { stream, reader, test: t, peer })
}

/// A client's exchange, accepted, its hello read.
#[derive(Debug)]
pub struct Accepted {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
    /// The test the client asks for.
    pub test: Test,
    peer: PeerQps,
}

/// The server side of the exchange `a` on `link`: runs its test, checks what arrived, reports.
pub fn serve(link: &Link, a: Accepted) -> Result<(Test, Outcome), RemoteError> {
    let Accepted { mut stream, mut reader, test: t, peer } = a;
    tracing::info!(op = ?t.op, qp_type = ?t.qp_type, size = t.size, qps = t.qps, cm = t.cm, "exchange: the client's test");
    let mut side = open_side(link, &t, true)?;
    let psn_base = crate::oob::random_psn();
    let mine = hello(&side, psn_base);
    let my_psns = psns(side.lanes.len(), psn_base);
    let lanes = side.lanes.len();
    if t.cm {
        let mut l = cm::listen(&mut side.ctx, link.local, link.tcp_port, lanes)?;
        send_line(&mut stream, &mine)?;
        for q in 0..lanes {
            let id = cm::request(&mut side.ctx, &mut l, side.lanes[q].qp)?;
            // Receives are posted before the REP, so none of the client's sends is early.
            for s in (0..side.recv_slots).filter(|_| server_checks(&t)) {
                post_recv(&mut side, q, s, &t)?;
            }
            cm::accept(&mut side.ctx, id)?;
        }
        let qps: Vec<Qp> = side.lanes.iter().map(|l| l.qp).collect();
        cm::established(&mut side.ctx, l, &qps, t.mtu)?;
    } else {
        connect_all(&mut side, &my_psns, &peer, &t)?;
        // Receives are posted (QPs in RTS) before the client hears back, so none of its sends is
        // early.
        for q in (0..lanes).filter(|_| server_checks(&t)) {
            for s in 0..side.recv_slots {
                post_recv(&mut side, q, s, &t)?;
            }
        }
        send_line(&mut stream, &mine)?;
    }
    stream.set_nonblocking(true).map_err(err)?;
    let mut out = Outcome::default();
    let mut wcs = Vec::new();
    let mut line = String::new();
    let mut reported = 0u64;
    let mut last_report = Instant::now();
    let mut waiter = Waiter::new(link.wait);
    let mut heard = Instant::now();
    let mut last_read = Instant::now();
    let reports = reports_receives(&t);
    let (mut stats, dev) =
        (Publisher::new(&format!("perf {:?} server", t.op).to_lowercase()), device_name(link));
    let done = loop {
        stats.maybe(|| vec![crate::stat::device(&dev, &side.ctx)]);
        // The client learns how many messages each lane has received and keeps within the
        // receive ring. None for RC: each report was a TCP send, 13 % of the server's time in a
        // one-vCPU VM's 2-byte SEND latency run.
        let total: u64 = side.lanes.iter().map(|l| l.received).sum();
        if reports && total != reported && last_report.elapsed() >= Duration::from_micros(200) {
            let rx: Vec<u64> = side.lanes.iter().map(|l| l.received).collect();
            let mut msg = json!({ "rx": rx }).to_string();
            msg.push('\n');
            // Non-blocking: a full socket buffer only delays the report.
            if stream.write(msg.as_bytes()).is_ok_and(|n| n == msg.len()) {
                reported = total;
                last_report = Instant::now();
            }
        }
        let moved = side.ctx.progress().map_err(err)? > 0;
        if moved {
            heard = Instant::now();
        } else if heard.elapsed() > SERVER_IDLE {
            return Err(RemoteError(format!(
                "the client sent no frame and no message for {} s",
                SERVER_IDLE.as_secs()
            )));
        }
        wcs.clear();
        side.ctx.poll_cq(side.cq, &mut wcs, 256).map_err(err)?;
        for wc in &wcs {
            let Some(q) = side.lanes.iter().position(|l| l.qp.qpn() == wc.qp_num) else { continue };
            let slot = (wc.wr_id & 0xFFFF_FFFF) as usize;
            side.lanes[q].received += 1;
            let ok = wc.status == WcStatus::Success
                && check_receive(&side, q, slot, wc.opcode, wc.imm_data, wc.byte_len, &t);
            if ok {
                out.verified += 1
            } else {
                out.errors += 1
            }
            post_recv(&mut side, q, slot, &t)?;
        }
        // Idle: sleep until a frame or the client's line comes; a report owed goes within 200 us.
        let owed = reports && side.lanes.iter().map(|l| l.received).sum::<u64>() != reported;
        let max = if owed { Duration::from_micros(200) } else { MAX_WAIT };
        let worked = moved || !wcs.is_empty();
        let slept = waiter.after_round(&side.ctx, worked, Some(stream.as_fd()), max).map_err(err)?;
        if !slept && last_read.elapsed() < READ_EVERY {
            continue;
        }
        last_read = Instant::now();
        // Bounded: at most a buffer's worth more than MAX_LINE (the BufReader's 8 KiB) per round.
        let before = line.len();
        let got = std::io::Read::take(&mut reader, (MAX_LINE + 1 - line.len().min(MAX_LINE)) as u64)
            .read_line(&mut line);
        if line.len() > before {
            heard = Instant::now();
        }
        match got {
            Ok(0) if line.len() > MAX_LINE => {
                return Err(RemoteError(format!(
                    "the client sent a line longer than {} KiB",
                    MAX_LINE / 1024
                )));
            }
            Ok(0) => return Err(RemoteError("the client left before the end".into())),
            Ok(_) if line.ends_with('\n') => {
                match parse_run_msg(line.trim_end().as_bytes(), side.lanes.len())? {
                    RunMsg::Done(sent) => break sent,
                    other => {
                        return Err(RemoteError(format!(
                            "the client sent {other:?} where done was expected"
                        )));
                    }
                }
            }
            Ok(_) if line.len() > MAX_LINE => {
                return Err(RemoteError(format!(
                    "the client sent a line longer than {} KiB",
                    MAX_LINE / 1024
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(err(e)),
        }
    };
    let sent = done;
    tracing::info!(?sent, "exchange: the client is done");
    if t.op == PerfOp::Write && t.qp_type == QpType::Rc {
        // No receive-side signal for RC WRITE: every slot must hold the last message written to it.
        for (q, lane) in side.lanes.iter().enumerate() {
            let posted = sent.get(q).copied().unwrap_or(0);
            let bytes = side.ctx.mr_bytes(&lane.mr).map_err(err)?;
            for slot in 0..side.slots.min(posted as usize) {
                let n = slot as u64 + (posted - 1 - slot as u64) / side.slots as u64 * side.slots as u64;
                let data = &bytes[slot * t.size..(slot + 1) * t.size];
                if is_message(&lane.pattern, t.size, side.slots, n, data) {
                    out.verified += 1
                } else {
                    out.errors += 1
                }
            }
        }
    }
    if server_checks(&t) {
        out.lost = side.lanes.iter().zip(&sent).map(|(l, &s)| s.saturating_sub(l.received)).sum();
    }
    stream.set_nonblocking(false).map_err(err)?;
    send_line(&mut stream, &json!({"verified": out.verified, "errors": out.errors, "lost": out.lost}))?;
    out.stats = side.ctx.stats();
    out.datapath = side.ctx.datapath_counters();
    if t.cm {
        crate::cm::close(&mut side.ctx);
    }
    out.captured = side.capture.as_ref().map(finish_capture);
    Ok((t, out))
}

fn check_receive(
    side: &Side,
    q: usize,
    slot: usize,
    opcode: WcOpcode,
    imm: Option<u32>,
    byte_len: u32,
    t: &Test,
) -> bool {
    let lane = &side.lanes[q];
    let Ok(bytes) = side.ctx.mr_bytes(&lane.mr) else { return false };
    if opcode == WcOpcode::RecvRdmaWithImm {
        let n = u64::from(imm.unwrap_or(u32::MAX));
        let at = (n % side.slots as u64) as usize * t.size;
        return byte_len as usize == t.size
            && is_message(&lane.pattern, t.size, side.slots, n, bytes.get(at..at + t.size).unwrap_or(&[]));
    }
    let skip = if t.qp_type == QpType::Ud { GRH } else { 0 };
    let rl = recv_len(t);
    let data = &bytes[slot * rl + skip..slot * rl + skip + t.size];
    let n = if t.qp_type == QpType::Rc { lane.received - 1 } else { unstamp(data) };
    byte_len as usize == skip + t.size && is_message(&lane.pattern, t.size, side.slots, n, data)
}

/// Connects to the exchange port, retrying while the server is not up yet ([`crate::oob::meet`]).
pub fn connect_retry(host: &str, tcp_port: u16) -> Result<TcpStream, RemoteError> {
    crate::oob::meet(Some(host), tcp_port, None).map(|(s, _)| s).map_err(RemoteError)
}

/// The client side: connects, asks for `t`, runs it, and returns what both sides found.
pub fn run_client(host: &str, link: &Link, t: &Test) -> Result<Outcome, RemoteError> {
    let stream = connect_retry(host, link.tcp_port)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(err)?);
    let mut stream = stream;
    let mut side = open_side(link, t, false)?;
    let psn_base = crate::oob::random_psn();
    let mut mine = hello(&side, psn_base);
    for (k, v) in [
        ("op", json!(op_name(t.op))),
        ("qp_type", json!(qp_name(t.qp_type))),
        ("atomic", json!(if t.atomic == AtomicOp::CmpSwap { "cmp-swap" } else { "fetch-add" })),
        ("mode", json!(if t.mode == Mode::Lat { "lat" } else { "bw" })),
        ("size", json!(t.size)),
        ("iters", json!(t.iters)),
        ("qps", json!(t.qps)),
        ("mtu", json!(t.mtu.bytes())),
        ("depth", json!(t.depth)),
        ("seed", json!(t.seed)),
        ("dcqcn_bps", json!(t.dcqcn_bps)),
        ("traffic_class", json!(t.traffic_class)),
        ("cm", json!(t.cm)),
        ("threads", json!(t.threads)),
        ("shard", json!(t.shard)),
    ] {
        mine[k] = v;
    }
    send_line(&mut stream, &mine)?;
    let lanes = side.lanes.len();
    let peer = parse_server_hello(&read_line(&mut reader, exchange_timeout(), "server")?, lanes)?;
    tracing::info!(qpns = ?peer.qpns, udp_port = ?peer.udp_port, "exchange: the server's QPs");
    let (remote, ah) = if t.cm {
        let server = std::net::SocketAddr::new(stream.peer_addr().map_err(err)?.ip(), link.tcp_port);
        let qps: Vec<Qp> = side.lanes.iter().map(|l| l.qp).collect();
        cm::connect(&mut side.ctx, link.local, server, &qps, t.mtu, t.traffic_class)?;
        (peer.rkeys.iter().zip(&peer.addrs).map(|(&k, &a)| (k, a)).collect(), None)
    } else {
        connect_all(&mut side, &psns(lanes, psn_base), &peer, t)?
    };
    let depth = side.slots as u64;
    let mut out = Outcome::default();
    let mut wcs = Vec::new();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(600);
    let unreliable = reports_receives(t);
    let mut posted_at = vec![start; side.lanes.len()];
    // UC/UD pacing: what the server reported received per lane, and what the client gave up on.
    let mut rx_seen = vec![0u64; side.lanes.len()];
    let mut settled = vec![0u64; side.lanes.len()];
    let (mut progress_at, mut watched_at) = (Instant::now(), Instant::now());
    let mut inbox = Vec::new();
    let mut waiter = Waiter::new(link.wait);
    stream.set_nonblocking(true).map_err(err)?;
    let (mut stats, dev) =
        (Publisher::new(&format!("perf {:?} client", t.op).to_lowercase()), device_name(link));
    let mut progress = Progress::new(format!("size {}", t.size), t.iters * lanes as u64, t.size);
    while side.lanes.iter().any(|l| l.completed < t.iters) {
        stats.maybe(|| vec![crate::stat::device(&dev, &side.ctx)]);
        progress.update(side.lanes.iter().map(|l| l.completed).sum());
        if Instant::now() > deadline {
            return Err(RemoteError("the run took longer than 10 minutes".into()));
        }
        for q in 0..side.lanes.len() {
            while side.lanes[q].posted < t.iters && side.lanes[q].posted - side.lanes[q].completed < depth {
                // UC and UD have no flow control: stay within half the server's receive ring.
                if unreliable
                    && server_checks(t)
                    && side.lanes[q].posted.saturating_sub(rx_seen[q].max(settled[q])) > depth / 2
                {
                    break;
                }
                let wr = client_wr(&mut side, q, &remote[q], ah, t)?;
                side.ctx.post_send(side.lanes[q].qp, &[wr]).map_err(|(_, e)| err(e))?;
                side.lanes[q].posted += 1;
                if t.mode == Mode::Lat {
                    posted_at[q] = Instant::now();
                }
            }
        }
        let moved = side.ctx.progress().map_err(err)? > 0;
        // UC/UD: the server's receive reports, every round. RC: the server says nothing until the
        // end, but a look now and then notices one that went away (its side of the connection
        // closed) at once, not after the QPs have retried into the void a thousand times.
        if unreliable || watched_at.elapsed() >= WATCH_SERVER_EVERY {
            watched_at = Instant::now();
            for msg in poll_lines(&mut stream, &mut inbox, lanes)? {
                if let RunMsg::Rx(rx) = msg {
                    for (q, &r) in rx.iter().enumerate().take(rx_seen.len()) {
                        if r > rx_seen[q] {
                            rx_seen[q] = r;
                            progress_at = Instant::now();
                        }
                    }
                }
            }
        }
        if unreliable {
            // Nothing received for a while: what is outstanding was lost.
            if progress_at.elapsed() > Duration::from_millis(20) {
                for (q, l) in side.lanes.iter().enumerate() {
                    settled[q] = l.posted;
                }
                progress_at = Instant::now();
            }
        }
        wcs.clear();
        side.ctx.poll_cq(side.cq, &mut wcs, 256).map_err(err)?;
        for wc in &wcs {
            let Some(q) = side.lanes.iter().position(|l| l.qp.qpn() == wc.qp_num) else { continue };
            side.lanes[q].completed += 1;
            if t.mode == Mode::Lat {
                out.latencies.push(posted_at[q].elapsed().as_nanos().max(1) as u64);
            }
            if wc.status != WcStatus::Success {
                out.errors += 1;
                continue;
            }
            match t.op {
                PerfOp::Read => {
                    let lane = &side.lanes[q];
                    let n = wc.wr_id;
                    let at = (n % side.slots as u64) as usize * t.size;
                    let got = &side.ctx.mr_bytes(&lane.mr).map_err(err)?[at..at + t.size];
                    if got == &lane.pattern[at..at + t.size] { out.verified += 1 } else { out.errors += 1 }
                }
                PerfOp::Atomic => {
                    let lane = &side.lanes[q];
                    let at = (wc.wr_id % side.slots as u64) as usize * 8;
                    let got = u64::from_ne_bytes(
                        side.ctx.mr_bytes(&lane.mr).map_err(err)?[at..at + 8].try_into().unwrap_or([0xFF; 8]),
                    );
                    if got == wc.wr_id { out.verified += 1 } else { out.errors += 1 }
                }
                _ => {}
            }
        }
        // Idle: sleep until a frame (or, UC/UD, the server's report) comes.
        let also = unreliable.then(|| stream.as_fd());
        waiter.after_round(&side.ctx, moved || !wcs.is_empty(), also, MAX_WAIT).map_err(err)?;
    }
    // The run is timed from the first post to the last completion, as perftest does; the settle
    // below is not part of it.
    let wall = start.elapsed();
    // Let the last frames land before the server looks.
    let settle = Instant::now() + Duration::from_millis(100);
    while Instant::now() < settle {
        let moved = side.ctx.progress().map_err(err)? > 0;
        waiter
            .after_round(&side.ctx, moved, None, settle.saturating_duration_since(Instant::now()))
            .map_err(err)?;
    }
    progress.finish();
    tracing::info!(?wall, "exchange: run over, sending done");
    out.wall = wall;
    out.bytes = t.iters * t.qps as u64 * if t.op == PerfOp::Atomic { 8 } else { t.size as u64 };
    stream.set_nonblocking(false).map_err(err)?;
    send_line(
        &mut stream,
        &json!({"done": true, "sent": side.lanes.iter().map(|l| l.posted).collect::<Vec<_>>()}),
    )?;
    // Progress reports may come before the final one, whole or in part: finish any partial line
    // from the inbox, then read lines until the report (the server checks its memory first).
    let patience = exchange_timeout().max(Duration::from_secs(60));
    let mut report = None;
    if !inbox.is_empty() {
        let rest = read_line(&mut reader, patience, "server")?;
        inbox.extend_from_slice(&rest);
        inbox.push(b'\n');
        for msg in inbox_lines(&mut inbox, lanes)? {
            if let RunMsg::Report { .. } = msg {
                report = Some(msg);
            }
        }
    }
    let (verified, errors, lost) = loop {
        match report.take() {
            Some(RunMsg::Report { verified, errors, lost }) => break (verified, errors, lost),
            _ => report = Some(parse_run_msg(&read_line(&mut reader, patience, "server")?, lanes)?),
        }
    };
    out.verified += verified;
    out.errors += errors;
    out.lost += lost;
    out.stats = side.ctx.stats();
    out.datapath = side.ctx.datapath_counters();
    if t.cm {
        crate::cm::close(&mut side.ctx);
    }
    out.captured = side.capture.as_ref().map(finish_capture);
    Ok(out)
}

fn client_wr(
    side: &mut Side,
    q: usize,
    remote: &(u32, u64),
    ah: Option<Ah>,
    t: &Test,
) -> Result<SendWr, RemoteError> {
    let n = side.lanes[q].posted;
    let slot = (n % side.slots as u64) as usize;
    let (rkey, raddr) = *remote;
    let lane = &side.lanes[q];
    let at = slot * t.size;
    let sge = |len: usize, off: usize| {
        vec![Sge { addr: lane.mr.addr + off as u64, length: len as u32, lkey: lane.mr.lkey }]
    };
    let k = t.size.min(8);
    if matches!(t.op, PerfOp::Send | PerfOp::Write) {
        side.ctx.mr_bytes_mut(&lane.mr).map_err(err)?[at..at + k].copy_from_slice(&stamp(n)[..k]);
    }
    let remote_addr = raddr + at as u64;
    let (opcode, sg) = match (t.op, t.qp_type) {
        (PerfOp::Send, _) => (WrOpcode::Send, sge(t.size, at)),
        (PerfOp::Write, QpType::Uc) => {
            (WrOpcode::RdmaWriteWithImm { remote_addr, rkey, imm: n as u32 }, sge(t.size, at))
        }
        (PerfOp::Write, _) => (WrOpcode::RdmaWrite { remote_addr, rkey }, sge(t.size, at)),
        (PerfOp::Read, _) => (WrOpcode::RdmaRead { remote_addr, rkey }, sge(t.size, at)),
        (PerfOp::Atomic, _) => {
            let op = match t.atomic {
                AtomicOp::FetchAdd => WrOpcode::AtomicFetchAndAdd { remote_addr: raddr, rkey, add: 1 },
                AtomicOp::CmpSwap => {
                    WrOpcode::AtomicCmpAndSwp { remote_addr: raddr, rkey, compare: n, swap: n + 1 }
                }
            };
            (op, sge(8, slot * 8))
        }
    };
    let mut wr = SendWr::new(n, opcode, sg);
    if let Some(ah) = ah {
        wr.ud = Some(UdDest { ah, remote_qpn: side.peer_qpns[q], remote_qkey: 0x8000_0000 });
    }
    Ok(wr)
}

/// Complete lines that arrived on a non-blocking stream (partial lines wait in `buf`, which holds
/// at most [`MAX_LINE`] bytes and a chunk), as messages of `lanes` lanes.
fn poll_lines(stream: &mut TcpStream, buf: &mut Vec<u8>, lanes: usize) -> Result<Vec<RunMsg>, RemoteError> {
    let mut chunk = [0u8; 4096];
    let mut out = Vec::new();
    // At most MAX_LINE bytes a round: the rest waits in the socket.
    for _ in 0..MAX_LINE / chunk.len() {
        match std::io::Read::read(stream, &mut chunk) {
            Ok(0) => return Err(RemoteError("the server closed the connection".into())),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                out.extend(inbox_lines(buf, lanes)?);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(err(e)),
        }
    }
    Ok(out)
}

/// Takes the complete lines out of `buf`; what stays (a partial line) must be within [`MAX_LINE`].
fn inbox_lines(buf: &mut Vec<u8>, lanes: usize) -> Result<Vec<RunMsg>, RemoteError> {
    let mut out = Vec::new();
    while let Some(i) = buf.iter().position(|&b| b == b'\n') {
        let line: Vec<u8> = buf.drain(..=i).collect();
        out.push(parse_run_msg(&line[..i], lanes)?);
    }
    if buf.len() > MAX_LINE {
        return Err(RemoteError(format!("the server sent a line longer than {} KiB", MAX_LINE / 1024)));
    }
    Ok(out)
}
