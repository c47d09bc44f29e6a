//! The `cm_mad` target: `softrdma_fuzz::cm_mad` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::cm_mad::run(data));
