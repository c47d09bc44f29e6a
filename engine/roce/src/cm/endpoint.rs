//! The CM of one port: its connections, listeners, and the calls of its consumer.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use ahash::AHashMap;
use wire::ib::cm::{CmMessage, Dreq, Rej, rej_reason};

use super::conn::{self, Conn, drep};
use super::types::{
    AcceptParams, CmConfig, CmError, CmEvent, CmStats, ConnId, ConnectParams, Mad, State, encode,
};

/// MADs waiting to be sent, at most this many (answers to a flood of unsolicited MADs are dropped
/// beyond it; retransmission timers resend what matters).
const TX_QUEUE: usize = 256;
/// Events waiting for the consumer, at most this many.
const EVENT_QUEUE: usize = 4096;

/// REQs and SIDR_REQs held for a service nobody listens on yet, at most this many.
const PARKED: usize = 64;

/// A REQ or SIDR_REQ for a service with no listener yet, held for
/// [`CmConfig::unclaimed_grace`]: a server that starts listening meanwhile gets it (a client
/// that connects the moment its server was told to listen does not see a REJ), otherwise it is
/// rejected when the grace ends.
#[derive(Debug)]
pub(super) struct Parked {
    deadline: Duration,
    peer: IpAddr,
    /// The sender's comm ID (REQ) or request ID (SIDR_REQ).
    key: u32,
    service_id: u64,
    mad: Box<Mad>,
}

/// A listener: its backlog and how many REQs wait for the consumer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listener {
    pub(super) backlog: usize,
    pub(super) waiting: usize,
}

/// The CM of one port.
#[derive(Debug)]
pub struct Cm {
    pub(super) cfg: CmConfig,
    pub(super) conns: AHashMap<u32, Conn>,
    /// (peer, remote comm ID) -> local comm ID, for REQs and SIDR_REQs we took.
    pub(super) by_remote: AHashMap<(IpAddr, u32), u32>,
    pub(super) listeners: AHashMap<u64, Listener>,
    pub(super) next_id: u32,
    pub(super) tx: VecDeque<(IpAddr, u8, Box<Mad>)>,
    pub(super) events: VecDeque<CmEvent>,
    pub(super) stats: CmStats,
    pub(super) parked: Vec<Parked>,
    /// Parked MADs are being handled again: no parking them a second time.
    pub(super) unparking: bool,
}

impl Cm {
    /// A CM with no connections and no listeners.
    pub fn new(cfg: CmConfig) -> Cm {
        Cm {
            cfg,
            conns: AHashMap::new(),
            by_remote: AHashMap::new(),
            listeners: AHashMap::new(),
            next_id: cfg.seed | 1,
            tx: VecDeque::new(),
            events: VecDeque::new(),
            stats: CmStats::default(),
            parked: Vec::new(),
            unparking: false,
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> CmStats {
        self.stats
    }

    /// The state of a connection, if the CM still has it.
    pub fn state(&self, id: ConnId) -> Option<State> {
        self.conns.get(&id.0).map(|c| c.state)
    }

    /// Connection records held (any state).
    pub fn conns(&self) -> usize {
        self.conns.len()
    }

    /// Takes REQs and SIDR_REQs for `service_id`, at most `backlog` waiting for the consumer.
    pub fn listen(&mut self, service_id: u64, backlog: usize) -> Result<(), CmError> {
        if self.listeners.contains_key(&service_id) {
            return Err(CmError::ServiceInUse);
        }
        self.listeners.insert(service_id, Listener { backlog: backlog.max(1), waiting: 0 });
        // Requests that came early are due now.
        for p in self.parked.iter_mut().filter(|p| p.service_id == service_id) {
            p.deadline = Duration::ZERO;
        }
        Ok(())
    }

    /// Stops taking REQs for `service_id`; REQs not answered yet are rejected.
    pub fn unlisten(&mut self, now: Duration, service_id: u64) {
        if self.listeners.remove(&service_id).is_none() {
            return;
        }
        let waiting: Vec<u32> = self
            .conns
            .values()
            .filter(|c| {
                c.listener == Some(service_id) && matches!(c.state, State::ReqRcvd | State::SidrReqRcvd)
            })
            .map(|c| c.id)
            .collect();
        for id in waiting {
            let _ = self.reject(now, ConnId(id), rej_reason::INVALID_SERVICE_ID, &[]);
        }
    }

    pub(super) fn alloc_id(&mut self) -> Result<u32, CmError> {
        if self.conns.len() >= self.cfg.max_conns {
            return Err(CmError::NoResources);
        }
        loop {
            // An odd increment walks every u32 before repeating; 0 is never an ID.
            self.next_id = self.next_id.wrapping_add(0x9E37_79B9);
            if self.next_id != 0 && !self.conns.contains_key(&self.next_id) {
                return Ok(self.next_id);
            }
        }
    }

    fn tid_for(&self, id: u32) -> u64 {
        (u64::from(self.cfg.seed) << 32) | u64::from(id)
    }

    /// The time a peer that advertised `exp` may take to answer, and so the wait before a retry.
    pub fn wait_for(exp: u8) -> Duration {
        // 4.096 µs << exp, plus twice a packet lifetime of about 1 ms on a LAN.
        Duration::from_nanos(4096u64 << exp.min(31)) + Duration::from_millis(2)
    }

    /// Active: sends a REQ to `peer`.
    pub fn connect(&mut self, now: Duration, peer: IpAddr, p: &ConnectParams) -> Result<ConnId, CmError> {
        let id = self.alloc_id()?;
        let mut c = Conn::new(id, peer, self.tid_for(id), State::ReqSent);
        c.service_id = p.service_id;
        c.local_qpn = p.qpn;
        c.traffic_class = p.traffic_class;
        let mad = conn::req(&self.cfg, id, c.tid, p)?;
        c.arm(now, mad.clone(), Cm::wait_for(self.cfg.response_timeout), self.cfg.max_retries);
        self.conns.insert(id, c);
        self.send((peer, p.traffic_class), mad);
        Ok(ConnId(id))
    }

    /// Passive: answers a [`CmEvent::Request`] with a REP.
    pub fn accept(&mut self, now: Duration, id: ConnId, p: &AcceptParams) -> Result<(), CmError> {
        let cfg = self.cfg;
        let c = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn)?;
        if c.state != State::ReqRcvd {
            return Err(CmError::WrongState(c.state));
        }
        let mad = conn::rep(&cfg, c, p)?;
        c.local_qpn = p.qpn;
        c.state = State::RepSent;
        let wait = Cm::wait_for(c.peer_timeout.min(cfg.response_timeout));
        c.arm(now, mad.clone(), wait, c.peer_retries.min(cfg.max_retries));
        let to = (c.peer, c.traffic_class);
        self.unwait(id.0);
        self.send(to, mad);
        Ok(())
    }

    /// Active: after a [`CmEvent::Reply`] (QP at RTR and RTS), sends the RTU; the connection is
    /// established.
    pub fn establish(&mut self, _now: Duration, id: ConnId) -> Result<(), CmError> {
        let c = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn)?;
        if c.state != State::RepRcvd {
            return Err(CmError::WrongState(c.state));
        }
        let mad = conn::rtu(c)?;
        c.state = State::Established;
        c.disarm();
        c.last = Some(mad.clone());
        let to = (c.peer, c.traffic_class);
        self.send(to, mad);
        self.event(CmEvent::Established(id));
        Ok(())
    }

    /// Rejects a REQ (passive, before accepting) or a REP (active, instead of establishing) with an
    /// IBTA reason; the record goes to time wait.
    pub fn reject(&mut self, now: Duration, id: ConnId, reason: u16, private: &[u8]) -> Result<(), CmError> {
        let c = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn)?;
        let rejected = match c.state {
            State::ReqRcvd => 0,
            State::RepRcvd => 1,
            s => return Err(CmError::WrongState(s)),
        };
        let mad = encode(
            &CmMessage::Rej(Rej {
                local_comm_id: c.id,
                remote_comm_id: c.remote_id,
                message_rejected: rejected,
                reject_info_len: 0,
                reason,
                ari: &[],
                private_data: private,
            }),
            c.tid,
        )?;
        let to = (c.peer, c.traffic_class);
        self.unwait(id.0);
        self.enter_timewait(now, id.0, Some(mad.clone()));
        self.send(to, mad);
        Ok(())
    }

    /// Closes a connection: sends DREQ (established), or DREP (after a
    /// [`CmEvent::DisconnectRequest`]). Any other state: the connection is abandoned (a REQ not
    /// answered is rejected, one we sent is forgotten); no event follows then.
    pub fn disconnect(&mut self, now: Duration, id: ConnId, private: &[u8]) -> Result<(), CmError> {
        let cfg = self.cfg;
        let c = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn)?;
        match c.state {
            State::Established | State::RepSent => {
                let mad = encode(
                    &CmMessage::Dreq(Dreq {
                        local_comm_id: c.id,
                        remote_comm_id: c.remote_id,
                        remote_qpn: c.remote_qpn,
                        private_data: private,
                    }),
                    c.tid,
                )?;
                c.state = State::DreqSent;
                c.arm(now, mad.clone(), Cm::wait_for(cfg.response_timeout), cfg.max_retries);
                let to = (c.peer, c.traffic_class);
                self.send(to, mad);
                Ok(())
            }
            State::DreqRcvd => {
                let mad = drep(c, private)?;
                let to = (c.peer, c.traffic_class);
                self.enter_timewait(now, id.0, Some(mad.clone()));
                self.send(to, mad);
                self.event(CmEvent::Disconnected(id));
                Ok(())
            }
            State::ReqRcvd | State::RepRcvd => {
                self.reject(now, id, rej_reason::CONSUMER_REJECT, &[])?;
                Ok(())
            }
            State::DreqSent | State::TimeWait => Ok(()),
            State::ReqSent | State::SidrReqSent | State::SidrReqRcvd => {
                self.unwait(id.0);
                self.remove(id.0);
                Ok(())
            }
        }
    }

    /// Forgets a connection at once (the consumer destroyed its ID): an established one is
    /// disconnected first, and the record lives on, without events, until that finishes.
    pub fn destroy(&mut self, now: Duration, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id.0) else { return };
        c.orphan = true;
        match c.state {
            State::Established | State::RepSent | State::DreqRcvd | State::ReqRcvd | State::RepRcvd => {
                let _ = self.disconnect(now, id, &[]);
            }
            State::DreqSent | State::TimeWait => {}
            _ => {
                self.unwait(id.0);
                self.remove(id.0);
            }
        }
    }

    /// Active: asks `peer` which UD QP serves `service_id` (SIDR_REQ).
    pub fn sidr_request(
        &mut self,
        now: Duration,
        peer: IpAddr,
        service_id: u64,
        private: &[u8],
    ) -> Result<ConnId, CmError> {
        let id = self.alloc_id()?;
        let mut c = Conn::new(id, peer, self.tid_for(id), State::SidrReqSent);
        c.service_id = service_id;
        let mad = conn::sidr_req(id, c.tid, service_id, private)?;
        c.arm(now, mad.clone(), Cm::wait_for(self.cfg.response_timeout), self.cfg.max_retries);
        self.conns.insert(id, c);
        self.send((peer, 0), mad);
        Ok(ConnId(id))
    }

    /// Passive: answers a [`CmEvent::SidrRequest`]; status 0 with the service's QP and Q_Key, or an
    /// IBTA SIDR status (1: no such service, 2: rejected).
    pub fn sidr_reply(
        &mut self,
        now: Duration,
        id: ConnId,
        status: u8,
        qpn: u32,
        qkey: u32,
        private: &[u8],
    ) -> Result<(), CmError> {
        let c = self.conns.get_mut(&id.0).ok_or(CmError::UnknownConn)?;
        if c.state != State::SidrReqRcvd {
            return Err(CmError::WrongState(c.state));
        }
        let mad = conn::sidr_rep(c, status, qpn, qkey, private)?;
        let to = (c.peer, c.traffic_class);
        self.unwait(id.0);
        self.enter_timewait(now, id.0, Some(mad.clone()));
        self.send(to, mad);
        Ok(())
    }

    /// Feeds a MAD received on QP1 from `peer`.
    pub fn handle_mad(&mut self, now: Duration, peer: IpAddr, mad: &[u8]) {
        self.stats.rx += 1;
        let Ok((hdr, msg)) = CmMessage::parse(mad) else {
            self.stats.rx_bad += 1;
            tracing::debug!(%peer, "CM: a MAD that does not parse as CM");
            return;
        };
        tracing::debug!(%peer, attr = %format_args!("{:#06x}", hdr.attr_id), tid = hdr.tid, "CM: received");
        self.dispatch(now, peer, hdr.tid, &msg);
    }

    /// Whether nothing is in flight: no MAD to send, no DREQ waiting for its DREP.
    pub fn settled(&self) -> bool {
        self.tx.is_empty() && !self.conns.values().any(|c| c.state == State::DreqSent)
    }

    /// Whether MADs wait to be sent.
    pub fn wants_transmit(&self) -> bool {
        !self.tx.is_empty()
    }

    /// The next MAD to send and where to.
    pub fn poll_transmit(&mut self) -> Option<(IpAddr, Box<Mad>)> {
        self.poll_transmit_classed().map(|(peer, _, mad)| (peer, mad))
    }

    /// [`poll_transmit`](Self::poll_transmit) with the IP traffic class (the TOS byte) the MAD
    /// goes with: its connection's primary path's (the REQ's; 0 for SIDR and for answers to
    /// MADs of no connection but a REQ's REJ, which takes the REQ's).
    pub fn poll_transmit_classed(&mut self) -> Option<(IpAddr, u8, Box<Mad>)> {
        self.tx.pop_front()
    }

    /// The next event for the consumer.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) has work next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let parked = self.parked.iter().map(|p| p.deadline);
        self.conns.values().filter_map(|c| c.deadline).chain(parked).min()
    }

    /// Resends what is due, gives up on what ran out of retries, ends time waits.
    pub fn handle_timeout(&mut self, now: Duration) {
        let due: Vec<u32> =
            self.conns.values().filter(|c| c.deadline.is_some_and(|d| d <= now)).map(|c| c.id).collect();
        for id in due {
            self.expire(now, id);
        }
        // Parked requests whose service is listened on now, or whose grace ended (rejected now).
        let (due, keep): (Vec<Parked>, Vec<Parked>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|p| p.deadline <= now || self.listeners.contains_key(&p.service_id));
        self.parked = keep;
        self.unparking = true;
        for p in due {
            if let Ok((hdr, msg)) = CmMessage::parse(&p.mad[..]) {
                self.dispatch(now, p.peer, hdr.tid, &msg);
            }
        }
        self.unparking = false;
    }

    /// Holds a REQ or SIDR_REQ for a service nobody listens on yet ([`Parked`]); false when it
    /// must be refused now (the hold is full, or it was held already).
    pub(super) fn park(
        &mut self,
        now: Duration,
        peer: IpAddr,
        tid: u64,
        service_id: u64,
        key: u32,
        msg: &CmMessage<'_>,
    ) -> bool {
        if self.unparking || self.cfg.unclaimed_grace.is_zero() {
            return false;
        }
        if self.parked.iter().any(|p| p.peer == peer && p.key == key) {
            // A retry of one held already.
            return true;
        }
        if self.parked.len() >= PARKED {
            return false;
        }
        let Ok(mad) = encode(msg, tid) else { return false };
        self.parked.push(Parked { deadline: now + self.cfg.unclaimed_grace, peer, key, service_id, mad });
        true
    }

    // ---- shared by conn.rs ----

    /// Queues `mad` to `peer` with the IP traffic class (TOS byte) beside it.
    pub(super) fn send(&mut self, (peer, traffic_class): (IpAddr, u8), mad: Box<Mad>) {
        if self.tx.len() >= TX_QUEUE {
            self.stats.tx_dropped += 1;
            return;
        }
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        tracing::debug!(%peer, attr = %format_args!("{attr:#06x}"), "CM: sending");
        self.stats.tx += 1;
        self.tx.push_back((peer, traffic_class, mad));
    }

    pub(super) fn event(&mut self, ev: CmEvent) {
        let id = match &ev {
            CmEvent::Request(id, _)
            | CmEvent::Reply(id, _)
            | CmEvent::Established(id)
            | CmEvent::Rejected(id, ..)
            | CmEvent::Unreachable(id)
            | CmEvent::DisconnectRequest(id, _)
            | CmEvent::Disconnected(id)
            | CmEvent::SidrRequest(id, ..)
            | CmEvent::SidrReply(id, _) => *id,
        };
        if self.conns.get(&id.0).is_some_and(|c| c.orphan) || self.events.len() >= EVENT_QUEUE {
            return;
        }
        self.events.push_back(ev);
    }

    /// A REQ (or SIDR_REQ) no longer waits for the consumer: its listener's backlog frees a slot.
    pub(super) fn unwait(&mut self, id: u32) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if let Some(l) = c.listener.take().and_then(|s| self.listeners.get_mut(&s)) {
            l.waiting = l.waiting.saturating_sub(1);
        }
    }

    pub(super) fn enter_timewait(&mut self, now: Duration, id: u32, last: Option<Box<Mad>>) {
        let tw = self.cfg.timewait;
        if let Some(c) = self.conns.get_mut(&id) {
            c.state = State::TimeWait;
            c.last = last;
            c.retries_left = 0;
            c.deadline = Some(now + tw);
        }
    }

    pub(super) fn remove(&mut self, id: u32) {
        if let Some(c) = self.conns.remove(&id) {
            if c.remote_id != 0 {
                self.by_remote.remove(&(c.peer, c.remote_id));
            }
        }
    }
}
