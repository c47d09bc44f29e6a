//! The messages perftest 4.5 (the version rxe's VM ships, protocol version "6.06") exchanges on its
//! TCP connection, as `../shared/captures/exchange/*.pcap` show them:
//!
//! | message | bytes | content |
//! |---|---|---|
//! | version | 16 | `"6.06"`, NUL-padded |
//! | cycle buffer | 4 | big-endian page size (4096); both take the larger |
//! | cache line | 4 | big-endian (64); both take the larger |
//! | MTU | 2 | the `ibv_mtu` enum as one ASCII digit and a NUL (`"3"` = 1024); both take the smaller |
//! | handshake | 108 | `LID:OUT_READS:QPN:PSN:RKEY:VADDR:GID[16]:SRQN:` in hex, then a NUL |
//! | report | 5 x 8 | bandwidth tools: size, iterations (big-endian u64), peak and average MB/s and Mpps (big-endian f64) |
//! | done | 5 | `"done"` and a NUL |

use engine::verbs::Mtu;
use std::net::Ipv6Addr;

/// The protocol version perftest 4.5 announces.
pub const VERSION: &str = "6.06";
/// Length of the version message.
pub const VERSION_LEN: usize = 16;
/// Length of a handshake message (`KEY_MSG_SIZE_GID`).
pub const DEST_LEN: usize = 108;
/// The closing message.
pub const DONE: &[u8; 5] = b"done\0";

/// The version message.
pub fn version_msg() -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    m[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    m
}

/// The version a peer announced, as a number ("6.06" -> 6.06); 0 if it is not one.
pub fn parse_version(m: &[u8]) -> f64 {
    let text = m.split(|&c| c == 0).next().unwrap_or_default();
    std::str::from_utf8(text).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0.0)
}

/// `ibv_mtu` enum value of `mtu` (256 = 1 ... 4096 = 5).
pub fn mtu_code(mtu: Mtu) -> u8 {
    match mtu {
        Mtu::Mtu256 => 1,
        Mtu::Mtu512 => 2,
        Mtu::Mtu1024 => 3,
        Mtu::Mtu2048 => 4,
        Mtu::Mtu4096 => 5,
    }
}

/// The MTU message.
pub fn mtu_msg(mtu: Mtu) -> [u8; 2] {
    [b'0' + mtu_code(mtu), 0]
}

/// The MTU a peer's message names.
pub fn parse_mtu(m: &[u8; 2]) -> Option<Mtu> {
    match m[0] {
        b'1' => Some(Mtu::Mtu256),
        b'2' => Some(Mtu::Mtu512),
        b'3' => Some(Mtu::Mtu1024),
        b'4' => Some(Mtu::Mtu2048),
        b'5' => Some(Mtu::Mtu4096),
        _ => None,
    }
}

/// One QP's address as perftest exchanges it (`struct pingpong_dest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// READ/atomic responder resources of the sender (max_dest_rd_atomic); the peer's max_rd_atomic.
    pub out_reads: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// R_Key of the buffer the peer targets.
    pub rkey: u32,
    /// Address of the buffer the peer targets.
    pub vaddr: u64,
    /// GID.
    pub gid: Ipv6Addr,
    /// SRQ number (0 without one).
    pub srqn: u32,
}

impl Dest {
    /// The 108-byte message: `%04x:%04x:%06x:%06x:%08x:%016x:` then the 16 GID bytes as `%02x:`
    /// and `%08x:`, NUL-terminated.
    pub fn to_wire(&self) -> [u8; DEST_LEN] {
        use std::fmt::Write;
        let mut text = String::with_capacity(DEST_LEN);
        let _ = write!(
            text,
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xFF_FFFF,
            self.psn & 0xFF_FFFF,
            self.rkey,
            self.vaddr
        );
        for b in self.gid.octets() {
            let _ = write!(text, "{b:02x}:");
        }
        let _ = write!(text, "{:08x}:", self.srqn);
        let mut out = [0u8; DEST_LEN];
        let n = text.len().min(DEST_LEN - 1);
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        out
    }

    /// Parses a handshake message; `None` if any field is malformed or out of range.
    pub fn from_wire(m: &[u8]) -> Option<Dest> {
        let text = std::str::from_utf8(m.split(|&c| c == 0).next()?).ok()?;
        let mut f = text.split(':');
        let mut field = |max_len: usize| -> Option<u64> {
            let s = f.next()?;
            if s.is_empty() || s.len() > max_len {
                return None;
            }
            u64::from_str_radix(s, 16).ok()
        };
        let lid = field(4)? as u16;
        let out_reads = field(4)? as u16;
        let qpn = field(6)? as u32;
        let psn = field(6)? as u32;
        let rkey = field(8)? as u32;
        let vaddr = field(16)?;
        let mut gid = [0u8; 16];
        for b in &mut gid {
            *b = u8::try_from(field(2)?).ok()?;
        }
        let srqn = field(8)? as u32;
        // The message ends with a ':' after SRQN: nothing may follow it.
        if f.next() != Some("") || f.next().is_some() {
            return None;
        }
        Some(Dest { lid, out_reads, qpn, psn, rkey, vaddr, gid: Ipv6Addr::from(gid), srqn })
    }
}

/// A bandwidth tool's result, sent by the client after the run (`struct bw_report_data`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Peak bandwidth, MB/s (2^20 bytes).
    pub bw_peak: f64,
    /// Average bandwidth, MB/s.
    pub bw_avg: f64,
    /// Message rate, millions per second.
    pub msg_rate: f64,
}

impl Report {
    /// The five fields as they go on the wire, one message each; `iters` is 4 bytes for peers
    /// older than protocol version 5.33.
    pub fn fields(&self, peer_version: f64) -> [Vec<u8>; 5] {
        let iters = if peer_version >= 5.33 {
            self.iters.to_be_bytes().to_vec()
        } else {
            (self.iters as u32).to_be_bytes().to_vec()
        };
        [
            self.size.to_be_bytes().to_vec(),
            iters,
            self.bw_peak.to_bits().to_be_bytes().to_vec(),
            self.bw_avg.to_bits().to_be_bytes().to_vec(),
            self.msg_rate.to_bits().to_be_bytes().to_vec(),
        ]
    }

    /// Rebuilds a report from the five received fields.
    pub fn from_fields(f: &[Vec<u8>; 5]) -> Report {
        let u = |b: &[u8]| b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        Report {
            size: u(&f[0]),
            iters: u(&f[1]),
            bw_peak: f64::from_bits(u(&f[2])),
            bw_avg: f64::from_bits(u(&f[3])),
            msg_rate: f64::from_bits(u(&f[4])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The client's handshake from `captures/exchange/rc_write_bw.tcp18515.pcap`.
    const CAPTURED: &[u8; 108] = b"0000:0001:000011:07c6db:00000217:0000560a5e3e9000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\0";

    #[test]
    fn captured_handshake() {
        let d = Dest::from_wire(CAPTURED).unwrap();
        assert_eq!(d.out_reads, 1);
        assert_eq!((d.qpn, d.psn, d.rkey, d.vaddr), (0x11, 0x07c6db, 0x217, 0x0000_560a_5e3e_9000));
        assert_eq!(d.gid, "::ffff:10.77.0.3".parse::<Ipv6Addr>().unwrap());
        assert_eq!(&d.to_wire(), CAPTURED);
    }

    #[test]
    fn captured_setup_messages() {
        assert_eq!(&version_msg(), b"6.06\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(parse_version(&version_msg()), 6.06);
        assert_eq!(mtu_msg(Mtu::Mtu1024), *b"3\0");
        assert_eq!(parse_mtu(b"5\0"), Some(Mtu::Mtu4096));
        assert_eq!(parse_mtu(b"9\0"), None);
        // The client's report of rc_write_bw: 3000 bytes, 16 iterations, then three doubles.
        let f = [
            vec![0, 0, 0, 0, 0, 0, 0x0b, 0xb8],
            vec![0, 0, 0, 0, 0, 0, 0, 0x10],
            vec![0x3f, 0xff, 0x92, 0x59, 0x5e, 0x5e, 0x04, 0xf1],
            vec![0x3f, 0xe8, 0x8a, 0x09, 0x1d, 0x38, 0xbc, 0x74],
            vec![0x3f, 0x31, 0x90, 0xdb, 0x32, 0xcd, 0x18, 0x5b],
        ];
        let r = Report::from_fields(&f);
        assert_eq!((r.size, r.iters), (3000, 16));
        assert!((r.bw_peak - 1.973).abs() < 0.01 && (r.bw_avg - 0.767).abs() < 0.01, "{r:?}");
        assert_eq!(r.fields(6.06), f);
        assert_eq!(r.fields(5.0)[1], vec![0, 0, 0, 0x10]);
    }

    #[test]
    fn malformed_handshakes_are_refused() {
        let good = CAPTURED.to_vec();
        for bad in [
            &b"0000:0001:000011\0"[..],
            &b"zz00:0001:000011:07c6db:00000217:0000560a5e3e9000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\0"[..],
            &b"0000:0001:1000011:07c6db:00000217:0000560a5e3e9000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\0"[..],
            &b"0000:0001:000011:07c6db:00000217:0000560a5e3e9000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:7\0"[..],
            &[0xff; 108][..],
            &[][..],
        ] {
            assert_eq!(Dest::from_wire(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(Dest::from_wire(&good).is_some());
    }

    proptest! {
        #[test]
        fn dest_roundtrip(lid: u16, out_reads: u16, qpn in 0u32..0x100_0000, psn in 0u32..0x100_0000,
                          rkey: u32, vaddr: u64, gid: [u8; 16], srqn: u32) {
            let d = Dest { lid, out_reads, qpn, psn, rkey, vaddr, gid: Ipv6Addr::from(gid), srqn };
            let w = d.to_wire();
            prop_assert_eq!(w[DEST_LEN - 1], 0);
            prop_assert_eq!(Dest::from_wire(&w), Some(d));
        }

        #[test]
        fn report_roundtrip(size: u64, iters: u64, a in 0.0f64..1e9, b in 0.0f64..1e9, c in 0.0f64..1e3) {
            let r = Report { size, iters, bw_peak: a, bw_avg: b, msg_rate: c };
            prop_assert_eq!(Report::from_fields(&r.fields(6.06)), r);
        }

        #[test]
        fn from_wire_never_panics(m in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Dest::from_wire(&m);
        }
    }
}
