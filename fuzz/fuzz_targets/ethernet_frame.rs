//! Parses arbitrary bytes as an Ethernet frame; whatever parses must re-emit to the same bytes, except
//! the ICRC (always recomputed) and, when the frame carries one, the UDP checksum that covers it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{FrameRepr, UdpChecksum};

fuzz_target!(|data: &[u8]| {
    let _ = wire::frame::identify(data);
    let Ok(repr) = FrameRepr::parse(data) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(&mut out), Ok(data.len()), "a parsed frame must emit at its own length");
    assert_eq!(FrameRepr::parse_verified(&out), Ok(repr), "an emitted frame must parse back, ICRC valid");

    let ip_at = repr.ethernet.buffer_len();
    let udp_at = ip_at + repr.ip.buffer_len();
    let ip_end = udp_at + repr.l4.buffer_len();
    let mut expected = data.to_vec();
    expected[ip_end - 4..ip_end].copy_from_slice(&out[ip_end - 4..ip_end]);
    if repr.udp().is_some_and(|u| u.checksum == UdpChecksum::Computed) {
        expected[udp_at + 6..udp_at + 8].copy_from_slice(&out[udp_at + 6..udp_at + 8]);
    }
    assert_eq!(out, expected, "re-emit must reproduce every byte the parser accepted");
    if FrameRepr::parse_verified(data).is_ok() {
        assert_eq!(out, data);
    }
});
