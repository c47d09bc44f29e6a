//! A UET perf run with one side per process over kernel UDP or AF_XDP, meeting on TCP like the RoCE
//! runs of [`crate::perf::remote`]: the client sends the test as JSON, runs the initiator and
//! collects the server's checks.

use crate::oob::{MAX_LINE, exchange_timeout, read_line_within};
use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::config::{UetOp, UetPerfConfig};
use super::report::counters_line;
use super::sides::{Initiator, Target};
use super::tss::NONCE_LEN;
use crate::perf::remote::{Link, MAX_WAIT, RemoteError, WATCH_SERVER_EVERY, open_error};
use crate::perf::{BwRow, LatRow};
use crate::stat::{Publisher, uet};
use engine::datapath::Datapath;
use engine::datapath::capture::CaptureLog;
use engine::datapath::link::{self, OnDatapath, Opened, Protocol};
use engine::progress::{Idle, Waiter};
use engine::uet::UetNode;

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
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                // The rest waits in the socket for the next round: memory stays bounded.
                if buf.len() > MAX_LINE {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(err(e)),
        }
    }
    if buf.len() > MAX_LINE && !buf[..=MAX_LINE].contains(&b'\n') {
        return Err(RemoteError(format!("the peer sent a line longer than {} KiB", MAX_LINE / 1024)));
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

/// The value of the first `result` line among `lines`, if any.
fn result_of(lines: Vec<Value>) -> Option<Value> {
    lines.into_iter().find_map(|mut v| v.get_mut("result").map(Value::take))
}

/// Each side's half of the run's TSS nonce: random, sent on the control channel (the client's in
/// its hello, the server's in its ready line) as a JSON array of bytes.
const NONCE_HALF: usize = NONCE_LEN / 2;

/// The nonce half in `v["tss_nonce"]`, if it is one.
fn nonce_half(v: &Value) -> Option<[u8; NONCE_HALF]> {
    let a = v["tss_nonce"].as_array().filter(|a| a.len() == NONCE_HALF)?;
    let mut half = [0u8; NONCE_HALF];
    for (b, x) in half.iter_mut().zip(a) {
        *b = u8::try_from(x.as_u64()?).ok()?;
    }
    Some(half)
}

/// The run's nonce: the client's half, then the server's.
fn run_nonce(client: &[u8; NONCE_HALF], server: &[u8; NONCE_HALF]) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[..NONCE_HALF].copy_from_slice(client);
    n[NONCE_HALF..].copy_from_slice(server);
    n
}

/// What runs on this side's UET node, whatever its datapath.
trait OnNode {
    fn run<D: Datapath>(
        self,
        node: UetNode<D>,
        capture: Option<CaptureLog>,
    ) -> Result<RemoteOutcome, RemoteError>;
}

/// A UET node on the datapath the engine's opener hands over, in the run's secure domain (keyed
/// with `nonce`) with `--tss`, given to `user`.
struct NodeOn<'a, U> {
    link: &'a link::Link,
    cfg: &'a UetPerfConfig,
    seed: u64,
    nonce: &'a [u8; NONCE_LEN],
    user: U,
}

impl<U: OnNode> OnDatapath for NodeOn<'_, U> {
    type Output = Result<RemoteOutcome, RemoteError>;
    fn on<D: Datapath + Send + 'static>(self, dp: D, opened: Opened) -> Self::Output {
        if let Some(e) = opened.short_of(self.link) {
            return Err(open_error(e));
        }
        let ses = ses::Endpoint::new(self.cfg.ses_config(), self.seed);
        // Over kernel UDP the kernel checked the UDP checksum (and sends none we could check):
        // the node accepts 0 there.
        let mut node = UetNode::new(dp, ses, opened.require_checksum).map_err(err)?;
        self.cfg.secure_and_mark(&mut node, self.nonce).map_err(err)?;
        self.user.run(node, opened.capture)
    }
}

/// Runs `user` on this side's UET node on `link`'s datapath (UDP port 4793, or AF_XDP steering
/// UDP 4793), with its egress faults and, with a capture file, the capture decorator.
fn with_node<U: OnNode>(
    link: &Link,
    cfg: &UetPerfConfig,
    seed: u64,
    nonce: &[u8; NONCE_LEN],
    user: U,
) -> Result<RemoteOutcome, RemoteError> {
    let dp = link.datapath(Protocol::Uet { max_payload: cfg.max_payload });
    dp.open(NodeOn { link: &dp, cfg, seed, nonce, user }).map_err(open_error)?
}

/// Waits for one client on `link`'s TCP port, takes its test, serves it, and reports its checks.
pub fn serve(link: &Link) -> Result<(UetPerfConfig, RemoteOutcome), RemoteError> {
    let (mut stream, mut reader) = crate::perf::remote::accept_one(link)?;
    let line = read_line_within(&mut reader, exchange_timeout(), "client").map_err(RemoteError)?;
    let cfg = UetPerfConfig::from_line(&line)?;
    let hello: Value = serde_json::from_slice(&line).map_err(err)?;
    let client_half = match nonce_half(&hello) {
        Some(h) => h,
        None if !cfg.tss => [0; NONCE_HALF],
        None => return Err(RemoteError("the client's hello lacks the TSS nonce".into())),
    };
    let half = tss::kdf::random::<NONCE_HALF>();
    let nonce = run_nonce(&client_half, &half);
    let serve = Serve { cfg, nonce_half: half, stream: &mut stream, wait: link.wait };
    let out = with_node(link, &cfg, cfg.seed.wrapping_mul(2) + 1, &nonce, serve)?;
    Ok((cfg, out))
}

/// The target's side of the run ([`serve_on`]).
struct Serve<'a> {
    cfg: UetPerfConfig,
    nonce_half: [u8; NONCE_HALF],
    stream: &'a mut TcpStream,
    wait: Idle,
}

impl OnNode for Serve<'_> {
    fn run<D: Datapath>(
        self,
        node: UetNode<D>,
        capture: Option<CaptureLog>,
    ) -> Result<RemoteOutcome, RemoteError> {
        serve_on(node, capture, self.cfg, self.nonce_half, self.stream, self.wait)
    }
}

fn serve_on<D: Datapath>(
    node: UetNode<D>,
    capture: Option<CaptureLog>,
    cfg: UetPerfConfig,
    nonce_half: [u8; NONCE_HALF],
    stream: &mut TcpStream,
    wait: Idle,
) -> Result<RemoteOutcome, RemoteError> {
    let mut t = Target::new(node, cfg).map_err(err)?;
    send_json(stream, &json!({"ready": true, "tss_nonce": nonce_half.to_vec()}))?;
    stream.set_nonblocking(true).map_err(err)?;
    let mut buf = Vec::new();
    let mut last_heard = Instant::now();
    let mut waiter = Waiter::new(wait);
    let mut stats = Publisher::new(&cfg.stat_name("server"));
    let done = loop {
        let moved = t.node.progress();
        t.drain();
        stats.maybe_uet(|| vec![uet::node("server", &mut t.node)]);
        if let Some(v) = poll_json(stream, &mut buf)?.into_iter().find(|v| v.get("done").is_some()) {
            break v;
        }
        // Spinning or sleeping on the socket (--wait), never a yield: that would hand the core
        // to any other busy process for a whole time slice (milliseconds of latency).
        if moved {
            last_heard = Instant::now();
        } else if last_heard.elapsed() > Duration::from_secs(60) {
            return Err(RemoteError("nothing happened for 60 s".into()));
        }
        waiter.after_round(&t.node, moved, Some(stream.as_fd()), MAX_WAIT).map_err(err)?;
    };
    // Datagrams in flight when the client finished may still arrive; answer retransmissions.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        let moved = t.node.progress();
        t.drain();
        waiter
            .after_round(&t.node, moved, None, until.saturating_duration_since(Instant::now()))
            .map_err(err)?;
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
    let stream = crate::perf::remote::connect_retry(host, link.tcp_port)?;
    let server_ip = match stream.peer_addr().map_err(err)?.ip() {
        std::net::IpAddr::V4(v4) => v4,
        std::net::IpAddr::V6(_) => return Err(RemoteError("UET runs use IPv4".into())),
    };
    let mut stream = stream;
    let half = tss::kdf::random::<NONCE_HALF>();
    send_json(&mut stream, &json!({ "uet": cfg.to_json(), "tss_nonce": half.to_vec() }))?;
    let mut reader = BufReader::new(stream.try_clone().map_err(err)?);
    let line = read_line_within(&mut reader, exchange_timeout(), "server").map_err(RemoteError)?;
    let ready = serde_json::from_slice::<Value>(&line).ok();
    if ready.as_ref().and_then(|v| v.get("ready").cloned()) != Some(json!(true)) {
        let shown: String = String::from_utf8_lossy(&line).chars().take(80).collect();
        return Err(RemoteError(format!("the server did not start the test: {}", shown.trim())));
    }
    let server_half = match ready.as_ref().and_then(nonce_half) {
        Some(h) => h,
        None if !cfg.tss => [0; NONCE_HALF],
        None => return Err(RemoteError("the server's ready line lacks the TSS nonce".into())),
    };
    let nonce = run_nonce(&half, &server_half);
    let client = Client { cfg: *cfg, server: server_ip, stream: &mut stream, wait: link.wait };
    with_node(link, cfg, cfg.seed.wrapping_mul(2), &nonce, client)
}

/// The initiator's side of the run ([`client_on`]).
struct Client<'a> {
    cfg: UetPerfConfig,
    server: Ipv4Addr,
    stream: &'a mut TcpStream,
    wait: Idle,
}

impl OnNode for Client<'_> {
    fn run<D: Datapath>(
        self,
        node: UetNode<D>,
        capture: Option<CaptureLog>,
    ) -> Result<RemoteOutcome, RemoteError> {
        client_on(node, capture, self.cfg, self.server, self.stream, self.wait)
    }
}

fn client_on<D: Datapath>(
    node: UetNode<D>,
    capture: Option<CaptureLog>,
    cfg: UetPerfConfig,
    server: Ipv4Addr,
    stream: &mut TcpStream,
    wait: Idle,
) -> Result<RemoteOutcome, RemoteError> {
    let mut a = Initiator::new(node, cfg, server);
    let (iters, depth) = (cfg.iters, cfg.depth() as u64);
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).map_err(err)?;
    let start = Instant::now();
    let mut last_progress = Instant::now();
    let mut posted_at = Instant::now();
    let mut waiter = Waiter::new(wait);
    // The server says nothing until the run is over, but a look now and then notices one that went
    // away (its side of the connection closed) at once, not after 60 s without a completion. Only a
    // result line is kept from what it may send meanwhile.
    stream.set_nonblocking(true).map_err(err)?;
    let (mut watched_at, mut buf, mut result) = (Instant::now(), Vec::new(), None);
    let mut stats = Publisher::new(&cfg.stat_name("client"));
    while completed < iters {
        stats.maybe_uet(|| vec![uet::node("client", &mut a.node)]);
        if watched_at.elapsed() >= WATCH_SERVER_EVERY {
            watched_at = Instant::now();
            let lines = poll_json(stream, &mut buf)?;
            result = result.or_else(|| result_of(lines));
        }
        while posted < iters && posted - completed < depth {
            a.post(posted).map_err(err)?;
            posted += 1;
            posted_at = Instant::now();
        }
        let moved = a.node.progress();
        let before = completed;
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
        waiter.after_round(&a.node, moved || completed != before, None, MAX_WAIT).map_err(err)?;
    }
    let wall = start.elapsed();
    let last: Vec<Value> = if cfg.op.is_atomic() {
        a.expected.iter().enumerate().map(|(s, v)| json!([s, v])).collect()
    } else {
        a.last_write.iter().enumerate().filter_map(|(s, i)| i.map(|i| json!([s, i]))).collect()
    };
    stream.set_nonblocking(false).map_err(err)?;
    send_json(stream, &json!({"done": {"last": last}}))?;
    stream.set_nonblocking(true).map_err(err)?;
    let result = loop {
        if let Some(r) = result.take() {
            break r;
        }
        a.node.progress();
        result = result_of(poll_json(stream, &mut buf)?);
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
        out.lat = Some(LatRow {
            size: cfg.size,
            wall_ns: hist.clone(),
            virtual_ns: hist,
            verified,
            errors,
            lost,
            baseline: None,
        });
    } else {
        out.bw = Some(BwRow::measured(cfg.size, iters, wall, Duration::ZERO, verified, errors, lost));
    }
    Ok(out)
}
