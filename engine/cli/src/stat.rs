//! `softrdma stat [PID]`: the live counters of running softrdma processes, per device and per QP,
//! as `rdma statistic` shows a NIC's. A process that runs devices publishes them every half second
//! ([`Publisher`], crate `softrdma-stat`) as one JSON file named by its PID in the stat directory (`SOFTRDMA_STAT_DIR`,
//! default `/tmp/softrdma-stat`), replaced atomically (written aside, then renamed) and removed when
//! the process ends; `stat` reads the files of the processes still alive.

use std::path::{Path, PathBuf};

use serde_json::Value;
pub use softrdma_stat::{EVERY, Publisher, device, dir};

/// Whether process `pid` is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The published counters of process `pid`, or of every live softrdma process (by PID); files of
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
            let p: u32 = name.strip_suffix(".json")?.parse().ok()?;
            Some((p, e.path()))
        })
        .filter(|(p, _)| pid.is_none_or(|want| want == *p))
        .collect();
    found.sort();
    let mut out = Vec::new();
    for (p, path) in found {
        if !alive(p) {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        // A file replaced while it is read is read again next time; a broken one is skipped.
        if let Some(v) = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok()) {
            out.push(v);
        }
    }
    Ok(out)
}

/// The counters as `softrdma stat` prints them: per process, per device, per QP.
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
    }
    s
}
