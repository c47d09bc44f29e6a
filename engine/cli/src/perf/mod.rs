//! `softrdma perf`: perftest-style bandwidth and latency runs of two endpoints over the simulated
//! network in one process, checking every delivered byte.
//!
//! Each QP has a ring of message slots on both sides. Source slots are filled with a pattern once;
//! before message `n` is posted its slot gets `n` stamped in its first 8 bytes. When message `n`
//! completes (the receive for SEND, the requester's completion for WRITE, READ and atomics) the
//! delivered slot must hold the stamp `n` and the source pattern after it, byte for byte.

pub mod baseline;
mod bench;
mod cm;
mod config;
pub mod hello;
mod link;
mod pattern;
pub mod plot;
pub mod progress;
pub mod record;
pub mod remote;
mod report;
pub mod threads;
pub mod uet;

pub use bench::Bench;
pub use config::{
    AtomicOp, BwRow, LatRow, Mode, PerfConfig, PerfError, PerfOp, Timeline, all_sizes, ring_slots,
    sweep_iters, window_slots,
};
pub use nicsim::LinkConfig;
pub(crate) use pattern::{fill_pattern, stamp, unstamp};
pub use report::{
    BW_COLUMNS, BwFigures, LAT_COLUMNS, LINE, baseline_line, build_kind, bw_line, counters_line, header,
    lat_baseline_line, lat_line, link_report,
};
