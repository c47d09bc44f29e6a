//! The `perftest_exchange` target: `softrdma_fuzz::perftest_exchange` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::perftest_exchange::run(data));
