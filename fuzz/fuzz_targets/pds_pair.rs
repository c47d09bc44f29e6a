//! The `pds_pair` target: `softrdma_fuzz::pds_pair` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::pds_pair::run(data));
