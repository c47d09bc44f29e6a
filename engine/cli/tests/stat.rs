//! `softrdma stat` (issue 33): the counters of a running `perf --server` (one side per process over
//! kernel UDP on loopback) and of an in-process run grow while they run, per device and per QP;
//! a process that has ended is no longer listed. For UET (issue 58): perf runs, and a libfabric
//! program over the provider (`fi_pingpong` under `softrdma run`, in two network namespaces; root,
//! iproute2 and `libfabric-bin`, else it says so and skips, except under CI).

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

/// The first UET node of every published process of the stat directory `dir` whose description
/// contains `what`, with its address, by address.
fn by_ip(dir: &std::path::Path, what: &str) -> Vec<(String, Value)> {
    let o = softrdma(dir, &["stat", "--json"]).output().unwrap();
    if !o.status.success() {
        // None publishes (yet).
        assert!(String::from_utf8_lossy(&o.stderr).contains("no softrdma process"), "{o:?}");
        return Vec::new();
    }
    let all: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut v: Vec<(String, Value)> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["what"].as_str().unwrap_or("").contains(what))
        .filter_map(|p| Some((p["uet"][0]["ip"].as_str()?.to_string(), p["uet"][0].clone())))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The node at `ip` among the published ones (`by_ip`).
fn node_at(dir: &std::path::Path, ip: &str) -> Value {
    let got = by_ip(dir, "fi_pingpong (libfabric)");
    got.into_iter().find(|(a, _)| a == ip).map(|(_, n)| n).unwrap_or_else(|| panic!("no node at {ip}"))
}

/// Sends (SEND and TAGGED_SEND: fi_pingpong's messages go as TAGGED_SEND on the HPC profile) of
/// a node's SES, sent (`ops_tx`) or received (`ops_rx`).
fn sends(node: &Value, dir: &str) -> u64 {
    ["SEND", "TAGGED_SEND"].iter().map(|op| node["ses"][dir][op].as_u64().unwrap_or(0)).sum()
}

/// `softrdma stat` of a libfabric program (issue 58): `fi_pingpong` over the provider, sealed by
/// TSS, between two network namespaces, is listed while it runs with its domain's endpoint: PDCs,
/// packets, ACKs, SES requests by opcode, TSS and the PDC's window and rate, from the cores'
/// own counters. The two sides agree: read server, client, server, client, each read more than
/// a publishing period after the one before (so each publication falls between those read
/// before and after it), the packets and SENDs one side sent lie between what the other had
/// received before and after (nothing is lost on the veth), and each side has sent as many as it
/// received, give or take the one in flight. The server keeps the verbs library, whose device is
/// listed beside the provider's node in the same process.
#[test]
fn stat_shows_a_libfabric_program_over_the_provider() {
    use common::netns::Netns;
    use common::proc::{Running, listens};
    let name = "stat_shows_a_libfabric_program_over_the_provider";
    if !common::proc::can_run_tools(name, &["fi_pingpong"], "libfabric-bin") {
        return;
    }
    let dir = common::scratch_dir("stat-fabric");
    let key = dir.join("key");
    std::fs::write(&key, "5a".repeat(32)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let n = Netns::new('s', "10.96.0");
    let env_dir = format!("SOFTRDMA_STAT_DIR={}", dir.display());
    let env_key = format!("SOFTRDMA_TSS_KEY_FILE={}", key.display());
    let pingpong = ["fi_pingpong", "-p", "softrdma", "-e", "rdm", "-S", "1024", "-I", "100000000"];
    // The server keeps the verbs library (libfabric's verbs provider opens its device at start-up,
    // which publishes beside the provider); the client runs without it.
    let spawn = |ns: &str, dev: &str, verbs: bool, extra: &[&str]| {
        let mut args = vec!["run", "--backend", "udp", "--dev", dev];
        if !verbs {
            args.push("--no-verbs");
        }
        args.extend(["--", "env", &env_dir, &env_key]);
        args.extend(pingpong);
        args.extend(extra);
        Running::new(n.spawn(ns, &args))
    };
    let mut server = spawn(&n.a, &n.va, true, &[]);
    let until = Instant::now() + Duration::from_secs(20);
    while !listens(server.child.id(), 47592) && !server.exited() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut client = spawn(&n.b, &n.vb, false, &["10.96.0.1"]);
    let (s_ip, c_ip) = ("10.96.0.1", "10.96.0.2");
    // Both publish once their ping-pong runs.
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let got = by_ip(&dir, "fi_pingpong (libfabric)");
        if got.len() == 2 && got.iter().all(|(_, n)| sends(n, "ops_rx") > 0) {
            break;
        }
        if Instant::now() > end || server.exited() || client.exited() {
            let (c, s) = (client.finish(Instant::now()), server.finish(Instant::now()));
            panic!("no ping-pong published: {got:?}\n{}\n{}", c.describe("client"), s.describe("server"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let gap = || std::thread::sleep(Duration::from_millis(1200));
    let s1 = node_at(&dir, s_ip);
    gap();
    let c1 = node_at(&dir, c_ip);
    gap();
    let s2 = node_at(&dir, s_ip);
    gap();
    let c2 = node_at(&dir, c_ip);
    let server_doc = stat(&dir, server.child.id());
    let text = String::from_utf8_lossy(&softrdma(&dir, &["stat"]).output().unwrap().stdout).into_owned();
    let still = !server.exited() && !client.exited();
    let (c, s) = (client.finish(Instant::now()), server.finish(Instant::now()));
    assert!(still, "the ping-pong ended early:\n{}\n{}", c.describe("client"), s.describe("server"));
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(s2["name"], "domain 0 ep0 rdm hpc", "{s2}");
    // The server's verbs device (the verbs library's file) and its domain (the provider's) show
    // as one process.
    let what = server_doc["what"].as_str().unwrap();
    assert!(
        what.contains("fi_pingpong (libfabric)") && what.contains("fi_pingpong (softrdma run)"),
        "{what}"
    );
    let dev = server_doc["devices"][0]["name"].as_str().unwrap_or("");
    assert!(dev.starts_with("softrdma_"), "the verbs library's device beside the node: {server_doc}");
    assert_eq!(server_doc["uet"].as_array().map(Vec::len), Some(1), "{server_doc}");
    for (node, path) in [
        (&c2, &["frames_tx"][..]),
        (&s2, &["frames_rx"]),
        (&c2, &["pds", "pdcs_open"]),
        (&s2, &["pds", "pdcs_accepted"]),
        (&c2, &["pds", "packets_tx"]),
        (&s2, &["pds", "packets_rx"]),
        (&c2, &["pds", "acks_rx"]),
        (&s2, &["pds", "acks_tx"]),
        (&c2, &["ses", "completions"]),
        (&s2, &["ses", "rx_used"]),
        (&c2, &["tss", "sealed"]),
        (&s2, &["tss", "opened"]),
    ] {
        assert!(uet_n(node, path) > 0, "{path:?} of {}: {node}", node["ip"]);
    }
    for node in [&c2, &s2] {
        assert_eq!((uet_n(node, &["tss", "bad_icv"]), uet_n(node, &["tss", "replays"])), (0, 0), "{node}");
        assert!(node["tss"]["epoch"].is_u64(), "{node}");
        // A ping-pong: each side has sent as many SENDs as it received, give or take the one in flight.
        assert!(sends(node, "ops_tx").abs_diff(sends(node, "ops_rx")) <= 1, "{node}");
        let pdc = &node["pdcs"][0];
        assert!(pdc["rate_bps"].as_u64().unwrap_or(0) > 0, "a PDC's rate: {node}");
    }
    let pkts = |n: &Value, k: &str| uet_n(n, &["pds", k]);
    let bracket = |lo: u64, x: u64, hi: u64, what: &str| {
        assert!(lo <= x && x <= hi, "{what}: {lo} <= {x} <= {hi}\n{s1}\n{c1}\n{s2}\n{c2}");
    };
    bracket(pkts(&s1, "packets_rx"), pkts(&c1, "packets_tx"), pkts(&s2, "packets_rx"), "client's packets");
    bracket(pkts(&c1, "packets_rx"), pkts(&s2, "packets_tx"), pkts(&c2, "packets_rx"), "server's packets");
    bracket(sends(&s1, "ops_rx"), sends(&c1, "ops_tx"), sends(&s2, "ops_rx"), "client's SENDs");
    bracket(sends(&c1, "ops_rx"), sends(&s2, "ops_tx"), sends(&c2, "ops_rx"), "server's SENDs");
    assert!(sends(&s2, "ops_rx") > sends(&s1, "ops_rx"), "the counters grow: {s1}\n{s2}");
    assert!(text.contains("uet domain 0 ep0 rdm hpc 10.96.0.1: frames tx"), "{text}");
    assert!(text.contains("ses: requests sent (TAGGED_SEND "), "{text}");
}
