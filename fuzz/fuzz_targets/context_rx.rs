//! The `context_rx` target: `softrdma_fuzz::context_rx` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::context_rx::run(data));
