//! softrdma engine: the RoCEv2 transports (RC, UC, UD) as sans-IO state machines behind a
//! verbs-shaped API, UET endpoints and a libfabric-shaped provider over them, the datapaths they
//! run on (the simulated network, kernel UDP, AF_XDP) and the progress engine that drives them.
//! The `softrdma` command-line tool and its perf, decode and capture code live in `engine/cli`.

pub mod datapath;
pub mod progress;
pub mod provider;
pub mod roce;
pub mod simpair;
mod sys;
pub mod uet;
pub mod verbs;

pub use sys::restore_default_sigpipe;
