//! softrdma engine: capture I/O and frame decoding today; the RoCE transports, verbs API, provider
//! layer, progress engine and datapaths arrive with their issues.

pub mod capture;
pub mod corpus;
pub mod datapath;
pub mod decode;
pub mod devinfo;
pub mod oob;
pub mod perf;
pub mod perftest;
pub mod pingpong;
pub mod progress;
pub mod provider;
pub mod roce;
pub mod simpair;
mod sys;
pub mod uet;
pub mod verbs;

pub use sys::restore_default_sigpipe;
