//! Parses arbitrary bytes as an Ethernet frame (RoCEv2, or UET over UDP) with the default
//! configuration, re-emits what parses and compares (see `reemit.rs`).
#![no_main]

mod reemit;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| reemit::check(data, &Default::default()));
