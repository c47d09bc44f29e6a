//! The subcommands' options ([`args`]) and how each runs.

pub(crate) mod args;
pub(crate) mod flood;
mod output;
pub(crate) mod perf;
mod perftest;
pub(crate) mod pingpong;
mod remote;
pub(crate) mod run;
mod uet;
