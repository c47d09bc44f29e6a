//! Driving endpoints on the simulated network: one loop for "run these endpoints until a condition,
//! advancing virtual time", shared by the tests, the benches and `softrdma perf`.
//!
//! A [`System`] is whatever sits on one network: it does a pass of work at the current virtual time
//! and says when its next event is (a frame arrival or an endpoint timer). [`run_until`] and
//! [`step`] drive it; [`Pair`] is the two-endpoint system of the pds and ses tests.
//!
//! The advance rule, in one place: when a pass moves nothing, time goes to the next event, but at
//! least 1 ns on. A deadline at or before `now` that a pass did not act on would otherwise be
//! returned again and again at the same instant and the loop would spin; with the rule the endpoint
//! sees it once per nanosecond instead (the pds tests assert it never happens).

use crate::link::LinkConfig;
use crate::network::{Network, PortId};
use std::convert::Infallible;
use std::time::Duration;

/// Endpoints on one simulated network, as [`run_until`] and [`step`] drive them.
pub trait System {
    /// What a pass can fail with ([`Infallible`] when nothing can).
    type Error;

    /// One pass of every endpoint at the current virtual time: timers due, frames to send, frames
    /// arrived, events. Whether anything moved.
    fn pass(&mut self) -> Result<bool, Self::Error>;

    /// The earliest next event, a frame arrival or an endpoint timer; `None` if nothing is pending.
    fn next_event(&self) -> Option<Duration>;

    /// The current virtual time.
    fn now(&self) -> Duration;

    /// Moves virtual time forward to `t`.
    fn advance_to(&mut self, t: Duration);
}

/// Moves time to the next event by the advance rule of the module documentation (at least 1 ns
/// on), if that is not past `limit`; false if it would be or nothing is pending.
fn advance<S: System + ?Sized>(sys: &mut S, limit: Duration) -> bool {
    let Some(t) = sys.next_event() else { return false };
    let t = t.max(sys.now().saturating_add(Duration::from_nanos(1)));
    if t > limit {
        return false;
    }
    sys.advance_to(t);
    true
}

/// One step: a pass, or, if it moved nothing, time to the next event. False when nothing moved and
/// nothing is pending at all. For loops that check their own condition after every pass.
pub fn step<S: System + ?Sized>(sys: &mut S) -> Result<bool, S::Error> {
    Ok(sys.pass()? || advance(sys, Duration::MAX))
}

/// Runs `sys` until `done` holds (true), or until nothing is pending by `limit` (false; time never
/// passes `limit`).
///
/// `done` is asked whenever nothing moves any more at the current instant; work it posts runs at
/// that instant, before time moves on.
pub fn run_until<S: System + ?Sized>(
    sys: &mut S,
    limit: Duration,
    mut done: impl FnMut(&mut S) -> bool,
) -> Result<bool, S::Error> {
    loop {
        while sys.pass()? {}
        if done(sys) {
            return Ok(true);
        }
        if !sys.pass()? && !advance(sys, limit) {
            return Ok(false);
        }
    }
}

/// The per-test part of a [`Pair`]: both endpoints and whatever the test records of them.
pub trait Ends {
    /// One pass of both endpoints at `net.now()`, side `s` on `ports[s]`; whether anything moved.
    fn pass(&mut self, net: &mut Network, ports: [PortId; 2]) -> bool;

    /// The earliest timer of either endpoint.
    fn timeout(&self) -> Option<Duration>;
}

/// Two endpoints joined by one cable, the test pair of the pds and ses simulation tests.
#[derive(Debug)]
pub struct Pair<E> {
    /// The network: the two ports and the cable.
    pub net: Network,
    /// Side 0's port and side 1's.
    pub ports: [PortId; 2],
    /// The endpoints.
    pub ends: E,
}

impl<E> Pair<E> {
    /// Ports 02:00:00:00:00:01 (side 0) and 02:00:00:00:00:02 (side 1) on a network seeded with
    /// `seed`, joined by a cable whose directions are `a_to_b` and `b_to_a`.
    ///
    /// # Panics
    /// If a link configuration is invalid.
    pub fn new(seed: u64, a_to_b: LinkConfig, b_to_a: LinkConfig, ends: E) -> Pair<E> {
        let mut net = Network::new(seed);
        let ports = [net.add_port([2, 0, 0, 0, 0, 1]), net.add_port([2, 0, 0, 0, 0, 2])];
        if let Err(e) = net.connect(ports[0], ports[1], a_to_b, b_to_a) {
            panic!("{e}");
        }
        Pair { net, ports, ends }
    }

    /// The current virtual time.
    pub fn now(&self) -> Duration {
        self.net.now()
    }
}

impl<E: Ends> Pair<E> {
    /// [`run_until`] on the pair.
    pub fn run_until(&mut self, limit: Duration, done: impl FnMut(&mut Self) -> bool) -> bool {
        let Ok(done) = run_until(self, limit, done);
        done
    }

    /// Runs for `d` of virtual time, whatever happens: time is `now + d` afterwards.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.net.now() + d;
        self.run_until(end, |_| false);
        if self.net.now() < end {
            self.net.advance_to(end);
        }
    }
}

impl<E: Ends> System for Pair<E> {
    type Error = Infallible;

    fn pass(&mut self) -> Result<bool, Infallible> {
        Ok(self.ends.pass(&mut self.net, self.ports))
    }

    fn next_event(&self) -> Option<Duration> {
        self.net.next_event().into_iter().chain(self.ends.timeout()).min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timer that fires at `at` and re-arms `every` later, `left` times in all; with `left` 0
    /// its deadline stays and nothing acts on it.
    struct Timer {
        now: Duration,
        at: Option<Duration>,
        every: Duration,
        left: u32,
        fired: Vec<Duration>,
        posted: bool,
    }

    impl System for Timer {
        type Error = Infallible;
        fn pass(&mut self) -> Result<bool, Infallible> {
            match self.at {
                Some(at) if at <= self.now && self.left > 0 => {
                    self.fired.push(self.now);
                    self.left -= 1;
                    self.at = (self.left > 0).then(|| at + self.every);
                    Ok(true)
                }
                _ => Ok(false),
            }
        }
        fn next_event(&self) -> Option<Duration> {
            self.at
        }
        fn now(&self) -> Duration {
            self.now
        }
        fn advance_to(&mut self, t: Duration) {
            self.now = self.now.max(t);
        }
    }

    fn timer(at: u64, every: u64, left: u32) -> Timer {
        let us = Duration::from_micros;
        Timer {
            now: Duration::ZERO,
            at: Some(us(at)),
            every: us(every),
            left,
            fired: Vec::new(),
            posted: false,
        }
    }

    #[test]
    fn runs_to_each_event_and_stops_at_the_limit() {
        let us = Duration::from_micros;
        let mut t = timer(5, 10, 100);
        assert_eq!(run_until(&mut t, us(30), |_| false), Ok(false));
        assert_eq!(t.fired, [us(5), us(15), us(25)]);
        assert_eq!(t.now, us(25), "time never passes the limit");
        assert_eq!(run_until(&mut t, us(1000), |t| t.fired.len() == 5), Ok(true));
        assert_eq!(t.now, us(45));
        let mut t = timer(5, 10, 2);
        assert_eq!(run_until(&mut t, Duration::MAX, |_| false), Ok(false), "nothing pending");
        assert_eq!(t.now, us(15));
    }

    #[test]
    fn a_deadline_nothing_acts_on_moves_time_by_a_nanosecond() {
        let mut t = timer(0, 0, 0);
        assert_eq!(step(&mut t), Ok(true));
        assert_eq!(t.now, Duration::from_nanos(1));
        assert_eq!(run_until(&mut t, Duration::from_nanos(10), |_| false), Ok(false));
        assert_eq!(t.now, Duration::from_nanos(10));
    }

    #[test]
    fn work_done_posts_runs_before_time_moves() {
        let us = Duration::from_micros;
        let mut t = timer(5, 10, 0);
        let ok = run_until(&mut t, us(100), |t| {
            if !t.posted {
                // Post a timer due now.
                (t.posted, t.left, t.at) = (true, 1, Some(t.now));
            }
            !t.fired.is_empty()
        });
        assert_eq!(ok, Ok(true));
        assert_eq!(t.fired, [Duration::ZERO]);
        let mut t = timer(5, 10, 3);
        let mut steps = 0;
        while step(&mut t) == Ok(true) {
            steps += 1;
        }
        assert_eq!((steps, t.fired.len(), t.now), (6, 3, us(25)));
    }
}
