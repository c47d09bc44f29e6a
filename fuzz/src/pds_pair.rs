//! Two PDS endpoints (`pds::Endpoint`, the sans-IO core) exchanging RUD, ROD and RUDI traffic over
//! a network the fuzzer runs: it sends, closes PDCs, delivers any packet in flight (so reorders),
//! drops, duplicates, trims (a switch cutting the payload), marks ECN CE and moves time, in the
//! open, 0-RTT or 1-RTT establishment, then lets the network deliver everything until the traffic
//! settles. In the open establishment, no packet lives longer than [`CLOSED_LINGER`] (the maximum
//! packet lifetime it relies on: a closed PDC's SYN delayed past it opens the PDC again); in the
//! secure ones, packets may be delayed without bound.
//!
//! Structure-aware: the input is an [`Input`] built with `arbitrary` from the fuzzer's bytes, so
//! every mutation is a valid scenario.
//!
//! Checks, with every message carrying its own number and a payload derived from it: no panic;
//! everything an endpoint sends parses as a PDS header; only messages sent to a side, in the mode
//! they were sent in, are delivered, with their payload intact; ROD delivers a PDC's messages in
//! the order they were sent; no message is delivered twice while the receiver lost no PDC
//! (reaped or failed, where the open establishment accepts a retransmitted SYN again); an
//! `Acked` message was delivered, and is acknowledged once; a `Failed` PDC's unacknowledged
//! messages were not acknowledged; a RUDI response answers that request, once; the receive
//! counters account for every packet fed; and once the network stops losing packets, every message
//! ends acknowledged or in a failed PDC's list, every RUDI request answered or failed.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use pds::{CLOSED_LINGER, Config, DeliveryKind, Endpoint, Establishment, Event, Mode, NextHeader, PdcId};
use wire::uet::PdsRepr;

/// The scenario.
#[derive(Arbitrary, Debug)]
pub struct Input {
    establishment: Est,
    /// `Config::ack_every` (1 to 16).
    ack_every: u8,
    /// `Config::window` (1 to 32 packets).
    window: u8,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Est {
    Open,
    ZeroRtt,
    OneRtt,
}

/// One step; `from` picks the endpoint (false: 0, true: 1), `at` a packet in flight (modulo their
/// number).
#[derive(Arbitrary, Debug)]
enum Op {
    Send {
        from: bool,
        ordered: bool,
        len: u8,
    },
    Rudi {
        from: bool,
        len: u8,
    },
    Close {
        from: bool,
        which: u8,
    },
    Deliver {
        at: u8,
        ce: bool,
    },
    Drop {
        at: u8,
    },
    Duplicate {
        at: u8,
    },
    Trim {
        at: u8,
        keep: u8,
    },
    Wait {
        micros: u16,
    },
    /// Jump to the earlier of the two endpoints' deadlines.
    Timeout,
}

/// Operations per input: more add little and slow every execution.
const MAX_OPS: usize = 512;
/// Steps of the final, lossless phase before the traffic must have settled.
const SETTLE_STEPS: usize = 20_000;

/// A message's bytes: its number, then `len` bytes derived from it.
fn body(id: u64, len: u8) -> Vec<u8> {
    let mut b = id.to_be_bytes().to_vec();
    b.extend((0..len).map(|i| (id as u8).wrapping_add(i)));
    b
}

/// The number of a message whose bytes are intact.
fn id_of(b: &[u8]) -> u64 {
    assert!(b.len() >= 8, "a body of {} bytes", b.len());
    let id = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
    assert_eq!(b[8..], body(id, (b.len() - 8) as u8)[8..], "the payload of message {id}");
    id
}

/// A RUDI response's bytes: the request's number, inverted.
fn response(id: u64) -> Vec<u8> {
    (!id).to_be_bytes().to_vec()
}

struct Packet {
    src: u8,
    dst: u8,
    sent: Duration,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct World {
    now: Duration,
    eps: Vec<Endpoint<u8>>,
    net: Vec<Packet>,
    /// How long a packet may stay in the network (open establishment).
    lifetime: Option<Duration>,
    next_id: u64,
    /// Messages sent on a PDC: (destination, mode); removed when acknowledged or failed.
    pending: HashMap<u64, (u8, Mode)>,
    /// Every message sent on a PDC.
    sent: HashMap<u64, (u8, Mode)>,
    delivered: HashSet<u64>,
    acked: HashSet<u64>,
    /// The last message a ROD PDC delivered, per (receiver, PDC).
    rod_last: HashMap<(u8, PdcId), u64>,
    /// PDCs each side lost (failed) on its own.
    lost: [u64; 2],
    /// RUDI requests outstanding: cookie -> (initiator, target).
    rudi: HashMap<u64, (u8, u8)>,
    /// Packets fed to each side, whole and trimmed.
    fed: [u64; 2],
    trimmed: [u64; 2],
}

impl World {
    fn new(input: &Input) -> World {
        let cfg = Config {
            ack_every: u32::from(input.ack_every % 16) + 1,
            window: u32::from(input.window % 32) + 1,
            max_pdcs: 8,
            max_pdcs_per_peer: 4,
            ..Config::default()
        };
        let establishment = match input.establishment {
            Est::Open => Establishment::Open,
            Est::ZeroRtt => Establishment::ZeroRtt,
            Est::OneRtt => Establishment::OneRtt,
        };
        let eps = (0..2u64)
            .map(|i| {
                let mut ep = Endpoint::new(cfg, 11 + i);
                ep.set_secure(establishment);
                ep.set_ack_events(true);
                ep
            })
            .collect();
        let lifetime = matches!(input.establishment, Est::Open).then_some(CLOSED_LINGER);
        World { eps, lifetime, ..World::default() }
    }

    /// Collects what both sides send into the network, and their events.
    fn pump(&mut self) {
        let mut buf = vec![0u8; 9000];
        for side in 0..2u8 {
            while let Some(t) = self.eps[usize::from(side)].poll_transmit(self.now, &mut buf) {
                let bytes = buf[..t.len].to_vec();
                assert!(PdsRepr::parse(&bytes).is_ok(), "side {side} sent an unparsable packet {bytes:02x?}");
                assert_eq!(t.dst, 1 - side, "side {side} sent to {}", t.dst);
                self.net.push(Packet { src: side, dst: t.dst, sent: self.now, bytes });
            }
            self.events(side);
        }
    }

    fn events(&mut self, side: u8) {
        while let Some(e) = self.eps[usize::from(side)].poll_event() {
            self.event(side, e);
        }
    }

    fn event(&mut self, side: u8, e: Event<u8>) {
        match e {
            Event::Acked { cookie, .. } => {
                assert!(self.delivered.contains(&cookie), "message {cookie} acknowledged, never delivered");
                assert!(self.acked.insert(cookie), "message {cookie} acknowledged twice");
                assert!(self.pending.remove(&cookie).is_some(), "message {cookie} acknowledged, not pending");
            }
            Event::Failed { unacked, .. } => {
                self.lost[usize::from(side)] += 1;
                for c in unacked {
                    assert!(!self.acked.contains(&c), "message {c} acknowledged and then failed");
                    self.pending.remove(&c);
                }
            }
            Event::RudiFailed { cookie, .. } => {
                assert!(self.rudi.remove(&cookie).is_some(), "RUDI request {cookie} failed twice");
            }
            Event::Closed { pdc, .. } => {
                self.rod_last.remove(&(side, pdc));
            }
            Event::Established { .. } | Event::Accepted { .. } => {}
        }
    }

    fn send(&mut self, from: u8, mode: Mode, len: u8) {
        let id = self.next_id;
        self.next_id += 1;
        let to = 1 - from;
        if self.eps[usize::from(from)].send(to, mode, NextHeader::ReqStd, body(id, len), id).is_ok() {
            self.pending.insert(id, (to, mode));
            self.sent.insert(id, (to, mode));
        }
    }

    fn rudi(&mut self, from: u8, len: u8) {
        let id = self.next_id;
        self.next_id += 1;
        self.eps[usize::from(from)].rudi_send(1 - from, NextHeader::ReqStd, body(id, len), id);
        self.rudi.insert(id, (from, 1 - from));
    }

    fn close(&mut self, from: u8, which: u8) {
        let ep = &mut self.eps[usize::from(from)];
        let ids: Vec<PdcId> = ep.pdcs().map(|(id, _)| id).collect();
        if !ids.is_empty() {
            let _ = ep.close(self.now, ids[usize::from(which) % ids.len()]);
        }
    }

    fn take(&mut self, at: u8) -> Option<Packet> {
        (!self.net.is_empty()).then(|| self.net.remove(usize::from(at) % self.net.len()))
    }

    fn deliver(&mut self, p: Packet, ce: bool) {
        let dst = p.dst;
        self.fed[usize::from(dst)] += 1;
        let d = self.eps[usize::from(dst)].handle_packet_ecn(self.now, p.src, &p.bytes, ce);
        let d = d.unwrap_or_else(|e| panic!("side {dst} refused a packet its peer sent: {e:?}"));
        let mut respond = None;
        if let Some(d) = d {
            assert_eq!(d.peer, p.src);
            match d.kind {
                DeliveryKind::Pdc { pdc, mode, .. } => {
                    let id = id_of(d.body);
                    assert_eq!(
                        self.sent.get(&id),
                        Some(&(dst, mode)),
                        "message {id} delivered to {dst} in {mode:?}"
                    );
                    if !self.delivered.insert(id) {
                        let reaped = self.eps[usize::from(dst)].stats().pdcs_reaped;
                        assert!(reaped + self.lost[usize::from(dst)] > 0, "message {id} delivered twice");
                    }
                    if mode == Mode::Rod {
                        let last = self.rod_last.insert((dst, pdc), id);
                        assert!(last.is_none_or(|l| l < id), "ROD PDC {pdc} delivered {id} after {last:?}");
                    }
                }
                DeliveryKind::RudiRequest { pkt_id } => {
                    let id = id_of(d.body);
                    assert!(self.rudi.get(&id).is_none_or(|&(_, t)| t == dst), "RUDI request {id} at {dst}");
                    respond = Some((pkt_id, id));
                }
                DeliveryKind::RudiResponse { cookie, .. } => {
                    assert_eq!(d.body, response(cookie), "the response to RUDI request {cookie}");
                    let out = self.rudi.remove(&cookie);
                    assert_eq!(
                        out.map(|(i, _)| i),
                        Some(dst),
                        "RUDI response {cookie} at {dst}, twice or unasked"
                    );
                }
                DeliveryKind::Uud => panic!("a UUD datagram nobody sent"),
            }
        }
        if let Some((pkt_id, id)) = respond {
            self.eps[usize::from(dst)].rudi_respond(p.src, pkt_id, NextHeader::Rsp, response(id));
        }
        // Before the next packet (the lossless phase delivers a batch): a PDC this one made the
        // side lose counts for the duplicates that may follow.
        self.events(dst);
    }

    fn trim(&mut self, p: Packet, keep: u8) {
        let dst = p.dst;
        // A switch keeps the headers at least: the PDS header parses.
        let head = PdsRepr::parse(&p.bytes).expect("parsed when sent").buffer_len();
        let cut = (head + usize::from(keep)).min(p.bytes.len());
        self.trimmed[usize::from(dst)] += 1;
        let r = self.eps[usize::from(dst)].handle_trimmed(self.now, p.src, &p.bytes[..cut]);
        assert!(r.is_ok(), "side {dst} refused a trimmed packet: {r:?}");
    }

    fn deadline(&self) -> Option<Duration> {
        self.eps.iter().filter_map(Endpoint::poll_timeout).min()
    }

    fn advance(&mut self, to: Duration) {
        self.now = self.now.max(to);
        for ep in &mut self.eps {
            ep.handle_timeout(self.now);
        }
    }

    /// Drops the packets that have outlived the network's packet lifetime.
    fn expire(&mut self) {
        if let Some(lifetime) = self.lifetime {
            let now = self.now;
            self.net.retain(|p| now - p.sent < lifetime);
        }
    }

    fn step(&mut self, op: &Op) {
        self.expire();
        match *op {
            Op::Send { from, ordered, len } => {
                self.send(u8::from(from), if ordered { Mode::Rod } else { Mode::Rud }, len)
            }
            Op::Rudi { from, len } => self.rudi(u8::from(from), len),
            Op::Close { from, which } => self.close(u8::from(from), which),
            Op::Deliver { at, ce } => {
                if let Some(p) = self.take(at) {
                    self.deliver(p, ce);
                }
            }
            Op::Drop { at } => drop(self.take(at)),
            Op::Duplicate { at } => {
                if !self.net.is_empty() {
                    let p = &self.net[usize::from(at) % self.net.len()];
                    let copy = Packet { src: p.src, dst: p.dst, sent: p.sent, bytes: p.bytes.clone() };
                    self.net.push(copy);
                }
            }
            Op::Trim { at, keep } => {
                if let Some(p) = self.take(at) {
                    self.trim(p, keep);
                }
            }
            Op::Wait { micros } => self.advance(self.now + Duration::from_micros(u64::from(micros))),
            Op::Timeout => {
                if let Some(t) = self.deadline() {
                    self.advance(t);
                }
            }
        }
        self.pump();
    }

    /// The lossless network: delivers everything in order and moves time to the next deadline
    /// when nothing is in flight, until nothing is outstanding.
    fn settle(&mut self) {
        for _ in 0..SETTLE_STEPS {
            self.pump();
            self.expire();
            if !self.net.is_empty() {
                for p in std::mem::take(&mut self.net) {
                    self.deliver(p, false);
                }
                continue;
            }
            if self.pending.is_empty() && self.rudi.is_empty() {
                return;
            }
            let Some(t) = self.deadline() else { break };
            self.advance(t);
        }
        let mut pending: Vec<_> = self.pending.keys().collect();
        pending.sort();
        let mut rudi: Vec<_> = self.rudi.keys().collect();
        rudi.sort();
        panic!("traffic did not settle: messages {pending:?} and RUDI requests {rudi:?} outstanding");
    }

    fn check_counts(&self) {
        for (side, ep) in self.eps.iter().enumerate() {
            let s = ep.stats();
            assert_eq!(s.rx_malformed, 0, "side {side}");
            assert_eq!(s.rx_packets, self.fed[side], "side {side}: packets fed");
            assert_eq!(s.rx_delivered + s.rx_control + s.rx_refused(), s.rx_packets, "side {side}: {s:?}");
            assert_eq!(s.rx_trimmed, self.trimmed[side], "side {side}: trimmed packets");
        }
    }
}

pub fn run(data: &[u8]) {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let mut w = World::new(&input);
    for op in input.ops.iter().take(MAX_OPS) {
        w.step(op);
    }
    w.settle();
    w.check_counts();
}
