//! `softrdma perf` over UET: SEND / TAGGED_SEND / WRITE / READ in a delivery mode (RUD, ROD, RUDI,
//! UUD), every message checked, in the table format of the RoCE runs. Both sides in this process on
//! the simulated network ([`UetBench`]), or one side per process over kernel UDP or AF_XDP
//! ([`serve`], [`run_client`]), meeting on TCP like the RoCE runs of [`super::remote`].
//!
//! The initiator ([`Initiator`]) posts operations and checks READ data; the target ([`Target`])
//! holds the receive buffers and the RMA region (slot `s` starts as message `s`) and checks every
//! received message. A WRITE is checked in this process at each completion (the slot holds exactly
//! that message); between processes the server checks at the end that each slot holds the last
//! message written to it.

mod bench;
mod config;
mod message;
mod remote;
mod report;
mod sides;
mod tss;

pub use bench::UetBench;
pub use config::{UetCc, UetOp, UetPerfConfig};
pub use remote::{RemoteOutcome, run_client, serve};
pub use report::counters_line;
pub use sides::{Initiator, Target};
pub use tss::{AeadBaseline, Floor, NONCE_LEN, tss_domain, tss_floor};
