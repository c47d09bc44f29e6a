//! Parses arbitrary bytes as an Ethernet frame (RoCEv2, or UET over UDP) with the default
//! configuration, re-emits what parses and compares (see `reemit.rs`).

use crate::reemit;

pub fn run(data: &[u8]) {
    reemit::check(data, &Default::default())
}
