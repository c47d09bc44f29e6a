//! The receiving side of an [`Endpoint`]: a received PDS packet is parsed and goes to its PDC
//! (requests, ACKs, NACKs, CPs), to the RUDI initiator (responses) or up (RUDI requests, UUD
//! datagrams); trimmed packets are NACKed; what a PDC reports back becomes events and counters.

use std::hash::Hash;
use std::time::Duration;

use wire::uet::pds::nack::FLAG_NT;
use wire::uet::pds::{NackCode, PdsRepr, RequestRepr};

use super::Endpoint;
use super::types::{Delivery, DeliveryKind, Refused};
use crate::event::{Event, PdcError};
use crate::pdc::{Outcome, PdcId};
use crate::rx::Verdict;

/// What became of a parsed packet: its bytes to hand up, taken by the PDS (`None`), or refused.
type Taken<'a, A> = Result<Option<Delivery<'a, A>>, Refused>;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
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
    ) -> Taken<'a, A> {
        let id = if r.syn() {
            self.syn_target(now, src, r)?
        } else {
            let Some(id) = self.lookup(src, r.dpdcid, r.spdcid) else {
                self.nack(src, NackCode::InvDpdcid, r.psn, r.dpdcid, r.spdcid, 0);
                return Err(Refused::UnknownPdc);
            };
            id
        };
        self.heard(id, now, r.syn());
        let p = self.pdcs.get_mut(&id).expect("looked up");
        if p.mode != r.mode {
            let (psn, spdcid) = (r.psn, r.spdcid);
            self.nack(src, NackCode::PdcModeMismatch, psn, id, spdcid, 0);
            // A SYN may have just opened it: the reaper's deadline is armed.
            self.touched(id);
            return Err(Refused::ModeMismatch);
        }
        if p.after_close(r.psn) {
            self.nack(src, NackCode::Closing, r.psn, id, r.spdcid, 0);
            self.touched(id);
            return Err(Refused::AfterClose);
        }
        let out = p.on_request(r, now, &self.cfg);
        p.ce_seen |= ce;
        let dropped = out.dropped;
        self.apply(now, id, out);
        self.touched(id);
        match dropped {
            None | Some(Verdict::New) => {
                let ack_requested = r.flags & wire::uet::pds::request::FLAG_AR != 0;
                let kind = DeliveryKind::Pdc { pdc: id, psn: r.psn, mode: r.mode, ack_requested };
                Ok(Some(Delivery { peer: src, kind, next_hdr: r.next_hdr, body }))
            }
            Some(Verdict::Duplicate) => Err(Refused::Duplicate),
            Some(Verdict::OutOfOrder) => Err(Refused::OutOfOrder),
            Some(Verdict::OutOfWindow) => Err(Refused::OutOfWindow),
        }
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
        let taken = match RequestRepr::parse(buf) {
            Ok(r) => self.on_request_packet(now, src, &r, &buf[r.buffer_len()..], ce),
            Err(_) => {
                let pds = PdsRepr::parse(buf).inspect_err(|_| self.stats.rx_malformed += 1)?;
                self.on_other_packet(now, src, pds, &buf[pds.buffer_len()..], ce)
            }
        };
        self.stats.rx_packets += 1;
        match taken {
            Ok(Some(d)) => {
                self.stats.rx_delivered += 1;
                Ok(Some(d))
            }
            Ok(None) => {
                self.stats.rx_control += 1;
                Ok(None)
            }
            Err(why) => {
                self.stats.refused(why);
                Ok(None)
            }
        }
    }

    /// Every packet but a request parsed inline: ACKs, NACKs and CPs go to their PDC, RUDI
    /// requests and UUD datagrams up, RUDI responses up when they answer a request of this side.
    fn on_other_packet<'a>(
        &mut self,
        now: Duration,
        src: A,
        pds: PdsRepr,
        body: &'a [u8],
        ce: bool,
    ) -> Taken<'a, A> {
        match pds {
            PdsRepr::Request(r) => self.on_request_packet(now, src, &r, body, ce),
            PdsRepr::Ack(a) => {
                self.stats.rx_acks += 1;
                let id = self.lookup(src, a.dpdcid, a.spdcid).ok_or(Refused::Stale)?;
                self.heard(id, now, false);
                let out = self.pdcs.get_mut(&id).expect("looked up").on_ack(&a, now, &self.cfg);
                self.apply(now, id, out);
                self.touched(id);
                Ok(None)
            }
            PdsRepr::Nack(n) => {
                self.stats.rx_nacks += 1;
                self.stats.rx_nack_codes.add(n.nack_code.into());
                if n.flags & FLAG_NT != 0 {
                    // RUDI NACK (its PSN field holds the pkt_id): the request stays pending; its
                    // timer resends it.
                    return if self.rudi.is_pending(src, n.nack_psn) {
                        Ok(None)
                    } else {
                        Err(Refused::Stale)
                    };
                }
                let id = self.lookup(src, n.dpdcid, n.spdcid).ok_or(Refused::Stale)?;
                self.heard(id, now, false);
                let ignored = match self.pdcs.get_mut(&id).expect("looked up").on_nack(&n, now, &self.cfg) {
                    Ok(out) => {
                        let ignored = out.nack_ignored;
                        self.apply(now, id, out);
                        ignored
                    }
                    Err(code) => {
                        self.fail(id, PdcError::Nack(code));
                        false
                    }
                };
                self.touched(id);
                if ignored { Err(Refused::NackIgnored) } else { Ok(None) }
            }
            PdsRepr::Cp(c) => {
                let Some(id) = self.lookup(src, c.dpdcid, c.spdcid) else {
                    self.nack(src, NackCode::InvDpdcid, c.psn, c.dpdcid, c.spdcid, 0);
                    return Err(Refused::UnknownPdc);
                };
                self.heard(id, now, false);
                let out = self.pdcs.get_mut(&id).expect("looked up").on_cp(&c, now, &self.cfg);
                let unexpected = out.unexpected;
                self.apply(now, id, out);
                self.touched(id);
                if unexpected {
                    self.nack(src, NackCode::UnexpEvent, c.psn, id, c.spdcid, 0);
                    return Err(Refused::UnexpectedCp);
                }
                Ok(None)
            }
            PdsRepr::Rudi(r) if !r.response => Ok(Some(Delivery {
                peer: src,
                kind: DeliveryKind::RudiRequest { pkt_id: r.pkt_id },
                next_hdr: r.next_hdr,
                body,
            })),
            PdsRepr::Rudi(r) => {
                let cookie = self.rudi.complete(src, r.pkt_id).ok_or(Refused::Stale)?;
                Ok(Some(Delivery {
                    peer: src,
                    kind: DeliveryKind::RudiResponse { pkt_id: r.pkt_id, cookie },
                    next_hdr: r.next_hdr,
                    body,
                }))
            }
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
        let pds = PdsRepr::parse(buf)?;
        self.stats.rx_trimmed += 1;
        if let PdsRepr::Request(r) = pds {
            let pdc = if r.syn() {
                self.syn_target(now, src, &r).ok()
            } else {
                self.lookup(src, r.dpdcid, r.spdcid)
            };
            if let Some(id) = pdc {
                self.heard(id, now, r.syn());
                self.touched(id);
                self.nack(src, NackCode::Trimmed, r.psn, id, r.spdcid, 0);
            }
        }
        Ok(())
    }

    fn apply(&mut self, now: Duration, pdc: PdcId, out: Outcome) {
        let Some(p) = self.pdcs.get(&pdc) else { return };
        let peer = p.peer;
        if out.established {
            tracing::debug!(pdc, ?peer, "PDC established");
            self.events.push_back(Event::Established { pdc, peer });
        }
        if self.ack_events {
            self.events.extend(out.acked.into_iter().map(|(psn, cookie)| Event::Acked { pdc, psn, cookie }));
        }
        self.stats.fast_retransmits += out.retransmits as u64;
        self.stats.window_cuts += u64::from(out.window_cut);
        if out.closed {
            self.closed(now, pdc);
        }
    }
}
