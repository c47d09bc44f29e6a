//! One UET node's counters for `softrdma stat` (issue 58): the node's frames, its PDS (PDCs open
//! and closing, packets, ACKs, NACKs by code, retransmissions), its SES (requests sent and
//! received by opcode, completions, errors by return code), its secure domain (epoch, bad ICVs,
//! replays) and each PDC's congestion window and rate.

use std::net::Ipv4Addr;

use engine::datapath::Datapath;
use engine::uet::UetNode;
use pds::CodeCounts;
use serde_json::{Map, Value, json};
use wire::uet::pds::NackCode;
use wire::uet::ses::{ReturnCode, SesOpcode};

/// PDCs listed one by one at most (the counts cover them all).
pub const MAX_LISTED_PDCS: usize = 64;

/// Codes by their spec names (the hexadecimal value for unnamed ones), and "OTHER" for those
/// beyond the table's slots.
fn by_code(c: &CodeCounts, name: impl Fn(u8) -> &'static str) -> Value {
    let mut m = Map::new();
    for (code, n) in c.iter() {
        let key = match name(code) {
            "UNKNOWN" => format!("0x{code:02X}"),
            known => known.to_string(),
        };
        m.insert(key, json!(n));
    }
    if c.other() > 0 {
        m.insert("OTHER".into(), json!(c.other()));
    }
    Value::Object(m)
}

fn nack_name(code: u8) -> &'static str {
    NackCode::from(code).name()
}

fn rc_name(code: u8) -> &'static str {
    ReturnCode::from(code).name()
}

fn opcode_name(code: u8) -> &'static str {
    SesOpcode::from(code).name()
}

/// The counters of `node`, named `name` (e.g. "initiator").
pub fn node<D: Datapath>(name: &str, node: &mut UetNode<D>) -> Value {
    let st = node.stats();
    let ip = node.ip();
    let tss = node.tss().map(|d| {
        let t = d.stats();
        json!({
            "epoch": d.epoch(), "sealed": t.sealed, "opened": t.opened, "bad_icv": t.auth_failures,
            "replays": t.replays, "old_epochs": t.old_epochs, "other_drops": t.other_drops,
            "latches": t.latches, "latched": d.latched(),
        })
    });
    let ses = node.ses();
    let (s, payload) = (*ses.stats(), ses.config().max_payload);
    let ses_json = json!({
        "outstanding": ses.outstanding(), "posted_receives": ses.posted_count(),
        "unexpected_held": ses.unexpected_count(), "inbound": ses.inbound_count(),
        "ops_tx": by_code(&s.ops_tx, opcode_name), "ops_rx": by_code(&s.ops_rx, opcode_name),
        "completions": s.completions, "completions_failed": s.completions_failed,
        "errors_rx": by_code(&s.completion_errors, rc_name),
        "errors_tx": by_code(&s.errors_sent_codes, rc_name),
        "rx_used": s.rx_used, "rx_rejected": s.rx_rejected, "rx_dropped": s.dropped,
        "unexpected": s.unexpected, "rendezvous_sent": s.rendezvous_sent, "rendezvous_reads": s.rendezvous_reads,
        "reassembly_timeouts": s.reassembly_timeouts,
    });
    let pds = ses.pds();
    let p = *pds.stats();
    let (mut open, mut closing) = (0u64, 0u64);
    let mut listed = Vec::new();
    for (id, info) in pds.pdcs() {
        if info.closing {
            closing += 1;
        } else {
            open += 1;
        }
        if listed.len() < MAX_LISTED_PDCS {
            listed.push(pdc(id, &info, payload));
        }
    }
    let grant_bps = pds.config().rccc.map(|r| r.grant_bps);
    let pds_json = json!({
        "pdcs_open": open, "pdcs_closing": closing, "pdcs_accepted": p.pdcs_accepted, "pdcs_reaped": p.pdcs_reaped,
        "packets_tx": p.tx_packets, "packets_rx": p.rx_packets, "delivered": p.rx_delivered,
        "retransmits": p.tx_retransmits, "fast_retransmits": p.fast_retransmits, "timeouts": p.timeouts,
        "acks_tx": p.tx_acks, "acks_rx": p.rx_acks, "nacks_tx": p.tx_nacks, "nacks_rx": p.rx_nacks,
        "nack_codes_tx": by_code(&p.tx_nack_codes, nack_name),
        "nack_codes_rx": by_code(&p.rx_nack_codes, nack_name),
        "rx_malformed": p.rx_malformed, "rx_duplicates": p.rx_duplicates, "rx_out_of_order": p.rx_out_of_order,
        "rx_out_of_window": p.rx_out_of_window, "rx_stale": p.rx_stale, "rx_unknown_pdc": p.rx_unknown_pdc,
        "rx_after_close": p.rx_after_close, "rx_unexpected_cps": p.rx_unexpected_cps,
        "window_cuts": p.window_cuts, "tail_probes": p.tail_probes, "ctrl_dropped": p.ctrl_dropped,
        "credits_tx": p.tx_credits, "credit_reqs_tx": p.tx_credit_reqs, "credit_grant_bps": grant_bps,
    });
    json!({
        "name": name,
        "ip": ip.to_string(),
        "frames_tx": st.tx_frames, "frames_rx": st.rx_frames, "rx_bad": st.rx_bad, "rx_other": st.rx_other,
        "rx_tss_drops": st.rx_tss_drops, "rx_trimmed": st.rx_trimmed, "tx_stalls": st.tx_stalls,
        "tx_failed": st.tx_failed, "tx_unresolved": st.tx_unresolved, "tx_tss_refused": st.tx_tss_refused,
        "pds": pds_json,
        "ses": ses_json,
        "tss": tss,
        "pdcs": listed,
    })
}

/// One PDC: its peer, state, windows and the rate they allow (window over smoothed RTT: the NSCC
/// window in bytes when congestion control runs, else the adaptive window of `payload`-byte
/// packets).
fn pdc(id: u16, info: &pds::endpoint::PdcInfo<Ipv4Addr>, payload: usize) -> Value {
    let bytes = info.cwnd.or(info.window.map(|w| w as usize * payload));
    let rate_bps = match (bytes, info.srtt) {
        (Some(b), Some(rtt)) if !rtt.is_zero() => Some((b as f64 * 8.0 / rtt.as_secs_f64()) as u64),
        _ => None,
    };
    json!({
        "pdcid": id, "peer": info.peer.to_string(), "peer_pdcid": info.peer_id,
        "mode": format!("{:?}", info.mode).to_uppercase(),
        "role": format!("{:?}", info.role).to_lowercase(),
        "closing": info.closing, "unacked": info.unacked,
        "cwnd": info.cwnd, "window": info.window,
        "srtt_ns": info.srtt.map(|d| d.as_nanos() as u64), "rate_bps": rate_bps,
    })
}
