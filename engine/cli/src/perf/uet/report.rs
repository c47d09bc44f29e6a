//! A UET node's counters as a perf run prints them.

use engine::datapath::Datapath;
use engine::uet::UetNode;

/// One line of a node's frame, PDS and SES counters, and its datapath's own (real datapaths).
pub fn counters_line<D: Datapath>(name: &str, n: &mut UetNode<D>) -> String {
    let f = n.stats();
    let p = *n.ses().pds().stats();
    let s = *n.ses().stats();
    let tss = n.tss().map_or(String::new(), |d| {
        let t = d.stats();
        format!(
            "; TSS sealed {} opened {} auth failures {} replays {} old epochs {} latched {}{}",
            t.sealed,
            t.opened,
            t.auth_failures,
            t.replays,
            t.old_epochs,
            t.latches,
            if d.latched() { " (now)" } else { "" }
        )
    });
    let dp: Vec<String> = n.datapath().counters().iter().map(|(k, v)| format!("{k} {v}")).collect();
    let dp = if dp.is_empty() { String::new() } else { format!("; datapath: {}", dp.join(", ")) };
    // Where every received frame went (each counted once), and what a hostile or broken peer
    // caused: what was refused, reaped or given up for it.
    let refused = format!(
        "; rx accounting: frames taken {} = not UET to us {} + bad {} (of which PDS malformed {}) + TSS drops {} + trimmed {} + PDS delivered {} + PDS control {} + PDS refused {} \
         (stale {} unknown PDC {} mode mismatch {} invalid SYNs {} stale SYNs {} SYNs (PDC limits) {} duplicates {} out-of-order {} out-of-window {} fatal NACKs ignored {}); \
         of the delivered: SES used {} + SES refused {} (dropped {} wrong delivery {} partial messages refused {} rejected {}, of which unexpected refused {} reads refused {}); \
         PDCs accepted {} reaped {} control dropped {} reassembly timeouts {} error responses {} headers evicted {}",
        f.rx_taken(),
        f.rx_other,
        f.rx_bad,
        p.rx_malformed,
        f.rx_tss_drops,
        f.rx_trimmed + f.rx_trimmed_dropped,
        p.rx_delivered,
        p.rx_control,
        p.rx_refused(),
        p.rx_stale,
        p.rx_unknown_pdc,
        p.rx_mode_mismatch,
        p.rx_invalid_syns,
        p.rx_stale_syns,
        p.rx_syns_refused,
        p.rx_duplicates,
        p.rx_out_of_order,
        p.rx_out_of_window,
        p.rx_nacks_ignored,
        s.rx_used,
        s.rx_refused(),
        s.dropped,
        s.wrong_delivery,
        s.inbound_refused,
        s.rx_rejected,
        s.unexpected_refused,
        s.reads_refused,
        p.pdcs_accepted,
        p.pdcs_reaped,
        p.ctrl_dropped,
        s.reassembly_timeouts,
        s.errors_sent,
        f.headers_evicted
    );
    format!(
        " {name}: frames tx {} rx {} (bad {}); PDS packets tx {} retransmits {} (SACK/NACK {}, timer {}) ACKs {} NACKs {}; SES rendezvous sent {} read {}, deferred {} restarted {}; tx stalls {} failed {}{refused}{tss}{dp}",
        f.tx_frames,
        f.rx_frames,
        f.rx_bad,
        p.tx_packets,
        p.tx_retransmits,
        p.fast_retransmits,
        p.timeouts,
        p.tx_acks,
        p.tx_nacks,
        s.rendezvous_sent,
        s.rendezvous_reads,
        s.deferred,
        s.restarts,
        f.tx_stalls,
        f.tx_failed
    )
}
