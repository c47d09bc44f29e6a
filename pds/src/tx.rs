//! The sending half of a PDC: the retransmit buffer in PSN order, cumulative and selective
//! acknowledgement, per-packet retransmit timers with backoff, fast retransmit from the SACK bitmap
//! (RUD) and go-back from a ROD_OOO NACK (ROD).
//!
//! Loss detection compares *transmission sequence numbers*: every transmission of a packet gets the
//! next `seq`. When the peer reports a packet received, any packet still unacknowledged whose latest
//! transmission went out before it has been lost (or is reordered, which only costs a duplicate the
//! receiver drops). This needs no RTT estimate and never retransmits the same loss twice per report.

use std::collections::VecDeque;
use std::time::Duration;

use wire::uet::pds::{Mode, NextHeader};

use crate::Body;
use crate::config::Config;
use crate::psn::diff;

/// What a packet of the PDC carries.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// Upper-layer bytes (SES header and payload).
    Data { next_hdr: NextHeader, body: Body, cookie: u64 },
    /// The sequenced CP CLOSE_CMD that ends the PDC.
    Close,
}

#[derive(Debug)]
pub(crate) struct TxPkt {
    pub(crate) payload: Payload,
    /// SACKed: received by the peer, waiting for the cumulative ACK to pass it.
    acked: bool,
    /// Queued for retransmission.
    retx: bool,
    /// Retransmissions after a timeout so far.
    pub(crate) retries: u32,
    /// Transmission sequence number of its latest transmission (0: never sent).
    seq: u64,
    /// When it last went out (for RTT samples).
    sent_at: Duration,
    /// How soon it goes out and asks to be acknowledged.
    pub(crate) urgency: Urgency,
}

/// How soon a packet goes out and asks to be acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Urgency {
    /// Sent at once; the last packet queued asks for an immediate ACK (AR).
    #[default]
    Prompt,
    /// Sent at once, asking for no immediate ACK: nobody waits for it (an inject), so the
    /// receiver's coalescing delay (`Config::ack_delay`) is no one's latency.
    Lazy,
    /// [`Lazy`](Self::Lazy), and it waits for company: it goes out with the endpoint's next
    /// transmission, or with its PDC's next ACK (within `Config::ack_delay`), whichever comes
    /// first. For the response to a request that asked for no immediate ACK: nobody waits for
    /// it either, and a send of its own would stand between the receiving application and its
    /// next request on a path where every send costs a system call.
    Held,
}

/// A packet newly known to be received, reported to the caller.
pub(crate) enum Delivered {
    Data { psn: u32, cookie: u64 },
    Close,
}

/// A queued packet whose retransmit timer does not run.
const NO_TIMER: u64 = u64::MAX;

/// A deadline as nanoseconds (virtual or real time since its epoch: 584 years fit).
fn nanos(t: Duration) -> u64 {
    u64::try_from(t.as_nanos()).unwrap_or(NO_TIMER - 1)
}

#[derive(Debug)]
pub(crate) struct TxHalf {
    /// PSN of `pkts[0]`: the oldest packet not cumulatively acknowledged.
    una: u32,
    pkts: VecDeque<TxPkt>,
    /// Per queued packet, its retransmit deadline in nanoseconds while the timer runs (sent, not
    /// SACKed, not queued again), else [`NO_TIMER`]. Apart from the packets (each with its body
    /// inline), so that finding the earliest deadline reads 8 bytes a packet, in a loop the
    /// compiler vectorizes.
    timers: VecDeque<u64>,
    /// `pkts[..sent]` have gone out at least once.
    sent: usize,
    retx_pending: usize,
    seq: u64,
    /// Payload bytes the last `on_ack` newly acknowledged, and when the newest of them was sent.
    pub(crate) last_acked: (usize, Option<Duration>),
    /// The newest transmission sequence number among the packets the last `handle_timeout`
    /// found expired.
    pub(crate) expired_seq: u64,
}

impl TxHalf {
    pub(crate) fn new(start_psn: u32) -> TxHalf {
        TxHalf {
            una: start_psn,
            pkts: VecDeque::new(),
            timers: VecDeque::new(),
            sent: 0,
            retx_pending: 0,
            seq: 0,
            last_acked: (0, None),
            expired_seq: 0,
        }
    }

    /// Oldest PSN not cumulatively acknowledged (the sender's CLEAR_PSN).
    pub(crate) fn una(&self) -> u32 {
        self.una
    }

    /// PSN the next queued packet gets.
    pub(crate) fn next_psn(&self) -> u32 {
        self.una.wrapping_add(self.pkts.len() as u32)
    }

    /// Packets queued or in flight.
    pub(crate) fn len(&self) -> usize {
        self.pkts.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Queues a packet; returns its PSN.
    pub(crate) fn push(&mut self, payload: Payload) -> u32 {
        self.push_with(payload, Urgency::Prompt)
    }

    /// Queues `payload` to go out with `urgency`.
    pub(crate) fn push_with(&mut self, payload: Payload, urgency: Urgency) -> u32 {
        let psn = self.next_psn();
        self.pkts.push_back(TxPkt {
            payload,
            acked: false,
            retx: false,
            retries: 0,
            seq: 0,
            sent_at: Duration::ZERO,
            urgency,
        });
        self.timers.push_back(NO_TIMER);
        psn
    }

    /// What every queued packet carries, oldest first.
    pub(crate) fn payloads(&self) -> impl Iterator<Item = &Payload> {
        self.pkts.iter().map(|p| &p.payload)
    }

    /// Numbers every queued packet again from `start` as never sent (secure establishment moved
    /// the Start_PSN of a PDC nothing of which was acknowledged).
    pub(crate) fn renumber(&mut self, start: u32) {
        self.una = start;
        self.sent = 0;
        self.retx_pending = 0;
        for p in &mut self.pkts {
            p.acked = false;
            p.retx = false;
            p.retries = 0;
            p.seq = 0;
        }
        self.timers.iter_mut().for_each(|t| *t = NO_TIMER);
    }

    /// Index of the packet to transmit next: a retransmission first, then a new packet if fewer than
    /// `window` have been sent.
    #[cfg(test)]
    pub(crate) fn next_to_send(&self, window: usize) -> Option<usize> {
        self.next_to_send_within(window, usize::MAX)
    }

    /// [`next_to_send`](Self::next_to_send), and a retransmission only among the first
    /// `retx_window` packets (the adaptive window counts retransmissions as in flight too; while
    /// one waits beyond it, nothing new goes either).
    pub(crate) fn next_to_send_within(&self, window: usize, retx_window: usize) -> Option<usize> {
        if self.retx_pending > 0 {
            return self.pkts.iter().take(self.sent.min(retx_window)).position(|p| p.retx);
        }
        (self.sent < self.pkts.len() && self.sent < window).then_some(self.sent)
    }

    /// Whether every packet not yet sent waits for company ([`Urgency::Held`]), and one does.
    pub(crate) fn only_held_unsent(&self) -> bool {
        self.sent < self.pkts.len() && self.pkts.range(self.sent..).all(|p| p.urgency == Urgency::Held)
    }

    /// Whether the newest packet sent asked for no immediate ACK (its receiver may hold the ACK
    /// for its coalescing delay).
    pub(crate) fn newest_sent_lazy(&self) -> bool {
        self.sent.checked_sub(1).is_some_and(|i| self.pkts[i].urgency != Urgency::Prompt)
    }

    /// One past the highest PSN sent.
    pub(crate) fn sent_end(&self) -> u32 {
        self.una.wrapping_add(self.sent as u32)
    }

    /// The sequence number of the newest transmission.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The packet at `idx` and its PSN.
    pub(crate) fn get(&self, idx: usize) -> (u32, &TxPkt) {
        (self.una.wrapping_add(idx as u32), &self.pkts[idx])
    }

    /// True if `idx` is a retransmission (sent before).
    pub(crate) fn is_retransmission(&self, idx: usize) -> bool {
        self.pkts[idx].seq != 0
    }

    /// Records that `pkts[idx]` went out at `now`.
    pub(crate) fn mark_sent(&mut self, idx: usize, now: Duration, cfg: &Config) {
        self.seq += 1;
        let p = &mut self.pkts[idx];
        p.seq = self.seq;
        self.timers[idx] = nanos(now + cfg.backoff(p.retries));
        p.sent_at = now;
        if p.retx {
            p.retx = false;
            self.retx_pending -= 1;
        }
        if idx == self.sent {
            self.sent += 1;
        }
    }

    fn set_retx(&mut self, idx: usize) -> bool {
        let p = &mut self.pkts[idx];
        if p.acked || p.retx {
            return false;
        }
        p.retx = true;
        self.retx_pending += 1;
        self.timers[idx] = NO_TIMER;
        true
    }

    /// Processes an acknowledgement: everything up to `cack` (inclusive) cumulatively, and the
    /// SACK bitmap `(base, bits)`. Newly received packets are passed to `report`. For RUD, packets
    /// sent before one now known received are queued for retransmission; returns how many.
    pub(crate) fn on_ack(
        &mut self,
        cack: u32,
        sack: Option<(u32, u64)>,
        mode: Mode,
        report: &mut impl FnMut(Delivered),
    ) -> usize {
        let mut newest = 0u64;
        let mut acked = (0usize, None::<(u64, Duration)>);
        let mut note = |p: &TxPkt| {
            acked.0 += payload_len(&p.payload);
            if acked.1.is_none_or(|(s, _)| p.seq > s) {
                acked.1 = Some((p.seq, p.sent_at));
            }
        };
        let n = diff(cack, self.una).wrapping_add(1);
        if n > 0 && n as usize <= self.sent {
            for i in 0..n as u32 {
                let p = self.pkts.pop_front().expect("n <= sent <= len");
                self.timers.pop_front();
                newest = newest.max(p.seq);
                if p.retx {
                    self.retx_pending -= 1;
                }
                if !p.acked {
                    note(&p);
                    report(delivered(self.una.wrapping_add(i), &p.payload));
                }
            }
            self.sent -= n as usize;
            self.una = cack.wrapping_add(1);
        }
        let mut highest = 0usize;
        if let Some((base, bits)) = sack {
            for i in (0..64).filter(|i| bits & (1u64 << i) != 0) {
                let psn = base.wrapping_add(i);
                let idx = diff(psn, self.una);
                if idx < 0 || idx as usize >= self.sent {
                    continue;
                }
                let idx = idx as usize;
                highest = highest.max(idx);
                let p = &mut self.pkts[idx];
                newest = newest.max(p.seq);
                if !p.acked {
                    p.acked = true;
                    self.timers[idx] = NO_TIMER;
                    if p.retx {
                        p.retx = false;
                        self.retx_pending -= 1;
                    }
                    note(p);
                    report(delivered(psn, &p.payload));
                }
            }
        }
        self.last_acked = (acked.0, acked.1.map(|(_, t)| t));
        if mode != Mode::Rud || newest == 0 {
            return 0;
        }
        (0..highest).filter(|&i| self.pkts[i].seq < newest && self.set_retx(i)).count()
    }

    /// ROD: the receiver expects `expected` and dropped the later packet `trigger`. Everything
    /// before `expected` was received; the rest is sent again in order, unless `trigger` left before
    /// the latest transmission of `expected` (a stale NACK). Returns how many were queued.
    pub(crate) fn go_back(
        &mut self,
        expected: u32,
        trigger: u32,
        report: &mut impl FnMut(Delivered),
    ) -> usize {
        self.on_ack(expected.wrapping_sub(1), None, Mode::Rod, report);
        if diff(expected, self.una) != 0 || self.sent == 0 {
            return 0;
        }
        let t = diff(trigger, self.una);
        if t > 0 && (t as usize) < self.sent && self.pkts[t as usize].seq < self.pkts[0].seq {
            return 0;
        }
        (0..self.sent).filter(|&i| self.set_retx(i)).count()
    }

    /// A tail probe: queues the oldest and the newest packets sent and not known received for
    /// retransmission (not counted as retries). The oldest fills the hole the receiver's
    /// cumulative ACK waits for, if that is what was lost; the newest, once SACKed (RUD) or
    /// NACKed out of order (ROD), shows every packet sent before it lost. Returns how many were
    /// queued.
    pub(crate) fn probe(&mut self) -> usize {
        if self.sent == 0 {
            return 0;
        }
        // The newest the receiver's SACK bitmap can report (64 PSNs from its cumulative ACK).
        let newest = (1..self.sent.min(64)).rev().find(|&i| !self.pkts[i].acked && !self.pkts[i].retx);
        usize::from(self.set_retx(0)) + newest.map_or(0, |i| usize::from(self.set_retx(i)))
    }

    /// Queues the sent packet `psn` for retransmission (after a transient NACK); false if it is
    /// unknown, received or already queued.
    pub(crate) fn resend(&mut self, psn: u32) -> bool {
        let i = diff(psn, self.una);
        i >= 0 && (i as usize) < self.sent && self.set_retx(i as usize)
    }

    /// Timer expiry: packets whose deadline passed are queued again (ROD: with everything after
    /// them). Returns how many timed out, or `Err` if one had already been retransmitted
    /// `max_retries` times.
    pub(crate) fn handle_timeout(&mut self, now: Duration, cfg: &Config, mode: Mode) -> Result<usize, ()> {
        let (mut expired, now) = (0, nanos(now));
        self.expired_seq = 0;
        for i in 0..self.sent {
            let p = &self.pkts[i];
            if p.acked || p.retx || self.timers[i] > now {
                continue;
            }
            if p.retries >= cfg.max_retries {
                return Err(());
            }
            self.expired_seq = self.expired_seq.max(p.seq);
            self.pkts[i].retries += 1;
            self.set_retx(i);
            expired += 1;
            if mode == Mode::Rod {
                for j in i + 1..self.sent {
                    self.set_retx(j);
                }
                break;
            }
        }
        Ok(expired)
    }

    /// Earliest retransmit deadline.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        let (a, b) = self.timers.as_slices();
        let (a, b) = (&a[..self.sent.min(a.len())], &b[..self.sent.saturating_sub(a.len())]);
        let min = |s: &[u64]| s.iter().fold(NO_TIMER, |m, &t| m.min(t));
        let first = min(a).min(min(b));
        (first != NO_TIMER).then(|| Duration::from_nanos(first))
    }

    /// Empties the buffer, returning the cookies of the data packets not known received.
    pub(crate) fn drain_unacked(&mut self) -> Vec<u64> {
        let out = self
            .pkts
            .iter()
            .filter(|p| !p.acked)
            .filter_map(|p| match p.payload {
                Payload::Data { cookie, .. } => Some(cookie),
                Payload::Close => None,
            })
            .collect();
        self.pkts.clear();
        self.timers.clear();
        self.sent = 0;
        self.retx_pending = 0;
        out
    }
}

fn payload_len(p: &Payload) -> usize {
    match p {
        Payload::Data { body, .. } => body.len(),
        _ => 0,
    }
}

fn delivered(psn: u32, p: &Payload) -> Delivered {
    match p {
        Payload::Data { cookie, .. } => Delivered::Data { psn, cookie: *cookie },
        Payload::Close => Delivered::Close,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(cookie: u64) -> Payload {
        Payload::Data { next_hdr: NextHeader::None, body: Body::default(), cookie }
    }

    fn sent(n: u64, start: u32) -> TxHalf {
        let cfg = Config::default();
        let mut tx = TxHalf::new(start);
        for c in 0..n {
            tx.push(data(c));
            let i = tx.next_to_send(256).unwrap();
            tx.mark_sent(i, Duration::ZERO, &cfg);
        }
        tx
    }

    fn acked(tx: &mut TxHalf, cack: u32, sack: Option<(u32, u64)>, mode: Mode) -> (Vec<u64>, usize) {
        let mut got = Vec::new();
        let n = tx.on_ack(cack, sack, mode, &mut |d| {
            if let Delivered::Data { cookie, .. } = d {
                got.push(cookie)
            }
        });
        (got, n)
    }

    #[test]
    fn cumulative_and_selective_ack_across_the_wrap() {
        let start = u32::MAX - 2;
        let mut tx = sent(8, start);
        // Received: start..start+1 cumulatively, then start+3 and start+5 selectively.
        let base = start.wrapping_add(2);
        let (got, fast) = acked(&mut tx, start.wrapping_add(1), Some((base, 0b1010)), Mode::Rud);
        assert_eq!(got, [0, 1, 3, 5]);
        // Packets 2 and 4 went out before 5: lost.
        assert_eq!(fast, 2);
        assert_eq!(tx.next_to_send(256), Some(0));
        assert_eq!(tx.una(), base);
        // A second identical report queues nothing new and reports nothing twice.
        assert_eq!(acked(&mut tx, start.wrapping_add(1), Some((base, 0b1010)), Mode::Rud), (vec![], 0));
        // A bogus cumulative ACK beyond what was sent is ignored.
        assert_eq!(acked(&mut tx, start.wrapping_add(100), None, Mode::Rud), (vec![], 0));
        assert_eq!(tx.len(), 6);
    }

    #[test]
    fn retransmitted_hole_is_not_resent_for_an_older_report() {
        let cfg = Config::default();
        let mut tx = sent(4, 10);
        assert_eq!(acked(&mut tx, 9, Some((10, 0b0010)), Mode::Rud).1, 1);
        let i = tx.next_to_send(256).unwrap();
        tx.mark_sent(i, Duration::ZERO, &cfg);
        // The same SACK again (packet 11 was sent before the retransmission of 10): nothing queued.
        assert_eq!(acked(&mut tx, 9, Some((10, 0b0010)), Mode::Rud).1, 0);
        // Packet 13 received: 12, sent before it, is lost; 10, resent after it, is not (yet).
        assert_eq!(acked(&mut tx, 9, Some((10, 0b1010)), Mode::Rud).1, 1);
        assert_eq!(tx.next_to_send(256), Some(2));
    }

    #[test]
    fn rod_go_back_and_stale_nack() {
        let cfg = Config::default();
        let mut tx = sent(5, 100);
        assert_eq!(tx.go_back(102, 104, &mut |_| {}), 3);
        assert_eq!(tx.una(), 102);
        for _ in 0..3 {
            let i = tx.next_to_send(256).unwrap();
            tx.mark_sent(i, Duration::ZERO, &cfg);
        }
        // A NACK triggered by packet 103's first transmission (before 102 was resent) is stale.
        let mut tx2 = sent(5, 100);
        tx2.go_back(102, 104, &mut |_| {});
        let i = tx2.next_to_send(256).unwrap();
        tx2.mark_sent(i, Duration::ZERO, &cfg);
        assert_eq!(tx2.next_to_send(256), Some(1));
        assert_eq!(tx2.go_back(102, 103, &mut |_| {}), 0, "stale: 103 left before 102 was resent");
        // After everything was resent, a NACK caused by the new 103 means the new 102 was lost.
        assert_eq!(tx.go_back(102, 103, &mut |_| {}), 3);
    }

    #[test]
    fn the_earliest_deadline_follows_sacks_resends_and_acks() {
        let cfg = Config::default();
        let rto = cfg.rto;
        let ms = Duration::from_millis;
        let mut tx = TxHalf::new(10);
        // Packets 10..14 go out 1 ms apart; 14 is queued, never sent (no timer).
        for c in 0..5 {
            tx.push(data(c));
        }
        for i in 0..4 {
            tx.mark_sent(i, ms(i as u64), &cfg);
        }
        assert_eq!(tx.poll_timeout(), Some(rto));
        // 10 is SACKed: 11's timer is the earliest. RUD queues nothing sent before a received one.
        assert_eq!(acked(&mut tx, 9, Some((10, 0b1)), Mode::Rud), (vec![0], 0));
        assert_eq!(tx.poll_timeout(), Some(ms(1) + rto));
        // 11 is NACKed: queued again, its timer stops until it is resent (at 9 ms).
        assert!(tx.resend(11));
        assert_eq!(tx.poll_timeout(), Some(ms(2) + rto));
        tx.mark_sent(1, ms(9), &cfg);
        assert_eq!(tx.poll_timeout(), Some(ms(2) + rto));
        // 12 and 13 time out: queued again, only 11's timer runs.
        assert_eq!(tx.handle_timeout(ms(3) + rto, &cfg, Mode::Rud), Ok(2));
        assert_eq!(tx.poll_timeout(), Some(ms(9) + rto));
        // Resent with backoff (two RTOs), then 14 goes out for the first time.
        tx.mark_sent(2, ms(20), &cfg);
        tx.mark_sent(3, ms(20), &cfg);
        tx.mark_sent(4, ms(21), &cfg);
        assert_eq!(tx.poll_timeout(), Some(ms(9) + rto));
        // A cumulative ACK through 12: 13 (backed off) is later than 14.
        assert_eq!(acked(&mut tx, 12, None, Mode::Rud), (vec![1, 2], 0));
        assert_eq!(tx.poll_timeout(), Some((ms(21) + rto).min(ms(20) + cfg.backoff(1))));
        assert_eq!(acked(&mut tx, 14, None, Mode::Rud), (vec![3, 4], 0));
        assert_eq!(tx.poll_timeout(), None, "nothing in flight");
    }

    #[test]
    fn timeout_backoff_and_retry_limit() {
        let cfg = Config { max_retries: 2, ..Config::default() };
        let mut tx = sent(1, 0);
        let mut now = Duration::ZERO;
        for retry in 0..2 {
            now = tx.poll_timeout().unwrap();
            assert_eq!(now, Duration::from_millis(5) * ((1 << (retry + 1)) - 1));
            assert_eq!(tx.handle_timeout(now, &cfg, Mode::Rud), Ok(1));
            tx.mark_sent(0, now, &cfg);
        }
        assert!(tx.poll_timeout().unwrap() > now);
        assert_eq!(tx.handle_timeout(tx.poll_timeout().unwrap(), &cfg, Mode::Rud), Err(()));
        assert_eq!(tx.drain_unacked(), [0]);
    }
}
