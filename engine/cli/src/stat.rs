//! `softrdma stat [PID]`: the live counters of running softrdma processes, per device and per QP,
//! as `rdma statistic` shows a NIC's. A process that runs devices publishes them every half second
//! ([`Publisher`], crate `softrdma-stat`) as JSON files named by its PID and a tag, one per
//! publisher (`PID.TAG.json`), in the stat directory (`SOFTRDMA_STAT_DIR`, default
//! `/tmp/softrdma-stat`), replaced atomically (written aside, then renamed) and removed when the
//! publisher ends; `stat` reads the files of the processes still alive, a process's merged.

use std::path::{Path, PathBuf};

use serde_json::Value;
pub use softrdma_stat::{EVERY, Publisher, device, dir, uet};

/// Whether process `pid` is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The published counters of process `pid`, or of every live softrdma process (by PID), a
/// process's files (`PID.TAG.json`, one per publisher) merged into one document; files of
/// processes that are gone are removed.
pub fn read(pid: Option<u32>) -> Result<Vec<Value>, String> {
    let d = dir();
    let entries = match std::fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", d.display())),
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (p, _tag) = name.strip_suffix(".json")?.split_once('.')?;
            Some((p.parse().ok()?, e.path()))
        })
        .filter(|(p, _)| pid.is_none_or(|want| want == *p))
        .collect();
    found.sort();
    let mut out: Vec<Value> = Vec::new();
    for (p, path) in found {
        if !alive(p) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        // A file replaced while it is read is read again next time; a broken one is skipped.
        let Some(v) =
            std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        match out.last_mut() {
            Some(last) if last["pid"] == p => merge(last, v),
            _ => out.push(v),
        }
    }
    Ok(out)
}

/// Adds another file of the same process to `into`: its devices and nodes after those already
/// there, its description joined with a comma unless the same.
fn merge(into: &mut Value, v: Value) {
    let what = v["what"].as_str().unwrap_or("");
    let have = into["what"].as_str().unwrap_or("").to_string();
    if !what.is_empty() && !have.split(", ").any(|w| w == what) {
        into["what"] =
            Value::from(if have.is_empty() { what.to_string() } else { format!("{have}, {what}") });
    }
    for key in ["devices", "uet"] {
        if let (Some(a), Some(b)) = (into[key].as_array_mut(), v[key].as_array()) {
            a.extend(b.iter().cloned());
        }
    }
}

/// The counters as `softrdma stat` prints them: per process, per device and QP, per UET node
/// and PDC.
pub fn render(procs: &[Value]) -> String {
    let mut s = String::new();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    for p in procs {
        s += &format!("pid {} ({})\n", n(p, "pid"), p["what"].as_str().unwrap_or("?"));
        for d in p["devices"].as_array().into_iter().flatten() {
            s += &format!(
                "  dev {} (GID {}): frames tx {} ({} B) rx {} ({} B), rx bad {} unknown {}, tx stalls {} failed {}, \
                 held after gaps {} of {}\n",
                d["name"].as_str().unwrap_or("?"),
                d["gid"].as_str().unwrap_or("?"),
                n(d, "frames_tx"),
                n(d, "bytes_tx"),
                n(d, "frames_rx"),
                n(d, "bytes_rx"),
                n(d, "rx_bad"),
                n(d, "rx_unknown"),
                n(d, "tx_stalls"),
                n(d, "tx_failed"),
                n(d, "held_packets"),
                n(d, "held_capacity")
            );
            if let Some(dp) = d["datapath"].as_object().filter(|m| !m.is_empty()) {
                let parts: Vec<String> = dp.iter().map(|(k, v)| format!("{k} {v}")).collect();
                s += &format!("    datapath: {}\n", parts.join(", "));
            }
            for q in d["qps"].as_array().into_iter().flatten() {
                s += &format!(
                    "    qp {} {}: requests {} retries {} timeouts {} tail probes {} window cuts {}; NAKs in seq {} rnr {} error {}; \
                     NAKs out seq {} rnr {}; duplicates {}; placed ahead {} not held {}; dropped qkey {} no-wqe {} uc {} stranger {}\n",
                    n(q, "qpn"),
                    q["state"].as_str().unwrap_or("?"),
                    n(q, "requests"),
                    n(q, "retries"),
                    n(q, "timeouts"),
                    n(q, "tail_probes"),
                    n(q, "window_cuts"),
                    n(q, "naks_in_seq"),
                    n(q, "naks_in_rnr"),
                    n(q, "naks_in_error"),
                    n(q, "naks_out_seq"),
                    n(q, "naks_out_rnr"),
                    n(q, "duplicates"),
                    n(q, "placed_ahead"),
                    n(q, "not_held"),
                    n(q, "dropped_qkey"),
                    n(q, "dropped_no_wqe"),
                    n(q, "dropped_uc"),
                    n(q, "dropped_stranger")
                );
            }
        }
        for u in p["uet"].as_array().into_iter().flatten() {
            s += &render_uet(u);
        }
    }
    s
}

/// `{"TRIMMED": 2, ...}` as "TRIMMED 2, ...", or "-".
fn codes(v: &Value) -> String {
    let parts: Vec<String> = v.as_object().into_iter().flatten().map(|(k, n)| format!("{k} {n}")).collect();
    if parts.is_empty() { "-".into() } else { parts.join(", ") }
}

/// One UET node: its frames, PDS, SES (requests by opcode), secure domain and PDCs.
fn render_uet(u: &Value) -> String {
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let (p, ses) = (&u["pds"], &u["ses"]);
    let mut s = format!(
        "  uet {} {}: frames tx {} rx {}, rx bad {} other {} tss drops {} trimmed {}, tx stalls {} failed {}\n",
        u["name"].as_str().unwrap_or("?"),
        u["ip"].as_str().unwrap_or("?"),
        n(u, "frames_tx"),
        n(u, "frames_rx"),
        n(u, "rx_bad"),
        n(u, "rx_other"),
        n(u, "rx_tss_drops"),
        n(u, "rx_trimmed"),
        n(u, "tx_stalls"),
        n(u, "tx_failed"),
    );
    s += &format!(
        "    pds: PDCs open {} closing {} (accepted {} reaped {}); packets tx {} rx {}; retransmits {} fast {} \
         timeouts {}; ACKs tx {} rx {}; NACKs tx {} ({}) rx {} ({}); rx duplicates {} stale {} unknown PDC {} \
         after close {} unexpected CPs {}\n",
        n(p, "pdcs_open"),
        n(p, "pdcs_closing"),
        n(p, "pdcs_accepted"),
        n(p, "pdcs_reaped"),
        n(p, "packets_tx"),
        n(p, "packets_rx"),
        n(p, "retransmits"),
        n(p, "fast_retransmits"),
        n(p, "timeouts"),
        n(p, "acks_tx"),
        n(p, "acks_rx"),
        n(p, "nacks_tx"),
        codes(&p["nack_codes_tx"]),
        n(p, "nacks_rx"),
        codes(&p["nack_codes_rx"]),
        n(p, "rx_duplicates"),
        n(p, "rx_stale"),
        n(p, "rx_unknown_pdc"),
        n(p, "rx_after_close"),
        n(p, "rx_unexpected_cps"),
    );
    s += &format!(
        "    ses: requests sent ({}) received ({}); completions {} (failed {}), errors received ({}) sent ({}); \
         outstanding {}; rx used {} rejected {} dropped {}\n",
        codes(&ses["ops_tx"]),
        codes(&ses["ops_rx"]),
        n(ses, "completions"),
        n(ses, "completions_failed"),
        codes(&ses["errors_rx"]),
        codes(&ses["errors_tx"]),
        n(ses, "outstanding"),
        n(ses, "rx_used"),
        n(ses, "rx_rejected"),
        n(ses, "rx_dropped"),
    );
    let t = &u["tss"];
    if t.is_object() {
        s += &format!(
            "    tss: epoch {}, sealed {} opened {}, bad ICVs {} replays {} old epochs {}, latched {}\n",
            n(t, "epoch"),
            n(t, "sealed"),
            n(t, "opened"),
            n(t, "bad_icv"),
            n(t, "replays"),
            n(t, "old_epochs"),
            if t["latched"] == true { "yes" } else { "no" },
        );
    }
    let opt = |v: &Value, unit: &str, div: f64| {
        v.as_f64().map_or_else(|| "-".to_string(), |x| format!("{}{unit}", (x / div * 10.0).round() / 10.0))
    };
    for c in u["pdcs"].as_array().into_iter().flatten() {
        s += &format!(
            "    pdc {} -> {} ({} {}{}): unacked {}, cwnd {}, window {}, srtt {}, rate {}\n",
            n(c, "pdcid"),
            c["peer"].as_str().unwrap_or("?"),
            c["mode"].as_str().unwrap_or("?"),
            c["role"].as_str().unwrap_or("?"),
            if c["closing"] == true { ", closing" } else { "" },
            n(c, "unacked"),
            opt(&c["cwnd"], " B", 1.0),
            opt(&c["window"], "", 1.0),
            opt(&c["srtt_ns"], " us", 1e3),
            opt(&c["rate_bps"], " Mb/s", 1e6),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn render_shows_a_uet_node_its_nack_and_error_codes_tss_and_pdcs() {
        let node = json!({
            "name": "initiator", "ip": "10.0.0.1", "frames_tx": 12, "frames_rx": 7, "rx_bad": 1,
            "pds": {
                "pdcs_open": 1, "pdcs_closing": 1, "packets_tx": 12, "packets_rx": 7, "retransmits": 3,
                "acks_tx": 2, "acks_rx": 5, "nacks_tx": 0, "nack_codes_tx": {}, "nacks_rx": 3,
                "nack_codes_rx": {"ROD_OOO": 2, "CLOSING": 1}, "rx_after_close": 4,
            },
            "ses": { "ops_tx": {"SEND": 7, "READ": 2}, "ops_rx": {}, "completions": 9, "completions_failed": 1,
                     "errors_rx": {"NO_MATCH": 2}, "errors_tx": {} },
            "tss": { "epoch": 3, "sealed": 12, "opened": 7, "bad_icv": 2, "replays": 1, "latched": true },
            "pdcs": [
                { "pdcid": 4, "peer": "10.0.0.2", "mode": "ROD", "role": "initiator", "closing": true, "unacked": 6,
                  "cwnd": 65536, "window": 16, "srtt_ns": 12500, "rate_bps": 41943040000u64 },
                { "pdcid": 5, "peer": "10.0.0.3", "mode": "RUD", "role": "target", "closing": false, "unacked": 0,
                  "cwnd": null, "window": null, "srtt_ns": null, "rate_bps": null },
            ],
        });
        let text = render(&[
            json!({ "pid": 42, "what": "perf uet rod send (in-process)", "devices": [], "uet": [node] }),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "pid 42 (perf uet rod send (in-process))");
        assert_eq!(
            lines[1],
            "  uet initiator 10.0.0.1: frames tx 12 rx 7, rx bad 1 other 0 tss drops 0 trimmed 0, tx stalls 0 failed 0"
        );
        assert!(lines[2].starts_with(
            "    pds: PDCs open 1 closing 1 (accepted 0 reaped 0); packets tx 12 rx 7; retransmits 3"
        ));
        assert!(
            lines[2].contains("ACKs tx 2 rx 5; NACKs tx 0 (-) rx 3 (CLOSING 1, ROD_OOO 2)"),
            "{}",
            lines[2]
        );
        assert!(lines[2].ends_with("after close 4 unexpected CPs 0"), "{}", lines[2]);
        assert!(
            lines[3].starts_with(
                "    ses: requests sent (READ 2, SEND 7) received (-); completions 9 (failed 1), errors received \
                 (NO_MATCH 2) sent (-)"
            ),
            "{}",
            lines[3]
        );
        assert_eq!(
            lines[4],
            "    tss: epoch 3, sealed 12 opened 7, bad ICVs 2 replays 1 old epochs 0, latched yes"
        );
        assert_eq!(
            lines[5],
            "    pdc 4 -> 10.0.0.2 (ROD initiator, closing): unacked 6, cwnd 65536 B, window 16, srtt 12.5 us, rate 41943 Mb/s"
        );
        assert_eq!(
            lines[6],
            "    pdc 5 -> 10.0.0.3 (RUD target): unacked 0, cwnd -, window -, srtt -, rate -"
        );
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn a_process_s_files_merge_into_one_document() {
        let mut doc =
            json!({ "pid": 7, "what": "fi_pingpong (softrdma run)", "devices": [{"name": "d"}], "uet": [] });
        merge(
            &mut doc,
            json!({ "pid": 7, "what": "fi_pingpong (libfabric)", "devices": [], "uet": [{"name": "n0"}] }),
        );
        merge(
            &mut doc,
            json!({ "pid": 7, "what": "fi_pingpong (libfabric)", "devices": [], "uet": [{"name": "n1"}] }),
        );
        assert_eq!(
            doc,
            json!({ "pid": 7, "what": "fi_pingpong (softrdma run), fi_pingpong (libfabric)",
                    "devices": [{"name": "d"}], "uet": [{"name": "n0"}, {"name": "n1"}] })
        );
    }

    #[test]
    fn render_leaves_out_the_tss_line_of_a_node_without_a_secure_domain() {
        let node =
            json!({ "name": "server", "ip": "127.0.0.1", "pds": {}, "ses": {}, "tss": null, "pdcs": [] });
        let text =
            render(&[json!({ "pid": 1, "what": "perf uet rud write server", "devices": [], "uet": [node] })]);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(!text.contains("tss:"), "{text}");
    }
}
