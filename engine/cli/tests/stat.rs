//! `softrdma stat` (issue 33): the counters of a running `perf --server` (one side per process over
//! kernel UDP on loopback) and of an in-process run grow while they run, per device and per QP;
//! a process that has ended is no longer listed.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn softrdma(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrdma"));
    c.args(args).env("SOFTRDMA_STAT_DIR", dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// `softrdma stat --json PID`, once the process has published.
fn stat(dir: &std::path::Path, pid: u32) -> Value {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let o = softrdma(dir, &["stat", "--json", &pid.to_string()]).output().unwrap();
        if o.status.success() {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            return v[0].clone();
        }
        assert!(
            Instant::now() < end,
            "process {pid} never published: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Frames received by the process's first device.
fn frames_rx(v: &Value) -> u64 {
    v["devices"][0]["frames_rx"].as_u64().unwrap()
}

fn grows(dir: &std::path::Path, child: &Child, what: &str) {
    let first = stat(dir, child.id());
    assert!(first["what"].as_str().unwrap().contains(what), "{first}");
    std::thread::sleep(Duration::from_millis(1200));
    let second = stat(dir, child.id());
    assert!(frames_rx(&second) > frames_rx(&first), "the counters grow: {first}\n{second}");
    let qp = &second["devices"][0]["qps"][0];
    assert_eq!(qp["state"], "RTS", "{qp}");
}

#[test]
fn stat_shows_growing_counters_of_running_processes() {
    let dir = common::scratch_dir("stat");
    // One side per process over kernel UDP: the server is the process looked at.
    let server = softrdma(
        &dir,
        &["perf", "write", "--backend", "udp", "--tcp-port", "18790", "--server", "--local", "127.0.55.2"],
    )
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let client = softrdma(
        &dir,
        &[
            "perf",
            "write",
            "--backend",
            "udp",
            "--tcp-port",
            "18790",
            "--connect",
            "127.0.55.2",
            "--local",
            "127.0.55.1",
            "--size",
            "4096",
            "--iters",
            "3000000",
        ],
    )
    .spawn()
    .unwrap();
    grows(&dir, &server, "server");
    let text = softrdma(&dir, &["stat"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("pid {} (perf write server)", server.id())), "{text}");
    assert!(text.contains("dev udp 127.0.55.2:4791") && text.contains("qp 17 RTS: requests"), "{text}");
    let (s, c) = (server.id(), client.id());
    for mut p in [client, server] {
        let _ = p.kill();
        let _ = p.wait();
    }
    // Gone processes are not listed (their files, left by the kill, are removed).
    for pid in [s, c] {
        assert!(!softrdma(&dir, &["stat", &pid.to_string()]).output().unwrap().status.success());
    }
    // In-process runs publish both devices.
    let run = softrdma(&dir, &["perf", "write", "--size", "4096", "--iters", "3000000", "--no-baseline"])
        .spawn()
        .unwrap();
    grows(&dir, &run, "in-process");
    let v = stat(&dir, run.id());
    assert_eq!(v["devices"].as_array().unwrap().len(), 2, "{v}");
    let mut run = run;
    let _ = run.kill();
    let _ = run.wait();
    std::fs::remove_dir_all(dir).unwrap();
}

/// A program under `softrdma run` publishes too (issue 33 with issue 28): a stock
/// `ibv_rc_pingpong` server under `softrdma run` is listed with its device and QP, and its
/// counters grow while a client (the same tool over the library, on another loopback address)
/// plays ping-pong with it.
#[test]
fn stat_shows_programs_under_softrdma_run() {
    if Command::new("ibv_rc_pingpong").arg("-h").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "ibv_rc_pingpong is missing (scripts/setup.sh installs it)"
        );
        eprintln!("stat_shows_programs_under_softrdma_run: skipped: ibv_rc_pingpong is not installed");
        return;
    }
    let dir = common::scratch_dir("stat-run");
    let pingpong = ["ibv_rc_pingpong", "-g", "1", "-p", "18791", "-n", "100000000"];
    let mut args = vec!["run", "--dev", "lo", "--"];
    args.extend(pingpong);
    let server = softrdma(&dir, &args).spawn().unwrap();
    let first = stat(&dir, server.id());
    assert_eq!(first["what"], "ibv_rc_pingpong (softrdma run)", "{first}");
    assert_eq!(first["devices"][0]["name"], "softrdma_lo", "{first}");
    // The client preloads the library itself: `softrdma run` takes only the interface's own
    // address, and two processes need two (one UDP port 4791 each).
    let lib = std::path::Path::new(env!("CARGO_BIN_EXE_softrdma"))
        .with_file_name("deps")
        .join("libsoftrdma_ibverbs.so");
    let client = Command::new(pingpong[0])
        .args(&pingpong[1..])
        .arg("127.0.0.1")
        .env("LD_PRELOAD", &lib)
        .env("SOFTRDMA_DEV", "lo")
        .env("SOFTRDMA_LOCAL", "127.0.0.2")
        .env("SOFTRDMA_STAT_DIR", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The server's QP reaches RTS once the client connects; then its frames grow.
    let end = Instant::now() + Duration::from_secs(20);
    while stat(&dir, server.id())["devices"][0]["qps"][0]["state"] != "RTS" {
        assert!(Instant::now() < end, "the server's QP never reached RTS: {}", stat(&dir, server.id()));
        std::thread::sleep(Duration::from_millis(100));
    }
    grows(&dir, &server, "softrdma run");
    for mut p in [client, server] {
        let _ = p.kill();
        let _ = p.wait();
    }
    std::fs::remove_dir_all(dir).unwrap();
}
