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
