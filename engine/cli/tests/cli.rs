//! The `softrdma` binary as a user runs it.

mod common;

use common::softrdma;

#[test]
fn decode_verify_good_capture() {
    let f = common::shared().join("captures/roce/linlinw5/rdma_write_bw.pcap");
    let o = softrdma(&["decode", "--verify", f.to_str().unwrap()]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("RC_WRITE_FIRST"), "{out}");
    assert!(out.contains("RETH(va="), "{out}");
    assert!(
        out.trim_end()
            .ends_with("roce frames: 20 ok, 0 bad; uet frames: 0 ok, 0 bad (40 other frames skipped)"),
        "{out}"
    );
}

#[test]
fn decode_verify_flags_a_corrupted_frame_and_fails() {
    let src = common::shared().join("captures/roce/cx4lx_cnp_scapy.pcap");
    let mut bytes = std::fs::read(src).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0x04; // a reserved byte of the CNP body
    let dir = common::scratch_dir("cli");
    let bad = dir.join("bad.pcap");
    std::fs::write(&bad, &bytes).unwrap();

    let o = softrdma(&["decode", "--verify", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("BAD: bad ICRC"), "{out}");
    assert!(out.contains("roce frames: 0 ok, 1 bad"), "{out}");

    // Without --verify the frame still decodes, and the exit status is 0.
    let o = softrdma(&["decode", bad.to_str().unwrap()]);
    assert!(o.status.success());

    let o = softrdma(&["decode", "--verify", "--json", bad.to_str().unwrap()]);
    let line = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["status"], "bad");
    assert_eq!(v["bth"]["opcode"], 0x81);
    assert!(String::from_utf8(o.stderr).unwrap().contains("roce frames: 0 ok, 1 bad"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_arguments_give_clear_errors() {
    let o = softrdma(&["decode"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr).unwrap().contains("FILES"));

    let o = softrdma(&["decode", "/nonexistent/x.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr).unwrap().contains("cannot read /nonexistent/x.pcap"));

    let o = softrdma(&["decode", env!("CARGO_MANIFEST_DIR")]);
    assert_eq!(o.status.code(), Some(2));

    let o = softrdma(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn perf_runs_every_operation_and_mode_and_checks_the_data() {
    let runs: [&[&str]; 5] = [
        &["perf", "write", "--all-sizes", "--iters", "16", "--no-baseline"],
        &["perf", "read", "--size", "5000", "--mtu", "1024", "--iters", "300", "--qps", "3"],
        &["perf", "send", "--mode", "lat", "--iters", "200", "--loss", "0.1", "--seed", "9"],
        &["perf", "atomic", "--atomic", "cmp-swap", "--iters", "300"],
        &["perf", "atomic", "--mode", "lat", "--iters", "100"],
    ];
    let outs: Vec<String> = runs
        .iter()
        .map(|args| {
            let o = softrdma(args);
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(o.status.success(), "{args:?}:\n{out}{}", String::from_utf8_lossy(&o.stderr));
            out
        })
        .collect();
    // All sizes: 23 rows from 2 bytes to 8 MiB.
    assert!(outs[0].contains("\n 2          16 ") && outs[0].contains("\n 8388608    16 "), "{}", outs[0]);
    assert!(outs[0].contains("verified: 368 messages, 0 errors"), "{}", outs[0]);
    // Three QPs of 300 messages, with the baseline line.
    assert!(outs[1].contains("verified: 900 messages, 0 errors") && outs[1].contains("engine / baseline:"));
    // Latency tables have the perftest columns; a lossy link still delivers everything.
    assert!(outs[2].contains("t_typical[usec]") && outs[2].contains("verified: 200 messages, 0 errors"));
    assert!(
        outs[3].contains("Atomic CMP_AND_SWAP BW") && outs[3].contains("verified: 300 messages, 0 errors")
    );
    assert!(outs[4].contains("verified: 100 messages, 0 errors"), "{}", outs[4]);
}

#[test]
fn perf_over_uc_ud_and_srq_verifies_what_arrives() {
    let runs: [(&[&str], bool); 6] = [
        (&["perf", "send", "--transport", "ud", "--size", "1024", "--loss", "0.05"], true),
        (&["perf", "send", "--transport", "uc", "--size", "5000", "--mtu", "1024", "--iters", "2000"], false),
        (&["perf", "write", "--transport", "uc", "--size", "3000", "--loss", "0.1", "--iters", "2000"], true),
        (
            &["perf", "send", "--transport", "ud", "--srq", "--qps", "3", "--dup", "0.1", "--iters", "1000"],
            false,
        ),
        (&["perf", "send", "--srq", "--qps", "2", "--iters", "1000", "--size", "4096"], false),
        (&["perf", "send", "--transport", "uc", "--mode", "lat", "--loss", "0.2", "--iters", "200"], true),
    ];
    for (args, lossy) in runs {
        let o = softrdma(args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{args:?}:\n{out}{}", String::from_utf8_lossy(&o.stderr));
        let line = out.lines().find(|l| l.starts_with("verified: ")).unwrap_or_default();
        let n: u64 = line.trim_start_matches("verified: ").split(' ').next().unwrap().parse().unwrap();
        assert!(line.ends_with(" 0 errors") && n > 0, "{args:?}: {line}");
        if lossy {
            assert!(out.contains(" lost: ") && !out.contains(" lost: 0 messages"), "{args:?}:\n{out}");
        }
    }
}

#[test]
fn perf_threads_shard_the_qps_and_verify_every_message() {
    let dir = common::scratch_dir("threads");
    let json = dir.join("run.json");
    let args = [
        "perf",
        "write",
        "--threads",
        "2",
        "--qps",
        "5",
        "--size",
        "4096",
        "--iters",
        "300",
        "--loss",
        "0.01",
    ];
    let o = softrdma(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("in-process, 2 threads"), "{out}");
    assert!(out.contains("baseline (2 threads at once"), "{out}");
    assert!(out.contains("verified: 1500 messages, 0 errors"), "{out}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["params"]["threads"], 2, "{doc}");
    // Each thread's two devices are reported, and each carried frames.
    let counters = doc["rows"][0]["counters"].as_object().unwrap();
    assert_eq!(counters.len(), 4, "{doc}");
    assert!(counters.values().all(|c| c["frames_tx"].as_u64() > Some(0)), "{doc}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn perf_rejects_bad_arguments() {
    let bad: [(&[&str], &str); 35] = [
        (&["perf", "read", "--transport", "uc"], "UC carries send and write only"),
        (&["perf", "write", "--transport", "ud"], "UD carries send only"),
        (&["perf", "write", "--srq"], "--srq applies to send over RC or UD"),
        (&["perf", "send", "--transport", "ud", "--size", "5000"], "must fit one packet"),
        (&["perf", "send", "--transport", "uc", "--size", "4"], "--size >= 8"),
        (&["perf", "send", "--mode", "lat", "--qps", "2"], "latency runs use one QP"),
        (&["perf", "write", "--mtu", "1000"], "256, 512, 1024, 2048 or 4096"),
        (&["perf", "write", "--loss", "1.5"], "probability"),
        (&["perf", "write", "--size", "0"], "--size"),
        (&["perf", "atomic", "--size", "16"], "atomics move 8 bytes"),
        (&["perf", "write", "--qps", "0"], "--qps"),
        (&["perf", "write", "--qps", "16385"], "--qps"),
        (&["perf", "write", "--threads", "2"], "at least N QPs"),
        (&["perf", "write", "--threads", "65", "--qps", "100"], "--threads"),
        (&["perf", "send", "--threads", "2", "--mode", "lat"], "--threads applies to bandwidth runs"),
        (&["perf", "send", "--threads", "2", "--qps", "2", "--transport", "rud"], "shards RoCE QPs"),
        (&["perf", "write", "--threads", "2", "--qps", "2", "--pcap", "x.pcap"], "each thread has its own"),
        (
            &[
                "perf",
                "write",
                "--threads",
                "2",
                "--qps",
                "2",
                "--backend",
                "afxdp",
                "--dev",
                "lo",
                "--connect",
                "10.0.0.2",
            ],
            "needs --xdp-driver",
        ),
        (&["perf", "write", "--threads", "2", "--qps", "2", "--backend", "udp", "--server"], "the client's"),
        (&["perf", "write", "--snaplen", "128"], "--pcap keeps whole frames"),
        (&["perf", "write", "--qps", "257", "--backend", "udp", "--connect", "127.0.0.1"], "at most 256 QPs"),
        (&["perf", "write", "--backend", "udp", "--connect", "127.0.0.1", "--snaplen", "10"], "--snaplen"),
        (&["perf", "fly"], "invalid value"),
        (&["perf", "write", "--cc", "nscc"], "UET congestion controls"),
        (&["perf", "write", "--transport", "rud", "--cc", "dcqcn"], "dcqcn runs on RC QPs"),
        (&["perf", "write", "--transport", "rudi", "--cc", "rccc"], "congestion control runs on PDCs"),
        (&["perf", "write", "--transport", "rud", "--trim", "64"], "at least 128 bytes"),
        (&["perf", "write", "--trim", "200"], "UET packet trimming"),
        (&["perf", "write", "--link-gbps", "0"], "link rate between"),
        (
            &["perf", "write", "--backend", "udp", "--link-gbps", "10", "--connect", "10.0.0.2"],
            "shape the simulated links",
        ),
        (
            &[
                "perf",
                "write",
                "--transport",
                "rud",
                "--backend",
                "udp",
                "--udp-port",
                "5000",
                "--connect",
                "127.0.0.1",
            ],
            "UET runs on UDP port 4793",
        ),
        (&["perf", "write", "--cm"], "--cm connects two processes"),
        (&["perf", "send", "--cm", "--transport", "ud", "--connect", "10.0.0.2"], "--cm connects RC and UC"),
        (&["perf", "write", "--cm", "--perftest"], "cannot be used with"),
        (
            &["perf", "write", "--cm", "--backend", "udp", "--udp-port", "5000", "--connect", "10.0.0.2"],
            "QP1 on UDP port 4791",
        ),
    ];
    for (args, why) in bad {
        let o = softrdma(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

#[test]
fn perf_counters_show_icrc_drops_and_retries() {
    let o = softrdma(&[
        "perf",
        "write",
        "--size",
        "8192",
        "--iters",
        "300",
        "--corrupt",
        "0.05",
        "--counters",
        "--no-baseline",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    let field = |line: &str, key: &str| -> u64 {
        line.split(key)
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).find(|x| !x.is_empty()))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let sim1 = out.lines().find(|l| l.starts_with(" sim1:")).expect("counters of sim1");
    let sim0 = out.lines().find(|l| l.starts_with(" sim0:")).expect("counters of sim0");
    assert!(field(sim1, "(bad ") > 0, "corrupted frames are dropped by the ICRC check: {sim1}");
    assert!(field(sim0, " retries ") > 0, "and recovered by retries: {sim0}");
    assert!(out.contains("verified: 300 messages, 0 errors"), "{out}");
}

#[test]
fn devinfo_lists_backends_devices_and_limits() {
    let o = softrdma(&["devinfo"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.contains("sim0: port 1 ACTIVE, active_mtu 4096, GID ::ffff:10.0.0.1"), "{out}");
    assert!(out.contains("lo (127.0.0.1)") && out.contains("max_msg_sz 8388608"), "{out}");
}

/// AF_XDP as `devinfo` reports it (issue 33): with the privileges, the interfaces it can bind
/// (every one with an IPv4 address but loopback, with its queues); without them, what is missing.
/// Root runs both sides (dropping to `nobody` with setpriv); another user sees the second.
#[test]
fn devinfo_reports_af_xdp_by_privilege() {
    let unprivileged = |o: std::process::Output| {
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "{out}");
        assert!(out.contains("afxdp: not for this process (AF_XDP needs root, or CAP_NET_ADMIN"), "{out}");
    };
    if !rustix::process::geteuid().is_root() {
        unprivileged(softrdma(&["devinfo"]));
        return;
    }
    let o = softrdma(&["devinfo"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let afxdp = out.split("\nafxdp: ").nth(1).unwrap_or_else(|| panic!("no afxdp section:\n{out}"));
    let section = afxdp.split("\n\n").next().unwrap_or_default();
    assert!(section.starts_with("one device per interface and queue"), "{out}");
    assert!(section.contains("rx queues") && !section.contains("\n  lo "), "{out}");
    let nobody = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_softrdma"), "devinfo"])
        .output()
        .expect("setpriv (util-linux)");
    unprivileged(nobody);
}

/// `--cc` on a 100 Gb/s simulated link: each congestion control finishes with every message
/// verified and no tail drop, and the report shows the links; without it the same run overflows
/// the 1 MB queue.
#[test]
fn perf_congestion_control_on_a_rate_limited_link() {
    let run = |extra: &[&str]| {
        let mut args = vec!["perf", "write", "--link-gbps", "100", "--iters", "600", "--no-baseline"];
        args.extend_from_slice(extra);
        let o = softrdma(&args);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{args:?}:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("verified: 600 messages, 0 errors"), "{out}");
        out
    };
    for extra in [
        &["--transport", "rud", "--cc", "nscc"][..],
        &["--transport", "rud", "--cc", "rccc"],
        &["--transport", "rod", "--cc", "rccc"],
        // Go-back-N under 10 % loss: every retransmission waits for credit too (without congestion
        // control this run collapses: three of four frames tail-dropped).
        &["--transport", "rod", "--cc", "rccc", "--loss", "0.1"],
        // Two messages in flight: the sender idles between them, and credit granted for
        // retransmissions that turned out unnecessary must not bank up into a burst.
        &["--transport", "rod", "--cc", "rccc", "--loss", "0.1", "--tx-depth", "2"],
        &["--transport", "rud", "--trim", "128"],
        &["--cc", "dcqcn"],
    ] {
        let out = run(extra);
        let to_target =
            out.lines().find(|l| l.contains("link toward the target") || l.contains("link toward sim1"));
        let line = to_target.unwrap_or_else(|| panic!("{extra:?}: no link report:\n{out}"));
        assert!(line.contains("tail drops 0 "), "{extra:?}: {line}");
    }
    let out = run(&["--transport", "rud"]);
    let line = out.lines().find(|l| l.contains("link toward the target")).unwrap();
    assert!(!line.contains("tail drops 0 "), "without congestion control the queue overflows: {line}");
}

/// `perf write --transport rud --tss` reports the AEAD baseline, the run's engine-time and
/// wall-clock shares of it, and the no-protocol floor, each with a number.
#[test]
fn perf_tss_reports_its_share_of_the_aead_baseline() {
    let o = softrdma(&["perf", "write", "--transport", "rud", "--tss", "--iters", "200"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("verified: 200 messages, 0 errors"), "{out}");
    let number_after = |line: &str, key: &str| -> f64 {
        let at = line.find(key).unwrap_or_else(|| panic!("no {key:?} in {line}")) + key.len();
        line[at..].split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(-1.0)
    };
    let line = |start: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?}:\n{out}"))
    };
    assert!(number_after(line("TSS baseline"), "machine speed):") > 0.0, "{out}");
    let run = line("this run:");
    let (engine, wall) = (number_after(run, "engine time ="), number_after(run, "MB/s ="));
    assert!(engine > 0.0 && wall > 0.0 && engine >= wall, "{run}");
    let floor = line("TSS floor");
    assert!(number_after(floor, "the same way,") > 0.0 && number_after(floor, "MB/s =") > 0.0, "{floor}");
}

/// A reader that goes away early (`softrdma perf ... | head -3`) ends the CLI by SIGPIPE, as it does
/// any Unix tool, not with a panic about a broken pipe.
#[test]
fn a_closed_stdout_pipe_ends_the_cli_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_softrdma"))
        .args(["perf", "write", "--all-sizes", "--iters", "20", "--no-baseline"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    // The read end is closed here, with the run still printing its table.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?} {stderr}", out.status);
}
