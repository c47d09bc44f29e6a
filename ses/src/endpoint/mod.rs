//! A SES endpoint over a PDS endpoint: operations in, packets out, responses and completions.
//!
//! This file holds the [`Endpoint`] itself, its construction and accessors, and its entry points:
//! received packets (handed to the target or the initiator side), PDS events, the transmit poll and
//! the timers. Its public types are in `types`, what it keeps between calls in `state`, and its
//! methods by role in `initiator` (operations out, their completions), `target` (receives, requests
//! in), `response` (the responses it sends) and `large` (rendezvous and deferrable sends).

mod compact;
#[cfg(test)]
mod compact_tests;
mod initiator;
mod large;
mod response;
mod state;
mod target;
#[cfg(test)]
mod tests;
mod types;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use ahash::{AHashMap as HashMap, AHashSet as HashSet};
use bytes::Bytes;
use pds::{DeliveryKind, NextHeader, PdcId, Urgency};
use wire::FixedHeader;
use wire::uet::ses::{SesHeader, SesRepr, StandardRequest};

use crate::config::{Config, ConfigError};
use crate::key::Regions;
use crate::matching::{Posted, Queues};
use state::{Compact, InMsg, OutOp, Pending, RdvWait, Reply, Unexpected};
use types::{Refusal, Taken};

pub use types::{Addr, Completion, CompletionKind, Error, Opts, Stats, Status};

/// The SES of one endpoint. See the crate documentation.
#[derive(Debug)]
pub struct Endpoint<A> {
    cfg: Config,
    pds: pds::Endpoint<A>,
    /// Registered memory.
    pub regions: Regions,
    queues: Queues<A>,
    /// Unexpected messages by id, in arrival order.
    unexpected: BTreeMap<u64, Unexpected<A>>,
    unexpected_bytes: usize,
    next_unexpected: u64,
    inbound: HashMap<(A, PdcId, u16), InMsg<A>>,
    /// Partly received messages by PDC and by source (`max_inbound_per_pdc`, `_per_source`).
    inbound_per_pdc: HashMap<PdcId, usize>,
    inbound_per_src: HashMap<A, usize>,
    /// When each partly received message is looked at again (`reassembly_timeout`).
    reassembly: BTreeSet<(Duration, (A, PdcId, u16))>,
    ops: HashMap<u16, OutOp<A>>,
    /// splitmix64 state: message ids, internal keys.
    rng: u64,
    completions: VecDeque<Completion<A>>,
    stats: Stats,
    /// JobIDs served besides the endpoint's own.
    jobs: HashSet<u32>,
    /// Receives waiting for the read of a rendezvous.
    rdv_waits: HashMap<u16, RdvWait<A>>,
    /// The internal keys of rendezvous sends, with the receiver allowed to read each.
    rendezvous_keys: HashMap<u64, A>,
    /// Receives reserved for restarting deferred sends, by target token (with the initiator).
    reserved: HashMap<u32, (A, Posted<A>)>,
    next_token: u32,
    /// Responses waiting for room on their PDC, in order per PDC: a PDC whose send queue is full
    /// holds back only its own.
    backlog: BTreeMap<PdcId, VecDeque<Pending<A>>>,
    /// READs being served, by source (`max_served_reads`).
    served_reads: HashMap<A, usize>,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// An endpoint if `cfg` can run (see [`Config::validate`]); `seed` goes to the PDS
    /// (Start_PSNs) and draws message ids and internal keys.
    pub fn try_new(cfg: Config, seed: u64) -> Result<Endpoint<A>, ConfigError> {
        cfg.validate()?;
        let mut pds = pds::Endpoint::new(cfg.pds, seed);
        // Operations complete on their SES responses, never on PDS acknowledgements.
        pds.set_ack_events(false);
        Ok(Endpoint {
            cfg,
            pds,
            regions: Regions::default(),
            queues: Queues::new(),
            unexpected: BTreeMap::new(),
            unexpected_bytes: 0,
            next_unexpected: 0,
            inbound: HashMap::new(),
            inbound_per_pdc: HashMap::new(),
            inbound_per_src: HashMap::new(),
            reassembly: BTreeSet::new(),
            ops: HashMap::new(),
            rng: seed ^ 0x5E5_0000_D1CE_5EED,
            completions: VecDeque::new(),
            stats: Stats::default(),
            jobs: HashSet::new(),
            rdv_waits: HashMap::new(),
            rendezvous_keys: HashMap::new(),
            reserved: HashMap::new(),
            next_token: 0,
            backlog: BTreeMap::new(),
            served_reads: HashMap::new(),
        })
    }

    /// An endpoint; `seed` goes to the PDS (Start_PSNs) and draws message ids and internal keys.
    ///
    /// # Panics
    ///
    /// If `cfg` cannot run ([`Config::validate`]; [`Endpoint::try_new`] returns the error).
    pub fn new(cfg: Config, seed: u64) -> Endpoint<A> {
        Endpoint::try_new(cfg, seed).unwrap_or_else(|e| panic!("ses::Config: {e}"))
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The PDS underneath (counters, PDC state, close).
    pub fn pds(&mut self) -> &mut pds::Endpoint<A> {
        &mut self.pds
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Operations waiting for their response.
    pub fn outstanding(&self) -> usize {
        self.ops.len()
    }

    /// Receives posted and not matched yet.
    pub fn posted_count(&self) -> usize {
        self.queues.len()
    }

    /// Messages kept as unexpected.
    pub fn unexpected_count(&self) -> usize {
        self.unexpected.len()
    }

    /// Messages partly received (first packet in, last not yet), over all sources and PDCs.
    pub fn inbound_count(&self) -> usize {
        self.inbound.len()
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion<A>> {
        let c = self.completions.pop_front()?;
        self.stats.completions += 1;
        match c.status {
            Status::Remote(rc) => self.stats.completion_errors.add(rc.into()),
            Status::Failed(_) | Status::Timeout => self.stats.completions_failed += 1,
            Status::Ok | Status::Truncated | Status::Cancelled => {}
        }
        Some(c)
    }

    /// Also serves requests carrying `job_id` (a JobID of the AV method's auth keys); requests
    /// whose JobID is neither this nor the endpoint's own are answered BAD_JOB_ID, untouched.
    pub fn authorize_job(&mut self, job_id: u32) {
        self.jobs.insert(job_id & 0xFF_FFFF);
    }

    /// Stops serving `job_id` (not the endpoint's own).
    pub fn revoke_job(&mut self, job_id: u32) {
        self.jobs.remove(&(job_id & 0xFF_FFFF));
    }

    /// The next pseudo-random number (splitmix64 over the seed).
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn job_authorized(&self, job_id: u32) -> bool {
        job_id == self.cfg.job_id & 0xFF_FFFF || self.jobs.contains(&job_id)
    }

    /// Feeds one received UET packet (the PDS header onwards; CRC already checked).
    pub fn handle_packet(&mut self, now: Duration, src: A, buf: &[u8]) -> Result<(), wire::Error> {
        self.handle_packet_ecn(now, src, buf, false)
    }

    /// [`handle_packet`](Self::handle_packet) for a packet whose IP header was marked CE.
    pub fn handle_packet_ecn(
        &mut self,
        now: Duration,
        src: A,
        buf: &[u8],
        ce: bool,
    ) -> Result<(), wire::Error> {
        let d = self.pds.handle_packet_ecn(now, src, buf, ce)?;
        if let Some(d) = d {
            let (reply, piece) = match d.kind {
                DeliveryKind::Pdc { pdc, ack_requested, .. } => {
                    // Nobody waits for the response to a request that asked for no immediate ACK.
                    let urgency = if ack_requested { Urgency::Prompt } else { Urgency::Held };
                    (Reply::Pdc(pdc, urgency), 0)
                }
                DeliveryKind::RudiRequest { pkt_id } => (Reply::Rudi(src, pkt_id), 0),
                DeliveryKind::RudiResponse { cookie, .. } => (Reply::None, (cookie & 0xFFFF_FFFF) as usize),
                DeliveryKind::Uud => (Reply::None, 0),
            };
            // Sends and writes first, their header parsed inline (see parse_plain_standard).
            let plain = if d.next_hdr == NextHeader::ReqStd && carries_requests(d.kind) {
                SesRepr::parse_plain_standard(d.body)
            } else {
                None
            };
            let taken = match plain {
                Some(r) => self.on_request(now, src, reply, &r, None, &d.body[StandardRequest::LEN..], None),
                None => match SesRepr::parse(d.body, d.next_hdr) {
                    Ok(Some(ses)) => {
                        let payload = &d.body[ses.buffer_len()..];
                        self.on_ses(now, src, reply, d.kind, ses, payload, piece)
                    }
                    _ => Err(Refusal::Dropped),
                },
            };
            self.stats.count(taken);
        }
        self.drain_pds_events();
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn on_ses(
        &mut self,
        now: Duration,
        src: A,
        reply: Reply<A>,
        kind: DeliveryKind,
        ses: SesRepr,
        payload: &[u8],
        piece: usize,
    ) -> Taken {
        match (ses.header, kind) {
            (SesHeader::Standard(r), k) if carries_requests(k) => {
                self.on_request(now, src, reply, &r, ses.ext, payload, None)
            }
            (SesHeader::Small(r), k) if carries_requests(k) => {
                self.on_compact(now, src, reply, k, Compact::Small(&r), ses.ext, payload)
            }
            (SesHeader::Medium(r), k) if carries_requests(k) => {
                self.on_compact(now, src, reply, k, Compact::Medium(&r), ses.ext, payload)
            }
            (
                SesHeader::ResponseDataSmall(r),
                DeliveryKind::Pdc { .. } | DeliveryKind::RudiResponse { .. },
            ) => {
                if usize::from(r.payload_length()) != payload.len() {
                    return Err(Refusal::Dropped);
                }
                // Over RUDI the request is the one of the response's pkt_id (its cookie names the
                // operation); over a PDC the operation's message id is its request's PSN's low 16
                // bits (see `compact`).
                let id = match kind {
                    DeliveryKind::RudiResponse { cookie, .. } => (cookie >> 32) as u16,
                    _ => r.original_request_psn as u16,
                };
                self.on_response(src, kind, id, r.head.return_code, r.head.list, payload, piece)
            }
            (SesHeader::Response(r), DeliveryKind::Pdc { .. } | DeliveryKind::RudiResponse { .. }) => {
                self.on_response(src, kind, r.message_id, r.head.return_code, r.head.list, &[], 0)
            }
            (SesHeader::ResponseData(r), DeliveryKind::Pdc { .. } | DeliveryKind::RudiResponse { .. }) => {
                let plen = usize::from(r.payload_length());
                if plen != payload.len() {
                    return Err(Refusal::Dropped);
                }
                let at = piece + r.message_offset as usize;
                let id = r.read_req_message_id;
                self.on_response(src, kind, id, r.head.return_code, r.head.list, payload, at)
            }
            _ => Err(Refusal::Dropped),
        }
    }

    fn drain_pds_events(&mut self) {
        while let Some(e) = self.pds.poll_event() {
            match e {
                pds::Event::Failed { pdc, error, .. } => {
                    let mut dead: Vec<u16> =
                        self.ops.iter().filter(|(_, o)| o.pdc == Some(pdc)).map(|(&id, _)| id).collect();
                    dead.sort_unstable();
                    for id in dead {
                        let op = self.ops.remove(&id).expect("listed");
                        self.end_op(op, Status::Failed(error));
                    }
                    self.forget_pdc(pdc);
                }
                pds::Event::RudiFailed { cookie, .. } => {
                    if let Some(op) = self.ops.remove(&((cookie >> 32) as u16)) {
                        self.end_op(op, Status::Timeout);
                    }
                }
                pds::Event::Closed { pdc, .. } => self.forget_pdc(pdc),
                pds::Event::Established { .. } | pds::Event::Accepted { .. } | pds::Event::Acked { .. } => {}
            }
        }
    }

    /// Drops the partly received messages of a PDC that failed or closed (see `drop_partial`).
    fn forget_pdc(&mut self, pdc: PdcId) {
        let gone: Vec<_> = self.inbound.keys().filter(|k| k.1 == pdc).copied().collect();
        for key in gone {
            if let Some(m) = self.remove_inbound(key) {
                self.drop_partial(m);
            }
        }
    }

    /// Writes the next packet to send into `buf` (see [`pds::Endpoint::poll_transmit`]).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<pds::Transmit<A>> {
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        self.pds.poll_transmit(now, buf)
    }

    /// [`poll_transmit`](Self::poll_transmit) with the payload left where it is (see
    /// [`pds::Endpoint::poll_transmit_split`]): the headers are written, the payload returned.
    pub fn poll_transmit_split(
        &mut self,
        now: Duration,
        buf: &mut [u8],
    ) -> Option<(pds::Transmit<A>, Bytes)> {
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        self.pds.poll_transmit_split(now, buf)
    }

    /// The next deadline (the PDS's timers, the reassembly timeout of partly received messages).
    pub fn poll_timeout(&self) -> Option<Duration> {
        let reassembly = self.reassembly.first().map(|&(t, _)| t);
        match (self.pds.poll_timeout(), reassembly) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.pds.handle_timeout(now);
        self.drain_pds_events();
        self.reap_inbound(now);
    }
}

/// Whether a PDS delivery of this kind can carry a SES request (a PDC's packets, RUDI requests,
/// UUD datagrams), not only responses.
fn carries_requests(kind: DeliveryKind) -> bool {
    matches!(kind, DeliveryKind::Pdc { .. } | DeliveryKind::RudiRequest { .. } | DeliveryKind::Uud)
}
