//! The network: ports, cables and switches, frames in flight on virtual time, and the tap.

use crate::link::{LinkConfig, LinkStats, QUEUE_BUCKET, mark_ce, trim};
use crate::tap::TapRecord;
use frame::{Frame, FramePool};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

/// How long `len` bytes take on the wire at `bps` (rounded up to the nanosecond).
fn serialization(len: usize, bps: u64) -> Duration {
    Duration::from_nanos((len as u128 * 8_000_000_000).div_ceil(u128::from(bps.max(1))) as u64)
}

/// A NIC port on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub usize);

/// A switch on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SwitchId(pub usize);

/// Errors from building or driving the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// No such port.
    NoSuchPort(usize),
    /// No such switch.
    NoSuchSwitch(usize),
    /// The port already has a link.
    PortInUse(usize),
    /// The port has no link, so it cannot send.
    NotConnected(usize),
    /// A probability outside 0..=1 or a zero-length queue with a bandwidth.
    BadConfig(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoSuchPort(p) => write!(f, "no port {p}"),
            Error::NoSuchSwitch(s) => write!(f, "no switch {s}"),
            Error::PortInUse(p) => write!(f, "port {p} is already connected"),
            Error::NotConnected(p) => write!(f, "port {p} has no link"),
            Error::BadConfig(why) => write!(f, "bad link configuration: {why}"),
        }
    }
}

impl std::error::Error for Error {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Port(usize),
    Switch(usize, usize),
}

#[derive(Debug)]
struct Link {
    cfg: LinkConfig,
    to: Node,
    busy_until: Duration,
    stats: LinkStats,
    /// Bytes waiting at each frame's arrival, in buckets of [`QUEUE_BUCKET`] bytes (links with a
    /// bandwidth only).
    queue_hist: Vec<u64>,
    /// Frames in flight in arrival order (the common case: latency and serialization keep a link
    /// first-in first-out); frames that must overtake or be overtaken go to the network's heap.
    fifo: VecDeque<Event>,
}

#[derive(Debug)]
struct Port {
    mac: [u8; 6],
    egress: Option<usize>,
    rx: VecDeque<Frame>,
    /// Link state: a down port sends and receives nothing.
    up: bool,
}

#[derive(Debug, Default)]
struct Switch {
    egress: Vec<usize>,
    macs: HashMap<[u8; 6], usize>,
}

#[derive(Debug)]
struct Event {
    at: Duration,
    seq: u64,
    link: usize,
    frame: Frame,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// The simulated network. See the crate documentation.
pub struct Network {
    now: Duration,
    rng: Xoshiro256PlusPlus,
    ports: Vec<Port>,
    links: Vec<Link>,
    switches: Vec<Switch>,
    events: BinaryHeap<Reverse<Event>>,
    /// No frame in flight arrives before this (the earliest arrival, or earlier): receiving
    /// checks it instead of searching every link and the heap per frame taken.
    due: Duration,
    seq: u64,
    tap: Option<Vec<TapRecord>>,
    pool: FramePool,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("now", &self.now)
            .field("ports", &self.ports.len())
            .field("in_flight", &(self.events.len() + self.links.iter().map(|l| l.fifo.len()).sum::<usize>()))
            .finish()
    }
}

fn check(cfg: &LinkConfig) -> Result<(), Error> {
    let p = [cfg.loss, cfg.reorder, cfg.duplicate, cfg.corrupt];
    if p.iter().any(|x| !(0.0..=1.0).contains(x)) {
        return Err(Error::BadConfig("probabilities must be within 0..=1"));
    }
    if cfg.bandwidth_bps > 0 && cfg.queue_limit == 0 {
        return Err(Error::BadConfig("a link with a bandwidth needs a queue"));
    }
    Ok(())
}

impl Network {
    /// An empty network at time zero whose impairments draw from `seed`.
    pub fn new(seed: u64) -> Network {
        Network {
            now: Duration::ZERO,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            ports: Vec::new(),
            links: Vec::new(),
            switches: Vec::new(),
            events: BinaryHeap::new(),
            due: Duration::MAX,
            seq: 0,
            tap: None,
            pool: FramePool::default(),
        }
    }

    /// Adds a NIC port with this MAC address.
    pub fn add_port(&mut self, mac: [u8; 6]) -> PortId {
        self.ports.push(Port { mac, egress: None, rx: VecDeque::new(), up: true });
        PortId(self.ports.len() - 1)
    }

    /// The MAC address of a port.
    pub fn mac(&self, port: PortId) -> Option<[u8; 6]> {
        self.ports.get(port.0).map(|p| p.mac)
    }

    fn add_link(&mut self, cfg: LinkConfig, to: Node) -> usize {
        self.links.push(Link {
            cfg,
            to,
            busy_until: Duration::ZERO,
            stats: LinkStats::default(),
            queue_hist: Vec::new(),
            fifo: VecDeque::new(),
        });
        self.links.len() - 1
    }

    fn free_port(&self, p: PortId) -> Result<(), Error> {
        match self.ports.get(p.0) {
            None => Err(Error::NoSuchPort(p.0)),
            Some(port) if port.egress.is_some() => Err(Error::PortInUse(p.0)),
            Some(_) => Ok(()),
        }
    }

    /// Joins two ports with a cable: `a_to_b` impairs what `a` sends, `b_to_a` what `b` sends.
    pub fn connect(
        &mut self,
        a: PortId,
        b: PortId,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<(), Error> {
        self.free_port(a)?;
        self.free_port(b)?;
        check(&a_to_b)?;
        check(&b_to_a)?;
        if a == b {
            return Err(Error::PortInUse(a.0));
        }
        self.ports[a.0].egress = Some(self.add_link(a_to_b, Node::Port(b.0)));
        self.ports[b.0].egress = Some(self.add_link(b_to_a, Node::Port(a.0)));
        Ok(())
    }

    /// Adds a learning switch with no ports yet.
    pub fn add_switch(&mut self) -> SwitchId {
        self.switches.push(Switch::default());
        SwitchId(self.switches.len() - 1)
    }

    /// Connects a port to a switch: `up` impairs what the port sends, `down` what the switch sends
    /// to it. The switch forwards by destination MAC (learnt from source MACs, plus the port's own
    /// MAC from the start) and floods unknown and group destinations.
    pub fn attach(
        &mut self,
        port: PortId,
        sw: SwitchId,
        up: LinkConfig,
        down: LinkConfig,
    ) -> Result<(), Error> {
        self.free_port(port)?;
        if sw.0 >= self.switches.len() {
            return Err(Error::NoSuchSwitch(sw.0));
        }
        check(&up)?;
        check(&down)?;
        let idx = self.switches[sw.0].egress.len();
        let down_link = self.add_link(down, Node::Port(port.0));
        let up_link = self.add_link(up, Node::Switch(sw.0, idx));
        let mac = self.ports[port.0].mac;
        let s = &mut self.switches[sw.0];
        s.egress.push(down_link);
        s.macs.insert(mac, idx);
        self.ports[port.0].egress = Some(up_link);
        Ok(())
    }

    /// Changes the impairments of the link a port sends on (for example to cut it).
    pub fn set_egress(&mut self, port: PortId, cfg: LinkConfig) -> Result<(), Error> {
        check(&cfg)?;
        let p = self.ports.get(port.0).ok_or(Error::NoSuchPort(port.0))?;
        let l = p.egress.ok_or(Error::NotConnected(port.0))?;
        self.links[l].cfg = cfg;
        Ok(())
    }

    /// Brings a port's link up or down (a pulled cable): while down, what it sends is dropped and
    /// what arrives for it is dropped.
    pub fn set_port_up(&mut self, port: PortId, up: bool) -> Result<(), Error> {
        self.ports.get_mut(port.0).ok_or(Error::NoSuchPort(port.0))?.up = up;
        Ok(())
    }

    /// Whether a port's link is up.
    pub fn port_up(&self, port: PortId) -> bool {
        self.ports.get(port.0).is_some_and(|p| p.up)
    }

    /// Current virtual time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Starts recording every transmitted frame.
    pub fn enable_tap(&mut self) {
        self.tap.get_or_insert_with(Vec::new);
    }

    /// The frames recorded so far (the tap keeps recording).
    pub fn take_tap(&mut self) -> Vec<TapRecord> {
        self.tap.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A frame buffer from the network's free list, to build a frame in.
    pub fn alloc(&mut self) -> Frame {
        self.pool.get()
    }

    /// Makes frame buffers up front until the free list holds `n` (see [`FramePool::reserve`]).
    pub fn reserve_frames(&mut self, n: usize) {
        self.pool.reserve(n);
    }

    /// Gives a received frame back to the free list.
    pub fn recycle(&mut self, f: Frame) {
        self.pool.put(f);
    }

    /// Sends a frame from `port` at the current time.
    pub fn transmit(&mut self, port: PortId, frame: Frame) -> Result<(), Error> {
        let p = self.ports.get(port.0).ok_or(Error::NoSuchPort(port.0))?;
        let link = p.egress.ok_or(Error::NotConnected(port.0))?;
        if !p.up {
            self.pool.put(frame);
            return Ok(());
        }
        if let Some(tap) = &mut self.tap {
            tap.push(TapRecord { time: self.now, port: port.0, bytes: frame.as_slice().to_vec() });
        }
        self.offer(link, frame, self.now);
        Ok(())
    }

    fn chance(&mut self, p: f64) -> bool {
        // 53 random bits make a uniform float in [0, 1).
        p > 0.0 && ((self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)) < p
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    /// Puts a frame on a link: loss, queue, corruption, reordering and duplication, in that order.
    fn offer(&mut self, link: usize, mut frame: Frame, t: Duration) {
        let cfg = self.links[link].cfg;
        let len = frame.len();
        let st = &mut self.links[link].stats;
        st.offered += 1;
        st.bytes += len as u64;
        if self.chance(cfg.loss) {
            self.links[link].stats.lost += 1;
            self.pool.put(frame);
            return;
        }
        let mut at = t;
        if cfg.bandwidth_bps > 0 {
            let l = &mut self.links[link];
            let start = l.busy_until.max(t);
            let queued_ns = (start - t).as_nanos();
            let queued_bytes = queued_ns * u128::from(cfg.bandwidth_bps) / 8_000_000_000;
            let bucket = (queued_bytes as usize / QUEUE_BUCKET).min(cfg.queue_limit / QUEUE_BUCKET);
            if l.queue_hist.len() <= bucket {
                l.queue_hist.resize(bucket + 1, 0);
            }
            l.queue_hist[bucket] += 1;
            if queued_bytes + len as u128 > cfg.queue_limit as u128 {
                let trimmed = (cfg.trim_to > 0)
                    .then(|| trim(frame.as_mut_slice(), len, cfg.trim_to, cfg.trim_dscp))
                    .flatten();
                let Some(short) = trimmed else {
                    l.stats.tail_dropped += 1;
                    self.pool.put(frame);
                    return;
                };
                // A trimmed frame goes in a strict-priority class: it waits only for its own
                // serialization, not behind the full queue.
                l.stats.trimmed += 1;
                frame.set_len(short);
                let at = t + serialization(short, cfg.bandwidth_bps) + cfg.latency;
                self.push(at, link, frame);
                return;
            }
            let (q, k, kmin) = (queued_bytes as f64, cfg.ecn_threshold as f64, cfg.ecn_min as f64);
            let mark = if cfg.ecn_threshold == 0 {
                false
            } else if q > k {
                true
            } else {
                cfg.ecn_min > 0 && q > kmin && self.chance(cfg.ecn_pmax * (q - kmin) / (k - kmin).max(1.0))
            };
            let l = &mut self.links[link];
            if mark && mark_ce(frame.as_mut_slice()) {
                l.stats.ecn_marked += 1;
            }
            l.busy_until = start + serialization(len, cfg.bandwidth_bps);
            at = l.busy_until;
        }
        at += cfg.latency;
        if len > 0 && self.chance(cfg.corrupt) {
            let bit = self.below(len as u64 * 8) as usize;
            frame.as_mut_slice()[bit / 8] ^= 1 << (bit % 8);
            self.links[link].stats.corrupted += 1;
        }
        if self.chance(cfg.reorder) {
            at += Duration::from_nanos(1 + self.below(cfg.reorder_window.as_nanos() as u64));
            self.links[link].stats.reordered += 1;
        }
        if self.chance(cfg.duplicate) {
            self.links[link].stats.duplicated += 1;
            let mut copy = self.pool.get();
            copy.buffer_mut()[..len].copy_from_slice(frame.as_slice());
            copy.set_len(len);
            self.push(at + Duration::from_nanos(1), link, copy);
        }
        self.push(at, link, frame);
    }

    fn push(&mut self, at: Duration, link: usize, frame: Frame) {
        self.seq += 1;
        self.due = self.due.min(at);
        let ev = Event { at, seq: self.seq, link, frame };
        let fifo = &mut self.links[link].fifo;
        if fifo.back().is_none_or(|last| last.at <= at) {
            fifo.push_back(ev);
        } else {
            self.events.push(Reverse(ev));
        }
    }

    /// The earliest (time, sequence) in flight and where it waits: `None` for the heap, or a link.
    fn earliest(&self) -> Option<(Duration, u64, Option<usize>)> {
        self.earliest_except(usize::MAX)
    }

    /// [`earliest`](Self::earliest) of every place but the link `skip`.
    fn earliest_except(&self, skip: usize) -> Option<(Duration, u64, Option<usize>)> {
        let mut best = self.events.peek().map(|e| (e.0.at, e.0.seq, None));
        for (i, l) in self.links.iter().enumerate().filter(|&(i, _)| i != skip) {
            if let Some(e) = l.fifo.front() {
                if best.is_none_or(|(at, seq, _)| (e.at, e.seq) < (at, seq)) {
                    best = Some((e.at, e.seq, Some(i)));
                }
            }
        }
        best
    }

    /// When the next frame reaches a port or switch, if any is in flight.
    pub fn next_event(&self) -> Option<Duration> {
        self.earliest().map(|(at, _, _)| at)
    }

    /// Moves time forward to `t` (never backward), delivering every frame due by then.
    pub fn advance_to(&mut self, t: Duration) {
        self.now = self.now.max(t);
        self.deliver_due();
    }

    fn deliver_due(&mut self) {
        if self.due > self.now {
            return;
        }
        self.due = Duration::MAX;
        while let Some((at, _, from)) = self.earliest() {
            if at > self.now {
                // Frames a switch forwards below were pushed with `due` lowered already.
                self.due = self.due.min(at);
                break;
            }
            let ev = match from {
                Some(l) => match self.links[l].to {
                    Node::Port(p) => {
                        self.deliver_run(l, p);
                        continue;
                    }
                    Node::Switch(..) => self.links[l].fifo.pop_front(),
                },
                None => self.events.pop().map(|r| r.0),
            };
            let Some(ev) = ev else { break };
            match self.links[ev.link].to {
                Node::Port(p) if self.ports[p].up => self.ports[p].rx.push_back(ev.frame),
                Node::Port(_) => self.pool.put(ev.frame),
                Node::Switch(s, ingress) => self.switch(s, ingress, ev.frame, ev.at),
            }
        }
    }

    /// Delivers the frames at the head of link `l`, which ends at port `p`, that are due and come
    /// before everything waiting elsewhere: the order one frame at a time would give, with the
    /// other places searched once per run instead of once per frame (arriving at a port adds no
    /// event anywhere).
    fn deliver_run(&mut self, l: usize, p: usize) {
        let bound = self.earliest_except(l).map(|(at, seq, _)| (at, seq));
        let (link, port, pool, now) = (&mut self.links[l], &mut self.ports[p], &mut self.pool, self.now);
        while let Some(e) = link.fifo.front() {
            if e.at > now || bound.is_some_and(|b| (e.at, e.seq) > b) {
                break;
            }
            let Some(ev) = link.fifo.pop_front() else { break };
            if port.up {
                port.rx.push_back(ev.frame);
            } else {
                pool.put(ev.frame);
            }
        }
    }

    fn switch(&mut self, s: usize, ingress: usize, frame: Frame, t: Duration) {
        let b = frame.as_slice();
        if b.len() < 14 {
            self.pool.put(frame);
            return;
        }
        let mut dst = [0u8; 6];
        let mut src = [0u8; 6];
        dst.copy_from_slice(&b[0..6]);
        src.copy_from_slice(&b[6..12]);
        let sw = &mut self.switches[s];
        if src[0] & 1 == 0 {
            sw.macs.insert(src, ingress);
        }
        let out = if dst[0] & 1 == 0 { sw.macs.get(&dst).copied() } else { None };
        match out {
            Some(o) if o == ingress => self.pool.put(frame),
            Some(o) => {
                let l = self.switches[s].egress[o];
                self.offer(l, frame, t);
            }
            None => {
                let outs: Vec<usize> = (0..self.switches[s].egress.len()).filter(|&o| o != ingress).collect();
                for o in outs {
                    let l = self.switches[s].egress[o];
                    let mut copy = self.pool.get();
                    copy.buffer_mut()[..frame.len()].copy_from_slice(frame.as_slice());
                    copy.set_len(frame.len());
                    self.offer(l, copy, t);
                }
                self.pool.put(frame);
            }
        }
    }

    /// The next frame that has reached `port` by now.
    pub fn receive(&mut self, port: PortId) -> Option<Frame> {
        self.deliver_due();
        self.ports.get_mut(port.0)?.rx.pop_front()
    }

    /// Counters of the link a port sends on.
    pub fn egress_stats(&self, port: PortId) -> Option<LinkStats> {
        let l = self.ports.get(port.0)?.egress?;
        Some(self.links[l].stats)
    }

    /// The link that delivers to `port` (from its cable peer or its switch).
    fn downlink(&self, port: PortId) -> Option<usize> {
        self.links.iter().position(|l| matches!(l.to, Node::Port(p) if p == port.0))
    }

    /// Counters of the link that delivers to `port` (for a port on a switch: the switch's egress
    /// toward it, the bottleneck of an incast).
    pub fn ingress_stats(&self, port: PortId) -> Option<LinkStats> {
        self.downlink(port).map(|l| self.links[l].stats)
    }

    /// The `p`-quantile (0..=1) of the bytes waiting on the link that delivers to `port`, sampled at
    /// every frame's arrival, to [`QUEUE_BUCKET`] bytes (the bucket's upper edge); `None` without
    /// samples.
    pub fn ingress_queue_quantile(&self, port: PortId, p: f64) -> Option<usize> {
        let h = &self.links[self.downlink(port)?].queue_hist;
        let total: u64 = h.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64 * p.clamp(0.0, 1.0)).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in h.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some((i + 1) * QUEUE_BUCKET);
            }
        }
        Some(h.len() * QUEUE_BUCKET)
    }

    /// Counters summed over every link direction.
    pub fn total_stats(&self) -> LinkStats {
        let mut t = LinkStats::default();
        for l in &self.links {
            t.add(&l.stats);
        }
        t
    }
}

#[cfg(test)]
mod tests;
