//! `--capture` over kernel UDP on loopback (issue 27): the file is written while the run goes on,
//! and is complete when a run ends in an error (here: the server is killed mid-run). No root
//! needed; the sides are 127.0.50.1 and 127.0.50.2, a loopback net of their own.

mod common;

use common::{scratch_dir, softrdma};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_capture_is_written_during_the_run_and_complete_after_an_error_exit() {
    let dir = scratch_dir("capture-file");
    let cap = dir.join("client.pcap");
    let bin = env!("CARGO_BIN_EXE_softrdma");
    let net = ["--backend", "udp", "--tcp-port", "18660"];
    let mut server = Command::new(bin)
        .args(["perf", "write"])
        .args(net)
        .args(["--server", "--local", "127.0.50.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let client = Command::new(bin)
        .args(["perf", "write", "--iters", "100000000"])
        .args(net)
        .args(["--connect", "127.0.50.2", "--local", "127.0.50.1", "--capture", cap.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The file grows while the client runs.
    let start = Instant::now();
    while std::fs::metadata(&cap).map_or(0, |m| m.len()) < 4 << 20 {
        assert!(start.elapsed() < Duration::from_secs(60), "the capture file did not grow");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.kill().unwrap();
    let _ = server.wait();
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // Whole records up to the end of the file, every one a good RoCE frame.
    let b = std::fs::read(&cap).unwrap();
    let mut at = 24;
    let mut frames = 0u64;
    while at + 16 <= b.len() {
        at += 16 + u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        frames += 1;
    }
    assert_eq!(at, b.len(), "the file ends with a whole record");
    let dec = softrdma(&["decode", "--verify", cap.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&dec.stdout);
    assert!(dec.status.success(), "{text}");
    assert!(text.contains(&format!("roce frames: {frames} ok, 0 bad")), "{frames} frames: {text}");
    std::fs::remove_dir_all(dir).unwrap();
}
