//! The `tss_domain` target: `softrdma_fuzz::tss_domain` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::tss_domain::run(data));
