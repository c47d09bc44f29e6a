//! The `pingpong_msg` target: `softrdma_fuzz::pingpong_msg` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::pingpong_msg::run(data));
