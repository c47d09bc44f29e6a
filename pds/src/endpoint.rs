//! One fabric endpoint's PDS: its PDCs, RUDI requests and UUD datagrams, and the packets, deadlines
//! and events the caller pulls out.
//!
//! PDC lookup (uet-wire.md §2): a request with SYN is matched by (source, SPDCID) and creates a
//! target PDC if none exists; every other packet is matched by its DPDCID, which is the local
//! [`PdcId`], and must come from the PDC's peer. A request or CP for no PDC is answered with NACK
//! INV_DPDCID, a SYN beyond `max_pdcs` with NO_PDC_AVAIL, a SYN whose Start_PSN differs from the
//! PDC's with INVALID_SYN, and a request in the wrong mode with PDC_MODE_MISMATCH. ACKs and NACKs
//! for no PDC are dropped (never answered).

use std::collections::{BTreeMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use ahash::AHashMap as HashMap;
use bytes::Bytes;
use wire::uet::pds::nack::FLAG_NT;
use wire::uet::pds::request::FLAG_RETX;
use wire::uet::pds::{Mode, NackCode, NackRepr, NextHeader, PdsRepr, RequestRepr, RudiRepr, UudRepr};

use crate::Body;
use crate::credit::Pacer;
use crate::pdc::{Outcome, Pdc, PdcId, Role, TxKind, emit, emit_body};
use crate::psn::diff;
use crate::rudi::Initiator;
use crate::rx::Verdict;
use crate::{Config, Event, PdcError};

/// How long a target remembers a closed PDC, to ignore delayed duplicates of its SYN packets
/// (longer than any packet lives in a data-center network, like TCP's TIME-WAIT).
pub const CLOSED_LINGER: Duration = Duration::from_secs(1);

/// A packet to send, written into the caller's buffer by [`Endpoint::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<A> {
    /// Destination fabric address.
    pub dst: A,
    /// Bytes written: PDS header and what follows it.
    pub len: usize,
}

/// Which service delivered a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryKind {
    /// A new (never before delivered) packet of a PDC; for ROD, the next in order.
    Pdc {
        /// The local PDC.
        pdc: PdcId,
        /// Its PSN.
        psn: u32,
        /// The PDC's mode.
        mode: Mode,
    },
    /// A RUDI request: answer it with [`Endpoint::rudi_respond`].
    RudiRequest {
        /// Its id.
        pkt_id: u32,
    },
    /// The response to a RUDI request this side sent.
    RudiResponse {
        /// Its id.
        pkt_id: u32,
        /// The cookie given to [`Endpoint::rudi_send`].
        cookie: u64,
    },
    /// A UUD datagram.
    Uud,
}

/// Upper-layer bytes handed up by [`Endpoint::handle_packet`], borrowed from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a, A> {
    /// The sender.
    pub peer: A,
    /// Which service.
    pub kind: DeliveryKind,
    /// The SES header format of `body`.
    pub next_hdr: NextHeader,
    /// Everything after the PDS header.
    pub body: &'a [u8],
}

/// Why a send was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendError {
    /// `max_queued` packets are already waiting on this PDC.
    QueueFull,
    /// No such PDC (never opened, failed or closed).
    UnknownPdc,
    /// The PDC is closing.
    Closing,
    /// `max_pdcs` PDCs exist already.
    NoPdcAvailable,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::QueueFull => "send queue full",
            SendError::UnknownPdc => "no such PDC",
            SendError::Closing => "PDC is closing",
            SendError::NoPdcAvailable => "PDC limit reached",
        })
    }
}

impl std::error::Error for SendError {}

/// Counters of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets written by `poll_transmit`.
    pub tx_packets: u64,
    /// Of which retransmissions (PDC and RUDI).
    pub tx_retransmits: u64,
    /// ACKs sent.
    pub tx_acks: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// Packets queued again after a SACK or NACK showed them lost.
    pub fast_retransmits: u64,
    /// Retransmit timer expiries.
    pub timeouts: u64,
    /// Packets received (parsed).
    pub rx_packets: u64,
    /// Packets that did not parse.
    pub rx_malformed: u64,
    /// Sequenced packets received twice (dropped).
    pub rx_duplicates: u64,
    /// ROD packets dropped for arriving out of order.
    pub rx_out_of_order: u64,
    /// Packets beyond the receive window (dropped).
    pub rx_out_of_window: u64,
    /// ACKs, NACKs and RUDI responses for no PDC or request (dropped).
    pub rx_stale: u64,
    /// NACKs received.
    pub rx_nacks: u64,
    /// SYNs refused by secure establishment (answered with NACK NEW_START_PSN).
    pub rx_stale_syns: u64,
    /// Trimmed packets received (answered with NACK TRIMMED when their PDC is known).
    pub rx_trimmed: u64,
    /// RCCC: CP CREDIT packets sent (grants not carried by an ACK).
    pub tx_credits: u64,
    /// RCCC: CP CREDIT_REQ packets sent (sends waiting for credit).
    pub tx_credit_reqs: u64,
}

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
    initiated: HashMap<(A, Mode), PdcId>,
    accepted: HashMap<(A, u16), PdcId>,
    next_id: PdcId,
    rr: PdcId,
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
    /// 1-RTT: the Start_PSN this side minted for a peer's next PDC, until a SYN uses it.
    minted: HashMap<(A, Mode), u32>,
    /// Report each acknowledged packet ([`Event::Acked`]); see [`Endpoint::set_ack_events`].
    ack_events: bool,
}

/// How a target accepts the Start_PSN of a new PDC (uet-wire.md §4, secure PDC establishment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Establishment {
    /// Any Start_PSN (outside a secure domain).
    #[default]
    Open,
    /// 0-RTT: a Start_PSN at or after the PSN following the last one received on the previous PDC
    /// from that peer (in that mode); an older one is refused with NACK NEW_START_PSN carrying that
    /// PSN. The initiator starts each new PDC after the last PSN of its previous one, so it is
    /// normally never refused.
    ZeroRtt,
    /// 1-RTT: only a Start_PSN this side minted: every new PDC's first SYN is answered with NACK
    /// NEW_START_PSN carrying a random Start_PSN, used once.
    OneRtt,
}

/// What [`Endpoint::pdc_info`] tells about a PDC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdcInfo<A> {
    /// The peer.
    pub peer: A,
    /// The peer's PDCID, once known.
    pub peer_id: Option<u16>,
    /// Delivery mode.
    pub mode: Mode,
    /// Who opened it.
    pub role: Role,
    /// Start_PSN of both directions.
    pub start_psn: u32,
    /// PSN the next packet sent gets.
    pub next_psn: u32,
    /// Lowest PSN not yet received from the peer.
    pub expected_psn: u32,
    /// The peer's CLEAR_PSN as last received.
    pub clear_psn: u32,
    /// Packets queued or not yet acknowledged.
    pub unacked: usize,
    /// Close in progress.
    pub closing: bool,
    /// The NSCC window in bytes, when congestion control runs.
    pub cwnd: Option<usize>,
    /// RCCC: credit units (256 bytes) granted to this PDC's peer so far.
    pub credit_granted: u64,
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
            initiated: HashMap::new(),
            accepted: HashMap::new(),
            next_id: 1,
            rr: 0,
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

    /// splitmix64.
    fn random(&mut self) -> u64 {
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

    /// Sends `bytes` (an SES header of format `next_hdr` and payload) to `peer` over this side's
    /// PDC in `mode`, opening it if needed. Returns the PDC and the packet's PSN; an
    /// [`Event::Acked`] with `cookie` follows when the peer has it.
    pub fn send(
        &mut self,
        peer: A,
        mode: Mode,
        next_hdr: NextHeader,
        body: impl Into<Body>,
        cookie: u64,
    ) -> Result<(PdcId, u32), SendError> {
        let id = self.connect(peer, mode)?;
        self.send_on(id, next_hdr, body, cookie).map(|psn| (id, psn))
    }

    /// Sends on an existing PDC, in either role (a target sends responses and read data this way).
    pub fn send_on(
        &mut self,
        pdc: PdcId,
        next_hdr: NextHeader,
        body: impl Into<Body>,
        cookie: u64,
    ) -> Result<u32, SendError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(SendError::UnknownPdc)?;
        if p.closing {
            return Err(SendError::Closing);
        }
        if p.tx.len() >= self.cfg.max_queued {
            return Err(SendError::QueueFull);
        }
        Ok(p.push(next_hdr, body.into(), cookie, &self.cfg))
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
        Ok(())
    }

    /// Sends a RUDI request; returns its `pkt_id`. The response arrives as a
    /// [`DeliveryKind::RudiResponse`], or [`Event::RudiFailed`] after `max_retries`.
    pub fn rudi_send(&mut self, peer: A, next_hdr: NextHeader, body: impl Into<Body>, cookie: u64) -> u32 {
        self.rudi.push(peer, next_hdr, body.into(), cookie)
    }

    /// Answers the RUDI request `pkt_id` from `peer` (sent once; a lost response is recovered by
    /// the initiator retransmitting the request).
    pub fn rudi_respond(&mut self, peer: A, pkt_id: u32, next_hdr: NextHeader, body: impl Into<Body>) {
        self.ctrl.push_back((peer, Ctrl::Rudi { pkt_id, next_hdr, body: body.into() }));
    }

    /// Sends a UUD datagram (no state, no acknowledgement, no retransmission).
    pub fn uud_send(&mut self, peer: A, next_hdr: NextHeader, body: impl Into<Body>) {
        self.ctrl.push_back((peer, Ctrl::Uud { next_hdr, body: body.into() }));
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
            credit_granted: p.credit_rx.granted(),
        })
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

    fn remove(&mut self, pdc: PdcId) -> Option<Pdc<A>> {
        let p = self.pdcs.remove(&pdc)?;
        match p.role {
            Role::Initiator => self.initiated.remove(&(p.peer, p.mode)),
            Role::Target => self.accepted.remove(&(p.peer, p.peer_id.unwrap_or(0))),
        };
        // Secure establishment: the next PDC of this pair starts after every PSN this one used
        // (initiator), and a SYN naming a Start_PSN before that is refused (target).
        let (map, next) = match p.role {
            Role::Initiator => (&mut self.next_start, p.tx.next_psn()),
            Role::Target => (&mut self.min_start, p.rx.expected()),
        };
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

    /// Whether each packet the peer acknowledges is reported as an [`Event::Acked`] (the default).
    /// A user that learns completion elsewhere (the SES, from its responses) turns them off: one
    /// event queued and taken per packet sent is work nobody reads.
    pub fn set_ack_events(&mut self, on: bool) {
        self.ack_events = on;
    }

    fn fail(&mut self, pdc: PdcId, error: PdcError) {
        if let Some(mut p) = self.remove(pdc) {
            let unacked = p.tx.drain_unacked();
            self.events.push_back(Event::Failed { pdc, peer: p.peer, error, unacked });
        }
    }

    fn nack(&mut self, dst: A, code: NackCode, psn: u32, dpdcid: u16, payload: u32) {
        let repr = NackRepr {
            next_hdr: NextHeader::None,
            flags: 0,
            nack_code: code,
            vendor_code: 0,
            nack_psn: psn,
            spdcid: 0,
            dpdcid,
            payload,
            ccx: None,
        };
        self.ctrl.push_back((dst, Ctrl::Nack(repr)));
    }

    fn apply(&mut self, pdc: PdcId, out: Outcome) {
        let Some(p) = self.pdcs.get(&pdc) else { return };
        let peer = p.peer;
        if out.established {
            self.events.push_back(Event::Established { pdc, peer });
        }
        if self.ack_events {
            self.events.extend(out.acked.into_iter().map(|(psn, cookie)| Event::Acked { pdc, psn, cookie }));
        }
        self.stats.fast_retransmits += out.retransmits as u64;
        match out.dropped {
            Some(Verdict::Duplicate) => self.stats.rx_duplicates += 1,
            Some(Verdict::OutOfOrder) => self.stats.rx_out_of_order += 1,
            Some(Verdict::OutOfWindow) => self.stats.rx_out_of_window += 1,
            _ => {}
        }
        if out.closed {
            self.remove(pdc);
            self.events.push_back(Event::Closed { pdc, peer });
        }
    }

    /// The PDC a SYN request from `src` belongs to, created if new; `None` if it was NACKed.
    fn syn_target(&mut self, now: Duration, src: A, r: &RequestRepr) -> Option<PdcId> {
        let start = r.start_psn().unwrap_or(r.psn);
        while self.closed.front().is_some_and(|c| c.0 <= now) {
            self.closed.pop_front();
        }
        if self.closed.iter().any(|&(_, peer, id, s)| peer == src && id == r.spdcid && s == start) {
            self.stats.rx_stale += 1;
            return None;
        }
        if let Some(&id) = self.accepted.get(&(src, r.spdcid)) {
            let p = &self.pdcs[&id];
            if p.start_psn != start {
                self.nack(src, NackCode::InvalidSyn, r.psn, r.spdcid, 0);
                return None;
            }
            return Some(id);
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
                    self.minted.insert(key, s);
                    Some(s)
                }
            },
        };
        if let Some(s) = wanted {
            self.stats.rx_stale_syns += 1;
            self.nack(src, NackCode::NewStartPsn, r.psn, r.spdcid, s);
            return None;
        }
        let Some(id) = self.alloc_id() else {
            self.nack(src, NackCode::NoPdcAvail, r.psn, r.spdcid, 0);
            return None;
        };
        self.pdcs.insert(id, Pdc::new(id, src, Some(r.spdcid), r.mode, Role::Target, start));
        if let Some(rc) = &self.cfg.rccc {
            // The new PDC's sender may use its speculative credit without a grant: count it as
            // granted, so the pacer leaves the last hop that long to carry it.
            self.pacer.charge(rc, now, rc.speculative);
        }
        self.accepted.insert((src, r.spdcid), id);
        self.events.push_back(Event::Accepted { pdc: id, peer: src, mode: r.mode });
        Some(id)
    }

    /// The PDC `dpdcid` if `src` is its peer (and `spdcid` its peer's id, when known).
    fn lookup(&self, src: A, dpdcid: u16, spdcid: u16) -> Option<PdcId> {
        let p = self.pdcs.get(&dpdcid)?;
        (p.peer == src && p.peer_id.is_none_or(|id| id == spdcid || spdcid == 0)).then_some(dpdcid)
    }

    /// Processes one received PDS packet (`buf` starts at the PDS header; a CRC trailer is already
    /// checked and removed). Returns the upper-layer bytes to deliver, if any; malformed packets are
    /// a typed error and change nothing.
    pub fn handle_packet<'a>(
        &mut self,
        now: Duration,
        src: A,
        buf: &'a [u8],
    ) -> Result<Option<Delivery<'a, A>>, wire::Error> {
        self.handle_packet_ecn(now, src, buf, false)
    }

    /// A RUD/ROD request with `body` after its header: its PDC is found (or, with SYN,
    /// established), the request is accepted or refused by it, and the body is delivered once.
    fn on_request_packet<'a>(
        &mut self,
        now: Duration,
        src: A,
        r: &RequestRepr,
        body: &'a [u8],
        ce: bool,
    ) -> Option<Delivery<'a, A>> {
        let id = if r.syn() {
            self.syn_target(now, src, r)
        } else {
            let id = self.lookup(src, r.dpdcid, r.spdcid);
            if id.is_none() {
                self.nack(src, NackCode::InvDpdcid, r.psn, r.spdcid, 0);
            }
            id
        };
        let id = id?;
        let p = self.pdcs.get_mut(&id).expect("looked up");
        if p.mode != r.mode {
            let (psn, spdcid) = (r.psn, r.spdcid);
            self.nack(src, NackCode::PdcModeMismatch, psn, spdcid, 0);
            return None;
        }
        let out = p.on_request(r, now, &self.cfg);
        p.ce_seen |= ce;
        let deliver = out.deliver;
        self.apply(id, out);
        let kind = DeliveryKind::Pdc { pdc: id, psn: r.psn, mode: r.mode };
        deliver.then_some(Delivery { peer: src, kind, next_hdr: r.next_hdr, body })
    }

    /// [`handle_packet`](Self::handle_packet) for a packet whose IP header carried ECN CE: the
    /// PDC's next ACK has the M flag set (the sender's NSCC reacts to it).
    pub fn handle_packet_ecn<'a>(
        &mut self,
        now: Duration,
        src: A,
        buf: &'a [u8],
        ce: bool,
    ) -> Result<Option<Delivery<'a, A>>, wire::Error> {
        // Requests, the packets that carry data, take a path of their own: parsed inline, their
        // repr is not merged with the other types' through memory, where it was read back at
        // once in other widths than it was written in (a store-forwarding stall per packet).
        if let Ok(r) = RequestRepr::parse(buf) {
            self.stats.rx_packets += 1;
            return Ok(self.on_request_packet(now, src, &r, &buf[r.buffer_len()..], ce));
        }
        let pds = PdsRepr::parse(buf).inspect_err(|_| self.stats.rx_malformed += 1)?;
        self.stats.rx_packets += 1;
        let body = &buf[pds.buffer_len()..];
        match pds {
            PdsRepr::Request(r) => Ok(self.on_request_packet(now, src, &r, body, ce)),
            PdsRepr::Ack(a) => {
                match self.lookup(src, a.dpdcid, a.spdcid) {
                    Some(id) => {
                        let out = self.pdcs.get_mut(&id).expect("looked up").on_ack(&a, now, &self.cfg);
                        self.apply(id, out);
                    }
                    None => self.stats.rx_stale += 1,
                }
                Ok(None)
            }
            PdsRepr::Nack(n) => {
                self.stats.rx_nacks += 1;
                if n.flags & FLAG_NT != 0 {
                    // RUDI NACK: the request stays pending; its timer resends it.
                    return Ok(None);
                }
                match self.lookup(src, n.dpdcid, n.spdcid) {
                    Some(id) => {
                        match self.pdcs.get_mut(&id).expect("looked up").on_nack(&n, now, &self.cfg) {
                            Ok(out) => self.apply(id, out),
                            Err(code) => self.fail(id, PdcError::Nack(code)),
                        }
                    }
                    None => self.stats.rx_stale += 1,
                }
                Ok(None)
            }
            PdsRepr::Cp(c) => {
                match self.lookup(src, c.dpdcid, c.spdcid) {
                    Some(id) => {
                        let out = self.pdcs.get_mut(&id).expect("looked up").on_cp(&c, now, &self.cfg);
                        self.apply(id, out);
                    }
                    None => self.nack(src, NackCode::InvDpdcid, c.psn, c.spdcid, 0),
                }
                Ok(None)
            }
            PdsRepr::Rudi(r) if !r.response => Ok(Some(Delivery {
                peer: src,
                kind: DeliveryKind::RudiRequest { pkt_id: r.pkt_id },
                next_hdr: r.next_hdr,
                body,
            })),
            PdsRepr::Rudi(r) => match self.rudi.complete(src, r.pkt_id) {
                Some(cookie) => Ok(Some(Delivery {
                    peer: src,
                    kind: DeliveryKind::RudiResponse { pkt_id: r.pkt_id, cookie },
                    next_hdr: r.next_hdr,
                    body,
                })),
                None => {
                    self.stats.rx_stale += 1;
                    Ok(None)
                }
            },
            PdsRepr::Uud(u) => {
                Ok(Some(Delivery { peer: src, kind: DeliveryKind::Uud, next_hdr: u.next_hdr, body }))
            }
        }
    }

    /// A packet a switch trimmed (uet-wire.md NACK codes: TRIMMED): `buf` holds what is left from
    /// the PDS header on. A request is answered with NACK TRIMMED for its PSN, so the sender resends
    /// it at once instead of waiting for its timer; a trimmed SYN opens its PDC as any SYN does (the
    /// PDS header is whole; the packet itself is not taken). Other packets are only counted.
    pub fn handle_trimmed(&mut self, now: Duration, src: A, buf: &[u8]) -> Result<(), wire::Error> {
        let pds = PdsRepr::parse(buf).inspect_err(|_| self.stats.rx_malformed += 1)?;
        self.stats.rx_trimmed += 1;
        if let PdsRepr::Request(r) = pds {
            let pdc =
                if r.syn() { self.syn_target(now, src, &r) } else { self.lookup(src, r.dpdcid, r.spdcid) };
            if pdc.is_some() {
                self.nack(src, NackCode::Trimmed, r.psn, r.spdcid, 0);
            }
        }
        Ok(())
    }

    /// Writes the next packet to send into `buf` (which must hold the largest body plus 16 bytes).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit<A>> {
        let t = self.poll_inner(now, buf, None)?;
        self.stats.tx_packets += 1;
        Some(t)
    }

    /// [`poll_transmit`](Self::poll_transmit) that leaves an upper layer's payload where it is:
    /// `len` bytes are written (the PDS header and the upper layer's header), and the payload
    /// that follows them on the wire is returned (shared, not copied; empty for a packet without
    /// one) for the caller to place after them, copied or sealed straight into the frame. `buf`
    /// must still have room for it: a packet is only taken when the whole of it fits.
    pub fn poll_transmit_split(&mut self, now: Duration, buf: &mut [u8]) -> Option<(Transmit<A>, Bytes)> {
        let mut tail = Bytes::new();
        let t = self.poll_inner(now, buf, Some(&mut tail))?;
        self.stats.tx_packets += 1;
        Some((t, tail))
    }

    fn poll_inner(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        mut tail: Option<&mut Bytes>,
    ) -> Option<Transmit<A>> {
        self.grant_credit(now);
        if let Some((dst, c)) = self.ctrl.pop_front() {
            let len = match c {
                Ctrl::Nack(n) => {
                    self.stats.tx_nacks += 1;
                    emit(&PdsRepr::Nack(n), buf)
                }
                Ctrl::Rudi { pkt_id, next_hdr, body } => {
                    let r = RudiRepr { response: true, next_hdr, flags: 0, reserved: 0, pkt_id };
                    emit_body(&PdsRepr::Rudi(r), &body, buf, tail)
                }
                Ctrl::Uud { next_hdr, body } => {
                    emit_body(&PdsRepr::Uud(UudRepr { next_hdr, flags: 0, reserved: 0 }), &body, buf, tail)
                }
            }?;
            return Some(Transmit { dst, len });
        }
        if let Some((pkt_id, p, retx)) = self.rudi.next_to_send(now, &self.cfg) {
            let flags = if retx { FLAG_RETX } else { 0 };
            let r = RudiRepr { response: false, next_hdr: p.next_hdr, flags, reserved: 0, pkt_id };
            let (dst, len) = (p.peer, emit_body(&PdsRepr::Rudi(r), &p.body, buf, tail)?);
            self.stats.tx_retransmits += u64::from(retx);
            return Some(Transmit { dst, len });
        }
        // Round robin over the PDCs, starting after the one served last.
        let mut cursor = self.rr;
        for _ in 0..self.pdcs.len() {
            let next = self.pdcs.range(cursor.wrapping_add(1)..).next().or_else(|| self.pdcs.iter().next());
            let id = *next?.0;
            cursor = id;
            let p = self.pdcs.get_mut(&id).expect("listed");
            let Some((len, kind)) = p.poll_transmit(now, &self.cfg, buf, tail.as_deref_mut()) else {
                continue;
            };
            let (dst, done) = (p.peer, p.close_done);
            match kind {
                TxKind::Ack => self.stats.tx_acks += 1,
                TxKind::Nack => self.stats.tx_nacks += 1,
                TxKind::Retransmit => self.stats.tx_retransmits += 1,
                TxKind::Credit => self.stats.tx_credits += 1,
                TxKind::CreditReq => self.stats.tx_credit_reqs += 1,
                TxKind::Control | TxKind::Data => {}
            }
            self.rr = id;
            if done {
                let (peer_id, start) = (p.peer_id.unwrap_or(0), p.start_psn);
                self.closed.push_back((now + CLOSED_LINGER, dst, peer_id, start));
                self.remove(id);
                self.events.push_back(Event::Closed { pdc: id, peer: dst });
            }
            return Some(Transmit { dst, len });
        }
        None
    }

    /// RCCC: the pull pacer makes the grants due at `now`, round robin over the PDCs whose peers
    /// want credit (each grant goes out in the PDC's next ACK or a CP CREDIT).
    fn grant_credit(&mut self, now: Duration) {
        let Some(rc) = self.cfg.rccc else { return };
        let (pdcs, cursor) = (&mut self.pdcs, &mut self.grant_rr);
        self.pacer.run(&rc, now, |max| {
            let wants = |(_, p): &(&PdcId, &Pdc<A>)| p.credit_rx.demand() > 0;
            let after = pdcs.range(cursor.wrapping_add(1)..).find(wants);
            let Some((&id, _)) = after.or_else(|| pdcs.range(..=*cursor).find(wants)) else { return 0 };
            *cursor = id;
            pdcs.get_mut(&id).map_or(0, |p| p.credit_rx.grant(max))
        });
    }

    /// The earliest time [`Endpoint::handle_timeout`] has something to do (or a delayed ACK, or a
    /// credit grant, is due).
    pub fn poll_timeout(&self) -> Option<Duration> {
        // One pass over the PDCs: their own deadlines, and whether any wants credit granted.
        let (mut first, mut wanted) = (None::<Duration>, false);
        for p in self.pdcs.values() {
            first = first.into_iter().chain(p.poll_timeout()).min();
            wanted |= p.credit_rx.demand() > 0;
        }
        let wanted = wanted && self.cfg.rccc.is_some();
        first.into_iter().chain(self.rudi.poll_timeout()).chain(self.pacer.poll_timeout(wanted)).min()
    }

    /// Whether `poll_transmit` would return a packet now (without a deadline passing).
    pub fn has_transmit(&self) -> bool {
        !self.ctrl.is_empty() || self.rudi.has_due()
    }

    /// Runs the timers due at `now`: retransmissions, retry limits (which fail the PDC or the RUDI
    /// request).
    pub fn handle_timeout(&mut self, now: Duration) {
        let mut failed = Vec::new();
        for (&id, p) in self.pdcs.iter_mut() {
            match p.handle_timeout(now, &self.cfg) {
                Ok(n) => self.stats.timeouts += n as u64,
                Err(()) => failed.push(id),
            }
        }
        for id in failed {
            self.fail(id, PdcError::RetryExceeded);
        }
        for (peer, pkt_id, cookie) in self.rudi.handle_timeout(now, &self.cfg) {
            self.events.push_back(Event::RudiFailed { peer, pkt_id, cookie });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RX_WINDOW;
    use bytes::Bytes;
    use wire::uet::pds::request::{FLAG_AR, FLAG_SYN};

    const NOW: Duration = Duration::ZERO;

    fn request(mode: Mode, flags: u8, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
        let r = RequestRepr {
            mode,
            next_hdr: NextHeader::ReqStd,
            flags,
            clear_psn_offset: 0,
            psn,
            spdcid,
            dpdcid,
            cc: None,
        };
        let mut b = vec![0; 16];
        let n = r.emit(&mut b).unwrap();
        b.truncate(n);
        b.extend_from_slice(b"payload");
        b
    }

    fn syn(mode: Mode, start: u32, offset: u16, spdcid: u16) -> Vec<u8> {
        request(
            mode,
            FLAG_SYN,
            start.wrapping_add(u32::from(offset)),
            spdcid,
            RequestRepr::syn_word(false, offset),
        )
    }

    fn sent(ep: &mut Endpoint<u8>) -> Vec<(u8, PdsRepr)> {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| {
            ep.poll_transmit(NOW, &mut buf).map(|t| (t.dst, PdsRepr::parse(&buf[..t.len]).unwrap()))
        })
        .collect()
    }

    fn nacks(ep: &mut Endpoint<u8>) -> Vec<(u8, NackCode, u32, u16)> {
        sent(ep)
            .into_iter()
            .filter_map(|(dst, p)| match p {
                PdsRepr::Nack(n) => Some((dst, n.nack_code, n.nack_psn, n.dpdcid)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn trimmed_requests_are_nacked_trimmed_and_not_taken() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        // A trimmed SYN (header only) opens the PDC; the packet is not received.
        let first = syn(Mode::Rud, 100, 0, 3);
        ep.handle_trimmed(NOW, 5, &first[..12]).unwrap();
        assert_eq!(nacks(&mut ep), [(5, NackCode::Trimmed, 100, 3)]);
        let pdc = match ep.poll_event() {
            Some(Event::Accepted { pdc, .. }) => pdc,
            e => panic!("{e:?}"),
        };
        assert_eq!(ep.pdc_info(pdc).unwrap().expected_psn, 100, "nothing taken");
        // The resent SYN is delivered; a later trimmed packet is NACKed by PSN.
        assert!(ep.handle_packet(NOW, 5, &first).unwrap().is_some());
        ep.handle_trimmed(NOW, 5, &request(Mode::Rud, 0, 101, 3, pdc)).unwrap();
        assert_eq!(nacks(&mut ep), [(5, NackCode::Trimmed, 101, 3)]);
        // Trimmed packets of no PDC, and trimmed non-requests: counted, not answered.
        ep.handle_trimmed(NOW, 6, &request(Mode::Rud, 0, 7, 3, 99)).unwrap();
        assert!(nacks(&mut ep).is_empty());
        assert_eq!(ep.handle_trimmed(NOW, 6, &[0xFF; 3]).map_err(|_| ()), Err(()));
        assert_eq!((ep.stats().rx_trimmed, ep.stats().rx_malformed), (3, 1));
    }

    /// The split transmit writes what the whole one writes, less the payload it hands back, and
    /// takes a packet only when the whole of it fits the buffer.
    #[test]
    fn a_split_transmit_is_the_whole_transmit_less_the_payload() {
        let body = |n: u8| Body::new(b"ses-head", Bytes::from((0..n).collect::<Vec<u8>>()));
        let (mut whole, mut split) =
            (Endpoint::<u8>::new(Config::default(), 1), Endpoint::<u8>::new(Config::default(), 1));
        for e in [&mut whole, &mut split] {
            for n in [0u8, 1, 200] {
                e.send(2, Mode::Rud, NextHeader::ReqStd, body(n), u64::from(n)).unwrap();
            }
            e.uud_send(3, NextHeader::ReqStd, body(9));
        }
        let (mut a, mut b) = ([0u8; 512], [0u8; 512]);
        let mut n = 0;
        while let Some(t) = whole.poll_transmit(NOW, &mut a) {
            let (s, tail) = split.poll_transmit_split(NOW, &mut b).unwrap();
            assert_eq!((s.dst, [&b[..s.len], &tail[..]].concat()), (t.dst, a[..t.len].to_vec()));
            n += 1;
        }
        assert_eq!((n, split.poll_transmit_split(NOW, &mut b)), (4, None));
        // Room for the headers but not the payload: nothing is taken.
        split.send(2, Mode::Rud, NextHeader::ReqStd, body(200), 9).unwrap();
        assert!(split.poll_transmit_split(NOW, &mut b[..100]).is_none());
        let (t, tail) = split.poll_transmit_split(NOW, &mut b).unwrap();
        assert_eq!(t.len + tail.len(), 12 + 8 + 200);
    }

    #[test]
    fn sender_resends_a_trimmed_packet_at_once() {
        let mut a = Endpoint::<u8>::new(Config::default(), 1);
        let mut b = Endpoint::<u8>::new(Config::default(), 2);
        a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 1).unwrap();
        let mut buf = [0u8; 256];
        let t = a.poll_transmit(NOW, &mut buf).unwrap();
        b.handle_trimmed(NOW, 1, &buf[..12]).unwrap();
        let n = b.poll_transmit(NOW, &mut buf).unwrap();
        a.handle_packet(NOW, 2, &buf[..n.len]).unwrap();
        let again = a.poll_transmit(NOW, &mut buf).unwrap();
        assert_eq!(again.len, t.len);
        assert!(
            matches!(PdsRepr::parse(&buf[..again.len]), Ok(PdsRepr::Request(r)) if r.flags & FLAG_RETX != 0)
        );
        assert_eq!(a.stats().timeouts, 0);
    }

    #[test]
    fn acknowledged_packets_are_reported_unless_turned_off() {
        for on in [true, false] {
            let mut a = Endpoint::<u8>::new(Config { ack_every: 1, ..Config::default() }, 1);
            let mut b = Endpoint::<u8>::new(Config::default(), 2);
            a.set_ack_events(on);
            let mut pdc = 0;
            for cookie in [7, 8] {
                pdc = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), cookie).unwrap().0;
            }
            let (sent, got) = shuttle(&mut a, &mut b, NOW);
            assert_eq!((sent.len(), got.len()), (2, 2));
            assert_eq!(a.pdc_info(pdc).map(|i| i.unacked), Some(0), "both acknowledged either way");
            let mut cookies = Vec::new();
            while let Some(e) = a.poll_event() {
                if let Event::Acked { cookie, .. } = e {
                    cookies.push(cookie);
                }
            }
            assert_eq!(cookies, if on { vec![7, 8] } else { vec![] }, "ack events {on}");
        }
    }

    /// Moves packets between `a` (address 1) and `b` (address 2) at `now` until both are quiet;
    /// returns what `a` sent and the bodies `b` delivered.
    fn shuttle(a: &mut Endpoint<u8>, b: &mut Endpoint<u8>, now: Duration) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let (mut from_a, mut got) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 2048];
        loop {
            let mut moved = false;
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                moved = true;
                from_a.push(buf[..t.len].to_vec());
                if let Some(d) = b.handle_packet(now, 1, &buf[..t.len]).unwrap() {
                    got.push(d.body.to_vec());
                }
            }
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                moved = true;
                a.handle_packet(now, 2, &buf[..t.len]).unwrap();
            }
            if !moved {
                return (from_a, got);
            }
        }
    }

    fn secure(seed: u64) -> Endpoint<u8> {
        let mut e = Endpoint::new(Config { ack_every: 1, ..Config::default() }, seed);
        e.set_secure(Establishment::ZeroRtt);
        e
    }

    #[test]
    fn secure_establishment_refuses_a_replayed_syn_of_a_closed_pdc() {
        for on in [false, true] {
            let (mut a, mut b) = (secure(1), secure(2));
            let mode = if on { Establishment::ZeroRtt } else { Establishment::Open };
            a.set_secure(mode);
            b.set_secure(mode);
            let (pdc, _) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"first"), 1).unwrap();
            let (sent, got) = shuttle(&mut a, &mut b, NOW);
            assert_eq!(got, [b"first".to_vec()]);
            let syn = sent[0].clone();
            a.close(NOW, pdc).unwrap();
            shuttle(&mut a, &mut b, NOW);
            assert_eq!((a.pdc_count(), b.pdc_count()), (0, 0));
            // Long after the close (past the closed-PDC linger), an attacker replays the first SYN.
            let later = NOW + CLOSED_LINGER * 2;
            let d = b.handle_packet(later, 1, &syn).unwrap().map(|d| d.body.to_vec());
            if !on {
                assert_eq!(d, Some(b"first".to_vec()), "without secure establishment the replay is taken");
                continue;
            }
            assert_eq!(d, None, "the replay is not delivered");
            assert_eq!((b.pdc_count(), b.stats().rx_stale_syns), (0, 1));
            let n = nacks(&mut b);
            assert_eq!(n.len(), 1);
            assert_eq!(n[0].1, NackCode::NewStartPsn);
            // The initiator's next PDC starts where the last one ended: accepted at once.
            a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"second"), 2).unwrap();
            let (_, got) = shuttle(&mut a, &mut b, later);
            assert_eq!(got, [b"second".to_vec()]);
            assert_eq!(b.stats().rx_stale_syns, 1, "no NACK needed");
        }
    }

    #[test]
    fn secure_establishment_moves_a_forgetful_initiator_to_a_fresh_start_psn() {
        let (mut a, mut b) = (secure(1), secure(2));
        let (pdc, _) = a.send(2, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"one"), 1).unwrap();
        shuttle(&mut a, &mut b, NOW);
        a.close(NOW, pdc).unwrap();
        shuttle(&mut a, &mut b, NOW);
        let min = b.min_start[&(1, Mode::Rod)];
        // A restarted initiator (no memory of its PDCs) whose random Start_PSN is below the minimum.
        let (mut a2, pdc2) = (3..)
            .map(|seed| {
                let mut e = secure(seed);
                let pdc = e.connect(2, Mode::Rod).unwrap();
                (e, pdc)
            })
            .find(|(e, pdc)| diff(e.pdc_info(*pdc).unwrap().start_psn, min) < 0)
            .unwrap();
        for (i, m) in [&b"two"[..], b"three", b"four"].into_iter().enumerate() {
            a2.send_on(pdc2, NextHeader::ReqStd, Bytes::from_static(m), i as u64).unwrap();
        }
        let (_, got) = shuttle(&mut a2, &mut b, NOW);
        assert_eq!(got, [b"two".to_vec(), b"three".to_vec(), b"four".to_vec()], "in order, once each");
        assert_eq!(a2.pdc_info(pdc2).unwrap().start_psn, min, "restarted from the target's minimum");
        assert!(b.stats().rx_stale_syns >= 1);
    }

    #[test]
    fn one_rtt_establishment_uses_only_start_psns_the_target_minted() {
        let (mut a, mut b) = (secure(1), secure(2));
        b.set_secure(Establishment::OneRtt);
        let (pdc, _) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"one"), 1).unwrap();
        let chosen = a.pdc_info(pdc).unwrap().start_psn;
        let (sent, got) = shuttle(&mut a, &mut b, NOW);
        assert_eq!(got, [b"one".to_vec()], "delivered once, after the restart");
        let minted = a.pdc_info(pdc).unwrap().start_psn;
        assert_ne!(minted, chosen, "the initiator moved to the minted Start_PSN");
        assert_eq!(b.stats().rx_stale_syns, 1);
        let first_syn = sent[0].clone();
        let accepted_syn = sent
            .iter()
            .rev()
            .find(|f| matches!(PdsRepr::parse(f), Ok(PdsRepr::Request(r)) if r.syn()))
            .unwrap()
            .clone();
        // The first attempt's SYN arriving late (established PDC): refused INVALID_SYN, and the
        // initiator takes that as stale, not as the end of its PDC.
        b.handle_packet(NOW, 1, &first_syn).unwrap();
        let n = nacks(&mut b);
        assert_eq!(n.first().map(|n| n.1), Some(NackCode::InvalidSyn));
        let mut buf = [0u8; 64];
        let repr = NackRepr {
            next_hdr: NextHeader::None,
            flags: 0,
            nack_code: NackCode::InvalidSyn,
            vendor_code: 0,
            nack_psn: n[0].2,
            spdcid: 0,
            dpdcid: pdc,
            payload: 0,
            ccx: None,
        };
        let len = repr.emit(&mut buf).unwrap();
        a.handle_packet(NOW, 2, &buf[..len]).unwrap();
        assert_eq!(a.pdc_count(), 1, "still open");
        a.close(NOW, pdc).unwrap();
        shuttle(&mut a, &mut b, NOW);
        // The SYN that was accepted, replayed after the close and the linger: its Start_PSN was
        // used once; a new one is minted and the replay refused.
        let later = NOW + CLOSED_LINGER * 2;
        assert_eq!(b.handle_packet(later, 1, &accepted_syn).unwrap().map(|d| d.body.to_vec()), None);
        assert_eq!((b.pdc_count(), b.stats().rx_stale_syns), (0, 2));
        assert_eq!(nacks(&mut b).first().map(|n| n.1), Some(NackCode::NewStartPsn));
    }

    #[test]
    fn request_for_no_pdc_is_nacked_inv_dpdcid() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        assert_eq!(ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, 42, 3, 9)), Ok(None));
        assert_eq!(nacks(&mut ep), [(5, NackCode::InvDpdcid, 42, 3)]);
        assert_eq!(ep.pdc_count(), 0);
    }

    #[test]
    fn syn_opens_a_target_pdc_and_the_checks_that_follow() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        let start = u32::MAX - 1;
        let first = syn(Mode::Rud, start, 0, 3);
        let d = ep.handle_packet(NOW, 5, &first).unwrap().unwrap();
        let DeliveryKind::Pdc { pdc, psn, mode: Mode::Rud } = d.kind else { panic!("{d:?}") };
        assert_eq!((psn, d.body, d.next_hdr), (start, &b"payload"[..], NextHeader::ReqStd));
        assert_eq!(ep.poll_event(), Some(Event::Accepted { pdc, peer: 5, mode: Mode::Rud }));
        let info = ep.pdc_info(pdc).unwrap();
        assert_eq!(
            (info.peer_id, info.role, info.start_psn, info.expected_psn),
            (Some(3), Role::Target, start, start.wrapping_add(1))
        );
        // Same SYN again: a duplicate, no second PDC.
        assert_eq!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, start, 0, 3)), Ok(None));
        assert_eq!((ep.pdc_count(), ep.stats().rx_duplicates), (1, 1));
        // A SYN of the same PDC naming another Start_PSN.
        ep.handle_packet(NOW, 5, &syn(Mode::Rud, start.wrapping_add(7), 0, 3)).unwrap();
        // The same PDC in the other mode.
        ep.handle_packet(NOW, 5, &request(Mode::Rod, 0, start.wrapping_add(1), 3, pdc)).unwrap();
        // Far beyond the window (psn_offset is 12 bits, so use the non-SYN form).
        let far = start.wrapping_add(1 + RX_WINDOW);
        ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, far, 3, pdc)).unwrap();
        // The right PDCID from the wrong peer, and from the right peer with the wrong SPDCID.
        ep.handle_packet(NOW, 6, &request(Mode::Rud, 0, start, 3, pdc)).unwrap();
        ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start, 4, pdc)).unwrap();
        assert_eq!(
            nacks(&mut ep),
            [
                (5, NackCode::InvalidSyn, start.wrapping_add(7), 3),
                (5, NackCode::PdcModeMismatch, start.wrapping_add(1), 3),
                (6, NackCode::InvDpdcid, start, 3),
                (5, NackCode::InvDpdcid, start, 4),
                (5, NackCode::PsnOorWindow, far, 3),
            ]
        );
        assert_eq!(ep.stats().rx_out_of_window, 1);
    }

    #[test]
    fn pdc_limit_answers_no_pdc_avail() {
        let mut ep = Endpoint::<u8>::new(Config { max_pdcs: 1, ..Config::default() }, 1);
        assert!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, 100, 0, 3)).unwrap().is_some());
        assert_eq!(ep.handle_packet(NOW, 6, &syn(Mode::Rud, 100, 0, 3)), Ok(None));
        assert_eq!(nacks(&mut ep), [(6, NackCode::NoPdcAvail, 100, 3)]);
        assert_eq!(ep.connect(9, Mode::Rod), Err(SendError::NoPdcAvailable));
    }

    #[test]
    fn malformed_packets_are_errors_and_change_nothing() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        assert_eq!(ep.handle_packet(NOW, 5, &[0x10]), Err(wire::Error::Truncated("PDS prologue")));
        assert!(ep.handle_packet(NOW, 5, &[0x00, 0x00, 0, 0]).is_err(), "reserved type 0");
        assert!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, 1, 0, 3)[..11]).is_err(), "truncated request");
        assert_eq!((ep.stats().rx_malformed, ep.pdc_count()), (3, 0));
        assert!(sent(&mut ep).is_empty());
    }

    #[test]
    fn acks_carry_cumulative_and_selective_state() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        let start = 1000;
        ep.handle_packet(NOW, 5, &syn(Mode::Rud, start, 0, 3)).unwrap();
        let pdc = ep.pdc_info(1).map(|_| 1).unwrap();
        // 1001 lost; 1002 and 1004 arrive out of order: each is acknowledged at once.
        ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 2, 3, pdc)).unwrap();
        ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 4, 3, pdc)).unwrap();
        let acks: Vec<_> = sent(&mut ep)
            .into_iter()
            .filter_map(|(_, p)| if let PdsRepr::Ack(a) = p { Some(a) } else { None })
            .collect();
        assert_eq!(acks.len(), 1, "coalesced into one ACK by the time it is polled");
        let a = acks[0];
        assert_eq!((a.cack_psn, a.ack_psn(), a.spdcid, a.dpdcid), (start, start + 4, pdc, 3));
        assert_eq!(a.sack_base_psn(), Some(start + 1));
        assert_eq!(
            [1, 2, 3, 4].map(|i| a.sack_received(start + i)),
            [Some(false), Some(true), Some(false), Some(true)]
        );
        // In order with AR: acknowledged at once; without, after ack_delay.
        ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 1, 3, pdc)).unwrap();
        assert!(sent(&mut ep).is_empty());
        assert_eq!(ep.poll_timeout(), Some(ep.config().ack_delay));
        ep.handle_packet(NOW, 5, &request(Mode::Rud, FLAG_AR, start + 3, 3, pdc)).unwrap();
        let out = sent(&mut ep);
        assert!(
            matches!(out[..], [(5, PdsRepr::Ack(a))] if a.cack_psn == start + 4 && a.cc_info().unwrap().sack_bitmap == 0)
        );
    }

    #[test]
    fn fatal_nack_fails_the_initiator() {
        let mut ep = Endpoint::<u8>::new(Config::default(), 1);
        let (pdc, _) = ep.send(5, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"x"), 11).unwrap();
        let out = sent(&mut ep);
        let PdsRepr::Request(r) = out[0].1 else { panic!() };
        assert!(r.syn() && r.psn_offset() == Some(0) && r.flags & FLAG_AR != 0);
        let nack = NackRepr {
            next_hdr: NextHeader::None,
            flags: 0,
            nack_code: NackCode::PdcModeMismatch,
            vendor_code: 0,
            nack_psn: r.psn,
            spdcid: 0,
            dpdcid: pdc,
            payload: 0,
            ccx: None,
        };
        let mut b = [0u8; 16];
        nack.emit(&mut b).unwrap();
        // From someone else: ignored.
        ep.handle_packet(NOW, 6, &b).unwrap();
        assert_eq!(ep.poll_event(), None);
        ep.handle_packet(NOW, 5, &b).unwrap();
        assert_eq!(
            ep.poll_event(),
            Some(Event::Failed {
                pdc,
                peer: 5,
                error: PdcError::Nack(NackCode::PdcModeMismatch),
                unacked: vec![11]
            })
        );
        assert_eq!(ep.pdc_count(), 0);
        assert_eq!(ep.send_on(pdc, NextHeader::ReqStd, Bytes::new(), 0), Err(SendError::UnknownPdc));
    }
}
