#![doc = include_str!("../README.md")]
//!
//! # Modules
//!
//! softrdma engine, by layer (ARCHITECTURE.md; every arrow points down):
//! - transport core: [`roce`], the RoCEv2 RC/UC/UD queue pair as a sans-IO state machine, with its
//!   own vocabulary (work requests, completions, the memory table, [`roce::QpError`]); [`cm`],
//!   the IBTA connection manager of QP1, sans-IO too; the UET cores are the `pds`, `ses` and `tss`
//!   crates;
//! - runtime: [`verbs::Context`] (a device: memory, QPs, CQs and `progress`), [`uet::UetNode`] (UET
//!   on a datapath), [`progress`] (the progress thread), [`simpair`] (two devices on a cable);
//! - APIs: [`verbs`] (Rust verbs) and [`provider`] (libfabric-shaped, over UET);
//! - datapaths: [`datapath`] (the simulated network, kernel UDP, AF_XDP, and decorators).
//!
//! The `softrdma` command-line tool and its perf, decode and capture code live in `engine/cli`.

pub mod datapath;
pub mod progress;
pub mod provider;
pub mod simpair;
mod sys;
pub mod uet;
pub mod verbs;

pub use roce;
pub use roce::cm;
pub use sys::restore_default_sigpipe;
