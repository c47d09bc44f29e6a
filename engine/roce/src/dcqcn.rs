//! DCQCN for RoCEv2 RC (`../shared/spec/roce-wire.md` §3 "CNP" and "DCQCN parameters"): the
//! reaction point (a sender's rate limiter driven by CNPs) and the notification point rule (at most
//! one CNP per QP per interval). Sans-IO: times come in, the next deadline goes out.
//!
//! On a CNP: `target = current; current *= 1 - alpha/2; alpha = (1-g)*alpha + g`. Without a CNP
//! for K: `alpha = (1-g)*alpha`. Each rate-increase event (the timer T, or every B bytes sent):
//! fast recovery (`current = (target + current)/2`) for the first F events after a cut, then
//! additive increase (`target += R_AI`), then hyper increase (`target += R_HAI`) once both the timer
//! and the byte counter passed F. While the rate is below the line rate, packets are paced.

use std::time::Duration;

/// DCQCN parameters (the SIGCOMM 2015 defaults of the spec page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcqcnConfig {
    /// Line rate, bits per second.
    pub line_bps: u64,
    /// Lowest rate.
    pub min_bps: u64,
    /// Alpha gain g = 1 / `g_inverse`.
    pub g_inverse: u32,
    /// Alpha update period K.
    pub alpha_period: Duration,
    /// Rate-increase timer T.
    pub increase_period: Duration,
    /// Byte counter B.
    pub byte_counter: u64,
    /// Fast-recovery steps F.
    pub fast_recovery: u32,
    /// Additive increase R_AI, bits per second.
    pub r_ai: u64,
    /// Hyper increase R_HAI, bits per second.
    pub r_hai: u64,
    /// At most one CNP per QP per this interval (notification point), and at most one rate cut
    /// per this interval however many CNPs arrive (reaction point; the NICs' rate-reduce monitor
    /// period), so a burst of CNPs cannot pin the rate at the minimum.
    pub cnp_interval: Duration,
}

impl DcqcnConfig {
    /// The defaults of the spec page for a link of `line_bps`.
    pub fn new(line_bps: u64) -> DcqcnConfig {
        DcqcnConfig {
            line_bps,
            min_bps: 10_000_000,
            g_inverse: 256,
            alpha_period: Duration::from_micros(55),
            increase_period: Duration::from_micros(55),
            byte_counter: 10 << 20,
            fast_recovery: 5,
            r_ai: 40_000_000,
            r_hai: 100_000_000,
            cnp_interval: Duration::from_micros(50),
        }
    }

    /// Parameters for a 100 Gb/s-class fabric with a base RTT near 8 us (the incast test's), where
    /// the paper's (`new`, tuned for 40 Gb/s and 55 us timers) recover too slowly: the first cut
    /// leaves alpha near 1 for hundreds of 55 us periods, so every later cut halves the rate and the
    /// link idles. Here: one CNP per 5 us per QP, alpha and rate-increase periods of 20 us (a few
    /// RTTs), g = 1/16 (alpha follows the marking within a few periods), additive and hyper
    /// increase of line/500 and line/100 (200 Mb/s and 1 Gb/s at 100 Gb/s), a 128 KiB byte
    /// counter. Meant with RED-style marking at the switch (nicsim `LinkConfig::ecn_min` and
    /// `ecn_pmax`, e.g. 5 KB / 20 % below a 100 KB threshold): `engine/tests/incast_rc.rs`.
    pub fn datacenter(line_bps: u64) -> DcqcnConfig {
        DcqcnConfig {
            g_inverse: 16,
            alpha_period: Duration::from_micros(20),
            increase_period: Duration::from_micros(20),
            byte_counter: 128 << 10,
            r_ai: line_bps / 500,
            r_hai: line_bps / 100,
            cnp_interval: Duration::from_micros(5),
            ..DcqcnConfig::new(line_bps)
        }
    }
}

/// One QP's reaction point.
#[derive(Debug, Clone)]
pub struct Dcqcn {
    cfg: DcqcnConfig,
    rc: f64,
    rt: f64,
    alpha: f64,
    alpha_due: Option<Duration>,
    cnp_since_alpha: bool,
    increase_due: Option<Duration>,
    timer_events: u32,
    byte_events: u32,
    bytes: u64,
    next_send: Duration,
    cnps: u64,
    last_cut: Option<Duration>,
}

impl Dcqcn {
    /// At line rate, not limiting.
    pub fn new(cfg: DcqcnConfig) -> Dcqcn {
        let line = cfg.line_bps as f64;
        Dcqcn {
            cfg,
            rc: line,
            rt: line,
            alpha: 1.0,
            alpha_due: None,
            cnp_since_alpha: false,
            increase_due: None,
            timer_events: 0,
            byte_events: 0,
            bytes: 0,
            next_send: Duration::ZERO,
            cnps: 0,
            last_cut: None,
        }
    }

    /// The current rate, bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rc as u64
    }

    /// CNPs received.
    pub fn cnps(&self) -> u64 {
        self.cnps
    }

    fn g(&self) -> f64 {
        1.0 / f64::from(self.cfg.g_inverse.max(1))
    }

    fn limiting(&self) -> bool {
        self.rc < self.cfg.line_bps as f64
    }

    /// A CNP arrived: cut the rate, unless the last cut was less than `cnp_interval` ago.
    pub fn on_cnp(&mut self, now: Duration) {
        self.cnps += 1;
        if self.last_cut.is_some_and(|l| now.saturating_sub(l) < self.cfg.cnp_interval) {
            return;
        }
        self.last_cut = Some(now);
        self.rt = self.rc;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.cfg.min_bps as f64);
        let g = self.g();
        self.alpha = (1.0 - g) * self.alpha + g;
        self.cnp_since_alpha = true;
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes = 0;
        self.alpha_due.get_or_insert(now + self.cfg.alpha_period);
        self.increase_due = Some(now + self.cfg.increase_period);
    }

    /// A packet of `bytes` went out at `now`: pacing and the byte counter.
    pub fn on_sent(&mut self, now: Duration, bytes: usize) {
        if !self.limiting() {
            return;
        }
        let gap = Duration::from_secs_f64(bytes as f64 * 8.0 / self.rc);
        self.next_send = self.next_send.max(now) + gap;
        self.bytes += bytes as u64;
        if self.bytes >= self.cfg.byte_counter {
            self.bytes = 0;
            self.byte_events += 1;
            self.increase();
        }
    }

    /// True if a packet may go out at `now`.
    pub fn may_send(&self, now: Duration) -> bool {
        !self.limiting() || now >= self.next_send
    }

    /// When a paced packet may go next (if pacing holds one back).
    pub fn send_at(&self) -> Option<Duration> {
        self.limiting().then_some(self.next_send)
    }

    /// The next timer (alpha update or rate increase), while limiting.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if !self.limiting() && self.alpha_due.is_none() {
            return None;
        }
        [self.alpha_due, self.increase_due].into_iter().flatten().min()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        if let Some(t) = self.alpha_due.filter(|&t| t <= now) {
            if !self.cnp_since_alpha {
                self.alpha *= 1.0 - self.g();
            }
            self.cnp_since_alpha = false;
            // Stop the alpha timer once at line rate with a negligible alpha.
            self.alpha_due =
                (self.limiting() || self.alpha > 1e-3).then_some(t.max(now) + self.cfg.alpha_period);
        }
        if let Some(t) = self.increase_due.filter(|&t| t <= now) {
            self.timer_events += 1;
            self.increase();
            self.increase_due = self.limiting().then_some(t.max(now) + self.cfg.increase_period);
        }
    }

    fn increase(&mut self) {
        let f = self.cfg.fast_recovery;
        let line = self.cfg.line_bps as f64;
        if self.timer_events.max(self.byte_events) < f {
            // Fast recovery: toward the target.
        } else if self.timer_events.min(self.byte_events) > f {
            self.rt = (self.rt + self.cfg.r_hai as f64).min(line);
        } else {
            self.rt = (self.rt + self.cfg.r_ai as f64).min(line);
        }
        self.rc = ((self.rt + self.rc) / 2.0).min(line);
        if line - self.rc < 1.0 {
            self.rc = line;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    #[test]
    fn cut_recover_and_pace() {
        let mut d = Dcqcn::new(DcqcnConfig::new(100 * G));
        assert!(d.may_send(Duration::ZERO) && d.poll_timeout().is_none(), "idle at line rate");
        let t0 = Duration::from_micros(10);
        d.on_cnp(t0);
        assert_eq!(d.rate_bps(), 50 * G, "alpha starts at 1: the first cut halves");
        // Pacing: a 4 KB packet at 50 Gb/s takes 655 ns.
        d.on_sent(t0, 4096);
        assert!(!d.may_send(t0) && d.may_send(t0 + Duration::from_nanos(656)));
        // Five fast-recovery steps close most of the gap to the target (100 G).
        let mut t = t0;
        for _ in 0..5 {
            t = d.poll_timeout().unwrap();
            d.handle_timeout(t);
        }
        assert!(d.rate_bps() > 98 * G && d.rate_bps() < 100 * G, "{}", d.rate_bps());
        // Repeated CNPs drive alpha up and the rate down, never below the minimum.
        for i in 1..=200 {
            d.on_cnp(t + i * d.cfg.cnp_interval);
        }
        assert_eq!(d.rate_bps(), 10_000_000);
        assert_eq!(d.cnps(), 201);
        // Without CNPs it climbs back to line rate and stops its timers.
        for _ in 0..100_000 {
            match d.poll_timeout() {
                Some(n) => d.handle_timeout(n),
                None => break,
            }
        }
        assert_eq!(d.rate_bps(), 100 * G);
        assert!(d.poll_timeout().is_none());
    }
}
