#![doc = include_str!("../README.md")]
//!
//! # The library
//!
//! The `softrdma` tool's library: everything the command line runs on top of the `engine` crate -
//! `perf` (perftest-style runs over the simulated network, kernel UDP or AF_XDP, every byte
//! checked), the peers of perftest's and rdma-core's stock tools (`perftest`, `pingpong`, with
//! their out-of-band exchange in `oob`), `devinfo`, `run` (unmodified libibverbs programs over softrdma), and capture reading, decoding and generation
//! (`capture`, `decode`, `corpus`). The binary (`src/main.rs`) parses the command line and calls in.

pub mod capture;
pub mod cm;
pub mod corpus;
pub mod decode;
pub mod devinfo;
pub mod fi_provider;
pub mod flood;
pub mod manual;
pub mod oob;
pub mod perf;
pub mod perftest;
pub mod pingpong;
pub mod run;
pub mod stat;
pub mod view;
