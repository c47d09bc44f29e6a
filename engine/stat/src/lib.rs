//! Publishing a process's live counters for `softrdma stat` (the tool's reader is in
//! `engine/cli/src/stat.rs`), a crate of its own so that the engine library needs no JSON: every
//! half second, one JSON file per [`Publisher`] named by the PID and a tag (`PID.TAG.json`) in
//! the stat directory (`SOFTRDMA_STAT_DIR`, default `/tmp/softrdma-stat`), replaced atomically
//! (written aside, then renamed) and removed when the publisher drops; the reader shows a
//! process's files as one process. Any process that runs devices publishes through it: `softrdma
//! perf`, programs under `softrdma run` (the verbs library), and programs over the libfabric
//! provider ([`provider`]). A document holds the process's RoCE devices ([`device`]) and its UET
//! nodes ([`uet::node`]).

pub mod provider;
pub mod uet;

use engine::verbs::{Context, QpState};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    let (st, hold) = (ctx.stats(), ctx.hold_stats());
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
                "dropped_stranger": d.foreign_source, "placed_ahead": d.placed_ahead, "not_held": d.not_held,
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
        "held_packets": hold.held, "held_capacity": hold.capacity,
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

/// Publishers made so far by this copy of the crate (a process may hold several: the verbs
/// library and the libfabric provider are libraries of their own, each with its copy).
static MADE: AtomicU64 = AtomicU64::new(0);

/// Publishes this process's counters (see the module documentation). Several may live in one
/// process (a program's verbs devices and its libfabric domains, each domain with its own): each
/// writes a file of its own, `PID.TAG.json`, and `softrdma stat` shows them as one process.
#[derive(Debug)]
pub struct Publisher {
    what: String,
    path: Option<PathBuf>,
    next: Instant,
    calls: u32,
    check_every: u32,
}

impl Publisher {
    /// A publisher for this process, described as `what` (e.g. "perf write server"), for a hot
    /// loop: [`maybe`](Self::maybe) reads the clock every few hundred calls. If the stat
    /// directory cannot be made, nothing is published (the run goes on).
    pub fn new(what: &str) -> Publisher {
        Publisher::checking_every(what, CHECK_EVERY)
    }

    /// A publisher whose [`due`](Self::due) reads the clock at every call: for callers whose
    /// calls may come far apart (a program's progress calls, which may sleep).
    pub fn for_rare_calls(what: &str) -> Publisher {
        Publisher::checking_every(what, 1)
    }

    fn checking_every(what: &str, check_every: u32) -> Publisher {
        let d = dir();
        // Unique in the process: this copy of the crate (where its counter lives) and the count.
        let copy = std::ptr::from_ref(&MADE) as usize;
        let tag = format!("{copy:x}-{}", MADE.fetch_add(1, Ordering::Relaxed));
        let path =
            std::fs::create_dir_all(&d).ok().map(|()| d.join(format!("{}.{tag}.json", std::process::id())));
        Publisher { what: what.into(), path, next: Instant::now(), calls: check_every, check_every }
    }

    /// Publishes `devices` (from [`device`]) if half a second has passed since the last time;
    /// cheap otherwise (the clock is read every few hundred calls).
    pub fn maybe(&mut self, devices: impl FnOnce() -> Vec<Value>) {
        if self.due() {
            self.publish(devices());
        }
    }

    /// Publishes UET `nodes` (from [`uet::node`]) as [`maybe`](Self::maybe) does devices.
    pub fn maybe_uet(&mut self, nodes: impl FnOnce() -> Vec<Value>) {
        if self.due() {
            self.publish_all(Vec::new(), nodes());
        }
    }

    /// Whether to publish now: half a second has passed since the last time this said so (the
    /// clock is read every few hundred calls, or every call: [`for_rare_calls`](Self::for_rare_calls)).
    pub fn due(&mut self) -> bool {
        self.calls += 1;
        if self.path.is_none() || self.calls < self.check_every {
            return false;
        }
        self.calls = 0;
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + EVERY;
        true
    }

    /// Publishes `devices` now.
    pub fn publish(&mut self, devices: Vec<Value>) {
        self.publish_all(devices, Vec::new());
    }

    /// Publishes RoCE `devices` and UET `nodes` now.
    pub fn publish_all(&mut self, devices: Vec<Value>, nodes: Vec<Value>) {
        let Some(path) = &self.path else { return };
        let doc = json!({ "pid": std::process::id(), "what": self.what, "devices": devices, "uet": nodes });
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
