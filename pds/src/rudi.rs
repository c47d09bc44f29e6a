//! RUDI: reliable, unordered delivery of idempotent requests without a PDC (uet-wire.md §2:
//! "RUDI is connectionless: no PDC, a non-sequential `pkt_id`, one response per request and no ACK;
//! the initiator keeps all state and uses a per-packet RTO"). The target keeps nothing: a
//! retransmitted request is executed again, which is why only idempotent operations may use it.

use std::collections::BTreeMap;
use std::time::Duration;

use wire::uet::pds::NextHeader;

use crate::Body;
use crate::config::Config;

/// A request waiting for its response.
#[derive(Debug)]
pub(crate) struct Pending<A> {
    pub(crate) peer: A,
    pub(crate) next_hdr: NextHeader,
    pub(crate) body: Body,
    pub(crate) cookie: u64,
    retries: u32,
    /// Next (re)transmission time; `None` while queued to go out now.
    deadline: Option<Duration>,
}

/// The initiator's table of outstanding RUDI requests, by `pkt_id`.
#[derive(Debug)]
pub(crate) struct Initiator<A> {
    pending: BTreeMap<u32, Pending<A>>,
    next_pkt_id: u32,
}

impl<A: Copy + Eq> Initiator<A> {
    pub(crate) fn new(first_pkt_id: u32) -> Initiator<A> {
        Initiator { pending: BTreeMap::new(), next_pkt_id: first_pkt_id }
    }

    /// Queues a request; returns its `pkt_id`.
    pub(crate) fn push(&mut self, peer: A, next_hdr: NextHeader, body: Body, cookie: u64) -> u32 {
        let mut id = self.next_pkt_id;
        while self.pending.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_pkt_id = id.wrapping_add(1);
        self.pending.insert(id, Pending { peer, next_hdr, body, cookie, retries: 0, deadline: None });
        id
    }

    /// The response to `pkt_id` from `peer` arrived: the request is done (its cookie), or `None`
    /// for a duplicate or stray response.
    pub(crate) fn complete(&mut self, peer: A, pkt_id: u32) -> Option<u64> {
        match self.pending.get(&pkt_id) {
            Some(p) if p.peer == peer => self.pending.remove(&pkt_id).map(|p| p.cookie),
            _ => None,
        }
    }

    /// Whether `pkt_id` is a request to `peer` still waiting for its response.
    pub(crate) fn is_pending(&self, peer: A, pkt_id: u32) -> bool {
        self.pending.get(&pkt_id).is_some_and(|p| p.peer == peer)
    }

    /// The next request to (re)send, marked sent at `now`: `(pkt_id, request, is_retransmission)`.
    pub(crate) fn next_to_send(&mut self, now: Duration, cfg: &Config) -> Option<(u32, &Pending<A>, bool)> {
        let (&id, p) = self.pending.iter_mut().find(|(_, p)| p.deadline.is_none())?;
        p.deadline = Some(now + cfg.backoff(p.retries));
        Some((id, p, p.retries > 0))
    }

    /// Timer expiry: requests due are queued again; those out of retries are removed and returned
    /// as `(peer, pkt_id, cookie)`.
    pub(crate) fn handle_timeout(&mut self, now: Duration, cfg: &Config) -> Vec<(A, u32, u64)> {
        let mut failed = Vec::new();
        for (&id, p) in self.pending.iter_mut() {
            if p.deadline.is_some_and(|t| t <= now) {
                if p.retries >= cfg.max_retries {
                    failed.push((p.peer, id, p.cookie));
                } else {
                    p.retries += 1;
                    p.deadline = None;
                }
            }
        }
        for (_, id, _) in &failed {
            self.pending.remove(id);
        }
        failed
    }

    /// Earliest retransmission deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        self.pending.values().filter_map(|p| p.deadline).min()
    }

    /// True if a request is waiting to go out.
    pub(crate) fn has_due(&self) -> bool {
        self.pending.values().any(|p| p.deadline.is_none())
    }

    /// Requests outstanding.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmits_then_fails() {
        let cfg = Config { max_retries: 1, ..Config::default() };
        let mut i = Initiator::new(u32::MAX);
        let a = i.push(1u8, NextHeader::ReqStd, Body::from(bytes::Bytes::from_static(b"x")), 7);
        let b = i.push(2u8, NextHeader::ReqStd, Body::default(), 8);
        assert_eq!((a, b), (u32::MAX, 0), "pkt_id wraps");
        assert!(!i.next_to_send(Duration::ZERO, &cfg).unwrap().2);
        assert!(!i.next_to_send(Duration::ZERO, &cfg).unwrap().2);
        assert!(i.next_to_send(Duration::ZERO, &cfg).is_none());
        assert_eq!(i.complete(2, b), Some(8));
        assert_eq!(i.complete(2, b), None, "duplicate response");
        assert_eq!(i.complete(2, a), None, "response from the wrong peer");
        let t = i.poll_timeout().unwrap();
        assert!(i.handle_timeout(t, &cfg).is_empty());
        let (id, _, retx) = i.next_to_send(t, &cfg).unwrap();
        assert!(retx && id == a);
        let t2 = i.poll_timeout().unwrap();
        assert_eq!(t2 - t, cfg.rto * 2, "backoff");
        assert_eq!(i.handle_timeout(t2, &cfg), [(1, a, 7)]);
        assert_eq!(i.len(), 0);
    }
}
