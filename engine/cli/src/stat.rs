//! `softrdma stat [PID]`: the live counters of running softrdma processes, per device and per QP,
//! as `rdma statistic` shows a NIC's. A process that runs devices publishes them every half second
//! ([`Publisher`]) as one JSON file named by its PID in the stat directory (`SOFTRDMA_STAT_DIR`,
//! default `/tmp/softrdma-stat`), replaced atomically (written aside, then renamed) and removed when
//! the process ends; `stat` reads the files of the processes still alive.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use engine::verbs::{Context, QpState};
use serde_json::{Value, json};

/// How often a process publishes.
pub const EVERY: Duration = Duration::from_millis(500);
/// Calls between two looks at the clock.
const CHECK_EVERY: u32 = 256;

/// The stat directory.
pub fn dir() -> PathBuf {
    std::env::var_os("SOFTRDMA_STAT_DIR").map_or_else(|| PathBuf::from("/tmp/softrdma-stat"), PathBuf::from)
}

/// One device's counters: its name, GID, the context's totals, the datapath's own counters and
/// each QP's.
pub fn device(name: &str, ctx: &Context) -> Value {
    let st = ctx.stats();
    let qps: Vec<Value> = ctx
        .qp_stats()
        .iter()
        .map(|q| {
            let (r, d) = (&q.requests, &q.drops);
            json!({
                "qpn": q.qpn,
                "state": state_name(q.state),
                "requests": r.packets, "retries": r.retries, "timeouts": r.timeouts, "tail_probes": r.tail_probes,
                "window_cuts": r.window_cuts,
                "naks_in_seq": r.seq_naks, "naks_in_rnr": r.rnr_naks, "naks_in_error": r.error_naks,
                "naks_out_seq": d.seq_naks_sent, "naks_out_rnr": d.rnr_naks_sent, "duplicates": d.duplicates,
                "dropped_qkey": d.qkey, "dropped_no_wqe": d.no_wqe, "dropped_uc": d.uc_aborted,
                "dropped_stranger": d.foreign_source,
            })
        })
        .collect();
    let datapath: serde_json::Map<String, Value> =
        ctx.datapath_counters().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({
        "name": name,
        "gid": ctx.gid().to_string(),
        "frames_tx": st.tx_frames, "bytes_tx": st.tx_bytes, "frames_rx": st.rx_frames, "bytes_rx": st.rx_bytes,
        "rx_bad": st.rx_bad, "rx_unknown": st.rx_unknown, "tx_stalls": st.tx_stalls, "tx_failed": st.tx_failed,
        "datapath": datapath,
        "qps": qps,
    })
}

fn state_name(s: QpState) -> &'static str {
    match s {
        QpState::Reset => "RESET",
        QpState::Init => "INIT",
        QpState::Rtr => "RTR",
        QpState::Rts => "RTS",
        QpState::Error => "ERR",
    }
}

/// Publishes this process's counters (see the module documentation).
#[derive(Debug)]
pub struct Publisher {
    path: Option<PathBuf>,
    what: String,
    next: Instant,
    calls: u32,
}

impl Publisher {
    /// A publisher for this process, described as `what` (e.g. "perf write server"). If the stat
    /// directory cannot be made, nothing is published (the run goes on).
    pub fn new(what: &str) -> Publisher {
        let d = dir();
        let path = std::fs::create_dir_all(&d).ok().map(|()| d.join(format!("{}.json", std::process::id())));
        Publisher { path, what: what.into(), next: Instant::now(), calls: CHECK_EVERY }
    }

    /// Publishes `devices` (from [`device`]) if half a second has passed since the last time;
    /// cheap otherwise (the clock is read every few hundred calls).
    pub fn maybe(&mut self, devices: impl FnOnce() -> Vec<Value>) {
        self.calls += 1;
        if self.path.is_none() || self.calls < CHECK_EVERY {
            return;
        }
        self.calls = 0;
        let now = Instant::now();
        if now >= self.next {
            self.next = now + EVERY;
            self.publish(devices());
        }
    }

    /// Publishes `devices` now.
    pub fn publish(&mut self, devices: Vec<Value>) {
        let Some(path) = &self.path else { return };
        let doc = json!({ "pid": std::process::id(), "what": self.what, "devices": devices });
        let aside = path.with_extension("json.tmp");
        if std::fs::write(&aside, doc.to_string()).and_then(|()| std::fs::rename(&aside, path)).is_err() {
            let _ = std::fs::remove_file(&aside);
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

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
                "  dev {} (GID {}): frames tx {} ({} B) rx {} ({} B), rx bad {} unknown {}, tx stalls {} failed {}\n",
                d["name"].as_str().unwrap_or("?"),
                d["gid"].as_str().unwrap_or("?"),
                n(d, "frames_tx"),
                n(d, "bytes_tx"),
                n(d, "frames_rx"),
                n(d, "bytes_rx"),
                n(d, "rx_bad"),
                n(d, "rx_unknown"),
                n(d, "tx_stalls"),
                n(d, "tx_failed")
            );
            if let Some(dp) = d["datapath"].as_object().filter(|m| !m.is_empty()) {
                let parts: Vec<String> = dp.iter().map(|(k, v)| format!("{k} {v}")).collect();
                s += &format!("    datapath: {}\n", parts.join(", "));
            }
            for q in d["qps"].as_array().into_iter().flatten() {
                s += &format!(
                    "    qp {} {}: requests {} retries {} timeouts {} tail probes {} window cuts {}; NAKs in seq {} rnr {} error {}; \
                     NAKs out seq {} rnr {}; duplicates {}; dropped qkey {} no-wqe {} uc {} stranger {}\n",
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
