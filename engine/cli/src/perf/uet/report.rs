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
    // What a hostile or broken peer caused, and what was refused or reaped for it.
    let refused = format!(
        "; refused: PDS malformed {} stale {} out-of-window {} SYNs (per-source cap) {} fatal NACKs ignored {} PDCs reaped {} control dropped {}; \
         SES wrong delivery {} partial messages refused {} reassembly timeouts {} unexpected refused {} reads refused {} error responses {}; \
         headers evicted {}",
        p.rx_malformed,
        p.rx_stale,
        p.rx_out_of_window,
        p.rx_syns_refused,
        p.rx_nacks_ignored,
        p.pdcs_reaped,
        p.ctrl_dropped,
        s.wrong_delivery,
        s.inbound_refused,
        s.reassembly_timeouts,
        s.unexpected_refused,
        s.reads_refused,
        s.errors_sent,
        f.headers_evicted
    );
    format!(
        " {name}: frames tx {} rx {} (bad {}); PDS packets tx {} retransmits {} (SACK/NACK {}, timer {}) ACKs {} NACKs {}; rx duplicates {} out-of-order drops {}; SES rendezvous sent {} read {}, deferred {} restarted {}; tx stalls {} failed {}{refused}{tss}{dp}",
        f.tx_frames,
        f.rx_frames,
        f.rx_bad,
        p.tx_packets,
        p.tx_retransmits,
        p.fast_retransmits,
        p.timeouts,
        p.tx_acks,
        p.tx_nacks,
        p.rx_duplicates,
        p.rx_out_of_order,
        s.rendezvous_sent,
        s.rendezvous_reads,
        s.deferred,
        s.restarts,
        f.tx_stalls,
        f.tx_failed
    )
}
