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
