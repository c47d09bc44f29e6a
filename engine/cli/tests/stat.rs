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

/// A UET node's counter, by its path in the document (e.g. `["pds", "acks_rx"]`).
fn uet_n(node: &Value, path: &[&str]) -> u64 {
    path.iter().fold(node, |v, k| &v[*k]).as_u64().unwrap_or_else(|| panic!("{path:?} in {node}"))
}

/// `softrdma stat` for UET (issue 58): an in-process `perf --transport rod` run over a lossy,
/// sealed link shows both nodes with their PDC, packets, ACKs, NACKs by code, retransmissions, SES
/// requests by opcode and completions and TSS counters, growing while it runs, in JSON and in text.
#[test]
fn stat_shows_the_uet_nodes_of_a_perf_run() {
    let dir = common::scratch_dir("stat-uet");
    let args = [
        "perf",
        "send",
        "--transport",
        "rod",
        "--tss",
        "--loss",
        "0.01",
        "--size",
        "16384",
        "--iters",
        "100000000",
        "--no-baseline",
    ];
    let mut run = softrdma(&dir, &args).spawn().unwrap();
    let first = stat(&dir, run.id());
    assert_eq!(first["what"], "perf uet rod send (in-process)", "{first}");
    std::thread::sleep(Duration::from_millis(1500));
    let v = stat(&dir, run.id());
    let text =
        String::from_utf8_lossy(&softrdma(&dir, &["stat", &run.id().to_string()]).output().unwrap().stdout)
            .into_owned();
    let _ = run.kill();
    let _ = run.wait();
    std::fs::remove_dir_all(dir).unwrap();
    let nodes = v["uet"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v}");
    let (a, b) = (&nodes[0], &nodes[1]);
    assert_eq!((&a["name"], &b["name"]), (&Value::from("initiator"), &Value::from("target")), "{v}");
    assert!(
        uet_n(a, &["pds", "packets_tx"]) > uet_n(&first["uet"][0], &["pds", "packets_tx"]),
        "the counters grow: {first}\n{v}"
    );
    for (node, path) in [
        (a, &["frames_tx"][..]),
        (b, &["frames_rx"]),
        (a, &["pds", "packets_tx"]),
        (b, &["pds", "packets_rx"]),
        (a, &["pds", "acks_rx"]),
        (b, &["pds", "acks_tx"]),
        (b, &["pds", "nacks_tx"]),
        (b, &["pds", "nack_codes_tx", "ROD_OOO"]),
        (a, &["pds", "nack_codes_rx", "ROD_OOO"]),
        (a, &["pds", "retransmits"]),
        (a, &["pds", "pdcs_open"]),
        (b, &["pds", "pdcs_accepted"]),
        (a, &["ses", "completions"]),
        (a, &["ses", "ops_tx", "SEND"]),
        (b, &["ses", "ops_rx", "SEND"]),
        (b, &["ses", "rx_used"]),
        (a, &["tss", "sealed"]),
        (b, &["tss", "opened"]),
    ] {
        assert!(uet_n(node, path) > 0, "{path:?} of {}: {node}", node["name"]);
    }
    // Every NACK is counted under its code; the loss shows no bad ICV or replay.
    let codes = b["pds"]["nack_codes_tx"].as_object().unwrap();
    assert_eq!(
        codes.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
        uet_n(b, &["pds", "nacks_tx"]),
        "{b}"
    );
    assert_eq!((uet_n(b, &["tss", "bad_icv"]), uet_n(b, &["tss", "replays"])), (0, 0), "{b}");
    let pdc = &a["pdcs"][0];
    assert_eq!(
        (&pdc["mode"], &pdc["role"], &pdc["peer"]),
        (&"ROD".into(), &"initiator".into(), &"10.0.0.2".into())
    );
    assert!(pdc["window"].as_u64().unwrap() > 0 && pdc["rate_bps"].as_u64().unwrap() > 0, "{pdc}");
    assert!(text.contains("uet initiator 10.0.0.1: frames tx") && text.contains("(ROD_OOO "), "{text}");
    assert!(text.contains("pdc 1 -> 10.0.0.2 (ROD initiator)") && text.contains("tss: epoch 0"), "{text}");
}

/// A UET perf server (one side per process over kernel UDP) publishes its node: the PDC its
/// client opened, the packets it takes and the ACKs it sends.
#[test]
fn stat_shows_a_uet_perf_server() {
    let dir = common::scratch_dir("stat-uet-server");
    let common_args = ["perf", "write", "--transport", "rud", "--backend", "udp", "--tcp-port", "18793"];
    let mut server = common_args.to_vec();
    server.extend(["--server", "--local", "127.0.55.4"]);
    let server = softrdma(&dir, &server).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut client = common_args.to_vec();
    client.extend([
        "--connect",
        "127.0.55.4",
        "--local",
        "127.0.55.3",
        "--size",
        "4096",
        "--iters",
        "3000000",
    ]);
    let client = softrdma(&dir, &client).spawn().unwrap();
    // The server publishes once its client's packets flow.
    let end = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let v = stat(&dir, server.id());
        if v["uet"][0]["pds"]["acks_tx"].as_u64().unwrap_or(0) > 0 {
            break v;
        }
        assert!(Instant::now() < end, "the server never sent an ACK: {v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    for mut p in [client, server] {
        let _ = p.kill();
        let _ = p.wait();
    }
    std::fs::remove_dir_all(dir).unwrap();
    assert_eq!(v["what"], "perf uet rud write server", "{v}");
    let node = &v["uet"][0];
    assert_eq!((&node["name"], &node["ip"]), (&"server".into(), &"127.0.55.4".into()), "{v}");
    for path in [&["pds", "packets_rx"][..], &["pds", "pdcs_accepted"], &["ses", "rx_used"], &["frames_tx"]] {
        assert!(uet_n(node, path) > 0, "{path:?}: {node}");
    }
    assert_eq!(node["pdcs"][0]["peer"], "127.0.55.3", "{node}");
    assert!(node["tss"].is_null(), "no secure domain without --tss: {node}");
}
