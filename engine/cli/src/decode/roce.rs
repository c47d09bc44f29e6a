//! One-line text and JSON summaries of RoCEv2 frames.

use std::fmt::Write as _;

use serde_json::{Value, json};
use wire::ib::{AethKind, NakCode, RoceRepr};

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

/// The text summary of a RoCEv2 transport packet: opcode, QP, PSN, AckReq and every header's fields.
pub(super) fn text(p: &RoceRepr<'_>) -> String {
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

/// The JSON fields of a RoCEv2 transport packet (names follow the spec page and Wireshark's).
pub(super) fn json(p: &RoceRepr<'_>) -> Value {
    let b = &p.bth;
    let mut v = json!({
        "bth": {
            "opcode": b.opcode.0,
            "opcode_name": b.opcode.to_string(),
            "se": b.solicited, "m": b.migreq, "pad_count": b.pad_count, "p_key": b.pkey,
            "fecn": b.fecn, "becn": b.becn, "dest_qp": b.dest_qp, "ack_req": b.ack_req, "psn": b.psn,
        },
        "payload_len": p.payload.len(),
    });
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
