//! One fabric endpoint's PDS: its PDCs, RUDI requests and UUD datagrams, and the packets, deadlines
//! and events the caller pulls out.
//!
//! PDC lookup (uet-wire.md §2): a request with SYN is matched by (source, SPDCID) and creates a
//! target PDC if none exists; every other packet is matched by its DPDCID, which is the local
//! [`PdcId`], and must come from the PDC's peer with the peer's PDCID as SPDCID once it is known.
//! A request or CP for no PDC is answered with NACK INV_DPDCID (whose SPDCID echoes the DPDCID it
//! named, so that the initiator can match the pair), a SYN beyond `max_pdcs` or
//! `max_pdcs_per_peer` with NO_PDC_AVAIL, a SYN whose Start_PSN differs from the PDC's with
//! INVALID_SYN, and a request in the wrong mode with PDC_MODE_MISMATCH. ACKs and NACKs for no PDC
//! are dropped (never answered); a NACK that would end a PDC must name a PSN in its window.
//!
//! Target PDCs that only ever received SYNs are dropped after `half_open_timeout` without a
//! packet, idle ones asked to close after `idle_timeout` (the reaper, run by
//! [`Endpoint::handle_timeout`]).
//!
//! This file holds the [`Endpoint`] itself, its construction and its accessors; its public types
//! are in `types`, and its methods by role in `establish` (the PDC table), `transmit` (sending, the
//! transmit poll, deadlines and timers) and `receive` (received packets); `sched` keeps which PDCs
//! the polls look at, so that idle PDCs cost them nothing.

#[cfg(test)]
mod dos_tests;
mod establish;
#[cfg(test)]
mod nack_tests;
mod receive;
mod sched;
#[cfg(test)]
mod sched_tests;
#[cfg(test)]
mod tests;
mod transmit;
mod types;
#[cfg(test)]
mod window_tests;

use std::collections::{BTreeMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use ahash::AHashMap as HashMap;
use wire::uet::pds::{Mode, NackRepr, NextHeader};

use crate::body::Body;
use crate::config::Config;
use crate::credit::Pacer;
use crate::event::Event;
use crate::pdc::{Pdc, PdcId};
use crate::rudi::Initiator;
use sched::Sched;

pub use types::{CLOSED_LINGER, Delivery, DeliveryKind, Establishment, PdcInfo, SendError, Stats, Transmit};

#[derive(Debug)]
enum Ctrl {
    Nack(NackRepr),
    Rudi { pkt_id: u32, next_hdr: NextHeader, body: Body },
    Uud { next_hdr: NextHeader, body: Body },
}

/// The PDS of one fabric endpoint, generic over the fabric address `A` (an IP address, a
/// `SocketAddr`, a simulated port...).
#[derive(Debug)]
pub struct Endpoint<A> {
    cfg: Config,
    rng: u64,
    last_start: u32,
    pdcs: BTreeMap<PdcId, Pdc<A>>,
    /// The PDCs a poll looks at: active ones, deadlines, credit demand.
    sched: Sched,
    /// The PDCs `handle_timeout` found due (kept for its capacity).
    due: Vec<PdcId>,
    initiated: HashMap<(A, Mode), PdcId>,
    accepted: HashMap<(A, u16), PdcId>,
    /// Target PDCs per peer (`Config::max_pdcs_per_peer`).
    targets: HashMap<A, usize>,
    next_id: PdcId,
    rr: PdcId,
    /// PDCs whose transmit poll kept [`Urgency::Held`] packets back: the next packet this
    /// endpoint sends releases them (`release` stays set until the poll finds nothing to send).
    ///
    /// [`Urgency::Held`]: crate::Urgency::Held
    holding: Vec<PdcId>,
    release: bool,
    ctrl: VecDeque<(A, Ctrl)>,
    /// Target PDCs closed recently: (until, peer, peer's PDCID, Start_PSN). A delayed duplicate
    /// of their SYN packets must not open a new PDC.
    closed: VecDeque<(Duration, A, u16, u32)>,
    rudi: Initiator<A>,
    events: VecDeque<Event<A>>,
    stats: Stats,
    /// RCCC: the pull pacer and the PDC granted last.
    pacer: Pacer,
    grant_rr: PdcId,
    /// Secure PDC establishment ([`Endpoint::set_secure`]): per peer and mode, the Start_PSN the
    /// next PDC this side opens uses (initiator), and the lowest Start_PSN a SYN may name (target).
    secure: Establishment,
    next_start: HashMap<(A, Mode), u32>,
    min_start: HashMap<(A, Mode), u32>,
    /// 1-RTT: the Start_PSN this side minted for a peer's next PDC, until a SYN uses it. At most
    /// `max_pdcs` entries: beyond, one is forgotten (its peer's next SYN gets a new one).
    minted: HashMap<(A, Mode), u32>,
    /// Report each acknowledged packet ([`Event::Acked`]); see [`Endpoint::set_ack_events`].
    ack_events: bool,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// An endpoint; `seed` drives its random Start_PSNs and first RUDI `pkt_id` (the caller
    /// chooses it, e.g. from the OS or a simulation seed).
    pub fn new(cfg: Config, seed: u64) -> Endpoint<A> {
        let mut e = Endpoint {
            cfg,
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            last_start: 0,
            pdcs: BTreeMap::new(),
            sched: Sched::default(),
            due: Vec::new(),
            initiated: HashMap::new(),
            accepted: HashMap::new(),
            targets: HashMap::new(),
            next_id: 1,
            rr: 0,
            holding: Vec::new(),
            release: false,
            ctrl: VecDeque::new(),
            closed: VecDeque::new(),
            rudi: Initiator::new(0),
            events: VecDeque::new(),
            stats: Stats::default(),
            pacer: Pacer::default(),
            grant_rr: 0,
            secure: Establishment::Open,
            next_start: HashMap::new(),
            min_start: HashMap::new(),
            minted: HashMap::new(),
            ack_events: true,
        };
        e.rudi = Initiator::new(e.random() as u32);
        e
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// What is known about a PDC.
    pub fn pdc_info(&self, pdc: PdcId) -> Option<PdcInfo<A>> {
        self.pdcs.get(&pdc).map(|p| PdcInfo {
            peer: p.peer,
            peer_id: p.peer_id,
            mode: p.mode,
            role: p.role,
            start_psn: p.start_psn,
            next_psn: p.tx.next_psn(),
            expected_psn: p.rx.expected(),
            clear_psn: p.rx.clear_psn(),
            unacked: p.tx.len(),
            closing: p.closing,
            cwnd: p.nscc.as_ref().map(crate::cc::Nscc::cwnd),
            window: p.window(),
            credit_granted: p.credit_rx.granted(),
            srtt: p.srtt(),
        })
    }

    /// Every PDC held, with what is known about it, by PDCID.
    pub fn pdcs(&self) -> impl Iterator<Item = (PdcId, PdcInfo<A>)> + '_ {
        self.pdcs.keys().filter_map(|&id| Some((id, self.pdc_info(id)?)))
    }

    /// PDCs held.
    pub fn pdc_count(&self) -> usize {
        self.pdcs.len()
    }

    /// RUDI requests waiting for a response.
    pub fn rudi_outstanding(&self) -> usize {
        self.rudi.len()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event<A>> {
        self.events.pop_front()
    }

    /// Whether each packet the peer acknowledges is reported as an [`Event::Acked`] (the default).
    /// A user that learns completion elsewhere (the SES, from its responses) turns them off: one
    /// event queued and taken per packet sent is work nobody reads.
    pub fn set_ack_events(&mut self, on: bool) {
        self.ack_events = on;
    }
}
