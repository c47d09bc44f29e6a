//! Both sides of a UET perf run in this process on a simulated cable, driven on virtual time.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ses::{DeliveryMode, Status};

use super::config::{UetOp, UetPerfConfig};
use super::report::counters_line;
use super::sides::{Initiator, Target};
use super::tss::{AeadBaseline, NONCE_LEN};
use crate::perf::{BwRow, LatRow, PerfError};
use crate::stat::{Publisher, uet};
use engine::datapath::sim::{SimNet, SimPort};
use engine::uet::UetNode;

/// Both sides on a simulated cable in this process.
pub struct UetBench {
    net: SimNet,
    a: Initiator<SimPort>,
    b: Target<SimPort>,
    last: Option<BwRow>,
}

impl std::fmt::Debug for UetBench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UetBench").field("cfg", &self.a.cfg).finish_non_exhaustive()
    }
}

/// A pass is one round of both nodes.
impl nicsim::System for UetBench {
    type Error = std::convert::Infallible;

    fn pass(&mut self) -> Result<bool, Self::Error> {
        Ok(self.a.node.progress() | self.b.node.progress())
    }

    fn next_event(&self) -> Option<Duration> {
        [self.net.next_event(), self.a.node.poll_timeout(), self.b.node.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

impl UetBench {
    /// Builds the two nodes.
    pub fn new(cfg: UetPerfConfig) -> Result<UetBench, PerfError> {
        cfg.check().map_err(PerfError::Stalled)?;
        let (net, pa, pb) = SimNet::pair(cfg.seed, cfg.link, cfg.link);
        let scfg = cfg.ses_config();
        // Every frame the run can hold at once, made before it starts: both PDS windows in
        // flight and each node's receive and send batches.
        let frames = 2 * (scfg.pds.window as usize + 2 * engine::uet::BATCH);
        net.with(|n| n.reserve_frames(frames));
        let mut a = UetNode::new(pa, ses::Endpoint::new(scfg, cfg.seed.wrapping_mul(2)), true)
            .map_err(PerfError::Stalled)?;
        let mut b = UetNode::new(pb, ses::Endpoint::new(scfg, cfg.seed.wrapping_mul(2) + 1), true)
            .map_err(PerfError::Stalled)?;
        // In-process runs stay reproducible from the seed: nothing they seal leaves the process.
        let nonce = [0; NONCE_LEN];
        cfg.secure_and_mark(&mut a, &nonce).map_err(PerfError::Stalled)?;
        cfg.secure_and_mark(&mut b, &nonce).map_err(PerfError::Stalled)?;
        let target = b.ip();
        Ok(UetBench { net, a: Initiator::new(a, cfg, target), b: Target::new(b, cfg)?, last: None })
    }

    /// The last bandwidth run's row.
    pub fn last_bw(&self) -> Option<&BwRow> {
        self.last.as_ref()
    }

    /// The links' queue report (see [`crate::perf::link_report`]).
    pub fn link_report(&self) -> String {
        crate::perf::link_report(&self.net, ["the initiator", "the target"])
    }

    /// Records every frame either node sends (before the link's impairments).
    pub fn enable_tap(&mut self) {
        self.net.with(|n| n.enable_tap());
    }

    /// The frames recorded since [`UetBench::enable_tap`].
    pub fn take_tap(&mut self) -> Vec<nicsim::TapRecord> {
        self.net.with(|n| n.take_tap())
    }

    /// One round of both nodes, then virtual time moves to the next event if nothing moved
    /// ([`nicsim::step`]); `false` when nothing can happen any more.
    fn step(&mut self) -> bool {
        let Ok(moved) = nicsim::step(self);
        moved
    }

    /// Takes the initiator's completions (checking WRITEs against the target's region); returns
    /// how many.
    fn initiator_completions(&mut self) -> u64 {
        let mut n = 0;
        while let Some(c) = self.a.node.ses().poll_completion() {
            let ok = c.status == Status::Ok;
            if let (_, Some(slot)) = self.a.complete(&c) {
                if self.a.cfg.op == UetOp::Write && ok {
                    if self.b.slot_holds(slot, c.context) {
                        self.a.verified += 1;
                    } else {
                        self.a.errors += 1;
                    }
                }
            }
            n += 1;
        }
        n
    }

    /// After a run of atomics: every slot of the target's region holds the sum the initiator's
    /// fetched values led it to expect (an atomic applied twice or lost shows here).
    fn check_atomic_region(&mut self) {
        if !self.a.cfg.op.is_atomic() {
            return;
        }
        for (slot, &want) in self.a.expected.iter().enumerate() {
            if self.b.slot_value(slot) == Some(want) {
                self.b.verified += 1;
            } else {
                self.b.errors += 1;
            }
        }
    }

    fn totals(&mut self) -> (u64, u64) {
        self.check_atomic_region();
        (self.a.verified + self.b.verified, self.a.errors + self.b.errors)
    }

    /// Bandwidth: `depth` operations in flight until `iters` complete (and, for sends, are
    /// received and checked).
    pub fn run_bw(&mut self) -> Result<BwRow, PerfError> {
        let cfg = self.a.cfg;
        let (iters, depth) = (cfg.iters, cfg.depth() as u64);
        let uud = cfg.transport == DeliveryMode::Uud;
        let (mut posted, mut completed, mut lost) = (0u64, 0u64, 0u64);
        let v0 = self.net.now();
        let harness0 = self.a.harness + self.b.harness;
        let mut base = cfg.tss.then(|| AeadBaseline::new(cfg.max_payload));
        let start = Instant::now();
        let mut stats = Publisher::new(&cfg.stat_name("(in-process)"));
        while completed < iters || (cfg.receives() && self.b.received + lost < iters) {
            stats.maybe_uet(|| self.nodes());
            while posted < iters
                && posted - completed < depth
                && (!uud || posted - self.b.received - lost < depth)
            {
                self.a.post(posted)?;
                posted += 1;
            }
            let moved = self.step();
            completed += self.initiator_completions();
            self.b.drain();
            if !moved {
                if !uud {
                    return Err(PerfError::Stalled("UET run made no progress"));
                }
                // UUD: what has not arrived when the network falls silent is lost.
                lost = posted - self.b.received;
            }
            if let Some(base) = base.as_mut() {
                let done = completed * cfg.size as u64;
                if done >= base.bytes + AeadBaseline::SLICE {
                    base.catch_up(done);
                }
            }
        }
        if let Some(base) = base.as_mut() {
            base.catch_up(iters * cfg.size as u64);
        }
        // The baseline's slices are not the run's time.
        let wall = start.elapsed().saturating_sub(base.as_ref().map_or(Duration::ZERO, |b| b.elapsed));
        let (verified, errors) = self.totals();
        let mut row = BwRow::measured(cfg.size, iters, wall, self.net.now() - v0, verified, errors, lost);
        row.check_time = self.a.harness + self.b.harness - harness0;
        row.baseline = base.map(|b| b.report());
        self.last = Some(row);
        Ok(row)
    }

    /// Latency: one operation at a time, post to completion (sends: until received too).
    pub fn run_lat(&mut self) -> Result<LatRow, PerfError> {
        let cfg = self.a.cfg;
        let mut wall = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|_| PerfError::Stalled("histogram"))?;
        let mut virt = wall.clone();
        let mut lost = 0;
        let mut stats = Publisher::new(&cfg.stat_name("(in-process)"));
        for i in 0..cfg.iters {
            stats.maybe_uet(|| self.nodes());
            let (t0, v0, seen) = (Instant::now(), self.net.now(), self.b.received);
            self.a.post(i)?;
            let mut sent = false;
            while !(sent && (!cfg.receives() || self.b.received > seen)) {
                let moved = self.step();
                sent |= self.initiator_completions() > 0;
                self.b.drain();
                if !moved {
                    if cfg.transport != DeliveryMode::Uud {
                        return Err(PerfError::Stalled("UET run made no progress"));
                    }
                    lost += 1;
                    break;
                }
            }
            wall.saturating_record(t0.elapsed().as_nanos().max(1) as u64);
            virt.saturating_record((self.net.now() - v0).as_nanos().max(1) as u64);
        }
        let (verified, errors) = self.totals();
        Ok(LatRow { size: cfg.size, wall_ns: wall, virtual_ns: virt, verified, errors, lost, baseline: None })
    }

    /// Both nodes' counters for `softrdma stat`.
    fn nodes(&mut self) -> Vec<serde_json::Value> {
        vec![uet::node("initiator", &mut self.a.node), uet::node("target", &mut self.b.node)]
    }

    /// PDS counters of both sides and the nodes' frame counters.
    pub fn counters(&mut self) -> [String; 2] {
        [counters_line("initiator", &mut self.a.node), counters_line("target", &mut self.b.node)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::uet::UetCc;
    use nicsim::LinkConfig;
    use serde_json::json;

    fn cfg(op: UetOp, transport: DeliveryMode, link: LinkConfig) -> UetPerfConfig {
        UetPerfConfig {
            op,
            transport,
            lat: false,
            size: 5000,
            iters: 200,
            depth: 16,
            max_payload: 2048,
            link,
            seed: 3,
            max_retries: 20,
            tss: false,
            cc: UetCc::None,
            cc_bps: 100_000_000_000,
            cc_rtt: Duration::from_micros(8),
            tclass: engine::uet::TrafficClass::default(),
            forms: ses::HeaderForms::Compact,
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
            (UetOp::FetchAdd, DeliveryMode::Rud),
            (UetOp::CmpSwap, DeliveryMode::Rod),
        ] {
            let size = if op.is_atomic() { 8 } else { 5000 };
            let c = UetPerfConfig { size, ..cfg(op, t, lossy) };
            // Atomics are also checked slot by slot in the target's region at the end.
            let extra = if op.is_atomic() { c.depth as u64 } else { 0 };
            let r = UetBench::new(c).unwrap().run_bw().unwrap();
            assert_eq!((r.verified, r.errors, r.lost), (200 + extra, 0, 0), "{op:?} {t:?}");
            let l = UetBench::new(UetPerfConfig { iters: 20, lat: true, ..c }).unwrap().run_lat().unwrap();
            let extra = if op.is_atomic() { 1 } else { 0 };
            assert_eq!((l.verified, l.errors, l.wall_ns.len()), (20 + extra, 0, 20), "{op:?} {t:?}");
        }
    }

    /// Messages under 8 bytes cannot carry their index: they were all counted as errors.
    #[test]
    fn tiny_messages_verify() {
        for (op, t, size) in [
            (UetOp::Send, DeliveryMode::Rud, 1),
            (UetOp::Send, DeliveryMode::Uud, 7),
            (UetOp::Write, DeliveryMode::Rod, 4),
            (UetOp::Read, DeliveryMode::Rud, 5),
        ] {
            let c = UetPerfConfig { size, ..cfg(op, t, LinkConfig::default()) };
            let r = UetBench::new(c).unwrap().run_bw().unwrap();
            assert_eq!((r.verified, r.errors), (200, 0), "{op:?} {t:?} {size}");
        }
    }

    #[test]
    fn message_buffers_are_reused_once_their_operation_completes() {
        for op in [UetOp::Write, UetOp::Send] {
            let mut b = UetBench::new(cfg(op, DeliveryMode::Rud, LinkConfig::default())).unwrap();
            let r = b.run_bw().unwrap();
            assert_eq!((r.verified, r.errors), (200, 0), "{op:?}");
            // 200 messages, at most `depth` buffers ever made: each completed one came back.
            assert!(b.a.buffers.is_empty(), "{op:?}: {} still held", b.a.buffers.len());
            assert!((1..=16).contains(&b.a.spare.len()), "{op:?}: {} spare", b.a.spare.len());
        }
    }

    #[test]
    fn tss_sealed_runs_verify_their_data() {
        let lossy = LinkConfig { loss: 0.05, corrupt: 0.02, duplicate: 0.02, ..LinkConfig::default() };
        let c = UetPerfConfig { tss: true, ..cfg(UetOp::Send, DeliveryMode::Rud, lossy) };
        let mut b = UetBench::new(c).unwrap();
        let r = b.run_bw().unwrap();
        assert_eq!((r.verified, r.errors), (200, 0));
        let counters = b.counters();
        assert!(counters[1].contains("TSS sealed"), "{}", counters[1]);
        assert!(b.b.node.tss().unwrap().stats().opened > 200);
        let base = r.baseline.expect("a sealed run measures its AEAD baseline");
        assert!(base.bytes >= 200 * 5000 && base.elapsed > Duration::ZERO, "{base:?}");
        let mut clear = UetBench::new(cfg(UetOp::Send, DeliveryMode::Rud, LinkConfig::default())).unwrap();
        assert!(!clear.a.cfg.tss && clear.run_bw().unwrap().baseline.is_none(), "no seal, no baseline");
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

    #[test]
    fn the_test_travels_as_json() {
        let c = cfg(UetOp::Tsend, DeliveryMode::Rod, LinkConfig::default());
        let back = UetPerfConfig::from_json(&c.to_json()).unwrap();
        assert_eq!(
            (back.op, back.transport, back.size, back.iters, back.depth),
            (c.op, c.transport, 5000, 200, 16)
        );
        let mut bad = c.to_json();
        bad["transport"] = json!("Rudi");
        assert!(UetPerfConfig::from_json(&bad).is_err(), "tsend over RUDI is refused");
    }
}
