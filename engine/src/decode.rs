//! `softrdma decode`: one summary line per frame, and with `--verify` a check that every RoCEv2 frame
//! has a correct ICRC (and IPv4/UDP checksums) and re-emits byte for byte from its parsed `Repr`.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde_json::{Value, json};
use wire::frame::{self, Encapsulation};
use wire::ib::{AethKind, NakCode, RoceRepr};
use wire::{FrameRepr, L4Repr};

use crate::capture::{self, CapturedFrame, LINKTYPE_ETHERNET};

/// Why a RoCEv2 frame failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The codec rejected it (bad ICRC, checksum, length, opcode, ...).
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
    /// Not RoCEv2 (other link type, EtherType, protocol or port): skipped.
    NotRoce,
    /// A good RoCEv2 frame.
    Good(FrameRepr<'a>),
    /// A RoCEv2 frame that failed; the repr is there when the frame still parses (e.g. bad ICRC).
    Bad(Option<FrameRepr<'a>>, Fault),
}

/// Examines one frame. With `verify`, checks the ICRC and the byte-exact re-emit as well.
pub fn examine(frame: &CapturedFrame, verify: bool) -> Verdict<'_> {
    let data = frame.data.as_slice();
    if frame.linktype != LINKTYPE_ETHERNET || frame::identify(data) != Some(Encapsulation::RoceV2) {
        return Verdict::NotRoce;
    }
    let parsed = FrameRepr::parse(data);
    if data.len() < frame.orig_len as usize {
        let fault = Fault::Snapped { captured: data.len(), original: frame.orig_len };
        return Verdict::Bad(parsed.ok(), fault);
    }
    let repr = match parsed {
        Ok(r) => r,
        Err(e) => return Verdict::Bad(None, Fault::Wire(e)),
    };
    if !verify {
        return Verdict::Good(repr);
    }
    if let Err(e) = repr.verify_icrc(data) {
        return Verdict::Bad(Some(repr), Fault::Wire(e));
    }
    match reemit_mismatch(&repr, data) {
        Some(offset) => Verdict::Bad(Some(repr), Fault::ReEmit { offset }),
        None => Verdict::Good(repr),
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

/// Counts over a decode run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// RoCEv2 frames that decoded (and verified, with `--verify`).
    pub ok: usize,
    /// RoCEv2 frames that failed.
    pub bad: usize,
    /// Frames that are not RoCEv2.
    pub skipped: usize,
}

/// Options of `softrdma decode`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Check ICRC and byte-exact re-emit.
    pub verify: bool,
    /// One JSON object per frame instead of text.
    pub json: bool,
}

/// Decodes every frame of every file, writing one line per RoCEv2 frame to `out`.
pub fn run(files: &[PathBuf], opts: &Options, out: &mut dyn Write) -> Result<Stats> {
    let mut stats = Stats::default();
    for path in files {
        let frames = capture::read_file(path)?;
        if !opts.json && files.len() > 1 {
            writeln!(out, "# {}", path.display())?;
        }
        for (i, f) in frames.iter().enumerate() {
            let number = i + 1;
            let verdict = examine(f, opts.verify);
            let (repr, fault) = match &verdict {
                Verdict::NotRoce => {
                    stats.skipped += 1;
                    continue;
                }
                Verdict::Good(r) => (Some(r), None),
                Verdict::Bad(r, fault) => (r.as_ref(), Some(*fault)),
            };
            if fault.is_some() {
                stats.bad += 1;
            } else {
                stats.ok += 1;
            }
            if opts.json {
                let mut v = repr.map(frame_json).unwrap_or_else(|| json!({}));
                v["file"] = json!(path.display().to_string());
                v["frame"] = json!(number);
                v["status"] = json!(if fault.is_some() { "bad" } else { "ok" });
                if let Some(fault) = fault {
                    v["error"] = json!(fault.to_string());
                }
                writeln!(out, "{v}")?;
            } else {
                let mut line = format!("{number:>6}");
                if let Some(r) = repr {
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

fn aeth_text(kind: AethKind) -> String {
    match kind {
        AethKind::Ack { credits: 31 } => "ACK".to_string(),
        AethKind::Ack { credits } => format!("ACK credits={credits}"),
        AethKind::RnrNak { timer } => format!("RNR_NAK timer={timer}"),
        AethKind::Nak(code) => format!("NAK {}", nak_name(code)),
        AethKind::Reserved(s) => format!("reserved syndrome {s:#04x}"),
    }
}

fn nak_name(code: NakCode) -> String {
    match code {
        NakCode::PsnSequenceError => "PSN_SEQUENCE_ERROR".into(),
        NakCode::InvalidRequest => "INVALID_REQUEST".into(),
        NakCode::RemoteAccessError => "REMOTE_ACCESS_ERROR".into(),
        NakCode::RemoteOperationalError => "REMOTE_OPERATIONAL_ERROR".into(),
        NakCode::InvalidRdRequest => "INVALID_RD_REQUEST".into(),
        NakCode::Unknown(c) => format!("code {c:#04x}"),
    }
}

/// The one-line text summary of a frame (tshark-like: addresses, opcode, QP, PSN, key fields).
pub fn frame_text(r: &FrameRepr<'_>) -> String {
    let mut s = String::new();
    let L4Repr::Roce { udp, packet } = &r.l4;
    let _ = write!(s, "{}:{} -> {}:{}  ", r.ip.src_addr(), udp.src_port, r.ip.dst_addr(), udp.dst_port);
    s.push_str(&roce_text(packet));
    s
}

fn roce_text(p: &RoceRepr<'_>) -> String {
    let b = &p.bth;
    let mut s = format!("{}  QP={:#08x} PSN={} A={}", b.opcode, b.dest_qp, b.psn, u8::from(b.ack_req));
    if b.solicited {
        s.push_str(" SE=1");
    }
    if b.migreq {
        s.push_str(" M=1");
    }
    if b.becn {
        s.push_str(" BECN=1");
    }
    if b.fecn {
        s.push_str(" FECN=1");
    }
    if b.pkey != wire::ib::bth::DEFAULT_PKEY {
        let _ = write!(s, " P_Key={:#06x}", b.pkey);
    }
    if let Some(h) = p.rdeth {
        let _ = write!(s, " RDETH(eecnxt={:#x})", h.ee_context);
    }
    if let Some(h) = p.deth {
        let _ = write!(s, " DETH(qkey={:#010x} srcqp={:#x})", h.qkey, h.src_qp);
    }
    if let Some(h) = p.feth {
        let _ = write!(s, " FETH(plt={} sel={})", h.placement_type(), h.selectivity());
    }
    if let Some(h) = p.reth {
        let _ = write!(s, " RETH(va={:#x} rkey={:#x} len={})", h.va, h.rkey, h.dma_len);
    }
    if let Some(h) = p.atomic_eth {
        let _ = write!(
            s,
            " AtomicETH(va={:#x} rkey={:#x} swap_add={:#x} cmp={:#x})",
            h.va, h.rkey, h.swap_add, h.compare
        );
    }
    if let Some(h) = p.aeth {
        let _ = write!(s, " AETH({} msn={})", aeth_text(h.kind()), h.msn);
    }
    if let Some(h) = p.atomic_ack_eth {
        let _ = write!(s, " AtomicAckETH(orig={:#x})", h.orig);
    }
    if let Some(h) = p.immdt {
        let _ = write!(s, " ImmDt={:#010x}", h.0);
    }
    if let Some(h) = p.ieth {
        let _ = write!(s, " IETH(rkey={:#x})", h.rkey);
    }
    if !p.payload.is_empty() || b.pad_count != 0 {
        let _ = write!(s, " payload={}", p.payload.len());
        if b.pad_count != 0 {
            let _ = write!(s, " pad={}", b.pad_count);
        }
    }
    s
}

/// The JSON object of a frame (field names follow the spec page and Wireshark's where they exist).
pub fn frame_json(r: &FrameRepr<'_>) -> Value {
    let L4Repr::Roce { udp, packet: p } = &r.l4;
    let b = &p.bth;
    let mut v = json!({
        "src": r.ip.src_addr().to_string(),
        "dst": r.ip.dst_addr().to_string(),
        "src_port": udp.src_port,
        "dst_port": udp.dst_port,
        "bth": {
            "opcode": b.opcode.0,
            "opcode_name": b.opcode.to_string(),
            "se": b.solicited, "m": b.migreq, "pad_count": b.pad_count, "p_key": b.pkey,
            "fecn": b.fecn, "becn": b.becn, "dest_qp": b.dest_qp, "ack_req": b.ack_req, "psn": b.psn,
        },
        "payload_len": p.payload.len(),
    });
    if let Some(vlan) = r.ethernet.tags().last() {
        v["vlan"] = json!(vlan.vid());
    }
    if let Some(h) = p.rdeth {
        v["rdeth"] = json!({ "ee_context": h.ee_context });
    }
    if let Some(h) = p.deth {
        v["deth"] = json!({ "q_key": h.qkey, "src_qp": h.src_qp });
    }
    if let Some(h) = p.feth {
        v["feth"] = json!({ "placement_type": h.placement_type(), "selectivity": h.selectivity() });
    }
    if let Some(h) = p.reth {
        v["reth"] = json!({ "va": h.va, "r_key": h.rkey, "dma_len": h.dma_len });
    }
    if let Some(h) = p.atomic_eth {
        v["atomic_eth"] =
            json!({ "va": h.va, "r_key": h.rkey, "swap_add": h.swap_add, "compare": h.compare });
    }
    if let Some(h) = p.aeth {
        v["aeth"] = json!({ "syndrome": h.syndrome, "kind": aeth_text(h.kind()), "msn": h.msn });
    }
    if let Some(h) = p.atomic_ack_eth {
        v["atomic_ack_eth"] = json!({ "orig": h.orig });
    }
    if let Some(h) = p.immdt {
        v["immdt"] = json!(h.0);
    }
    if let Some(h) = p.ieth {
        v["ieth"] = json!({ "r_key": h.rkey });
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
        assert!(matches!(examine(&good, true), Verdict::Good(_)));
        let mut bad = read_request();
        let n = bad.len();
        bad[n - 3] ^= 1;
        let bad = frame(bad);
        assert!(matches!(examine(&bad, false), Verdict::Good(_)));
        assert!(matches!(
            examine(&bad, true),
            Verdict::Bad(Some(_), Fault::Wire(wire::Error::BadIcrc { .. }))
        ));
        let mut snapped = frame(read_request());
        snapped.orig_len += 10;
        assert!(matches!(examine(&snapped, true), Verdict::Bad(_, Fault::Snapped { .. })));
        let mut other = frame(read_request());
        other.linktype = 113;
        assert!(matches!(examine(&other, true), Verdict::NotRoce));
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
