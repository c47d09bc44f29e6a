//! The `provider_config` target: `softrdma_fuzz::provider_config` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::provider_config::run(data));
