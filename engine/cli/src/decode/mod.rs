//! `softrdma decode`: one summary line per RoCEv2 or UET frame, and with `--verify` a check that
//! every such frame has a correct ICRC or UET CRC (and IPv4/UDP checksums) and re-emits byte for byte
//! from its parsed `Repr`.

mod roce;
mod uet;

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Value, json};
use wire::frame::{self, Encapsulation};
use wire::uet::UetConfig;
use wire::{FrameRepr, L4Repr};

use crate::capture::{self, CapturedFrame, LINKTYPE_ETHERNET};

/// Why a RoCEv2 or UET frame failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The codec rejected it (bad ICRC or CRC, checksum, length, opcode, ...).
    Wire(wire::Error),
    /// The capture stored fewer bytes than the frame had.
    Snapped {
        /// Bytes stored.
        captured: usize,
        /// Bytes on the wire.
        original: u32,
    },
    /// Parsing succeeded but emitting the `Repr` gave different bytes.
    ReEmit {
        /// First differing byte offset (or the shorter length).
        offset: usize,
    },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Wire(e) => write!(f, "{e}"),
            Fault::Snapped { captured, original } => {
                write!(f, "capture holds {captured} of {original} bytes (snap length)")
            }
            Fault::ReEmit { offset } => {
                write!(f, "re-emitted frame differs from the original at byte {offset}")
            }
        }
    }
}

/// What decoding one captured frame found.
#[derive(Debug)]
pub enum Verdict<'a> {
    /// Neither RoCEv2 nor UET (other link type, EtherType, protocol or port): skipped.
    Other,
    /// A good frame.
    Good(Encapsulation, FrameRepr<'a>),
    /// A frame that failed; the repr is there when the frame still parses (e.g. bad ICRC).
    Bad(Encapsulation, Option<FrameRepr<'a>>, Fault),
}

/// Examines one frame. With `verify`, checks the ICRC or CRC and the byte-exact re-emit as well.
pub fn examine<'a>(frame: &'a CapturedFrame, verify: bool, config: &UetConfig) -> Verdict<'a> {
    let data = frame.data.as_slice();
    let kind = match frame::identify(data, config) {
        Some(kind) if frame.linktype == LINKTYPE_ETHERNET => kind,
        _ => return Verdict::Other,
    };
    let parsed = FrameRepr::parse_with(data, config);
    if data.len() < frame.orig_len as usize {
        let fault = Fault::Snapped { captured: data.len(), original: frame.orig_len };
        return Verdict::Bad(kind, parsed.ok(), fault);
    }
    let repr = match parsed {
        Ok(r) => r,
        Err(e) => return Verdict::Bad(kind, None, Fault::Wire(e)),
    };
    if !verify {
        return Verdict::Good(kind, repr);
    }
    if let Err(e) = repr.verify_crc(data) {
        return Verdict::Bad(kind, Some(repr), Fault::Wire(e));
    }
    match reemit_mismatch(&repr, data) {
        Some(offset) => Verdict::Bad(kind, Some(repr), Fault::ReEmit { offset }),
        None => Verdict::Good(kind, repr),
    }
}

/// Emits `repr` and returns the first offset where it differs from `original`, if any.
pub fn reemit_mismatch(repr: &FrameRepr<'_>, original: &[u8]) -> Option<usize> {
    let mut buf = vec![0u8; repr.buffer_len()];
    if repr.emit(&mut buf).is_err() {
        return Some(0);
    }
    if buf == original {
        return None;
    }
    Some(buf.iter().zip(original).position(|(a, b)| a != b).unwrap_or(buf.len().min(original.len())))
}

/// Good and bad counts of one protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames that decoded (and verified, with `--verify`).
    pub ok: usize,
    /// Frames that failed.
    pub bad: usize,
}

/// Counts over a decode run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// RoCEv2 frames.
    pub roce: Counts,
    /// UET frames (UDP 4793, and native IP when configured).
    pub uet: Counts,
    /// Frames that are neither.
    pub skipped: usize,
}

impl Stats {
    /// Bad frames of either protocol.
    pub fn bad(&self) -> usize {
        self.roce.bad + self.uet.bad
    }

    /// The closing summary line.
    pub fn summary(&self) -> String {
        format!(
            "roce frames: {} ok, {} bad; uet frames: {} ok, {} bad ({} other frames skipped)",
            self.roce.ok, self.roce.bad, self.uet.ok, self.uet.bad, self.skipped
        )
    }
}

/// Options of `softrdma decode`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Check ICRC or CRC and the byte-exact re-emit.
    pub verify: bool,
    /// One JSON object per frame instead of text.
    pub json: bool,
    /// How to recognise and parse UET (native-IP protocol number, CRC trailer).
    pub uet: UetConfig,
}

/// Decodes every frame of every file, writing one line per RoCEv2 or UET frame to `out`.
pub fn run(files: &[PathBuf], opts: &Options, out: &mut dyn Write) -> Result<Stats> {
    let mut stats = Stats::default();
    for path in files {
        let frames = capture::read_file(path)?;
        if !opts.json && files.len() > 1 {
            writeln!(out, "# {}", path.display())?;
        }
        for (i, f) in frames.iter().enumerate() {
            let number = i + 1;
            let (kind, repr, fault) = match examine(f, opts.verify, &opts.uet) {
                Verdict::Other => {
                    stats.skipped += 1;
                    continue;
                }
                Verdict::Good(kind, r) => (kind, Some(r), None),
                Verdict::Bad(kind, r, fault) => (kind, r, Some(fault)),
            };
            let counts = if kind == Encapsulation::RoceV2 { &mut stats.roce } else { &mut stats.uet };
            if fault.is_some() {
                counts.bad += 1;
            } else {
                counts.ok += 1;
            }
            if opts.json {
                let mut v = repr.as_ref().map(frame_json).unwrap_or_else(|| json!({}));
                v["file"] = json!(path.display().to_string());
                v["frame"] = json!(number);
                v["status"] = json!(if fault.is_some() { "bad" } else { "ok" });
                if let Some(fault) = fault {
                    v["error"] = json!(fault.to_string());
                }
                writeln!(out, "{v}")?;
            } else {
                let mut line = format!("{number:>6}");
                if let Some(r) = &repr {
                    line.push_str("  ");
                    line.push_str(&frame_text(r));
                }
                if let Some(fault) = fault {
                    let _ = write!(line, "  BAD: {fault}");
                }
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(stats)
}

/// Source and destination as `addr:port` (or the bare address for native-IP UET).
fn endpoints(r: &FrameRepr<'_>) -> (String, String) {
    match r.udp() {
        Some(u) => {
            (format!("{}:{}", r.ip.src_addr(), u.src_port), format!("{}:{}", r.ip.dst_addr(), u.dst_port))
        }
        None => (r.ip.src_addr().to_string(), r.ip.dst_addr().to_string()),
    }
}

/// The one-line text summary of a frame (tshark-like: addresses, then the transport's key fields).
pub fn frame_text(r: &FrameRepr<'_>) -> String {
    let (src, dst) = endpoints(r);
    let body = match &r.l4 {
        L4Repr::Roce { packet, .. } => roce::text(packet),
        L4Repr::UetUdp { packet, .. } => format!("UET {}", uet::text(packet)),
        L4Repr::UetIp { entropy, packet } => {
            format!("UET/IP entropy={:#06x} {}", entropy.entropy, uet::text(packet))
        }
    };
    format!("{src} -> {dst}  {body}")
}

/// The JSON object of a frame.
pub fn frame_json(r: &FrameRepr<'_>) -> Value {
    let (protocol, mut v) = match &r.l4 {
        L4Repr::Roce { packet, .. } => ("roce", roce::json(packet)),
        L4Repr::UetUdp { packet, .. } => ("uet", uet::json(packet)),
        L4Repr::UetIp { entropy, packet } => {
            let mut v = uet::json(packet);
            v["entropy"] = json!(entropy.entropy);
            ("uet", v)
        }
    };
    v["protocol"] = json!(protocol);
    v["src"] = json!(r.ip.src_addr().to_string());
    v["dst"] = json!(r.ip.dst_addr().to_string());
    if let Some(u) = r.udp() {
        v["src_port"] = json!(u.src_port);
        v["dst_port"] = json!(u.dst_port);
    }
    if let Some(vlan) = r.ethernet.tags().last() {
        v["vlan"] = json!(vlan.vid());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn frame(data: Vec<u8>) -> CapturedFrame {
        let orig_len = data.len() as u32;
        CapturedFrame { timestamp: Duration::ZERO, linktype: LINKTYPE_ETHERNET, orig_len, data }
    }

    /// rxe READ request (captures/roce/rxe_read_request_pcapplusplus.pcap).
    fn read_request() -> Vec<u8> {
        let h = "000c29ae1ca4000c2989a2e508004500003cbe10400040118a4bc0a83881c0a83883df9412b7002800000c00ffff000000118054cb6300007fee260fb000000002b80001000008c6154a";
        (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn verdicts() {
        let good = frame(read_request());
        assert!(matches!(examine(&good, true, &UetConfig::default()), Verdict::Good(..)));
        let mut bad = read_request();
        let n = bad.len();
        bad[n - 3] ^= 1;
        let bad = frame(bad);
        assert!(matches!(examine(&bad, false, &UetConfig::default()), Verdict::Good(..)));
        assert!(matches!(
            examine(&bad, true, &UetConfig::default()),
            Verdict::Bad(_, Some(_), Fault::Wire(wire::Error::BadIcrc { .. }))
        ));
        let mut snapped = frame(read_request());
        snapped.orig_len += 10;
        assert!(matches!(
            examine(&snapped, true, &UetConfig::default()),
            Verdict::Bad(_, _, Fault::Snapped { .. })
        ));
        let mut other = frame(read_request());
        other.linktype = 113;
        assert!(matches!(examine(&other, true, &UetConfig::default()), Verdict::Other));
    }

    #[test]
    fn text_summary() {
        let data = read_request();
        let r = FrameRepr::parse(&data).unwrap();
        assert_eq!(
            frame_text(&r),
            "192.168.56.129:57236 -> 192.168.56.131:4791  RC_RDMA_READ_REQUEST  QP=0x000011 PSN=5557091 A=1 \
             RETH(va=0x7fee260fb000 rkey=0x2b8 len=65536)"
        );
        let j = frame_json(&r);
        assert_eq!(j["bth"]["opcode_name"], "RC_RDMA_READ_REQUEST");
        assert_eq!(j["reth"]["dma_len"], 65536);
    }
}
