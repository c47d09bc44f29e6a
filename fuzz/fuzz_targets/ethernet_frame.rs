//! The `ethernet_frame` target: `softrdma_fuzz::ethernet_frame` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::ethernet_frame::run(data));
