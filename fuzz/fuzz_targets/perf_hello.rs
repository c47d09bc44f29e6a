//! The `perf_hello` target: `softrdma_fuzz::perf_hello` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::perf_hello::run(data));
