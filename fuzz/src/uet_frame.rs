//! UET frames over UDP and native IP: the first input byte chooses the configuration (bit 0: CRC
//! trailer; bit 1: recognise native IP with protocol 253, else with the protocol in the second
//! byte), the rest is the frame. Re-emit and compare as in `reemit.rs`.

use crate::reemit;

use wire::uet::{DEFAULT_IP_PROTO, UetConfig};

pub fn run(data: &[u8]) {
    let [flags, proto, frame @ ..] = data else { return };
    let ip_proto = if flags & 2 != 0 { DEFAULT_IP_PROTO } else { *proto };
    reemit::check(frame, &UetConfig { crc: flags & 1 != 0, ip_proto: Some(ip_proto) });
}
