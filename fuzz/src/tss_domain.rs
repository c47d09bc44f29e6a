//! Drives a receiving secure domain (`tss::SecureDomain`, cluster key mode, rekeying every 4
//! packets, a 16-TSC replay window, epochs living 2 steps, a latch after 8 ICV failures) with
//! packets two senders sealed, delivered once, again (replays), tampered (ciphertext, ICV, AAD,
//! header fields, claimed source) or made up, while epochs move and keys rotate and retire.
//!
//! Checks, against a model kept here:
//! - what opens is byte for byte a packet a sender sealed, untampered, and yields its plaintext;
//! - no (source, TSC) is ever delivered twice, nor one as old as the replay window or older;
//! - a packet that should open does: untampered, first delivery, TSC newer than every TSC of its
//!   source delivered so far, the receiver holding its AN's key, its epoch not too old, no latch;
//! - nothing opens once the domain has latched, and it latches exactly at the failure limit;
//! - the counters add up to what `open` returned.
//!
//! Input: a sequence of operations, each a byte `op` (the low 3 bits choose) and its arguments.

use std::collections::HashSet;
use tss::{Config, KeyMode, SecureDomain, TssError};
use wire::uet::tss::TssRepr;

const SOURCES: [u32; 2] = [0x0A00_0001, 0x0A00_0002];
const FAIL_LIMIT: u32 = 8;
const WINDOW: u64 = 16;
const LIFETIME: u16 = 2;
const KEEP: usize = 64;

/// A packet as a sender sealed it.
#[derive(Clone, PartialEq)]
struct Sealed {
    source: u32,
    hdr: TssRepr,
    body: Vec<u8>,
    clear: Vec<u8>,
    /// Which key (by installation number) sealed it.
    key: u32,
}

struct World {
    senders: [SecureDomain; 2],
    /// Installation number of the key each sender seals with, per AN.
    sender_keys: [[Option<u32>; 2]; 2],
    receiver: SecureDomain,
    receiver_keys: [Option<u32>; 2],
    /// The AN the senders seal with.
    active: bool,
    next_key: u32,
    sealed: Vec<Sealed>,
    delivered: HashSet<(u32, u64)>,
    top: [Option<u64>; 2],
    opened: u64,
    refused: u64,
    auth_failures: u32,
}

fn cfg() -> Config {
    Config {
        sdi: 7,
        mode: KeyMode::Cluster,
        rekey_shift: Some(2),
        max_epoch_lifetime: LIFETIME,
        auth_fail_limit: FAIL_LIMIT,
        replay_window: WINDOW,
        ssi: None,
    }
}

fn key(n: u32) -> [u8; 32] {
    let mut k = [0x5Au8; 32];
    k[..4].copy_from_slice(&n.to_be_bytes());
    k
}

/// The index of the sender whose source this is.
fn sender(source: u32) -> Option<usize> {
    SOURCES.iter().position(|&s| s == source)
}

/// The AAD prefix (addresses and ports) of a packet from `source`.
fn prefix(source: u32) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&source.to_be_bytes());
    p[4..8].copy_from_slice(&0x0A00_0009u32.to_be_bytes());
    p[8..].copy_from_slice(&[0xC0, 0x01, 0x12, 0xB9]);
    p
}

impl World {
    fn new() -> World {
        World {
            senders: [SecureDomain::new(cfg(), key(0), 0), SecureDomain::new(cfg(), key(0), 0)],
            sender_keys: [[Some(0), None], [Some(0), None]],
            receiver: SecureDomain::new(cfg(), key(0), 0),
            receiver_keys: [Some(0), None],
            active: false,
            next_key: 1,
            sealed: Vec::new(),
            delivered: HashSet::new(),
            top: [None; 2],
            opened: 0,
            refused: 0,
            auth_failures: 0,
        }
    }

    fn seal(&mut self, who: usize, len: usize) {
        let source = SOURCES[who];
        let clear: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ who as u8).collect();
        let mut body = clear.clone();
        let s = &mut self.senders[who];
        let hdr = s.seal(source, &prefix(source), &mut body).expect("a sender with a key seals");
        let key = self.sender_keys[who][usize::from(hdr.an)].expect("the active AN has a key");
        let p = Sealed { source, hdr, body, clear, key };
        if self.sealed.len() == KEEP {
            self.sealed.remove(0);
        }
        self.sealed.push(p);
    }

    /// Whether `p` (as sealed) must open now.
    fn should_open(&self, p: &Sealed) -> bool {
        let who = sender(p.source).expect("a sender's packet");
        !self.receiver.latched()
            && self.receiver_keys[usize::from(p.hdr.an)] == Some(p.key)
            && p.hdr.epoch() >= self.receiver.epoch().saturating_sub(LIFETIME)
            && !self.delivered.contains(&(p.source, p.hdr.tsc))
            && self.top[who].is_none_or(|t| p.hdr.tsc > t)
    }

    fn deliver(&mut self, source: u32, aad: [u8; 12], hdr: TssRepr, body: &[u8]) {
        let original = self
            .sealed
            .iter()
            .find(|p| p.source == source && aad == prefix(source) && p.hdr == hdr && p.body == body)
            .cloned();
        let must = original.as_ref().is_some_and(|p| self.should_open(p));
        let was_latched = self.receiver.latched();
        let mut buf = body.to_vec();
        let r = self.receiver.open(source, &aad, &hdr, &mut buf);
        match r {
            Ok(n) => {
                let p = original.expect("only what a sender sealed, untampered, opens");
                assert!(!was_latched, "a latched domain opened a packet");
                assert_eq!(&buf[..n], &p.clear[..], "the plaintext is what was sealed");
                assert!(self.delivered.insert((source, hdr.tsc)), "a TSC delivered twice");
                let who = sender(source).expect("a sender");
                let behind = self.top[who].map_or(0, |t| t.saturating_sub(hdr.tsc));
                assert!(behind < WINDOW, "a TSC {behind} behind its source's newest opened");
                self.top[who] = Some(self.top[who].map_or(hdr.tsc, |t| t.max(hdr.tsc)));
                self.opened += 1;
            }
            Err(e) => {
                assert!(!must, "a packet that should open was refused: {e:?}");
                self.refused += 1;
                if e == TssError::AuthFailed {
                    self.auth_failures += 1;
                }
            }
        }
        assert_eq!(self.receiver.latched(), self.auth_failures >= FAIL_LIMIT, "latch at the limit");
        let st = self.receiver.stats();
        assert_eq!(st.opened, self.opened);
        assert_eq!(st.auth_failures + st.replays + st.old_epochs + st.other_drops, self.refused);
    }
}

pub fn run(data: &[u8]) {
    let mut w = World::new();
    let mut it = data.iter().copied();
    let mut arg = move || -> Option<u8> { it.next() };
    while let Some(op) = arg() {
        match op & 7 {
            0 | 1 => {
                let len = usize::from(arg().unwrap_or(0));
                w.seal(usize::from(op >> 7), len);
            }
            2 | 3 if !w.sealed.is_empty() => {
                let p = w.sealed[usize::from(arg().unwrap_or(0)) % w.sealed.len()].clone();
                w.deliver(p.source, prefix(p.source), p.hdr, &p.body);
            }
            4 if !w.sealed.is_empty() => {
                // Tampered: `how` picks the field, `at` the byte or bit.
                let p = w.sealed[usize::from(arg().unwrap_or(0)) % w.sealed.len()].clone();
                let (how, at) = (arg().unwrap_or(0), usize::from(arg().unwrap_or(0)));
                let (mut source, mut aad, mut hdr, mut body) = (p.source, prefix(p.source), p.hdr, p.body);
                match how % 6 {
                    0 if !body.is_empty() => {
                        let i = at % body.len();
                        body[i] ^= 1 << (how >> 5);
                    }
                    0 => body.push(how),
                    1 => aad[at % 12] ^= 1 << (how >> 5),
                    2 => hdr.tsc ^= 1 << (at % 64),
                    3 => hdr.an = !hdr.an,
                    4 => hdr.sdi ^= 1 << (at % 24),
                    _ => source = SOURCES[usize::from(source == SOURCES[0])],
                }
                w.deliver(source, aad, hdr, &body);
            }
            5 => {
                // Made up: a header and a body from the input.
                let mut tsc = [0u8; 8];
                tsc.iter_mut().for_each(|b| *b = arg().unwrap_or(0));
                let flags = arg().unwrap_or(0);
                let hdr = TssRepr {
                    reserved: false,
                    an: flags & 1 != 0,
                    sdi: if flags & 2 != 0 { 7 } else { u32::from(flags) },
                    ssi: None,
                    tsc: u64::from_be_bytes(tsc),
                };
                let len = usize::from(arg().unwrap_or(0) % 64);
                let body: Vec<u8> = (0..len).map(|_| arg().unwrap_or(0)).collect();
                w.deliver(SOURCES[usize::from(flags >> 7)], prefix(SOURCES[0]), hdr, &body);
            }
            6 => {
                // Epochs move forward: bit 3 the first sender, 4 the second, 5 the receiver.
                let by = u16::from(op >> 6) + 1;
                for who in 0..2 {
                    if op & (8 << who) != 0 {
                        let e = w.senders[who].epoch().saturating_add(by);
                        w.senders[who].new_epoch(e);
                    }
                }
                if op & 0x20 != 0 {
                    let e = w.receiver.epoch().saturating_add(by);
                    w.receiver.new_epoch(e);
                }
            }
            7 => {
                // Key rotation, make-before-break: a new key under the AN not in use, installed
                // at the receiver and both senders, who then seal with it; or (bit 3) the
                // receiver retires an AN (bit 4).
                if op & 8 != 0 {
                    let an = op & 0x10 != 0;
                    w.receiver.retire(an);
                    w.receiver_keys[usize::from(an)] = None;
                } else {
                    let (n, an) = (w.next_key, !w.active);
                    w.next_key += 1;
                    w.active = an;
                    w.receiver.install_key(an, key(n));
                    w.receiver_keys[usize::from(an)] = Some(n);
                    for who in 0..2 {
                        w.senders[who].install_key(an, key(n));
                        w.sender_keys[who][usize::from(an)] = Some(n);
                        w.senders[who].activate(an).expect("just installed");
                    }
                }
            }
            _ => {}
        }
    }
}
