//! The two sides of a UET perf run: the initiator posts operations and checks READ data and
//! atomic results; the target holds the receive buffers and the RMA region and checks every
//! received message.

use std::net::Ipv4Addr;
use std::time::Duration;

use ahash::AHashMap as HashMap;
use bytes::Bytes;
use ses::{Access, Addr, Completion, CompletionKind, DeliveryMode, JobScope, Opts, RecvSpec, Status};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

use super::config::{TAG, UetOp, UetPerfConfig};
use super::message::{check, is_message, message, ses_error, timed};
use crate::perf::PerfError;
use engine::datapath::Datapath;
use engine::uet::UetNode;

/// The side that posts operations.
#[derive(Debug)]
pub struct Initiator<D> {
    pub(super) node: UetNode<D>,
    pub(super) cfg: UetPerfConfig,
    dst: Addr<Ipv4Addr>,
    /// Region slots not in use by an RMA in flight (RUD completes out of order, so a slot is
    /// reused only once its own operation is done).
    free: Vec<usize>,
    slot_of: HashMap<u64, usize>,
    /// The last message written to each slot.
    pub(super) last_write: Vec<Option<u64>>,
    /// Atomics: each slot's value as this side's completed operations made it (a slot starts as
    /// its index and operation `i` adds `i + 1`); every fetched value must equal it.
    pub(super) expected: Vec<u64>,
    pub(super) verified: u64,
    pub(super) errors: u64,
    /// Time spent making and checking messages.
    pub(super) harness: Duration,
    /// The buffers of the messages in flight: the application's until their operation completes
    /// (the endpoint shares them until then).
    pub(super) buffers: HashMap<u64, Bytes>,
    /// Buffers of completed messages, for the next ones (as a verbs application reuses its
    /// registered memory rather than allocating a buffer per message).
    pub(super) spare: Vec<Vec<u8>>,
}

impl<D: Datapath> Initiator<D> {
    pub(super) fn new(node: UetNode<D>, cfg: UetPerfConfig, target: Ipv4Addr) -> Initiator<D> {
        let dst = Addr { fep: target, pid_on_fep: 0, resource_index: 0 };
        let free = (0..cfg.depth()).rev().collect();
        let last_write = vec![None; cfg.depth()];
        let expected = (0..cfg.depth() as u64).collect();
        Initiator {
            node,
            cfg,
            dst,
            free,
            slot_of: HashMap::new(),
            last_write,
            expected,
            verified: 0,
            errors: 0,
            harness: Duration::ZERO,
            buffers: HashMap::new(),
            spare: Vec::new(),
        }
    }

    pub(super) fn post(&mut self, i: u64) -> Result<(), PerfError> {
        let size = self.cfg.size;
        let slot = if self.cfg.op.uses_region() {
            let slot = self.free.pop().ok_or(PerfError::Stalled("no free slot"))?;
            self.slot_of.insert(i, slot);
            slot
        } else {
            0
        };
        let opts = Opts { context: i, ordered: self.cfg.transport == DeliveryMode::Rod, ..Opts::default() };
        let (dst, key) = (self.dst, self.cfg.key());
        // Each message is made in a buffer of its own that the endpoint shares until it completes
        // (as a verbs application posts from its memory): no copy before the frame.
        let mut made = || {
            timed(&mut self.harness, || {
                let mut m = self.spare.pop().unwrap_or_default();
                message(i, size, &mut m);
                let m = Bytes::from(m);
                self.buffers.insert(i, m.clone());
                m
            })
        };
        let r = match self.cfg.op {
            UetOp::Send | UetOp::Tsend => {
                let tag = (self.cfg.op == UetOp::Tsend).then_some(TAG);
                let m = made();
                self.node.ses().send_bytes(dst, m, tag, opts)
            }
            UetOp::Write => {
                let m = made();
                self.node.ses().write_bytes(dst, key, (slot * size) as u64, m, opts)
            }
            UetOp::Read => self.node.ses().read(dst, key, (slot * size) as u64, size, opts),
            UetOp::FetchAdd => {
                let add = (i + 1).to_le_bytes();
                self.node.ses().fetch_atomic(
                    dst,
                    key,
                    (slot * 8) as u64,
                    AmoOpcode::Sum,
                    AmoDatatype::Uint64,
                    &add,
                    opts,
                )
            }
            UetOp::CmpSwap => {
                let (old, new) = (self.expected[slot], self.expected[slot].wrapping_add(i + 1));
                let (c, w) = (old.to_le_bytes(), new.to_le_bytes());
                self.node.ses().compare_atomic(
                    dst,
                    key,
                    (slot * 8) as u64,
                    AmoOpcode::Cswap,
                    AmoDatatype::Uint64,
                    &c,
                    &w,
                    opts,
                )
            }
        };
        r.map(|_| ()).map_err(ses_error)
    }

    /// Takes a completion: frees its slot, checks READ data. Returns `(index, slot)`.
    pub(super) fn complete(&mut self, c: &Completion<Ipv4Addr>) -> (u64, Option<usize>) {
        if let Some(m) = self.buffers.remove(&c.context) {
            // Back to the spares once the endpoint holds no part of it (it may still, if the
            // operation failed with packets queued).
            timed(&mut self.harness, || self.spare.extend(m.try_into_mut().ok().map(Vec::from)));
        }
        let slot = self.slot_of.remove(&c.context);
        if let Some(s) = slot {
            self.free.push(s);
        }
        if c.status != Status::Ok {
            self.errors += 1;
            return (c.context, slot);
        }
        match (self.cfg.op, slot) {
            (UetOp::Read, Some(s))
                if timed(&mut self.harness, || is_message(&c.data, self.cfg.size, s as u64)) =>
            {
                self.verified += 1
            }
            (UetOp::Read, _) => self.errors += 1,
            (UetOp::Write, Some(s)) => self.last_write[s] = Some(c.context),
            (UetOp::FetchAdd | UetOp::CmpSwap, Some(s)) => {
                let old = c.data.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
                if old == Some(self.expected[s]) {
                    self.expected[s] = self.expected[s].wrapping_add(c.context + 1);
                    self.verified += 1;
                } else {
                    self.errors += 1;
                }
            }
            _ => {}
        }
        (c.context, slot)
    }
}

/// The side that receives messages and holds the RMA region.
#[derive(Debug)]
pub struct Target<D> {
    pub(super) node: UetNode<D>,
    cfg: UetPerfConfig,
    posted: u64,
    pub(super) received: u64,
    pub(super) verified: u64,
    pub(super) errors: u64,
    /// Time spent checking messages.
    pub(super) harness: Duration,
}

impl<D: Datapath> Target<D> {
    pub(super) fn new(mut node: UetNode<D>, cfg: UetPerfConfig) -> Result<Target<D>, PerfError> {
        if cfg.op.uses_region() {
            let mut region = vec![0u8; cfg.size * cfg.depth()];
            let mut m = Vec::new();
            for slot in 0..cfg.depth() {
                message(slot as u64, cfg.size, &mut m);
                region[slot * cfg.size..(slot + 1) * cfg.size].copy_from_slice(&m);
            }
            let key = cfg.key();
            node.ses()
                .regions
                .register(key, region, Access::ALL, JobScope::Any)
                .map_err(|_| PerfError::Stalled("key"))?;
        }
        let mut t =
            Target { node, cfg, posted: 0, received: 0, verified: 0, errors: 0, harness: Duration::ZERO };
        // UUD has no flow control: every datagram gets a receive up front.
        let first = if cfg.transport == DeliveryMode::Uud { cfg.iters } else { cfg.depth() as u64 };
        if cfg.receives() {
            for _ in 0..first.min(cfg.iters) {
                t.post_recv();
            }
        }
        Ok(t)
    }

    fn post_recv(&mut self) {
        let tag = (self.cfg.op == UetOp::Tsend).then_some((TAG, 0));
        let (size, ctx) = (self.cfg.size, self.posted);
        self.node.ses().post_recv(RecvSpec { tag, ..RecvSpec::any() }, size, ctx);
        self.posted += 1;
    }

    /// Takes a completion: checks the message and posts the next receive.
    fn complete(&mut self, c: &Completion<Ipv4Addr>) {
        if c.kind != CompletionKind::Recv {
            return;
        }
        self.received += 1;
        let size = self.cfg.size;
        if c.status == Status::Ok && timed(&mut self.harness, || check(&c.data, size).is_some()) {
            self.verified += 1;
        } else {
            self.errors += 1;
        }
        if self.posted < self.cfg.iters {
            self.post_recv();
        }
    }

    /// The UINT64 in region slot `slot` (atomics).
    pub(super) fn slot_value(&mut self, slot: usize) -> Option<u64> {
        let key = self.cfg.key();
        let r = self.node.ses().regions.get(key)?;
        r.data.bytes().get(slot * 8..slot * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// Whether region slot `slot` holds message `i`.
    pub(super) fn slot_holds(&mut self, slot: usize, i: u64) -> bool {
        let (size, key) = (self.cfg.size, self.cfg.key());
        let regions = &self.node.ses().regions;
        let data = regions.get(key).and_then(|r| r.data.bytes().get(slot * size..(slot + 1) * size));
        timed(&mut self.harness, || data.is_some_and(|d| is_message(d, size, i)))
    }

    pub(super) fn drain(&mut self) {
        while let Some(c) = self.node.ses().poll_completion() {
            self.complete(&c);
        }
    }
}
