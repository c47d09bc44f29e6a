//! Two `softrdma perf` processes over kernel UDP on loopback, on UDP ports other than 4791 (issue
//! 27): each side says in the exchange which port it receives on, and its peer's frames go there.
//! No root needed. The sides are 127.0.49.1 (client) and 127.0.49.2 (server), a loopback net of
//! their own.

mod common;

use common::scratch_dir;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs a server on 127.0.49.2 UDP `server_port` and a client on 127.0.49.1 UDP `client_port`,
/// the client with `args`; returns both outputs (stdout, with the counters).
fn pair(tcp_port: u16, server_port: u16, client_port: u16, args: &[&str]) -> (String, String) {
    let (tcp, sp, cp) = (tcp_port.to_string(), server_port.to_string(), client_port.to_string());
    let common = ["--backend", "udp", "--tcp-port", &tcp, "--counters"];
    let server = Command::new(env!("CARGO_BIN_EXE_softrdma"))
        .args(&args[..2])
        .args(common)
        .args(["--server", "--local", "127.0.49.2", "--udp-port", &sp])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    std::thread::sleep(Duration::from_millis(200));
    let client = Command::new(env!("CARGO_BIN_EXE_softrdma"))
        .args(args)
        .args(common)
        .args(["--connect", "127.0.49.2", "--local", "127.0.49.1", "--udp-port", &cp])
        .output()
        .expect("run the client");
    let server = server.wait_with_output().expect("the server");
    let (c, s) = (String::from_utf8_lossy(&client.stdout), String::from_utf8_lossy(&server.stdout));
    let detail = format!(
        "{args:?}\nclient:\n{c}{}\nserver:\n{s}{}",
        String::from_utf8_lossy(&client.stderr),
        String::from_utf8_lossy(&server.stderr)
    );
    assert!(client.status.success() && server.status.success(), "{detail}");
    assert!(!c.contains("verified: 0 messages"), "{detail}");
    for out in [&c, &s] {
        assert!(out.contains(" 0 errors") && out.contains("(bad 0,"), "{detail}");
    }
    // What the server received came to its port and went up to the engine.
    let readdressed = s
        .split("roce port: frames readdressed to 4791 ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse::<u64>().ok()));
    assert!(readdressed.is_some_and(|n| n > 0), "{detail}");
    (c.into_owned(), s.into_owned())
}

/// The UDP (source, destination) ports of every frame of a capture `--capture` wrote.
fn ports(pcap: &std::path::Path) -> Vec<(u16, u16)> {
    let b = std::fs::read(pcap).unwrap();
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &b[at + 16..at + 16 + len];
        // Ethernet, IPv4 without options, UDP.
        out.push((u16::from_be_bytes([f[34], f[35]]), u16::from_be_bytes([f[36], f[37]])));
        at += 16 + len;
    }
    assert_eq!(at, b.len(), "whole records");
    out
}

#[test]
fn softrdma_peers_on_other_udp_ports() {
    // Both on 5000 (as on a host where rdma_rxe holds 4791).
    pair(18650, 5000, 5000, &["perf", "write", "--iters", "500"]);
    pair(18651, 5000, 5000, &["perf", "send", "--transport", "ud", "--size", "1024", "--iters", "300"]);
    // Different ports on each side: frames go to the port the peer gave, from the bound one.
    let dir = scratch_dir("udp-port");
    let cap = dir.join("client.pcap");
    let (c, _) = pair(
        18652,
        5002,
        5001,
        &["perf", "read", "--size", "8192", "--iters", "300", "--capture", cap.to_str().unwrap()],
    );
    assert!(c.contains("wrote "), "{c}");
    let seen = ports(&cap);
    assert!(seen.len() >= 600, "{}", seen.len());
    assert!(seen.iter().all(|&p| p == (5001, 5002) || p == (5002, 5001)), "{seen:?}");
    assert!(seen.contains(&(5001, 5002)) && seen.contains(&(5002, 5001)));
    std::fs::remove_dir_all(dir).unwrap();
}

/// `libsoftrdma_ibverbs.so` of this build (cargo builds the crate's cdylib beside the tests).
fn library() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_softrdma")).with_file_name("deps").join("libsoftrdma_ibverbs.so")
}

/// Runs `server` and then `client` (the stock tools, over the library on `lo`) on 127.0.49.3 and
/// 127.0.49.4, both with `SOFTRDMA_UDP_PORT=udp_port`; both must exit 0 within 60 s.
fn stock_pair(udp_port: u16, server: &[&str], client: &[&str]) {
    let spawn = |argv: &[&str], local: &str| {
        Command::new(argv[0])
            .args(&argv[1..])
            .env("LD_PRELOAD", library())
            .env("SOFTRDMA_BACKEND", "udp")
            .env("SOFTRDMA_DEV", "lo")
            .env("SOFTRDMA_LOCAL", local)
            .env("SOFTRDMA_UDP_PORT", udp_port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", argv[0]))
    };
    let s = spawn(server, "127.0.49.3");
    std::thread::sleep(Duration::from_millis(1500));
    let c = spawn(client, "127.0.49.4");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut outs = Vec::new();
    for (what, mut p) in [("client", c), ("server", s)] {
        let status = loop {
            if let Some(st) = p.try_wait().unwrap() {
                break Some(st);
            }
            if std::time::Instant::now() > deadline {
                let _ = p.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let o = p.wait_with_output().unwrap();
        let text = format!(
            "{what} ({status:?}):\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        outs.push((status.is_some_and(|s| s.success()), text));
    }
    let report: Vec<&str> = outs.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        outs.iter().all(|(ok, _)| *ok),
        "{server:?} / {client:?} on UDP port {udp_port}:\n{}",
        report.join("\n")
    );
}

/// The stock tools over the library with `SOFTRDMA_UDP_PORT` other than 4791 on both sides: the
/// QPs' frames (requests, ACKs, READ responses), the UD address handles' and the connection
/// manager's MADs go to that port, where the peer receives (they went to 4791, where no one did,
/// and RC ended in RETRY_EXC_ERR).
#[test]
fn stock_tools_over_the_library_on_another_udp_port() {
    let tools = ["ibv_rc_pingpong", "ibv_ud_pingpong", "rping"];
    if let Some(t) = tools.iter().find(|t| Command::new(t).arg("-h").output().is_err()) {
        assert!(std::env::var_os("CI").is_none(), "{t} is missing (scripts/setup.sh installs it)");
        eprintln!("stock_tools_over_the_library_on_another_udp_port: skipped: {t} is not installed");
        return;
    }
    let rc = ["ibv_rc_pingpong", "-g", "1", "-p", "18653", "-n", "200", "-s", "8192", "-c"];
    stock_pair(5003, &rc, &[&rc[..], &["127.0.49.3"]].concat());
    let ud = ["ibv_ud_pingpong", "-g", "1", "-p", "18654", "-n", "200", "-s", "1024", "-c"];
    stock_pair(5003, &ud, &[&ud[..], &["127.0.49.3"]].concat());
    stock_pair(
        5003,
        &["rping", "-s", "-a", "127.0.49.3", "-p", "18655", "-C", "20"],
        &["rping", "-c", "-a", "127.0.49.3", "-p", "18655", "-C", "20", "-v"],
    );
}
