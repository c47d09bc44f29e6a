//! The capture reader and `softrdma decode` (issue 30): pcap and pcapng images
//! (`capture::read_bytes`), then every frame through `decode::examine` with verification and
//! through the text and JSON renderings, as `softrdma decode --verify [--json]` runs them.
//!
//! Checks: no panic; no frame is longer than the image holding it; a frame examined as good
//! re-emits byte for byte.
//!
//! Input: a capture image; seeded from ../shared/captures (scripts/fuzz-smoke.sh).

use softrdma::{capture, decode};
use wire::uet::UetConfig;

pub fn run(data: &[u8]) {
    let Ok(frames) = capture::read_bytes(data) else { return };
    let config = UetConfig { crc: false, ip_proto: Some(wire::uet::DEFAULT_IP_PROTO) };
    for f in &frames {
        assert!(f.data.len() <= data.len(), "a frame of {} bytes from {} bytes", f.data.len(), data.len());
        if let decode::Verdict::Good(_, repr) = decode::examine(f, true, &config) {
            assert_eq!(decode::reemit_mismatch(&repr, &f.data), None, "a good frame re-emits as it was");
            let _ = decode::frame_text(&repr);
            let _ = decode::frame_json(&repr);
        }
    }
}
