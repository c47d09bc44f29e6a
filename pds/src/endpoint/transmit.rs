//! The sending side of an [`Endpoint`]: queuing packets on PDCs, RUDI requests and responses, UUD
//! datagrams and NACKs; the transmit poll (control packets, then RUDI, then the active PDCs round
//! robin) with RCCC credit grants; the next deadline and the timers (of the PDCs due only).

use std::hash::Hash;
use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::request::FLAG_RETX;
use wire::uet::pds::{Mode, NackCode, NackRepr, NextHeader, PdsRepr, RudiRepr, UudRepr};

use super::types::{SendError, Transmit};
use super::{Ctrl, Endpoint};
use crate::body::Body;
use crate::event::{Event, PdcError};
use crate::pdc::{NoRoom, PdcId, TxKind, emit, emit_body};
use crate::tx::Urgency;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
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
        self.send_on_with(pdc, next_hdr, body, cookie, Urgency::Prompt)
    }

    /// [`send_on`](Self::send_on) with an [`Urgency`] other than [`Urgency::Prompt`]: a packet
    /// nobody waits on (an inject, or the response to one) asks for no immediate ACK, so the
    /// peer acknowledges it within its coalescing delay (`Config::ack_delay`) instead of at
    /// once; a held one also waits for company.
    pub fn send_on_with(
        &mut self,
        pdc: PdcId,
        next_hdr: NextHeader,
        body: impl Into<Body>,
        cookie: u64,
        urgency: Urgency,
    ) -> Result<u32, SendError> {
        let p = self.pdcs.get_mut(&pdc).ok_or(SendError::UnknownPdc)?;
        if p.closing {
            return Err(SendError::Closing);
        }
        if p.tx.len() >= self.cfg.max_queued {
            return Err(SendError::QueueFull);
        }
        let psn = p.push(next_hdr, body.into(), cookie, urgency, &self.cfg);
        self.sched.touch(pdc, p, &self.cfg);
        Ok(psn)
    }

    /// Sends a RUDI request; returns its `pkt_id`. The response arrives as a
    /// [`DeliveryKind::RudiResponse`], or [`Event::RudiFailed`] after `max_retries`.
    ///
    /// [`DeliveryKind::RudiResponse`]: crate::DeliveryKind::RudiResponse
    pub fn rudi_send(&mut self, peer: A, next_hdr: NextHeader, body: impl Into<Body>, cookie: u64) -> u32 {
        self.rudi.push(peer, next_hdr, body.into(), cookie)
    }

    /// Answers the RUDI request `pkt_id` from `peer` (sent once; a lost response is recovered by
    /// the initiator retransmitting the request).
    /// Dropped (and counted) when `Config::max_ctrl` control packets wait already.
    pub fn rudi_respond(&mut self, peer: A, pkt_id: u32, next_hdr: NextHeader, body: impl Into<Body>) {
        self.queue_ctrl(peer, Ctrl::Rudi { pkt_id, next_hdr, body: body.into() });
    }

    /// Sends a UUD datagram (no state, no acknowledgement, no retransmission). Dropped (and
    /// counted) when `Config::max_ctrl` control packets wait already.
    pub fn uud_send(&mut self, peer: A, next_hdr: NextHeader, body: impl Into<Body>) {
        self.queue_ctrl(peer, Ctrl::Uud { next_hdr, body: body.into() });
    }

    /// Queues a control packet, or drops it when `Config::max_ctrl` wait already.
    fn queue_ctrl(&mut self, dst: A, c: Ctrl) {
        if self.ctrl.len() >= self.cfg.max_ctrl {
            self.stats.ctrl_dropped += 1;
            return;
        }
        self.ctrl.push_back((dst, c));
    }

    /// Queues a NACK from this endpoint (not from a PDC's receiving half).
    pub(super) fn nack(&mut self, dst: A, code: NackCode, psn: u32, spdcid: u16, dpdcid: u16, payload: u32) {
        let repr = NackRepr {
            next_hdr: NextHeader::None,
            flags: 0,
            nack_code: code,
            vendor_code: 0,
            nack_psn: psn,
            spdcid,
            dpdcid,
            payload,
            ccx: None,
        };
        self.queue_ctrl(dst, Ctrl::Nack(repr));
    }

    /// Writes the next packet to send into `buf` (which must hold the largest body plus 16 bytes).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut [u8]) -> Option<Transmit<A>> {
        let t = self.poll_released(now, buf, None)?;
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
        let t = self.poll_released(now, buf, Some(&mut tail))?;
        self.stats.tx_packets += 1;
        Some((t, tail))
    }

    /// The next packet; one going out releases the packets held back for company (they follow
    /// it in this poll), and a poll that finds nothing ends the release.
    fn poll_released(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        tail: Option<&mut Bytes>,
    ) -> Option<Transmit<A>> {
        let Some(t) = self.poll_inner(now, buf, tail) else {
            self.release = false;
            return None;
        };
        self.release = true;
        for id in self.holding.drain(..) {
            if let Some(p) = self.pdcs.get_mut(&id) {
                p.holding = false;
                self.sched.touch(id, p, &self.cfg);
            }
        }
        Some(t)
    }

    fn poll_inner(
        &mut self,
        now: Duration,
        buf: &mut [u8],
        mut tail: Option<&mut Bytes>,
    ) -> Option<Transmit<A>> {
        self.grant_credit(now);
        if let Some((dst, c)) = self.ctrl.pop_front() {
            let control = matches!(c, Ctrl::Nack(_));
            let len = match c {
                Ctrl::Nack(n) => {
                    self.stats.tx_nacks += 1;
                    self.stats.tx_nack_codes.add(n.nack_code.into());
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
            return Some(Transmit { dst, len, control });
        }
        if let Some((pkt_id, p, retx)) = self.rudi.next_to_send(now, &self.cfg) {
            let flags = if retx { FLAG_RETX } else { 0 };
            let r = RudiRepr { response: false, next_hdr: p.next_hdr, flags, reserved: 0, pkt_id };
            let (dst, len) = (p.peer, emit_body(&PdsRepr::Rudi(r), &p.body, buf, tail)?);
            self.stats.tx_retransmits += u64::from(retx);
            return Some(Transmit { dst, len, control: false });
        }
        // Round robin over the active PDCs, starting after the one served last; one with nothing
        // to send leaves the active set until something touches it again.
        self.sched.activate_due(now);
        let mut cursor = self.rr;
        for _ in 0..self.sched.active_len() {
            let id = self.sched.next_active(cursor)?;
            cursor = id;
            let Some(p) = self.pdcs.get_mut(&id) else {
                self.sched.idle(id);
                continue;
            };
            let listed = p.holding;
            let (len, kind) = match p.poll_transmit(now, &self.cfg, buf, tail.as_deref_mut(), self.release) {
                Ok(Some(sent)) => sent,
                Ok(None) => {
                    if p.holding && !listed {
                        self.holding.push(id);
                    }
                    self.sched.idle(id);
                    // It may have armed its tail probe.
                    self.sched.rearm(id, p, &self.cfg);
                    continue;
                }
                // Due, but not in this buffer: it stays active for a larger one.
                Err(NoRoom) => continue,
            };
            let (dst, done) = (p.peer, p.close_done);
            let control = !matches!(kind, TxKind::Data | TxKind::Retransmit);
            match kind {
                TxKind::Ack => self.stats.tx_acks += 1,
                TxKind::Nack(code) => {
                    self.stats.tx_nacks += 1;
                    self.stats.tx_nack_codes.add(code.into());
                }
                TxKind::Retransmit => self.stats.tx_retransmits += 1,
                TxKind::Credit => self.stats.tx_credits += 1,
                TxKind::CreditReq => self.stats.tx_credit_reqs += 1,
                TxKind::Control | TxKind::Data => {}
            }
            self.rr = id;
            if done {
                self.closed(now, id);
            } else {
                self.sched.rearm(id, p, &self.cfg);
            }
            return Some(Transmit { dst, len, control });
        }
        None
    }

    /// RCCC: the pull pacer makes the grants due at `now`, round robin over the PDCs whose peers
    /// want credit (each grant goes out in the PDC's next ACK or a CP CREDIT).
    fn grant_credit(&mut self, now: Duration) {
        let Some(rc) = self.cfg.rccc else { return };
        let (pdcs, cursor, sched, cfg) = (&mut self.pdcs, &mut self.grant_rr, &mut self.sched, &self.cfg);
        self.pacer.run(&rc, now, |max| {
            let Some(id) = sched.next_wanting_credit(*cursor) else { return 0 };
            *cursor = id;
            let Some(p) = pdcs.get_mut(&id) else { return 0 };
            let granted = p.credit_rx.grant(max);
            // The grant goes out in its next ACK or a CP CREDIT.
            sched.touch(id, p, cfg);
            granted
        });
    }

    /// The earliest time [`Endpoint::handle_timeout`] has something to do (or a delayed ACK, or a
    /// credit grant, is due).
    pub fn poll_timeout(&self) -> Option<Duration> {
        let wanted = self.sched.credit_wanted() && self.cfg.rccc.is_some();
        let first = self.sched.next_deadline();
        first.into_iter().chain(self.rudi.poll_timeout()).chain(self.pacer.poll_timeout(wanted)).min()
    }

    /// Whether `poll_transmit` would return a packet now (without a deadline passing).
    pub fn has_transmit(&self) -> bool {
        !self.ctrl.is_empty() || self.rudi.has_due()
    }

    /// Runs the timers due at `now`: retransmissions, retry limits (which fail the PDC or the RUDI
    /// request), the reaper of half-open and idle target PDCs.
    pub fn handle_timeout(&mut self, now: Duration) {
        // Only the PDCs whose deadline has come: each runs its timers, then the reaper looks at it,
        // and the polls look at it again (once: a deadline its timers leave due, a delayed ACK,
        // is the transmit poll's).
        let mut due = std::mem::take(&mut self.due);
        while let Some(id) = self.sched.pop_due(now) {
            due.push(id);
        }
        for &id in &due {
            let Some(p) = self.pdcs.get_mut(&id) else { continue };
            match p.handle_timeout(now, &self.cfg) {
                Ok(n) => {
                    self.stats.timeouts += n as u64;
                    self.stats.window_cuts += std::mem::take(&mut p.window_cuts);
                    self.stats.tail_probes += std::mem::take(&mut p.probes);
                }
                Err(()) => {
                    self.fail(id, PdcError::RetryExceeded);
                    continue;
                }
            }
            if !self.reap(id, now) {
                self.touched(id);
            }
        }
        due.clear();
        self.due = due;
        for (peer, pkt_id, cookie) in self.rudi.handle_timeout(now, &self.cfg) {
            self.events.push_back(Event::RudiFailed { peer, pkt_id, cookie });
        }
    }
}
