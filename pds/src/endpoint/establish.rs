//! The PDC table of an [`Endpoint`]: random Start_PSNs and PDC ids, opening a PDC (initiator),
//! accepting a SYN (target, with secure establishment), finding the PDC a packet belongs to, and
//! closing, failing and removing PDCs.

use std::hash::Hash;
use std::time::Duration;

use wire::uet::pds::{Mode, NackCode, RequestRepr};

use super::Endpoint;
use super::types::{CLOSED_LINGER, Establishment, Refused, SendError};
use crate::event::{Event, PdcError};
use crate::pdc::{Pdc, PdcId, Role};
use crate::psn::diff;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// splitmix64.
    pub(super) fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A random Start_PSN: non-zero and at least 2^16 away from the previous one (SUET, "§3.5.8.2").
    fn start_psn(&mut self) -> u32 {
        loop {
            let s = self.random() as u32;
            if s != 0 && diff(s, self.last_start).unsigned_abs() >= 1 << 16 {
                self.last_start = s;
                return s;
            }
        }
    }

    fn alloc_id(&mut self) -> Option<PdcId> {
        if self.pdcs.len() >= self.cfg.max_pdcs.min(usize::from(u16::MAX)) {
            return None;
        }
        while self.next_id == 0 || self.pdcs.contains_key(&self.next_id) {
            self.next_id = self.next_id.wrapping_add(1);
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        Some(id)
    }

    /// The initiator PDC to `peer` in `mode`, opened if there is none (nothing is sent until data
    /// is queued).
    pub fn connect(&mut self, peer: A, mode: Mode) -> Result<PdcId, SendError> {
        if let Some(&id) = self.initiated.get(&(peer, mode)) {
            return Ok(id);
        }
        let id = self.alloc_id().ok_or(SendError::NoPdcAvailable)?;
        let start = match self.next_start.get(&(peer, mode)) {
            Some(&s) if self.secure == Establishment::ZeroRtt => s,
            _ => self.start_psn(),
        };
        self.pdcs.insert(id, Pdc::new(id, peer, None, mode, Role::Initiator, start));
        self.initiated.insert((peer, mode), id);
        Ok(id)
    }

    /// Closes a PDC: the initiator sends CLOSE_CMD once everything is acknowledged, the target asks
    /// the initiator with CLOSE_REQ. [`Event::Closed`] follows. A PDC that never sent or received
    /// anything is dropped at once.
    pub fn close(&mut self, now: Duration, pdc: PdcId) -> Result<(), SendError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(SendError::UnknownPdc)?;
        if p.role == Role::Initiator && p.peer_id.is_none() && p.tx.is_empty() && p.tx.una() == p.start_psn {
            let peer = p.peer;
            self.remove(pdc);
            self.events.push_back(Event::Closed { pdc, peer });
            return Ok(());
        }
        p.close(now);
        self.sched.touch(pdc, p, &self.cfg);
        Ok(())
    }

    pub(super) fn remove(&mut self, pdc: PdcId) -> Option<Pdc<A>> {
        let p = self.pdcs.remove(&pdc)?;
        self.sched.forget(pdc);
        match p.role {
            Role::Initiator => {
                self.initiated.remove(&(p.peer, p.mode));
            }
            Role::Target => {
                self.accepted.remove(&(p.peer, p.peer_id.unwrap_or(0)));
                if let Some(n) = self.targets.get_mut(&p.peer) {
                    *n -= 1;
                    if *n == 0 {
                        self.targets.remove(&p.peer);
                    }
                }
            }
        }
        // Secure establishment: the next PDC of this pair starts after every PSN this one used
        // (initiator), and a SYN naming a Start_PSN before that is refused (target).
        let (map, next) = match p.role {
            Role::Initiator => (&mut self.next_start, p.tx.next_psn()),
            Role::Target => (&mut self.min_start, p.rx.expected()),
        };
        // Bounded as `minted` is: many peers' entries (spoofed SYNs whose PDCs were reaped) make
        // room by forgetting one.
        if map.len() >= self.cfg.max_pdcs && !map.contains_key(&(p.peer, p.mode)) {
            let any = map.keys().next().copied();
            any.map(|k| map.remove(&k));
        }
        let e = map.entry((p.peer, p.mode)).or_insert(next);
        if diff(next, *e) > 0 {
            *e = next;
        }
        Some(p)
    }

    /// Secure PDC establishment (uet-wire.md §4), for endpoints in a secure domain: see
    /// [`Establishment`]. Refused SYNs are answered with NACK NEW_START_PSN and the initiator opens
    /// the PDC again from the Start_PSN it carries, so a replayed SYN of a closed PDC can never
    /// open a PDC again, however late it comes.
    pub fn set_secure(&mut self, mode: Establishment) {
        self.secure = mode;
    }

    /// A close handshake ended: the PDC is gone, and a delayed duplicate of its SYN packets is
    /// ignored for [`CLOSED_LINGER`] (however the handshake ended: a CLOSE_CMD or CLOSE_ACK sent,
    /// or the initiator's NACK INV_DPDCID to a target's CLOSE_REQ, when it had already forgotten
    /// the PDC).
    pub(super) fn closed(&mut self, now: Duration, pdc: PdcId) {
        if let Some(p) = self.remove(pdc) {
            self.closed.push_back((now + CLOSED_LINGER, p.peer, p.peer_id.unwrap_or(0), p.start_psn));
            self.events.push_back(Event::Closed { pdc, peer: p.peer });
        }
    }

    pub(super) fn fail(&mut self, pdc: PdcId, error: PdcError) {
        if let Some(mut p) = self.remove(pdc) {
            tracing::warn!(pdc, peer = ?p.peer, ?error, "PDC failed");
            let unacked = p.tx.drain_unacked();
            self.events.push_back(Event::Failed { pdc, peer: p.peer, error, unacked });
        }
    }

    /// The PDC a SYN request from `src` belongs to, created if new; else why not (NACKed unless
    /// stale).
    pub(super) fn syn_target(&mut self, now: Duration, src: A, r: &RequestRepr) -> Result<PdcId, Refused> {
        let start = r.start_psn().unwrap_or(r.psn);
        while self.closed.front().is_some_and(|c| c.0 <= now) {
            self.closed.pop_front();
        }
        if self.closed.iter().any(|&(_, peer, id, s)| peer == src && id == r.spdcid && s == start) {
            return Err(Refused::Stale);
        }
        if let Some(&id) = self.accepted.get(&(src, r.spdcid)) {
            let p = &self.pdcs[&id];
            if p.start_psn != start {
                self.nack(src, NackCode::InvalidSyn, r.psn, 0, r.spdcid, 0);
                return Err(Refused::InvalidSyn);
            }
            return Ok(id);
        }
        let key = (src, r.mode);
        let wanted = match self.secure {
            Establishment::Open => None,
            Establishment::ZeroRtt => self.min_start.get(&key).copied().filter(|&min| diff(start, min) < 0),
            Establishment::OneRtt if self.minted.get(&key) == Some(&start) => {
                self.minted.remove(&key);
                None
            }
            Establishment::OneRtt => match self.minted.get(&key) {
                Some(&s) => Some(s),
                None => {
                    let s = self.start_psn();
                    if self.minted.len() >= self.cfg.max_pdcs {
                        let any = self.minted.keys().next().copied();
                        any.map(|k| self.minted.remove(&k));
                    }
                    self.minted.insert(key, s);
                    Some(s)
                }
            },
        };
        if let Some(s) = wanted {
            self.nack(src, NackCode::NewStartPsn, r.psn, 0, r.spdcid, s);
            return Err(Refused::StaleSyn);
        }
        let held = self.targets.get(&src).copied().unwrap_or(0);
        let Some(id) = self.alloc_id().filter(|_| held < self.cfg.max_pdcs_per_peer) else {
            self.nack(src, NackCode::NoPdcAvail, r.psn, 0, r.spdcid, 0);
            return Err(Refused::NoPdcAvail);
        };
        let mut p = Pdc::new(id, src, Some(r.spdcid), r.mode, Role::Target, start);
        p.last_rx = now;
        self.pdcs.insert(id, p);
        self.targets.insert(src, held + 1);
        if let Some(rc) = &self.cfg.rccc {
            // The new PDC's sender may use its speculative credit without a grant: count it as
            // granted, so the pacer leaves the last hop that long to carry it.
            self.pacer.charge(rc, now, rc.speculative);
        }
        self.accepted.insert((src, r.spdcid), id);
        self.stats.pdcs_accepted += 1;
        self.events.push_back(Event::Accepted { pdc: id, peer: src, mode: r.mode });
        Ok(id)
    }

    /// The PDC `dpdcid` if `src` is its peer (and `spdcid` its peer's id, when known).
    pub(super) fn lookup(&self, src: A, dpdcid: u16, spdcid: u16) -> Option<PdcId> {
        let p = self.pdcs.get(&dpdcid)?;
        (p.peer == src && p.peer_id.is_none_or(|id| id == spdcid)).then_some(dpdcid)
    }

    /// A packet for `pdc` arrived at `now`: the reaper leaves it alone for a while, and for good
    /// from the half-open ones once a packet without SYN shows the initiator knows its PDCID.
    pub(super) fn heard(&mut self, pdc: PdcId, now: Duration, syn: bool) {
        if let Some(p) = self.pdcs.get_mut(&pdc) {
            p.last_rx = p.last_rx.max(now);
            p.half_open &= syn;
        }
    }

    /// The reaper (see [`Config::half_open_timeout`](crate::Config::half_open_timeout)) for PDC
    /// `id`, whose deadline came at `now`: a target PDC due is dropped (half-open) or asked to
    /// close (idle). Returns whether it is gone.
    pub(super) fn reap(&mut self, id: PdcId, now: Duration) -> bool {
        let Some(p) = self.pdcs.get_mut(&id) else { return true };
        if p.reap_at(&self.cfg).is_none_or(|t| t > now) {
            return false;
        }
        if !p.half_open && !p.closing {
            p.close(now);
            return false;
        }
        if let Some(p) = self.remove(id) {
            tracing::debug!(pdc = id, peer = ?p.peer, half_open = p.half_open, "PDC reaped");
            self.stats.pdcs_reaped += 1;
            self.events.push_back(Event::Closed { pdc: id, peer: p.peer });
        }
        true
    }

    /// PDC `id` changed (if it is still there): the polls look at it again.
    pub(super) fn touched(&mut self, id: PdcId) {
        if let Some(p) = self.pdcs.get(&id) {
            self.sched.touch(id, p, &self.cfg);
        }
    }
}
