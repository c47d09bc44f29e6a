//! The `cm_qp1` target: `softrdma_fuzz::cm_qp1` (its checks and input format are documented there).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| softrdma_fuzz::cm_qp1::run(data));
