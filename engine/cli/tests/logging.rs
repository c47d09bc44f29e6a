//! Logs (issue 33): `SOFTRDMA_LOG=debug` shows every RC retransmission with its QPN, PSN and cause,
//! as many as the counters count; without it nothing is logged; a bad filter is refused.

mod common;

use common::count;

use std::process::Command;

fn perf(log: Option<&str>) -> (String, String, bool) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrdma"));
    c.args(["perf", "write", "--loss", "0.05", "--iters", "200", "--counters", "--no-baseline"]);
    match log {
        Some(l) => c.env("SOFTRDMA_LOG", l),
        None => c.env_remove("SOFTRDMA_LOG"),
    };
    let o = c.output().unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.success(),
    )
}

#[test]
fn every_retransmission_is_logged_with_its_qpn_psn_and_cause() {
    let (out, log, ok) = perf(Some("debug"));
    assert!(ok && out.contains(" 0 errors"), "{out}{log}");
    // The requester is sim0 (the first counters line).
    let sim0 = out.lines().find(|l| l.starts_with(" sim0:")).unwrap();
    let retries = count(sim0, " retries");
    assert!(retries > 0, "5 % loss retransmits: {sim0}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("retransmitting from the oldest")).collect();
    assert_eq!(lines.len() as u64, retries, "one log line per retransmission counted:\n{log}");
    for l in &lines {
        assert!(l.contains("qpn=17") && l.contains(" psn=") && l.contains(" cause="), "{l}");
    }
    assert!(log.contains("cause=PSN sequence NAK"), "{log}");
    let probes = count(sim0, "tail probes");
    assert_eq!(log.matches("tail probe:").count() as u64, probes);
}

#[test]
fn no_log_without_softrdma_log_and_a_bad_filter_is_refused() {
    let (out, log, ok) = perf(None);
    assert!(ok && out.contains(" 0 errors"));
    assert_eq!(log, "", "nothing on stderr without SOFTRDMA_LOG");
    let (_, err, ok) = perf(Some("engine=[[["));
    assert!(!ok && err.contains("SOFTRDMA_LOG"), "{err}");
}

/// Two processes over kernel UDP on loopback (127.0.57.0/24, used by no other test): each side
/// logs the steps of its exchange, and the client's progress line shows where asked for.
#[test]
fn the_exchange_steps_are_logged_and_a_long_run_shows_its_progress() {
    let bin = env!("CARGO_BIN_EXE_softrdma");
    let udp = ["--backend", "udp", "--tcp-port", "18770"];
    let server = Command::new(bin)
        .args(["perf", "write", "--server", "--local", "127.0.57.2"])
        .args(udp)
        .env("SOFTRDMA_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Long enough (tens of thousands of 64 KiB writes) to pass the progress line's two seconds.
    let client = Command::new(bin)
        .args(["perf", "write", "--connect", "127.0.57.2", "--local", "127.0.57.1", "--iters", "100000"])
        .args(udp)
        .env("SOFTRDMA_LOG", "info")
        .env("SOFTRDMA_PROGRESS", "always")
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let (c_err, s_err) = (String::from_utf8_lossy(&client.stderr), String::from_utf8_lossy(&server.stderr));
    assert!(client.status.success() && server.status.success(), "{c_err}{s_err}");
    for step in ["exchange: connected", "exchange: the client's test", "exchange: the client is done"] {
        assert!(s_err.contains(step), "server log lacks {step:?}:\n{s_err}");
    }
    for step in ["exchange: connected", "exchange: the server's QPs", "exchange: run over"] {
        assert!(c_err.contains(step), "client log lacks {step:?}:\n{c_err}");
    }
    assert!(c_err.contains("/100000 messages ("), "no progress line:\n{c_err}");
}
