//! The context's counters: the device's own plus every QP's, in total and per QP.

use super::{Context, FIRST_QPN, Qp};
use crate::roce::HoldStats;
use crate::verbs::{QpStats, Stats};

impl Context {
    /// Datapath counters.
    pub fn stats(&self) -> Stats {
        let mut st = self.stats;
        for e in self.qps.iter().flatten() {
            let d = e.qp.drops();
            st.drops.qkey += d.qkey;
            st.drops.no_wqe += d.no_wqe;
            st.drops.uc_aborted += d.uc_aborted;
            st.drops.seq_naks_sent += d.seq_naks_sent;
            st.drops.rnr_naks_sent += d.rnr_naks_sent;
            st.drops.duplicates += d.duplicates;
            st.drops.placed_ahead += d.placed_ahead;
            st.drops.not_held += d.not_held;
            st.drops.foreign_source += d.foreign_source;
            let r = e.qp.req_counters();
            st.requests.packets += r.packets;
            st.requests.retries += r.retries;
            st.requests.timeouts += r.timeouts;
            st.requests.tail_probes += r.tail_probes;
            st.requests.window_cuts += r.window_cuts;
            st.requests.rnr_naks += r.rnr_naks;
            st.requests.seq_naks += r.seq_naks;
            st.requests.error_naks += r.error_naks;
        }
        st
    }

    /// Each QP's number, state and counters (requester, responder), for live statistics.
    pub fn qp_stats(&self) -> Vec<QpStats> {
        (self.qps.iter().flatten())
            .map(|e| QpStats {
                qpn: e.qp.qpn(),
                state: e.qp.state(),
                requests: e.qp.req_counters(),
                drops: e.qp.drops(),
            })
            .collect()
    }

    /// The current DCQCN rate of a QP (bits per second) and the CNPs it received.
    pub fn dcqcn_state(&self, qp: Qp) -> Option<(u64, u64)> {
        let e = self.qps.get((qp.0.checked_sub(FIRST_QPN)?) as usize)?.as_ref()?;
        e.qp.dcqcn().map(|d| (d.rate_bps(), d.cnps()))
    }

    /// RC or UC packets a QP took from its connected peer's address
    /// ([`QueuePair::peer_packets`](crate::roce::QueuePair::peer_packets)); `None` for no such QP.
    pub fn qp_peer_packets(&self, qp: Qp) -> Option<u64> {
        let e = self.qps.get((qp.0.checked_sub(FIRST_QPN)?) as usize)?.as_ref()?;
        Some(e.qp.peer_packets())
    }

    /// The request packets the device's RC QPs hold after gaps, and the bound on them.
    pub fn hold_stats(&self) -> HoldStats {
        self.hold.stats()
    }
}
