//! The `uet_frame` target: `softrdma_fuzz::uet_frame` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::uet_frame::run(data));
