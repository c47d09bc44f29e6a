//! `softrdma stat` for programs over the libfabric provider (issue 58): each domain (one fabric
//! of the engine's provider) publishes its endpoints' UET nodes ([`uet::node`]) through a
//! [`Publisher`] of its own, from the program's progress calls every half second and as an
//! endpoint closes (`engine::provider::stat`). A node is named by its domain and endpoint:
//! `domain 0 ep0 rdm hpc`; the process is described by its name, "fi_pingpong (libfabric)".

use std::sync::atomic::{AtomicU32, Ordering};

use engine::provider::{StatNode, StatSink};

use crate::{Publisher, uet};

/// Domains opened by this process so far (the next one's number).
static DOMAINS: AtomicU32 = AtomicU32::new(0);

/// The stat sink of a new domain.
pub fn sink() -> Box<dyn StatSink> {
    let program = std::fs::read_to_string("/proc/self/comm")
        .map_or_else(|_| "program".into(), |s| s.trim().to_string());
    Box::new(DomainStats {
        publisher: Publisher::for_rare_calls(&format!("{program} (libfabric)")),
        domain: DOMAINS.fetch_add(1, Ordering::Relaxed),
    })
}

/// One domain's publisher.
struct DomainStats {
    publisher: Publisher,
    domain: u32,
}

impl StatSink for DomainStats {
    fn due(&mut self) -> bool {
        self.publisher.due()
    }

    fn publish(&mut self, nodes: &mut [StatNode<'_>]) {
        let nodes = nodes
            .iter_mut()
            .map(|n| uet::node(&format!("domain {} {}", self.domain, n.name), n.node))
            .collect();
        self.publisher.publish_all(Vec::new(), nodes);
    }
}
