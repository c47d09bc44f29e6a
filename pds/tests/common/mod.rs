//! Two PDS endpoints joined by a nicsim cable. Every frame is the PDS packet plus the CRC32C
//! trailer (uet-wire.md "Decisions": optional, 4 bytes), checked on receipt so that nicsim's
//! bit flips are dropped as a real receiver would. A `drop` hook lets a test lose chosen packets.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use bytes::Bytes;
use nicsim::{Ends, LinkConfig, Network, Pair, PortId};
use pds::{Config, DeliveryKind, Endpoint, Event, NextHeader};
use wire::uet::PdsRepr;
use wire::uet::layout::{CRC_LEN, crc32c};

/// What one side received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub kind: DeliveryKind,
    pub next_hdr: NextHeader,
    pub body: Vec<u8>,
}

pub struct Side {
    pub ep: Endpoint<u8>,
    pub events: Vec<Event<u8>>,
    pub received: Vec<Received>,
    pub bad_crc: u64,
    /// Answer RUDI requests with `rudi_answer(request body)`.
    pub serve_rudi: bool,
}

/// The idempotent "read" a RUDI target performs: 64 bytes derived from the request.
pub fn rudi_answer(req: &[u8]) -> Vec<u8> {
    let key =
        req.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    (0..64u64).map(|i| (key.rotate_left(i as u32) ^ i) as u8).collect()
}

/// Decides which packets a test loses.
pub type DropHook = Box<dyn FnMut(u8, &PdsRepr) -> bool>;

/// The packets each side has sent, parsed, for inspection.
pub type Sent = Vec<(u8, PdsRepr)>;

/// The two endpoints on their cable (side 0 on `ports[0]`, side 1 on `ports[1]`).
pub type Sim = Pair<Pds>;

/// Both PDS endpoints of a [`Sim`] and what the test sees of them.
pub struct Pds {
    pub sides: [Side; 2],
    /// Called with the sender and the PDS header of every packet; true loses it before the cable.
    pub drop: DropHook,
    pub sent: Sent,
    buf: Vec<u8>,
}

impl Pds {
    /// Two endpoints with `cfg` on a cable seeded with `seed`.
    pub fn pair(seed: u64, cfg: Config, a_to_b: LinkConfig, b_to_a: LinkConfig) -> Sim {
        let side = |ep| Side { ep, events: Vec::new(), received: Vec::new(), bad_crc: 0, serve_rudi: true };
        let pds = Pds {
            sides: [
                side(Endpoint::new(cfg, seed.wrapping_mul(2))),
                side(Endpoint::new(cfg, seed.wrapping_mul(2) + 1)),
            ],
            drop: Box::new(|_, _| false),
            sent: Vec::new(),
            buf: vec![0; 9000],
        };
        Pair::new(seed, a_to_b, b_to_a, pds)
    }
}

impl Ends for Pds {
    fn pass(&mut self, net: &mut Network, ports: [PortId; 2]) -> bool {
        let now = net.now();
        let mut moved = false;
        for (s, &port) in ports.iter().enumerate() {
            let ep = &mut self.sides[s].ep;
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while let Some(t) = ep.poll_transmit(now, &mut self.buf) {
                moved = true;
                assert_eq!(t.dst, 1 - s as u8, "sent to the peer");
                let len = t.len;
                let crc = crc32c(&self.buf[..len]);
                self.buf[len..len + CRC_LEN].copy_from_slice(&crc.to_be_bytes());
                let pds = PdsRepr::parse(&self.buf[..len]).expect("what we send parses");
                self.sent.push((s as u8, pds));
                if (self.drop)(s as u8, &pds) {
                    continue;
                }
                let mut f = net.alloc();
                f.buffer_mut()[..len + CRC_LEN].copy_from_slice(&self.buf[..len + CRC_LEN]);
                f.set_len(len + CRC_LEN);
                net.transmit(port, f).unwrap();
            }
            let side = &mut self.sides[s];
            while let Some(f) = net.receive(port) {
                moved = true;
                let data = f.as_slice();
                let (pkt, trailer) = data.split_at(data.len().saturating_sub(CRC_LEN));
                if trailer.len() != CRC_LEN || crc32c(pkt) != u32::from_be_bytes(trailer.try_into().unwrap())
                {
                    side.bad_crc += 1;
                    net.recycle(f);
                    continue;
                }
                let d = side.ep.handle_packet(now, 1 - s as u8, pkt).expect("CRC-checked packets parse");
                if let Some(d) = d {
                    if let (DeliveryKind::RudiRequest { pkt_id }, true) = (d.kind, side.serve_rudi) {
                        let answer = Bytes::from(rudi_answer(d.body));
                        side.ep.rudi_respond(d.peer, pkt_id, NextHeader::RspDataSmall, answer);
                    }
                    side.received.push(Received {
                        kind: d.kind,
                        next_hdr: d.next_hdr,
                        body: d.body.to_vec(),
                    });
                }
                net.recycle(f);
            }
            while let Some(e) = side.ep.poll_event() {
                moved = true;
                side.events.push(e);
            }
        }
        if !moved {
            // A deadline already past that nothing acts on is a timer that spins: the endpoint
            // would wake up every nanosecond (RCCC's CREDIT_REQ timer once did).
            if let Some(t) = self.timeout() {
                assert!(t > now, "a deadline at {t:?} (now {now:?}) that nothing acts on");
            }
        }
        moved
    }

    fn timeout(&self) -> Option<Duration> {
        self.sides.iter().filter_map(|s| s.ep.poll_timeout()).min()
    }
}

/// A small deterministic generator for workloads.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Message `idx` of a stream tagged `tag`: a 9-byte header (tag, index, length) and `len` bytes
/// of a pattern that depends on all three.
pub fn message(tag: u8, idx: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + len);
    v.push(tag);
    v.extend_from_slice(&idx.to_be_bytes());
    v.extend_from_slice(&(len as u32).to_be_bytes());
    v.extend((0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(idx * 7 + u32::from(tag)) as u8));
    v
}

/// Checks a received message against [`message`]; returns (tag, index).
pub fn check_message(body: &[u8]) -> Result<(u8, u32), String> {
    if body.len() < 9 {
        return Err(format!("{} byte message", body.len()));
    }
    let tag = body[0];
    let idx = u32::from_be_bytes(body[1..5].try_into().unwrap());
    let len = u32::from_be_bytes(body[5..9].try_into().unwrap()) as usize;
    if message(tag, idx, len) != body {
        return Err(format!("message {tag}/{idx} corrupt ({} bytes, header says {len})", body.len()));
    }
    Ok((tag, idx))
}
