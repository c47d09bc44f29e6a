//! One-line text and JSON summaries of UET packets (names from `../shared/spec/uet-wire.md`).

use std::fmt::Write as _;

use serde_json::{Value, json};
use wire::uet::pds::{AckCc, PdsRepr, request};
use wire::uet::ses::{SesExt, SesHeader};
use wire::uet::{SesRepr, UetRepr};

/// The text summary of a UET packet: TSS fields, or PDS and SES fields and the payload length.
pub(super) fn text(p: &UetRepr<'_>) -> String {
    match p {
        UetRepr::Secure { tss, ciphertext, .. } => {
            let mut s = format!("TSS SDI={:#x} AN={}", tss.sdi, u8::from(tss.an));
            if let Some(ssi) = tss.ssi {
                let _ = write!(s, " SSI={ssi:#x}");
            }
            let _ =
                write!(s, " epoch={} counter={} ciphertext={}", tss.epoch(), tss.counter(), ciphertext.len());
            s
        }
        UetRepr::Clear { pds, ses, payload, crc } => {
            let mut s = pds_text(pds);
            if let Some(ses) = ses {
                s.push_str("  ");
                s.push_str(&ses_text(ses));
            }
            if !payload.is_empty() {
                let _ = write!(s, " payload={}", payload.len());
            }
            if *crc {
                s.push_str(" CRC");
            }
            s
        }
    }
}

fn pds_text(pds: &PdsRepr) -> String {
    let mut s = format!("{} flags={:#04x}", pds.pds_type().name(), pds.flags());
    match pds {
        PdsRepr::Request(r) => {
            let _ = write!(s, " PSN={:#x} CLEAR_PSN={:#x} SPDCID={:#x}", r.psn, r.clear_psn(), r.spdcid);
            match r.start_psn() {
                Some(start) => {
                    let _ = write!(
                        s,
                        " SYN Start_PSN={start:#x} use_rsv_pdc={}",
                        u8::from(r.use_rsv_pdc() == Some(true))
                    );
                }
                None => {
                    let _ = write!(s, " DPDCID={:#x}", r.dpdcid);
                }
            }
            if r.flags & request::FLAG_AR != 0 {
                s.push_str(" AR");
            }
            if let Some(cc) = r.cc {
                let _ = write!(s, " ccc_id={} credit_target={}", cc.ccc_id, cc.credit_target);
            }
        }
        PdsRepr::Rudi(r) => {
            let _ = write!(s, " pkt_id={:#x}", r.pkt_id);
        }
        PdsRepr::Uud(_) => {}
        PdsRepr::Ack(r) => {
            let _ = write!(
                s,
                " CACK_PSN={:#x} ACK_PSN={:#x} SPDCID={:#x} DPDCID={:#x}",
                r.cack_psn,
                r.ack_psn(),
                r.spdcid,
                r.dpdcid
            );
            if let (Some(i), Some(base)) = (r.cc_info(), r.sack_base_psn()) {
                let _ = write!(
                    s,
                    " cc_type={} mpr={} SACK_base={base:#x} bitmap={:#018x}",
                    i.cc_type, i.mpr, i.sack_bitmap
                );
            }
        }
        PdsRepr::Nack(r) => {
            let what = if r.for_rudi() { "pkt_id" } else { "PSN" };
            let _ = write!(s, " {} {what}={:#x} payload={:#x}", r.nack_code.name(), r.nack_psn, r.payload);
        }
        PdsRepr::Cp(r) => {
            let _ = write!(s, " {} PSN={:#x} payload={:#x}", r.ctl_type.name(), r.psn, r.payload);
        }
    }
    s
}

fn ses_text(ses: &SesRepr) -> String {
    let mut s = format!("SES {}", ses.next_header().name());
    match &ses.header {
        SesHeader::Standard(h) => {
            let c = &h.common;
            let _ = write!(
                s,
                " {} msg={:#x} job={:#x} len={}",
                c.opcode.name(),
                h.message_id(),
                c.job_id,
                h.request_length
            );
        }
        SesHeader::Small(h) => {
            let c = &h.common;
            let _ = write!(s, " {} job={:#x} len={}", c.opcode.name(), c.job_id, h.request_length());
        }
        SesHeader::Medium(h) => {
            let c = &h.common;
            let _ = write!(s, " {} job={:#x} len={}", c.opcode.name(), c.job_id, h.request_length());
        }
        SesHeader::Response(h) => {
            let _ =
                write!(s, " {} {} msg={:#x}", h.head.opcode.name(), h.head.return_code.name(), h.message_id);
        }
        SesHeader::ResponseData(h) => {
            let _ = write!(
                s,
                " {} {} len={}",
                h.head.opcode.name(),
                h.head.return_code.name(),
                h.payload_length()
            );
        }
        SesHeader::ResponseDataSmall(h) => {
            let _ = write!(
                s,
                " {} {} len={}",
                h.head.opcode.name(),
                h.head.return_code.name(),
                h.payload_length()
            );
        }
    }
    match &ses.ext {
        Some(SesExt::Atomic(a)) => {
            let _ = write!(s, " AMO {} {}", a.amo_opcode.name(), a.datatype.name());
        }
        Some(SesExt::CompareSwap(c)) => {
            let _ = write!(s, " AMO {} {}", c.atomic.amo_opcode.name(), c.atomic.datatype.name());
        }
        Some(SesExt::Rendezvous(r)) => {
            let _ = write!(s, " rendezvous eager={}", r.eager_length);
        }
        None => {}
    }
    s
}

/// The JSON fields of a UET packet.
pub(super) fn json(p: &UetRepr<'_>) -> Value {
    match p {
        UetRepr::Secure { tss, ciphertext, .. } => json!({
            "tss": { "sdi": tss.sdi, "an": tss.an, "ssi": tss.ssi, "epoch": tss.epoch(), "counter": tss.counter() },
            "ciphertext_len": ciphertext.len(),
        }),
        UetRepr::Clear { pds, ses, payload, crc } => {
            let mut v = json!({
                "pds": { "type": pds.pds_type().name(), "flags": pds.flags() },
                "payload_len": payload.len(),
                "crc": crc,
            });
            let d = &mut v["pds"];
            match pds {
                PdsRepr::Request(r) => {
                    d["psn"] = json!(r.psn);
                    d["clear_psn"] = json!(r.clear_psn());
                    d["spdcid"] = json!(r.spdcid);
                    d["dpdcid"] = json!(r.dpdcid);
                    d["start_psn"] = json!(r.start_psn());
                }
                PdsRepr::Rudi(r) => d["pkt_id"] = json!(r.pkt_id),
                PdsRepr::Uud(_) => {}
                PdsRepr::Ack(r) => {
                    d["cack_psn"] = json!(r.cack_psn);
                    d["ack_psn"] = json!(r.ack_psn());
                    d["spdcid"] = json!(r.spdcid);
                    d["dpdcid"] = json!(r.dpdcid);
                    if let AckCc::Cc(i, _) | AckCc::Ccx(i, _) = r.cc {
                        d["cc_type"] = json!(i.cc_type);
                        d["sack_base_psn"] = json!(r.sack_base_psn());
                        d["sack_bitmap"] = json!(i.sack_bitmap);
                    }
                }
                PdsRepr::Nack(r) => {
                    d["nack_code"] = json!(r.nack_code.name());
                    d["nack_psn"] = json!(r.nack_psn);
                    d["payload"] = json!(r.payload);
                }
                PdsRepr::Cp(r) => {
                    d["ctl_type"] = json!(r.ctl_type.name());
                    d["psn"] = json!(r.psn);
                    d["payload"] = json!(r.payload);
                }
            }
            if let Some(ses) = ses {
                let mut o = json!({ "format": ses.next_header().name() });
                if let Some(c) = ses.common() {
                    o["opcode"] = json!(c.opcode.name());
                    o["job_id"] = json!(c.job_id);
                    o["pid_on_fep"] = json!(c.pid_on_fep());
                    o["resource_index"] = json!(c.resource_index());
                }
                let head = match &ses.header {
                    SesHeader::Response(h) => Some(h.head),
                    SesHeader::ResponseData(h) => Some(h.head),
                    SesHeader::ResponseDataSmall(h) => Some(h.head),
                    _ => None,
                };
                if let Some(h) = head {
                    o["opcode"] = json!(h.opcode.name());
                    o["return_code"] = json!(h.return_code.name());
                }
                v["ses"] = o;
            }
            v
        }
    }
}
