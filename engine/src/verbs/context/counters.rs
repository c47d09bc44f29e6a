//! The context's counters: the device's own plus every QP's, in total and per QP.

use super::Context;
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
}
