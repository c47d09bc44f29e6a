//! RCCC, the UET receiver-credit congestion control (`../shared/spec/uet-wire.md` §5, "RCCC" and
//! "RCCC in HTSIM"): a sender sends new data only against credit its receiver granted; each
//! receiver grants credit at its own line rate, a pull of 4 MTUs at a time, round robin over the
//! PDCs that want some, so an N-to-1 incast arrives at the rate the last hop drains.
//!
//! Wire carriage: requests go as RUD_CC/ROD_CC with `credit_target`; grants go in ACK_CC
//! (`cc_type` 1, `credit`) and in CP CREDIT (ctl 7); a sender out of credit whose target the
//! receiver may not know asks with CP CREDIT_REQ (ctl 8, the target in the payload).
//!
//! Units and meaning (no source says; the spec page's choice of 256-byte units, plus this one):
//! `credit_target` and `credit` are **cumulative** counts of 256-byte units since the PDC opened,
//! modulo 2^24 - the credit the sender wants beyond its speculative credit, and the credit granted
//! so far. A lost, duplicated or reordered grant or request then never loses or doubles credit:
//! each side keeps the largest value seen (24-bit serial arithmetic, [`advance24`]).
//!
//! A new PDC starts with speculative credit (htsim: maxwnd) so the first round trip needs no grant.
//! Credit is charged per transmission, for the packet's bytes from the PDS header on plus
//! [`RcccConfig::overhead`] (the headers below); a retransmission first adds its cost to the
//! target, so under loss the sender still sends no faster than it is granted. A receiver with no
//! [`RcccConfig`] grants whatever is asked at once (no pacing), so a credit sender never waits on a
//! peer that does not run RCCC.

use std::time::Duration;

/// Bytes per credit unit (htsim's pull quantum; uet-wire.md "Choices").
pub const UNIT: u64 = 256;

/// RCCC parameters of an endpoint (both roles: sending against credit and granting it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcccConfig {
    /// The rate at which this endpoint grants credit to its senders, bits per second: its line
    /// rate, or a little under it so that the last hop's queue drains.
    pub grant_bps: u64,
    /// Credit a PDC may use before any grant (htsim: maxwnd).
    pub speculative: u64,
    /// Bytes one grant gives (htsim: 4 MTUs per pull).
    pub pull: u64,
    /// Bytes of each packet below the PDS header (Ethernet, IP, UDP, TSS), charged with it.
    pub overhead: u64,
}

impl RcccConfig {
    /// htsim's choices for a `link_bps` receiver on a path of `base_rtt` with `mtu`-byte packets:
    /// grants at 98 % of the line rate, 4-MTU pulls, speculative credit 1.5 BDP (maxwnd), 42 bytes
    /// of Ethernet + IPv4 + UDP per packet.
    pub fn new(link_bps: u64, base_rtt: Duration, mtu: u64) -> RcccConfig {
        let bdp = link_bps as f64 / 8.0 * base_rtt.as_secs_f64();
        RcccConfig {
            grant_bps: link_bps / 100 * 98,
            speculative: (1.5 * bdp) as u64,
            pull: 4 * mtu,
            overhead: 42,
        }
    }

    /// How long granting `bytes` takes at `grant_bps`.
    fn pace(&self, bytes: u64) -> Duration {
        Duration::from_nanos((bytes as u128 * 8 * 1_000_000_000 / u128::from(self.grant_bps.max(1))) as u64)
    }
}

/// Advances a 64-bit cumulative count to agree with a 24-bit field carrying its low bits, if the
/// field is ahead (by less than 2^23); an older or duplicated field leaves it unchanged.
pub fn advance24(current: u64, field: u32) -> u64 {
    let delta = (u64::from(field).wrapping_sub(current)) & 0xFF_FFFF;
    if delta != 0 && delta < 1 << 23 { current + delta } else { current }
}

/// Units covering `bytes` (rounded up).
fn units(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

/// The sending half's credit.
#[derive(Debug, Clone, Default)]
pub(crate) struct CreditTx {
    /// Units granted by the receiver so far.
    granted: u64,
    /// Bytes charged so far.
    used: u64,
    /// Bytes of every transmission wanted so far: each packet queued, and each retransmission.
    wanted: u64,
    /// The target last sent to the receiver (units).
    told: u64,
    /// When to ask again (CREDIT_REQ) if still blocked.
    ask_due: Option<Duration>,
    /// The last look found data and no credit for it.
    blocked: bool,
    /// The retransmission whose cost is in `wanted` and not yet charged.
    again: Option<u32>,
}

impl CreditTx {
    /// A packet of `cost` bytes was queued.
    pub(crate) fn queue(&mut self, cost: u64) {
        self.wanted += cost;
    }

    /// The packet `psn` of `cost` bytes is to be sent again: its cost joins the target once per
    /// retransmission (however often the sender looks at it while it waits for credit).
    pub(crate) fn want_again(&mut self, psn: u32, cost: u64) {
        if self.again != Some(psn) {
            self.again = Some(psn);
            self.wanted += cost;
        }
    }

    /// The credit target to send (units beyond the speculative credit, cumulative).
    pub(crate) fn target(&self, cfg: &RcccConfig) -> u64 {
        units(self.wanted.saturating_sub(cfg.speculative))
    }

    /// The 24-bit `credit_target` field (the target modulo 2^24).
    pub(crate) fn target_field(&self, cfg: &RcccConfig) -> u32 {
        (self.target(cfg) & 0xFF_FFFF) as u32
    }

    /// Whether a transmission of `cost` bytes is covered.
    pub(crate) fn covers(&self, cfg: &RcccConfig, cost: u64) -> bool {
        self.used + cost <= cfg.speculative + self.granted * UNIT
    }

    /// A transmission of `cost` bytes that carried the current target went out at `now`.
    pub(crate) fn charge(&mut self, cfg: &RcccConfig, cost: u64, now: Duration, rto: Duration) {
        self.used += cost;
        self.again = None;
        self.told = self.target(cfg);
        self.ask_due = Some(now + rto);
        self.blocked = false;
    }

    /// A grant (the 24-bit cumulative credit of an ACK_CC or CP CREDIT) arrived at `now`.
    ///
    /// Unused credit is kept up to the speculative credit and one pull; beyond that it is
    /// forfeited. A sender with a backlog spends grants as they come, so this costs it nothing,
    /// but the target can run ahead of what is finally sent (a retransmission whose cost joined
    /// the target and that an acknowledgement then made unnecessary, a go-back-N restart while
    /// blocked), and credit banked that way would later let a whole message out at once, faster
    /// than the receiver grants (found with `perf --transport rod --cc rccc --loss 0.1` and a few
    /// messages in flight: the banked credit reached 1.4 MB and bursts overflowed the 1 MB queue).
    pub(crate) fn on_grant(&mut self, cfg: &RcccConfig, field: u32, now: Duration, rto: Duration) {
        let before = self.granted;
        self.granted = advance24(self.granted, field);
        if self.granted != before {
            self.ask_due = Some(now + rto);
        }
        // Forfeiting is charging the excess as if spent: what is still to send stays wanted.
        let limit = self.used + cfg.speculative + cfg.pull;
        let excess = (cfg.speculative + self.granted * UNIT).saturating_sub(limit);
        self.used += excess;
        self.wanted += excess;
    }

    /// Blocked on credit at `now`: whether to send CREDIT_REQ now (the receiver has not been told
    /// the current target, or no grant came for `rto`).
    pub(crate) fn should_ask(&mut self, cfg: &RcccConfig, now: Duration, rto: Duration) -> bool {
        self.blocked = true;
        let target = self.target(cfg);
        let ask = self.told < target || self.ask_due.is_none_or(|t| t <= now);
        if ask {
            self.told = target;
            self.ask_due = Some(now + rto);
        }
        ask
    }

    /// Forgets that the sender was blocked on credit (before it looks again).
    pub(crate) fn unblock(&mut self) {
        self.blocked = false;
    }

    /// When a blocked sender asks again.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        self.ask_due.filter(|_| self.blocked)
    }
}

/// The receiving half's credit: what the peer wants and what it was granted.
#[derive(Debug, Clone, Default)]
pub(crate) struct CreditRx {
    /// The peer runs RCCC (a CC request or CREDIT_REQ was seen): ACKs carry credit state.
    pub(crate) active: bool,
    target: u64,
    granted: u64,
    /// A grant (or a repeat of the last one) is to be sent.
    pub(crate) announce: bool,
}

impl CreditRx {
    /// A request's or CREDIT_REQ's target; `pace` false grants it at once. A CREDIT_REQ
    /// (`asked`) with nothing left to grant repeats the last grant (it may have been lost).
    pub(crate) fn on_target(&mut self, field: u32, pace: bool, asked: bool) {
        self.active = true;
        self.target = advance24(self.target, field);
        if !pace && self.granted < self.target {
            self.granted = self.target;
            self.announce |= asked;
        }
        if asked && self.granted >= self.target {
            self.announce = true;
        }
    }

    /// Units wanted and not granted.
    pub(crate) fn demand(&self) -> u64 {
        self.target.saturating_sub(self.granted)
    }

    /// Grants up to `max` units; returns how many.
    pub(crate) fn grant(&mut self, max: u64) -> u64 {
        let n = self.demand().min(max);
        self.granted += n;
        self.announce |= n > 0;
        n
    }

    /// Units granted so far.
    pub(crate) fn granted(&self) -> u64 {
        self.granted
    }

    /// The 24-bit credit field.
    pub(crate) fn field(&self) -> u32 {
        (self.granted & 0xFF_FFFF) as u32
    }
}

/// An endpoint's pull pacer: when the next grant may be made.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pacer {
    next: Duration,
}

impl Pacer {
    /// Grants due at `now`: calls `give(max_units)` (which grants to the next PDC in turn and
    /// returns the units granted, 0 when no PDC wants any) for each pull slot that has come.
    pub(crate) fn run(&mut self, cfg: &RcccConfig, now: Duration, mut give: impl FnMut(u64) -> u64) {
        // An idle pacer does not bank credit: at most two pulls of catch-up.
        let slack = cfg.pace(2 * cfg.pull);
        if self.next > now {
            return;
        }
        self.next = self.next.max(now.saturating_sub(slack));
        while self.next <= now {
            let n = give(units(cfg.pull));
            if n == 0 {
                return;
            }
            self.next += cfg.pace(n * UNIT);
        }
    }

    /// `bytes` arrive at `now` without a grant (a new PDC's speculative credit): the next grant
    /// waits until they could have crossed the last hop at the grant rate.
    pub(crate) fn charge(&mut self, cfg: &RcccConfig, now: Duration, bytes: u64) {
        self.next = self.next.max(now) + cfg.pace(bytes);
    }

    /// The next pull slot, if any PDC wants credit.
    pub(crate) fn poll_timeout(&self, wanted: bool) -> Option<Duration> {
        wanted.then_some(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> RcccConfig {
        RcccConfig { grant_bps: 8_000_000_000, speculative: 1024, pull: 4096, overhead: 0 }
    }

    #[test]
    fn advance24_takes_newer_fields_across_the_wrap_and_ignores_older() {
        assert_eq!(advance24(0, 5), 5);
        assert_eq!(advance24(5, 3), 5, "older");
        assert_eq!(advance24(5, 5), 5, "duplicate");
        assert_eq!(advance24(0xFF_FFFE, 2), 0x100_0002, "across the wrap");
        assert_eq!(advance24(0x100_0002, 0xFF_FFFE), 0x100_0002, "older, across the wrap");
    }

    #[test]
    fn sender_spends_speculative_credit_then_waits_for_grants() {
        let c = cfg();
        let mut tx = CreditTx::default();
        for _ in 0..4 {
            tx.queue(512);
        }
        assert_eq!(tx.target(&c), 4, "1024 bytes beyond the speculative 1024 = 4 units");
        let (now, rto) = (Duration::ZERO, Duration::from_micros(100));
        assert!(tx.covers(&c, 512));
        tx.charge(&c, 512, now, rto);
        tx.charge(&c, 512, now, rto);
        assert!(!tx.covers(&c, 512));
        tx.on_grant(&c, 2, now, rto);
        assert!(tx.covers(&c, 512));
        tx.on_grant(&c, 1, now, rto);
        tx.charge(&c, 512, now, rto);
        assert!(!tx.covers(&c, 512), "an older grant took nothing back and gave nothing");
    }

    #[test]
    fn credit_banked_beyond_speculative_and_a_pull_is_forfeited() {
        let c = cfg(); // speculative 1024, pull 4096
        let (now, rto) = (Duration::ZERO, Duration::from_micros(100));
        let mut tx = CreditTx::default();
        tx.queue(64 * 1024);
        // Granted far more than was sent (say the retransmissions it was for became unnecessary).
        tx.on_grant(&c, 400, now, rto);
        let mut burst = 0;
        while tx.covers(&c, 512) {
            tx.charge(&c, 512, now, rto);
            burst += 512;
        }
        assert_eq!(burst, 1024 + 4096, "at once: the speculative credit and one pull, not 100 KiB");
        tx.on_grant(&c, 402, now, rto);
        assert!(tx.covers(&c, 512), "later grants are credit again");
        assert!(tx.target(&c) >= 402, "the target stays ahead of the forfeited credit");
    }

    #[test]
    fn blocked_sender_asks_once_then_again_after_the_timeout() {
        let c = cfg();
        let mut tx = CreditTx::default();
        tx.queue(4096);
        let rto = Duration::from_micros(100);
        assert_eq!(tx.poll_timeout(), None, "not blocked: no timer");
        assert!(tx.should_ask(&c, Duration::ZERO, rto));
        assert_eq!(tx.poll_timeout(), Some(rto));
        assert!(!tx.should_ask(&c, Duration::from_micros(50), rto));
        assert!(tx.should_ask(&c, Duration::from_micros(100), rto));
        tx.queue(4096);
        assert!(tx.should_ask(&c, Duration::from_micros(110), rto), "a new target is told at once");
    }

    #[test]
    fn receiver_grants_only_what_is_wanted_and_repeats_on_request() {
        let mut rx = CreditRx::default();
        rx.on_target(10, true, false);
        assert_eq!(rx.grant(4), 4);
        assert_eq!(rx.grant(16), 6);
        assert_eq!(rx.grant(16), 0);
        rx.announce = false;
        rx.on_target(10, true, true);
        assert!(rx.announce, "CREDIT_REQ with nothing left repeats the grant");
        let mut unpaced = CreditRx::default();
        unpaced.on_target(7, false, false);
        assert_eq!((unpaced.demand(), unpaced.field()), (0, 7));
    }

    #[test]
    fn pacer_grants_at_its_rate_and_does_not_bank_idle_time() {
        let c = cfg(); // a 4096-byte pull every 4.096 us at 8 Gb/s
        let mut p = Pacer::default();
        let mut given = 0;
        for us in 0..=40 {
            p.run(&c, Duration::from_micros(us), |max| {
                given += max;
                max
            });
        }
        assert_eq!(given, 10 * 16, "slots at 0, 4.096, ... 36.864 us");
        // A second later: two pulls of catch-up and the one due now, not a second's worth.
        let before = given;
        p.run(&c, Duration::from_secs(1), |max| {
            given += max;
            max
        });
        assert_eq!(given - before, 3 * 16);
        let mut looks = 0;
        p.run(&c, Duration::from_secs(2), |_| {
            looks += 1;
            0
        });
        assert_eq!(looks, 1, "nobody wants credit: one look, no grant");
    }
}
