//! The JSON lines of `softrdma perf --backend udp|afxdp`'s exchange, parsed and checked against the
//! engine's limits before anything is allocated (security review M1): the client's hello (the test
//! and its QPs), the server's hello (its QPs), the client's `done` and the progress and final
//! reports. Pure functions over the line's bytes, so they can be fuzzed (`fuzz/fuzz_targets/
//! perf_hello.rs`); an error names the field.

use super::{AtomicOp, Mode, PerfOp};
use engine::verbs::{Mtu, QpType};
use serde_json::{Map, Value};
use std::net::IpAddr;

/// The test a client asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Test {
    /// Operation.
    pub op: PerfOp,
    /// Which atomic.
    pub atomic: AtomicOp,
    /// Transport.
    pub qp_type: QpType,
    /// Bandwidth or latency.
    pub mode: Mode,
    /// Message size.
    pub size: usize,
    /// Messages per QP.
    pub iters: u64,
    /// QP pairs.
    pub qps: usize,
    /// Path MTU.
    pub mtu: Mtu,
    /// Messages in flight per QP.
    pub depth: usize,
    /// Seed of the data patterns.
    pub seed: u64,
    /// DCQCN on both sides' QPs ([`engine::roce::dcqcn::DcqcnConfig::datacenter`] for this line
    /// rate, bits per second).
    pub dcqcn_bps: Option<u64>,
    /// The traffic class of both sides' QPs (`ah_attr.grh.traffic_class`, the IP header's DSCP
    /// and ECN byte; `--tclass` DSCP << 2).
    pub traffic_class: u8,
    /// The QPs are connected by the connection manager (`--cm`), not by the exchange's QP numbers
    /// and PSNs.
    pub cm: bool,
    /// Engine threads of the run (`--threads`): each runs its share of the QPs over an exchange
    /// of its own ([`super::threads`]).
    pub threads: usize,
    /// Which of them this exchange is (0 to `threads - 1`).
    pub shard: usize,
}

/// Why a remote run failed.
#[derive(Debug)]
pub struct RemoteError(pub String);

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RemoteError {}

/// The largest message a test may ask for ([`engine::verbs::MAX_MSG_SIZE`], the CLI's `--size`).
pub const MAX_SIZE: u64 = engine::verbs::MAX_MSG_SIZE;
/// The most QP pairs a test may ask for (the CLI's `--qps`).
pub const MAX_QPS: u64 = 256;
/// The most messages in flight per QP (the CLI's `--tx-depth`).
pub const MAX_DEPTH: u64 = 4096;
/// The most messages per QP: 2^32 keeps `iters x qps x size` (the bytes moved) within a u64, and
/// takes minutes at any rate the engine reaches, within the client's 10-minute run limit.
pub const MAX_ITERS: u64 = 1 << 32;
/// The most engine threads a run shards its QPs over (`--threads`).
pub const MAX_THREADS: u64 = 64;

/// A field of a message that is missing or out of range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloError {
    /// Which message ("the client's hello").
    pub from: &'static str,
    /// The field (`size`), or `line` for the message as a whole.
    pub field: &'static str,
    /// What is wrong with it.
    pub why: String,
}

impl std::fmt::Display for HelloError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} {}", self.from, self.field, self.why)
    }
}

impl std::error::Error for HelloError {}

impl From<HelloError> for RemoteError {
    fn from(e: HelloError) -> RemoteError {
        RemoteError(e.to_string())
    }
}

/// A peer's QPs as its hello gives them, one entry per lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerQps {
    /// The peer's address (its RoCEv2 GID).
    pub gid: IpAddr,
    /// QP numbers (24 bits).
    pub qpns: Vec<u32>,
    /// First PSNs (24 bits).
    pub psns: Vec<u32>,
    /// R_Keys of the peer's regions.
    pub rkeys: Vec<u32>,
    /// Addresses of the peer's regions.
    pub addrs: Vec<u64>,
    /// The UDP port the peer receives on (absent: 4791).
    pub udp_port: Option<u16>,
}

struct Msg<'a> {
    from: &'static str,
    v: &'a Map<String, Value>,
}

impl Msg<'_> {
    fn fail<T>(&self, field: &'static str, why: impl Into<String>) -> Result<T, HelloError> {
        Err(HelloError { from: self.from, field, why: why.into() })
    }

    fn get(&self, field: &'static str) -> Result<&Value, HelloError> {
        match self.v.get(field) {
            Some(v) => Ok(v),
            None => self.fail(field, "is missing"),
        }
    }

    /// An unsigned integer within `lo..=hi`.
    fn uint(&self, field: &'static str, lo: u64, hi: u64) -> Result<u64, HelloError> {
        let v = self.get(field)?;
        match v.as_u64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            Some(n) => self.fail(field, format!("{n} is out of range {lo}..={hi}")),
            None => self.fail(field, format!("is not an unsigned integer: {}", short(v))),
        }
    }

    /// Like [`Msg::uint`], `default` when absent.
    fn uint_or(&self, field: &'static str, lo: u64, hi: u64, default: u64) -> Result<u64, HelloError> {
        if self.v.get(field).is_none_or(Value::is_null) { Ok(default) } else { self.uint(field, lo, hi) }
    }

    /// One of `names`, as its index.
    fn name(&self, field: &'static str, names: &[&str]) -> Result<usize, HelloError> {
        let v = self.get(field)?;
        match v.as_str().and_then(|s| names.iter().position(|n| *n == s)) {
            Some(i) => Ok(i),
            None => self.fail(field, format!("is not one of {names:?}: {}", short(v))),
        }
    }

    /// Like [`Msg::name`], `names[0]` when absent.
    fn name_or_first(&self, field: &'static str, names: &[&str]) -> Result<usize, HelloError> {
        if self.v.get(field).is_none_or(Value::is_null) { Ok(0) } else { self.name(field, names) }
    }

    /// A list of exactly `len` unsigned integers up to `max`.
    fn list(&self, field: &'static str, len: usize, max: u64) -> Result<Vec<u64>, HelloError> {
        let v = self.get(field)?;
        let Some(a) = v.as_array() else { return self.fail(field, format!("is not a list: {}", short(v))) };
        if a.len() != len {
            return self.fail(field, format!("has {} entries for {len} QPs", a.len()));
        }
        a.iter()
            .map(|x| match x.as_u64() {
                Some(n) if n <= max => Ok(n),
                _ => self.fail(field, format!("has {} (not an integer in 0..={max})", short(x))),
            })
            .collect()
    }
}

/// A value for an error message, cut to 40 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 40 { s } else { format!("{}...", s.chars().take(40).collect::<String>()) }
}

fn object<'a>(line: &'a Value, from: &'static str) -> Result<Msg<'a>, HelloError> {
    match line.as_object() {
        Some(v) => Ok(Msg { from, v }),
        None => Err(HelloError { from, field: "line", why: "is not a JSON object".into() }),
    }
}

fn json(line: &[u8], from: &'static str) -> Result<Value, HelloError> {
    serde_json::from_slice(line).map_err(|e| HelloError {
        from,
        field: "line",
        why: format!("is not JSON: {e}"),
    })
}

fn peer_qps(m: &Msg, lanes: usize) -> Result<PeerQps, HelloError> {
    let gid = match m.get("gid")?.as_str().map(str::parse::<IpAddr>) {
        Some(Ok(ip)) => ip,
        _ => return m.fail("gid", format!("is not an IP address: {}", short(m.get("gid")?))),
    };
    let u24 = |f| Ok::<_, HelloError>(m.list(f, lanes, 0xFF_FFFF)?.into_iter().map(|n| n as u32).collect());
    let (qpns, psns) = (u24("qpns")?, u24("psns")?);
    let rkeys = m.list("rkeys", lanes, u64::from(u32::MAX))?.into_iter().map(|n| n as u32).collect();
    let addrs = m.list("addrs", lanes, u64::MAX)?;
    // A peer that does not say listens on 4791.
    let udp_port = match m.v.get("udp_port") {
        None | Some(Value::Null) => None,
        Some(_) => Some(m.uint("udp_port", 1, u64::from(u16::MAX))? as u16),
    };
    Ok(PeerQps { gid, qpns, psns, rkeys, addrs, udp_port })
}

/// The client's hello: the test it asks for and its QPs, every field checked (sizes up to
/// [`MAX_SIZE`], at most [`MAX_QPS`] QPs, 1 to [`MAX_ITERS`] iterations, a path MTU of 256 to 4096,
/// one list entry per QP).
pub fn parse_client_hello(line: &[u8]) -> Result<(Test, PeerQps), HelloError> {
    let v = json(line, "the client's hello")?;
    let m = object(&v, "the client's hello")?;
    let op = [PerfOp::Send, PerfOp::Write, PerfOp::Read, PerfOp::Atomic]
        [m.name("op", &["send", "write", "read", "atomic"])?];
    let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud][m.name("qp_type", &["rc", "uc", "ud"])?];
    let atomic =
        [AtomicOp::FetchAdd, AtomicOp::CmpSwap][m.name_or_first("atomic", &["fetch-add", "cmp-swap"])?];
    let mode = [Mode::Bw, Mode::Lat][m.name_or_first("mode", &["bw", "lat"])?];
    let size = m.uint("size", 1, MAX_SIZE)? as usize;
    if op == PerfOp::Atomic && size != 8 {
        return m.fail("size", format!("{size} for an atomic (atomics move 8 bytes)"));
    }
    let mtu_bytes = m.uint("mtu", 256, 4096)?;
    let Some(mtu) = Mtu::from_bytes(mtu_bytes as u32) else {
        return m.fail("mtu", format!("{mtu_bytes} is not a path MTU (256, 512, 1024, 2048 or 4096)"));
    };
    let qps = m.uint("qps", 1, MAX_QPS)? as usize;
    let t = Test {
        op,
        atomic,
        qp_type,
        mode,
        size,
        iters: m.uint("iters", 1, MAX_ITERS)?,
        qps,
        mtu,
        depth: m.uint("depth", 1, MAX_DEPTH)? as usize,
        seed: m.uint("seed", 0, u64::MAX)?,
        dcqcn_bps: match m.v.get("dcqcn_bps") {
            None | Some(Value::Null) => None,
            Some(_) => Some(m.uint("dcqcn_bps", 1, u64::MAX)?),
        },
        traffic_class: m.uint_or("traffic_class", 0, 255, 0)? as u8,
        cm: match m.v.get("cm") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return m.fail("cm", format!("is not true or false: {}", short(v))),
        },
        threads: m.uint_or("threads", 1, MAX_THREADS, 1)? as usize,
        shard: m.uint_or("shard", 0, MAX_THREADS - 1, 0)? as usize,
    };
    if t.shard >= t.threads {
        return m.fail("shard", format!("{} of a run over {} threads", t.shard, t.threads));
    }
    // What the CLI refuses on the client (`cli/perf.rs`) the server refuses too.
    match qp_type {
        QpType::Uc if matches!(op, PerfOp::Read | PerfOp::Atomic) => {
            return m.fail("qp_type", "uc carries send and write only");
        }
        QpType::Ud if op != PerfOp::Send => return m.fail("qp_type", "ud carries send only"),
        QpType::Ud if t.cm => return m.fail("cm", "connects rc and uc QPs"),
        QpType::Ud if size > mtu.bytes() as usize => {
            return m
                .fail("size", format!("{size} for ud: a UD message must fit one packet of {}", mtu.bytes()));
        }
        QpType::Uc | QpType::Ud if size < 8 => {
            return m.fail("size", format!("{size} for uc or ud: each message carries its 8-byte number"));
        }
        _ => {}
    }
    Ok((t, peer_qps(&m, qps)?))
}

/// The server's hello: its QPs, one per lane of the client's `lanes`.
pub fn parse_server_hello(line: &[u8], lanes: usize) -> Result<PeerQps, HelloError> {
    let v = json(line, "the server's hello")?;
    peer_qps(&object(&v, "the server's hello")?, lanes)
}

/// What a message of the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunMsg {
    /// The client's end: messages it posted per lane.
    Done(Vec<u64>),
    /// The server's progress report (UC/UD): messages received per lane.
    Rx(Vec<u64>),
    /// The server's final report.
    Report {
        /// Messages it checked.
        verified: u64,
        /// Messages that failed its checks.
        errors: u64,
        /// Messages the transport lost.
        lost: u64,
    },
}

/// A message of the run (after the hellos), with `lanes` entries in its lists.
pub fn parse_run_msg(line: &[u8], lanes: usize) -> Result<RunMsg, HelloError> {
    let from = "the peer's message";
    let v = json(line, from)?;
    let m = object(&v, from)?;
    if m.v.contains_key("sent") {
        Ok(RunMsg::Done(m.list("sent", lanes, MAX_ITERS)?))
    } else if m.v.contains_key("rx") {
        Ok(RunMsg::Rx(m.list("rx", lanes, MAX_ITERS)?))
    } else if m.v.contains_key("verified") {
        let n = |f| m.uint(f, 0, MAX_ITERS * MAX_QPS);
        Ok(RunMsg::Report { verified: n("verified")?, errors: n("errors")?, lost: n("lost")? })
    } else {
        m.fail("line", format!("is none of done, rx or a report: {}", short(&v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hello() -> Value {
        json!({
            "op": "send", "qp_type": "rc", "atomic": "fetch-add", "mode": "bw", "size": 4096,
            "iters": 10, "qps": 2, "mtu": 1024, "depth": 16, "seed": 7, "dcqcn_bps": null,
            "gid": "10.0.0.1", "qpns": [17, 18], "psns": [1, 2], "rkeys": [5, 6], "addrs": [0, 4096],
            "udp_port": 4791,
        })
    }

    fn with(k: &str, v: Value) -> Result<(Test, PeerQps), HelloError> {
        let mut h = hello();
        h[k] = v;
        parse_client_hello(h.to_string().as_bytes())
    }

    #[test]
    fn a_real_hello_parses() {
        let (t, p) = parse_client_hello(hello().to_string().as_bytes()).unwrap();
        assert_eq!((t.size, t.qps, t.iters, t.depth, t.seed), (4096, 2, 10, 16, 7));
        assert_eq!(p.qpns, [17, 18]);
        assert_eq!(p.udp_port, Some(4791));
        assert!(!t.cm, "no \"cm\": the exchange connects the QPs");
        assert_eq!(parse_server_hello(hello().to_string().as_bytes(), 2).unwrap(), p);
        assert!(with("cm", json!(true)).unwrap().0.cm);
    }

    #[test]
    fn a_lie_in_any_hello_field_is_refused_naming_the_field() {
        for (k, v) in [
            ("size", json!(u64::MAX)),
            ("size", json!(0)),
            ("size", json!(-1)),
            ("size", json!("big")),
            ("qps", json!(257)),
            ("qpns", json!([1, 2, 3])),
            ("qpns", json!([1 << 24, 1])),
            ("psns", json!(7)),
            ("rkeys", json!([1u64 << 32, 0])),
            ("addrs", json!([1.5, 0])),
            ("udp_port", json!(70000)),
            ("udp_port", json!(0)),
            ("iters", json!(0)),
            ("iters", json!(1u64 << 63)),
            ("mtu", json!(3000)),
            ("mtu", json!(8192)),
            ("depth", json!(0)),
            ("op", json!("frobnicate")),
            ("qp_type", json!(3)),
            ("gid", json!("10.0.0")),
            ("seed", json!(null)),
            ("cm", json!("yes")),
        ] {
            let e = with(k, v.clone()).unwrap_err();
            assert_eq!(e.field, k, "{k} = {v}: {e}");
            assert!(e.to_string().contains(k), "{e}");
        }
        assert_eq!(parse_client_hello(b"[1]").unwrap_err().field, "line");
        assert_eq!(parse_client_hello(b"{").unwrap_err().field, "line");
        assert_eq!(parse_server_hello(hello().to_string().as_bytes(), 3).unwrap_err().field, "qpns");
        // The connection manager connects RC and UC QPs only.
        let mut ud = hello();
        ud["qp_type"] = json!("ud");
        ud["cm"] = json!(true);
        assert_eq!(parse_client_hello(ud.to_string().as_bytes()).unwrap_err().field, "cm");
    }

    #[test]
    fn run_messages() {
        assert_eq!(parse_run_msg(br#"{"done":true,"sent":[3,4]}"#, 2), Ok(RunMsg::Done(vec![3, 4])));
        assert_eq!(parse_run_msg(br#"{"rx":[1,2]}"#, 2), Ok(RunMsg::Rx(vec![1, 2])));
        assert_eq!(
            parse_run_msg(br#"{"verified":5,"errors":0,"lost":1}"#, 2),
            Ok(RunMsg::Report { verified: 5, errors: 0, lost: 1 })
        );
        assert_eq!(parse_run_msg(br#"{"sent":[3]}"#, 2).unwrap_err().field, "sent");
        assert_eq!(
            parse_run_msg(br#"{"verified":-1,"errors":0,"lost":0}"#, 1).unwrap_err().field,
            "verified"
        );
        assert_eq!(parse_run_msg(br#"{}"#, 1).unwrap_err().field, "line");
    }
}
