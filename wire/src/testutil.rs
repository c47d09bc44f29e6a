//! Test helpers shared by the tests of several files.

/// Parses a hex string (the test vectors, e.g. from `captures/uet/xdp2_uet_*.pcap`).
pub(crate) fn hex(s: &str) -> std::vec::Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}
