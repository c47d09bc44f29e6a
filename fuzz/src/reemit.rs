//! The check both fuzz targets make: whatever parses must re-emit to the same bytes, except the
//! integrity fields the emitter always recomputes (the RoCE ICRC or UET CRC trailer, and the UDP
//! checksum that covers them), and the output must parse back with valid integrity fields.

use wire::uet::{UetConfig, UetRepr};
use wire::{FrameRepr, L4Repr, UdpChecksum};

pub fn check(data: &[u8], config: &UetConfig) {
    let _ = wire::frame::identify(data, config);
    let Ok(repr) = FrameRepr::parse_with(data, config) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(&mut out), Ok(data.len()), "a parsed frame must emit at its own length");
    assert_eq!(FrameRepr::parse_verified(&out, config), Ok(repr), "an emitted frame must parse back");

    let ip_at = repr.ethernet.buffer_len();
    let l4_at = ip_at + repr.ip.buffer_len();
    let ip_end = l4_at + repr.l4.buffer_len();
    let mut expected = data.to_vec();
    let trailer_recomputed = match &repr.l4 {
        L4Repr::Roce { .. } => true,
        L4Repr::UetUdp { packet, .. } | L4Repr::UetIp { packet, .. } => {
            matches!(packet, UetRepr::Clear { crc: true, .. })
        }
    };
    if trailer_recomputed {
        expected[ip_end - 4..ip_end].copy_from_slice(&out[ip_end - 4..ip_end]);
    }
    if repr.udp().is_some_and(|u| u.checksum == UdpChecksum::Computed) {
        expected[l4_at + 6..l4_at + 8].copy_from_slice(&out[l4_at + 6..l4_at + 8]);
    }
    assert_eq!(out, expected, "re-emit must reproduce every byte the parser accepted");
    if FrameRepr::parse_verified(data, config).is_ok() {
        assert_eq!(out, data);
    }
}
