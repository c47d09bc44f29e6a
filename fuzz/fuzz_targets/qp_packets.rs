//! The `qp_packets` target: `softrdma_fuzz::qp_packets` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::qp_packets::run(data));
