//! `softrdma perf` over UET: two [`UetNode`]s on the simulated network, SEND / TAGGED_SEND / WRITE /
//! READ in a delivery mode (RUD, ROD, RUDI, UUD), every message checked, in the table format of the
//! RoCE runs so that both can be compared in one run.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nicsim::LinkConfig;
use ses::key::IDEMPOTENT_SAFE;
use ses::{Access, Addr, Completion, CompletionKind, DeliveryMode, EpType, JobScope, Opts, RecvSpec, Status};

use super::{BwRow, LatRow, PerfError};
use crate::datapath::sim::{SimNet, SimPort};
use crate::uet::UetNode;

/// UET operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UetOp {
    /// SEND.
    Send,
    /// TAGGED_SEND.
    Tsend,
    /// WRITE.
    Write,
    /// READ.
    Read,
}

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct UetPerfConfig {
    /// Operation.
    pub op: UetOp,
    /// Delivery mode.
    pub transport: DeliveryMode,
    /// Message size.
    pub size: usize,
    /// Messages.
    pub iters: u64,
    /// Operations in flight (bandwidth mode).
    pub depth: usize,
    /// Payload bytes per packet.
    pub max_payload: usize,
    /// The link, both directions.
    pub link: LinkConfig,
    /// Seed of the network and the endpoints.
    pub seed: u64,
    /// PDS retry limit.
    pub max_retries: u32,
}

impl UetPerfConfig {
    /// Why the combination cannot run, if it cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        match (self.transport, self.op) {
            (DeliveryMode::Rudi, UetOp::Send | UetOp::Tsend) => {
                Err("RUDI carries idempotent RMA: write or read")
            }
            (DeliveryMode::Uud, UetOp::Write | UetOp::Read) => Err("UUD carries datagram sends: send"),
            (DeliveryMode::Uud, UetOp::Tsend) => Err("UUD carries untagged datagram sends: send"),
            (DeliveryMode::Uud, _) if self.size > self.max_payload => {
                Err("a UUD datagram must fit one packet")
            }
            _ if self.size > 1 << 30 => Err("messages are at most 1 GiB"),
            _ => Ok(()),
        }
    }
}

const TAG: u64 = 0x5EED_0000_0000_0001;
const KEY: u64 = 0x1000;

/// The bytes of message `i` (the first 8 carry `i` when they fit).
fn message(i: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend((0..size).map(|k| (k as u64).wrapping_mul(131).wrapping_add(i.wrapping_mul(7919)) as u8));
    if size >= 8 {
        buf[..8].copy_from_slice(&i.to_le_bytes());
    }
}

/// The index a received message claims, and whether it is intact.
fn check(data: &[u8], size: usize, scratch: &mut Vec<u8>) -> Option<u64> {
    if data.len() != size {
        return None;
    }
    let i = if size >= 8 { u64::from_le_bytes(data[..8].try_into().ok()?) } else { 0 };
    message(i, size, scratch);
    if size >= 8 {
        (scratch[..] == *data).then_some(i)
    } else {
        (scratch[8.min(size)..] == data[8.min(size)..]).then_some(i)
    }
}

/// Two nodes joined by a simulated cable.
pub struct UetBench {
    cfg: UetPerfConfig,
    net: SimNet,
    a: UetNode<SimPort>,
    b: UetNode<SimPort>,
    dst: Addr<Ipv4Addr>,
    scratch: Vec<u8>,
    verified: u64,
    errors: u64,
    /// Region slots not in use by an RMA in flight (RUD completes out of order, so a slot is
    /// reused only once its own operation is done).
    free: Vec<usize>,
    /// The slot of each RMA in flight, by message index.
    slot_of: HashMap<u64, usize>,
}

impl std::fmt::Debug for UetBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UetBench").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl UetBench {
    /// Builds the two nodes (B holds the target region for RMA).
    pub fn new(cfg: UetPerfConfig) -> Result<UetBench, PerfError> {
        cfg.check().map_err(PerfError::Stalled)?;
        let (net, pa, pb) = SimNet::pair(cfg.seed, cfg.link, cfg.link);
        let pds = pds::Config { max_retries: cfg.max_retries, ..pds::Config::default() };
        let ep_type = if cfg.transport == DeliveryMode::Uud { EpType::Dgram } else { EpType::Rdm };
        let scfg = ses::Config {
            pds,
            ep_type,
            max_payload: cfg.max_payload,
            initiator: 1,
            ..ses::Config::default()
        };
        let a = UetNode::new(pa, ses::Endpoint::new(scfg, cfg.seed * 2), true).map_err(PerfError::Stalled)?;
        let mut b =
            UetNode::new(pb, ses::Endpoint::new(scfg, cfg.seed * 2 + 1), true).map_err(PerfError::Stalled)?;
        let dst = Addr { fep: b.ip(), pid_on_fep: 0, resource_index: 0 };
        if matches!(cfg.op, UetOp::Write | UetOp::Read) {
            let key = if cfg.transport == DeliveryMode::Rudi { KEY | IDEMPOTENT_SAFE } else { KEY };
            let mut region = vec![0u8; cfg.size * cfg.depth.max(1)];
            let mut m = Vec::new();
            for slot in 0..cfg.depth.max(1) {
                message(slot as u64, cfg.size, &mut m);
                region[slot * cfg.size..(slot + 1) * cfg.size].copy_from_slice(&m);
            }
            b.ses()
                .regions
                .register(key, region, Access::ALL, JobScope::Any)
                .map_err(|_| PerfError::Stalled("key"))?;
        }
        let free = (0..cfg.depth.max(1)).rev().collect();
        Ok(UetBench {
            cfg,
            net,
            a,
            b,
            dst,
            scratch: Vec::new(),
            verified: 0,
            errors: 0,
            free,
            slot_of: HashMap::new(),
        })
    }

    fn key(&self) -> u64 {
        if self.cfg.transport == DeliveryMode::Rudi { KEY | IDEMPOTENT_SAFE } else { KEY }
    }

    fn opts(&self, context: u64) -> Opts {
        Opts { context, ordered: self.cfg.transport == DeliveryMode::Rod, header_data: None }
    }

    /// One round of both nodes; advances virtual time when nothing moved. `false` when nothing
    /// can happen any more.
    fn step(&mut self) -> bool {
        let moved = self.a.progress() | self.b.progress();
        if moved {
            return true;
        }
        let next =
            [self.net.next_event(), self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min();
        match next {
            Some(t) => {
                self.net.advance_to(t.max(self.net.now() + Duration::from_nanos(1)));
                true
            }
            None => false,
        }
    }

    fn post(&mut self, i: u64) -> Result<(), PerfError> {
        let size = self.cfg.size;
        let mut m = std::mem::take(&mut self.scratch);
        let slot = if matches!(self.cfg.op, UetOp::Write | UetOp::Read) {
            let slot = self.free.pop().ok_or(PerfError::Stalled("no free slot"))?;
            self.slot_of.insert(i, slot);
            slot
        } else {
            0
        };
        let (dst, key, opts) = (self.dst, self.key(), self.opts(i));
        let r = match self.cfg.op {
            UetOp::Send | UetOp::Tsend => {
                message(i, size, &mut m);
                let tag = (self.cfg.op == UetOp::Tsend).then_some(TAG);
                self.a.ses().send(dst, &m, tag, opts)
            }
            UetOp::Write => {
                message(i, size, &mut m);
                self.a.ses().write(dst, key, (slot * size) as u64, &m, opts)
            }
            UetOp::Read => self.a.ses().read(dst, key, (slot * size) as u64, size, opts),
        };
        self.scratch = m;
        r.map(|_| ()).map_err(|e| match e {
            ses::Error::Busy => PerfError::Stalled("UET send queue full"),
            ses::Error::TooLong => PerfError::Stalled("message too long"),
            ses::Error::Unsupported => PerfError::Stalled("operation not supported on this endpoint"),
            ses::Error::NoPdc => PerfError::Stalled("no PDC"),
        })
    }

    fn post_recv(&mut self, context: u64) {
        let tag = (self.cfg.op == UetOp::Tsend).then_some((TAG, 0));
        let size = self.cfg.size;
        self.b.ses().post_recv(RecvSpec { tag, src: None }, size, context);
    }

    /// Checks an initiator completion; returns the message index.
    fn initiator_done(&mut self, c: &Completion<Ipv4Addr>) -> u64 {
        let slot = self.slot_of.remove(&c.context);
        if let Some(s) = slot {
            self.free.push(s);
        }
        if c.status != Status::Ok {
            self.errors += 1;
            return c.context;
        }
        match self.cfg.op {
            UetOp::Read => {
                if slot.is_some()
                    && check(&c.data, self.cfg.size, &mut self.scratch) == slot.map(|s| s as u64)
                {
                    self.verified += 1;
                } else {
                    self.errors += 1;
                }
            }
            UetOp::Write => {
                // Delivered: the target region's slot holds exactly this message now.
                let slot = slot.unwrap_or(usize::MAX);
                let size = self.cfg.size;
                let key = self.key();
                let region = self
                    .b
                    .ses()
                    .regions
                    .get(key)
                    .and_then(|r| r.data.get(slot * size..(slot + 1) * size))
                    .map(<[u8]>::to_vec);
                match region.and_then(|d| check(&d, size, &mut self.scratch)) {
                    Some(i) if i == c.context || size < 8 => self.verified += 1,
                    _ => self.errors += 1,
                }
            }
            UetOp::Send | UetOp::Tsend => {}
        }
        c.context
    }

    fn target_done(&mut self, c: &Completion<Ipv4Addr>) {
        if c.kind != CompletionKind::Recv {
            return;
        }
        if c.status == Status::Ok && check(&c.data, self.cfg.size, &mut self.scratch).is_some() {
            self.verified += 1;
        } else {
            self.errors += 1;
        }
    }

    fn receives(&self) -> bool {
        matches!(self.cfg.op, UetOp::Send | UetOp::Tsend)
    }

    /// Bandwidth: `depth` operations in flight until `iters` complete (and, for sends, are
    /// received and checked).
    pub fn run_bw(&mut self) -> Result<BwRow, PerfError> {
        let (iters, depth) = (self.cfg.iters, self.cfg.depth.max(1) as u64);
        if self.receives() {
            for r in 0..depth.min(iters) {
                self.post_recv(r);
            }
        }
        let (mut posted, mut completed, mut received, mut recv_posted) = (0u64, 0u64, 0u64, depth.min(iters));
        // UUD: datagrams still unreceived when the network falls silent are lost.
        let mut lost = 0u64;
        let v0 = self.net.now();
        let start = Instant::now();
        let uud = self.cfg.transport == DeliveryMode::Uud;
        while completed < iters || (self.receives() && received + lost < iters) {
            // UUD has no flow control: keep the sender within the posted receives.
            while posted < iters && posted - completed < depth && (!uud || posted - received - lost < depth) {
                self.post(posted)?;
                posted += 1;
            }
            let moved = self.step();
            while let Some(c) = self.a.ses().poll_completion() {
                self.initiator_done(&c);
                completed += 1;
            }
            while let Some(c) = self.b.ses().poll_completion() {
                self.target_done(&c);
                received += 1;
                if recv_posted < iters {
                    self.post_recv(recv_posted);
                    recv_posted += 1;
                }
            }
            if !moved {
                if !uud {
                    return Err(PerfError::Stalled("UET run made no progress"));
                }
                lost = posted - received;
            }
        }
        let wall = start.elapsed();
        let bytes = iters * self.cfg.size as u64;
        Ok(BwRow {
            size: self.cfg.size,
            iters,
            bytes,
            wall,
            virtual_time: self.net.now() - v0,
            peak: bytes as f64 / wall.as_secs_f64().max(1e-9),
            verified: self.verified,
            errors: self.errors,
            lost,
            duplicates: 0,
            check_time: Duration::ZERO,
            baseline: None,
        })
    }

    /// Latency: one operation at a time, post to completion (for sends: until received too).
    pub fn run_lat(&mut self) -> Result<LatRow, PerfError> {
        let mut wall = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|_| PerfError::Stalled("histogram"))?;
        let mut virt = wall.clone();
        let mut lost = 0;
        for i in 0..self.cfg.iters {
            if self.receives() {
                self.post_recv(i);
            }
            let (t0, v0) = (Instant::now(), self.net.now());
            self.post(i)?;
            let (mut sent, mut got) = (false, !self.receives());
            while !(sent && got) {
                let moved = self.step();
                if let Some(c) = self.a.ses().poll_completion() {
                    self.initiator_done(&c);
                    sent = true;
                }
                if let Some(c) = self.b.ses().poll_completion() {
                    self.target_done(&c);
                    got = true;
                }
                if !moved {
                    if self.cfg.transport == DeliveryMode::Uud {
                        lost += 1;
                        self.b.ses().cancel_recv(i);
                        while self.b.ses().poll_completion().is_some() {}
                        break;
                    }
                    return Err(PerfError::Stalled("UET run made no progress"));
                }
            }
            wall.saturating_record(t0.elapsed().as_nanos().max(1) as u64);
            virt.saturating_record((self.net.now() - v0).as_nanos().max(1) as u64);
        }
        Ok(LatRow {
            size: self.cfg.size,
            wall_ns: wall,
            virtual_ns: virt,
            verified: self.verified,
            errors: self.errors,
            lost,
        })
    }

    /// Records every frame either node sends (before the link's impairments).
    pub fn enable_tap(&mut self) {
        self.net.with(|n| n.enable_tap());
    }

    /// The frames recorded since [`UetBench::enable_tap`].
    pub fn take_tap(&mut self) -> Vec<nicsim::TapRecord> {
        self.net.with(|n| n.take_tap())
    }

    /// PDS counters of both sides and the nodes' frame counters.
    pub fn counters(&mut self) -> [String; 2] {
        let line = |name: &str, n: &mut UetNode<SimPort>| {
            let f = n.stats();
            let p = *n.ses().pds().stats();
            format!(
                " {name}: frames tx {} rx {} (bad {}); PDS packets tx {} retransmits {} (SACK/NACK {}, timer {}) ACKs {} NACKs {}; rx duplicates {} out-of-order drops {}",
                f.tx_frames,
                f.rx_frames,
                f.rx_bad,
                p.tx_packets,
                p.tx_retransmits,
                p.fast_retransmits,
                p.timeouts,
                p.tx_acks,
                p.tx_nacks,
                p.rx_duplicates,
                p.rx_out_of_order
            )
        };
        [line("initiator", &mut self.a), line("target", &mut self.b)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(op: UetOp, transport: DeliveryMode, link: LinkConfig) -> UetPerfConfig {
        UetPerfConfig {
            op,
            transport,
            size: 5000,
            iters: 200,
            depth: 16,
            max_payload: 2048,
            link,
            seed: 3,
            max_retries: 20,
        }
    }

    #[test]
    fn every_operation_and_mode_verifies_its_data_over_a_lossy_link() {
        let lossy = LinkConfig { loss: 0.05, corrupt: 0.02, duplicate: 0.02, ..LinkConfig::default() };
        for (op, t) in [
            (UetOp::Send, DeliveryMode::Rud),
            (UetOp::Tsend, DeliveryMode::Rod),
            (UetOp::Write, DeliveryMode::Rud),
            (UetOp::Write, DeliveryMode::Rudi),
            (UetOp::Read, DeliveryMode::Rod),
            (UetOp::Read, DeliveryMode::Rudi),
        ] {
            let mut b = UetBench::new(cfg(op, t, lossy)).unwrap();
            let r = b.run_bw().unwrap();
            assert_eq!((r.errors, r.lost), (0, 0), "{op:?} {t:?}");
            assert_eq!(r.verified, 200, "{op:?} {t:?}");
            let mut b = UetBench::new(UetPerfConfig { iters: 20, ..cfg(op, t, lossy) }).unwrap();
            let l = b.run_lat().unwrap();
            assert_eq!((l.errors, l.wall_ns.len()), (0, 20), "{op:?} {t:?}");
        }
    }

    #[test]
    fn datagrams_fit_one_packet_and_lose_only_whole_messages() {
        let mut c = cfg(UetOp::Send, DeliveryMode::Uud, LinkConfig { loss: 0.1, ..LinkConfig::default() });
        c.size = 1500;
        let r = UetBench::new(c).unwrap().run_bw().unwrap();
        assert_eq!(r.errors, 0);
        assert!(r.lost > 0 && r.verified + r.lost == 200, "{} verified, {} lost", r.verified, r.lost);
        c.size = 3000;
        assert!(UetBench::new(c).is_err());
        assert!(
            UetBench::new(UetPerfConfig { op: UetOp::Send, transport: DeliveryMode::Rudi, ..c }).is_err()
        );
    }
}
