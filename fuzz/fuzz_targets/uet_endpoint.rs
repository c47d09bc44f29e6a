//! The `uet_endpoint` target: `softrdma_fuzz::uet_endpoint` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::uet_endpoint::run(data));
