//! The `capture_reader` target: `softrdma_fuzz::capture_reader` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::capture_reader::run(data));
