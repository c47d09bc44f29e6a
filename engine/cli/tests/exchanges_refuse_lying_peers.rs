//! Security review M1 (issue 30): the peer-facing TCP exchanges of `softrdma perf --backend udp`,
//! `pingpong` and `perf --perftest` must survive a lying, babbling or silent peer. A raw TCP peer
//! here sends each side a lie; the side must exit with a clear error naming what was wrong, never
//! panic (exit status 101), never hang (a silent peer times out after SOFTRDMA_EXCHANGE_TIMEOUT
//! seconds, 2 here), and never buffer an unbounded line (a 10 MB line without a newline is
//! refused). Kernel UDP on loopback, no root: the sides are 127.0.51.1 and 127.0.51.2.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SERVER: &str = "127.0.51.2";
const CLIENT: &str = "127.0.51.1";
/// How long a side may take to give up on a bad peer (the silent peer's timeout is 2 s).
const LIMIT: Duration = Duration::from_secs(20);

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_softrdma"))
        .args(args)
        .env("SOFTRDMA_EXCHANGE_TIMEOUT", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn softrdma")
}

/// Waits up to LIMIT for `child`; kills it and fails if it is still running. Returns its exit code
/// and stderr.
fn finish(mut child: Child, what: &str) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (status.code(), err);
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {LIMIT:?} (hangs on the peer)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks a side refused its peer: a non-zero exit that is not a panic, naming `needle`.
fn refused(code: Option<i32>, stderr: &str, needle: &str, what: &str) {
    assert_ne!(code, Some(101), "{what}: panicked:\n{stderr}");
    assert!(code.is_some_and(|c| c != 0), "{what}: exit {code:?}:\n{stderr}");
    assert!(
        stderr.to_lowercase().contains(&needle.to_lowercase()),
        "{what}: the error does not name {needle:?}:\n{stderr}"
    );
}

fn connect(host: &str, port: u16) -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return s,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("connecting to the server on {port}: {e}"),
        }
    }
}

/// The hello a real client sends for an RC WRITE test of one QP.
fn hello() -> Value {
    json!({
        "op": "write", "qp_type": "rc", "atomic": "fetch-add", "mode": "bw", "size": 65536,
        "iters": 100, "qps": 1, "mtu": 1024, "depth": 16, "seed": 1, "dcqcn_bps": null,
        "gid": CLIENT, "qpns": [17], "psns": [1], "rkeys": [0x1234], "addrs": [4096], "udp_port": 4791,
    })
}

fn with(key: &str, v: Value) -> Vec<u8> {
    let mut h = hello();
    h[key] = v;
    let mut line = h.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Starts a perf server on `port`, sends it `bytes` as a client (then stays silent, connection
/// open), and checks it refuses them naming `needle`.
fn lie_to_perf_server(port: u16, bytes: &[u8], needle: &str, what: &str) {
    let tcp = port.to_string();
    let udp = (port + 1000).to_string();
    let server = spawn(&[
        "perf",
        "write",
        "--backend",
        "udp",
        "--server",
        "--local",
        SERVER,
        "--tcp-port",
        &tcp,
        "--udp-port",
        &udp,
    ]);
    let mut s = connect(SERVER, port);
    // The server may close on us mid-way through a long line: that is fine.
    let _ = s.write_all(bytes);
    let (code, err) = finish(server, what);
    refused(code, &err, needle, what);
}

#[test]
fn perf_server_refuses_a_lying_client() {
    let huge = json!(18446744073709551615u64);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("size 2^64-1", with("size", huge.clone()), "size"),
        ("size 2^40", with("size", json!(1u64 << 40)), "size"),
        ("size 0", with("size", json!(0)), "size"),
        ("size as a string", with("size", json!("big")), "size"),
        ("negative qps", with("qps", json!(-1)), "qps"),
        ("100000 qps", with("qps", json!(100000)), "qps"),
        ("qpns longer than qps", with("qpns", json!([17, 18])), "qpns"),
        ("qpn above 24 bits", with("qpns", json!([1 << 24])), "qpns"),
        ("psn above 24 bits", with("psns", json!([1 << 24])), "psns"),
        ("rkey above 32 bits", with("rkeys", json!([1u64 << 32])), "rkeys"),
        ("addrs not numbers", with("addrs", json!(["x"])), "addrs"),
        ("udp_port 70000", with("udp_port", json!(70000)), "udp_port"),
        ("iters 0", with("iters", json!(0)), "iters"),
        ("iters 2^63", with("iters", json!(1u64 << 63)), "iters"),
        ("mtu 3000", with("mtu", json!(3000)), "mtu"),
        ("depth 0", with("depth", json!(0)), "depth"),
        ("unknown op", with("op", json!("frobnicate")), "op"),
        ("unknown transport", with("qp_type", json!("xrc")), "qp_type"),
        ("gid not an address", with("gid", json!("not-an-ip")), "gid"),
        ("not JSON", b"hello there\n".to_vec(), "json"),
        ("a JSON array", b"[1,2,3]\n".to_vec(), "object"),
        ("10 MB without a newline", vec![b'x'; 10 << 20], "KiB"),
        ("nothing at all", Vec::new(), "nothing"),
        ("threads 65", with("threads", json!(65)), "threads"),
        (
            "shard beyond its threads",
            {
                let mut h = hello();
                (h["threads"], h["shard"]) = (json!(2), json!(2));
                format!("{h}\n").into_bytes()
            },
            "shard",
        ),
        ("2 threads, one connects", with("threads", json!(2)), "not all of them connected"),
    ];
    for (i, (what, bytes, needle)) in cases.into_iter().enumerate() {
        lie_to_perf_server(31100 + i as u16, &bytes, needle, what);
    }
}

/// Starts a perf client against `port`, answers its hello with `bytes` as the server, and checks
/// it refuses them naming `needle`.
fn lie_to_perf_client(port: u16, bytes: &[u8], needle: &str, what: &str) {
    let listener = TcpListener::bind((SERVER, port)).expect("bind");
    let tcp = port.to_string();
    let udp = (port + 1000).to_string();
    let client = spawn(&[
        "perf",
        "write",
        "--backend",
        "udp",
        "--connect",
        SERVER,
        "--local",
        CLIENT,
        "--tcp-port",
        &tcp,
        "--udp-port",
        &udp,
        "--iters",
        "100",
    ]);
    let (mut s, _) = listener.accept().expect("accept");
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while s.read(&mut b).expect("the client's hello") == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let theirs: Value = serde_json::from_slice(&line).expect("the client's hello is JSON");
    assert!(theirs["qpns"].is_array(), "{theirs}");
    let _ = s.write_all(bytes);
    let (code, err) = finish(client, what);
    refused(code, &err, needle, what);
    let _ = s.shutdown(Shutdown::Both);
}

#[test]
fn perf_client_refuses_a_lying_server() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("qpns longer than the client's", with("qpns", json!([17, 18])), "qpns"),
        ("qpn above 24 bits", with("qpns", json!([1u64 << 40])), "qpns"),
        ("psns not a list", with("psns", json!(5)), "psns"),
        ("udp_port 70000", with("udp_port", json!(70000)), "udp_port"),
        ("gid not an address", with("gid", json!(12)), "gid"),
        ("not JSON", b"\xff\xfe garbage\n".to_vec(), "json"),
        ("10 MB without a newline", vec![b'{'; 10 << 20], "KiB"),
        ("nothing at all", Vec::new(), "nothing"),
    ];
    for (i, (what, bytes, needle)) in cases.into_iter().enumerate() {
        lie_to_perf_client(31200 + i as u16, &bytes, needle, what);
    }
}

/// A valid ibv_*_pingpong address message ("%04x:%06x:%06x:%s" with a 32-digit GID, NUL-ended).
const PINGPONG_MSG: &[u8; 52] = b"0000:000011:0abcde:00000000000000000000ffff7f003401\0";
/// pingpong and perftest listen on UDP 4791: each test has a loopback net of its own.
const PP_SERVER: &str = "127.0.52.2";
const PP_CLIENT: &str = "127.0.52.1";
const PT_SERVER: &str = "127.0.53.2";

#[test]
fn pingpong_refuses_a_lying_or_silent_peer() {
    // As the client of a pingpong server.
    let server_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage", vec![b'z'; 52], "malformed"),
        ("a short message, then close", b"0000:0000".to_vec(), "closed"),
        ("nothing at all", Vec::new(), "nothing"),
        ("no done after the address", [&PINGPONG_MSG[..], b"xxxxx"].concat(), "done"),
    ];
    for (i, (what, bytes, needle)) in server_cases.into_iter().enumerate() {
        let port = 31300 + i as u16;
        let p = port.to_string();
        let server = spawn(&["pingpong", "rc", "-p", &p, "--local", PP_SERVER]);
        let mut s = connect(PP_SERVER, port);
        let _ = s.write_all(&bytes);
        if what.contains("close") {
            let _ = s.shutdown(Shutdown::Write);
        }
        let (code, err) = finish(server, what);
        refused(code, &err, needle, &format!("pingpong server, {what}"));
    }
    // As the server of a pingpong client.
    let client_cases: Vec<(&str, Vec<u8>, &str)> =
        vec![("garbage", vec![0xff; 52], "malformed"), ("nothing at all", Vec::new(), "nothing")];
    for (i, (what, bytes, needle)) in client_cases.into_iter().enumerate() {
        let port = 31350 + i as u16;
        let listener = TcpListener::bind((PP_SERVER, port)).expect("bind");
        let p = port.to_string();
        let client = spawn(&["pingpong", "rc", PP_SERVER, "-p", &p, "--local", PP_CLIENT]);
        let (mut s, _) = listener.accept().expect("accept");
        let mut theirs = [0u8; 52];
        s.read_exact(&mut theirs).expect("the client's address");
        let _ = s.write_all(&bytes);
        let (code, err) = finish(client, what);
        refused(code, &err, needle, &format!("pingpong client, {what}"));
    }
}

#[test]
fn perftest_peer_refuses_a_lying_or_silent_peer() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("nothing at all", Vec::new(), "nothing"),
        ("a short version, then silence", b"6.0".to_vec(), "nothing"),
        // Version, cycle buffer and cache line (any values pass, clamped), then a bad MTU message.
        ("a malformed MTU", [&b"6.06\0\0\0\0\0\0\0\0\0\0\0\0"[..], &[0xff; 8], b"zz"].concat(), "mtu"),
    ];
    for (i, (what, bytes, needle)) in cases.into_iter().enumerate() {
        let port = 31400 + i as u16;
        let p = port.to_string();
        let server =
            spawn(&["perf", "write", "--perftest", "--server", "--local", PT_SERVER, "--tcp-port", &p]);
        let mut s = connect(PT_SERVER, port);
        let _ = s.write_all(&bytes);
        let (code, err) = finish(server, what);
        refused(code, &err, needle, &format!("perftest server, {what}"));
    }
}

/// UET perf (`--transport rud`) listens on UDP 4793: a loopback net of its own.
const UET_SERVER: &str = "127.0.54.2";

/// The hello a real UET client sends (`{"uet": UetPerfConfig::to_json()}`), with `key` set to `v`.
fn uet_with(key: &str, v: Value) -> Vec<u8> {
    let mut t = json!({
        "op": "Write", "transport": "Rud", "lat": false, "size": 4096, "iters": 100, "depth": 16,
        "max_payload": 4096, "seed": 1, "max_retries": 100, "tss": false, "cc": "None",
        "cc_bps": 100_000_000_000u64, "cc_rtt_ns": 20_000,
    });
    t[key] = v;
    let mut line = json!({ "uet": t }).to_string().into_bytes();
    line.push(b'\n');
    line
}

#[test]
fn uet_perf_server_refuses_a_lying_client() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // Any seed is a seed (it made the server panic, seed * 2 overflowing): the server takes
        // the test and says so, and the client hangs up.
        ("seed 2^64-1", uet_with("seed", json!(u64::MAX)), "closed"),
        ("size 0", uet_with("size", json!(0)), "size"),
        ("iters 0", uet_with("iters", json!(0)), "iters"),
        ("max_payload 0", uet_with("max_payload", json!(0)), "payload"),
        ("cc_bps 0", uet_with("cc_bps", json!(0)), "cc_bps"),
        ("not JSON", b"{{{\n".to_vec(), "json"),
        ("10 MB without a newline", vec![b' '; 10 << 20], "KiB"),
        ("nothing at all", Vec::new(), "nothing"),
    ];
    for (i, (what, bytes, needle)) in cases.into_iter().enumerate() {
        let port = 31500 + i as u16;
        let p = port.to_string();
        let server = spawn(&[
            "perf",
            "write",
            "--transport",
            "rud",
            "--backend",
            "udp",
            "--server",
            "--local",
            UET_SERVER,
            "--tcp-port",
            &p,
        ]);
        let mut s = connect(UET_SERVER, port);
        let _ = s.write_all(&bytes);
        if what.starts_with("seed") {
            let mut reply = [0u8; 64];
            let n = s.read(&mut reply).unwrap_or(0);
            assert!(String::from_utf8_lossy(&reply[..n]).contains("ready"), "{what}: no ready");
            let _ = s.shutdown(Shutdown::Both);
        }
        let (code, err) = finish(server, what);
        refused(code, &err, needle, &format!("UET perf server, {what}"));
    }
}
