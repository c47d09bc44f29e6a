//! The bodies of the cargo-fuzz targets, one module per target: `fuzz_targets/NAME.rs` hands
//! libFuzzer's input to `NAME::run`, and `tests/seeds.rs` replays the committed seeds
//! (`seeds/NAME/`) through the same function under `cargo test`.

pub mod capture_reader;
pub mod cm_mad;
pub mod cm_qp1;
pub mod context_rx;
pub mod ethernet_frame;
pub mod pds_pair;
pub mod perf_hello;
pub mod perftest_exchange;
pub mod pingpong_msg;
pub mod provider_config;
pub mod qp_packets;
pub mod tss_domain;
pub mod uet_endpoint;
pub mod uet_frame;

mod reemit;
mod roce_desc;
