//! The provider's configuration parsers (issue 30): the service file (`UET_PROVIDER_SERVICE_PATH`,
//! `parse_service_file`) and the `UET_PROVIDER_*` variables (`ProviderConfig::from_vars`).
//!
//! Checks: no panic; what parses keeps the documented limits (names of at most 64 characters and
//! listed once, at least one index, `start_index + num_indices <= 4096`; a DSCP at most 63; sizes
//! from 1 to 4 GiB); an error names a line of the file.
//!
//! Input: the service file text, then after a 0xFF byte (not UTF-8) the variables' values
//! separated by 0xFE bytes, in the order of `VARS`.

use std::collections::HashSet;

use engine::provider::{ProviderConfig, parse_service_file};

const VARS: [&str; 5] = [
    "UET_PROVIDER_MAX_EAGER_SIZE",
    "UET_PROVIDER_MSG_RENDEZVOUS_SIZE",
    "UET_PROVIDER_TAG_RENDEZVOUS_SIZE",
    "UET_PROVIDER_DEF_DATA_TC",
    "UET_PROVIDER_INITIATOR_ID",
];

pub fn run(data: &[u8]) {
    let (file, vars) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(text) = std::str::from_utf8(file) {
        match parse_service_file(text) {
            Ok(services) => {
                let mut names = HashSet::new();
                for s in &services {
                    assert!(s.name.len() <= 64 && !s.name.is_empty(), "{s:?}");
                    assert!(names.insert(s.name.clone()), "{s:?} listed twice");
                    assert!(
                        s.num_indices >= 1 && u32::from(s.start_index) + u32::from(s.num_indices) <= 4096
                    );
                }
            }
            Err((line, why)) => {
                assert!(
                    line >= 1 && line <= text.lines().count(),
                    "line {line} of a {}-line file",
                    text.lines().count()
                );
                assert!(!why.is_empty());
            }
        }
    }
    let values: Vec<String> =
        vars.split(|&b| b == 0xFE).map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    let get = |k: &str| VARS.iter().position(|&v| v == k).and_then(|i| values.get(i).cloned());
    if let Ok(c) = ProviderConfig::from_vars(get) {
        for s in [c.max_eager, c.msg_rendezvous_size, c.tag_rendezvous_size] {
            assert!((1..=1 << 32).contains(&s), "size {s}");
        }
        assert!(c.def_data_tc <= 63);
    }
}
