//! 8:1 incast over nicsim (issue 10, acceptance 3, the UET lines): eight UET nodes WRITE 64 KiB
//! messages (4 in flight) over RUD into one receiver behind a switch whose egress toward it is the
//! 100 Gb/s bottleneck (1 MB of buffer, ECN marking above 100 KB). With NSCC (senders ECT(0), the
//! receiver's ACKs echo CE in their M flag), with RCCC (the receiver's pull pacer grants credit at
//! 98 % of its line rate) and without congestion control, on fixed seeds. Prints the table.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use common::incast::{ECN_K, MSG, Metrics, RATE, RUN, SENDERS, links, starts};
use engine::datapath::sim::{SimNet, SimPort};
use engine::uet::{TRIMMED_DSCP, UetNode};
use nicsim::LinkConfig;
use pds::cc::NsccConfig;
use pds::credit::RcccConfig;
use ses::{Access, Addr, CompletionKind, JobScope, Opts, Status};

const DEPTH: usize = 4;

/// The congestion control of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cc {
    None,
    Nscc,
    Rccc,
}

/// An incast on the driver: a pass posts what each sender may (`DEPTH` in flight, from its start
/// until [`RUN`]), then runs every node's round and takes the senders' completions.
struct Incast {
    net: SimNet,
    rx: UetNode<SimPort>,
    tx: Vec<UetNode<SimPort>>,
    dst: Addr<Ipv4Addr>,
    data: Vec<u8>,
    start: Vec<Duration>,
    in_flight: [usize; SENDERS],
    /// Bytes written by each sender by `RUN`.
    done: [u64; SENDERS],
}

impl nicsim::System for Incast {
    type Error = std::convert::Infallible;

    fn pass(&mut self) -> Result<bool, Self::Error> {
        let now = self.net.now();
        for (i, n) in self.tx.iter_mut().enumerate() {
            while self.in_flight[i] < DEPTH && now < RUN && now >= self.start[i] {
                let off = (i * MSG) as u64;
                if n.ses().write(self.dst, 0x77, off, &self.data, Opts::default()).is_err() {
                    break;
                }
                self.in_flight[i] += 1;
            }
        }
        let mut moved = self.rx.progress();
        for (i, n) in self.tx.iter_mut().enumerate() {
            moved |= n.progress();
            while let Some(c) = n.ses().poll_completion() {
                self.in_flight[i] -= 1;
                if c.kind == CompletionKind::Write && c.status == Status::Ok && now <= RUN {
                    self.done[i] += c.len as u64;
                }
            }
        }
        Ok(moved)
    }

    fn next_event(&self) -> Option<Duration> {
        let now = self.net.now();
        let timers = self.tx.iter().filter_map(UetNode::poll_timeout).chain(self.rx.poll_timeout());
        let waiting = self.start.iter().copied().filter(|&t| t > now);
        self.net.next_event().into_iter().chain(timers).chain(waiting).min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

fn run(cc: Cc, seed: u64) -> Metrics {
    run_with(cc, seed, false).0
}

/// A run; with `trim`, the bottleneck trims to 128 bytes (Ethernet, IPv4, UDP, PDS and SES headers
/// kept) what it has no room for. Also returns the senders' PDS retransmission-timer expiries.
fn run_with(cc: Cc, seed: u64, trim: bool) -> (Metrics, u64) {
    let net = SimNet::new(seed);
    let sw = net.with(|n| n.add_switch());
    let (fast, mut bottleneck) = links();
    if trim {
        bottleneck.trim_to = 128;
        bottleneck.trim_dscp = TRIMMED_DSCP;
    }
    // "No CC" is the fixed window: the loss-adaptive one (`min_window`) is itself a (loss-based)
    // congestion control, and these runs measure NSCC, RCCC and trimming against none.
    let mut pcfg = pds::Config { ack_every: 1, max_retries: 50, min_window: None, ..pds::Config::default() };
    let base_rtt = Duration::from_micros(8);
    match cc {
        Cc::None => {}
        Cc::Nscc => pcfg.cc = Some(NsccConfig { link_bps: RATE, base_rtt, mss: 4200 }),
        // Every node grants at 98 % of its 100 Gb/s; senders start with 1.5 BDP of credit.
        Cc::Rccc => pcfg.rccc = Some(RcccConfig::new(RATE, base_rtt, 4200)),
    }
    let scfg = ses::Config { pds: pcfg, max_payload: 4096, ..ses::Config::default() };
    let node = |name: &str, ip: Ipv4Addr, down: LinkConfig, seed: u64| -> UetNode<SimPort> {
        let port = net.add_device(name, IpAddr::V4(ip)).unwrap();
        net.with(|n| n.attach(port, sw, fast, down)).unwrap();
        let mut n = UetNode::new(net.open(name).unwrap(), ses::Endpoint::new(scfg, seed), true).unwrap();
        n.set_ecn(cc == Cc::Nscc);
        n
    };
    let mut rx = node("rx", Ipv4Addr::new(10, 9, 0, 100), bottleneck, seed * 100);
    let rx_port = rx.datapath().port();
    rx.ses().regions.register(0x77, vec![0; MSG * SENDERS], Access::ALL, JobScope::Any).unwrap();
    let tx: Vec<UetNode<SimPort>> = (0..SENDERS)
        .map(|i| {
            node(&format!("s{i}"), Ipv4Addr::new(10, 9, 0, 1 + i as u8), fast, seed * 100 + 1 + i as u64)
        })
        .collect();
    let dst = Addr { fep: rx.ip(), pid_on_fep: 0, resource_index: 0 };
    let mut sys = Incast {
        net,
        rx,
        tx,
        dst,
        data: vec![0x5A; MSG],
        start: starts(seed),
        in_flight: [0; SENDERS],
        done: [0; SENDERS],
    };
    // Until the run's end, and then until the instant nothing moves any more.
    let Ok(_) = nicsim::run_until(&mut sys, Duration::MAX, |s| s.net.now() >= RUN);
    let Incast { net, rx, mut tx, done, .. } = sys;
    let st = net.with(|n| n.ingress_stats(rx_port)).unwrap();
    let q_p99 = net.with(|n| n.ingress_queue_quantile(rx_port, 0.99)).unwrap_or(0);
    let in_flight = st.trimmed - rx.stats().rx_trimmed;
    assert!(in_flight < 100, "every trimmed frame but those still on the wire reached the PDS: {in_flight}");
    let timeouts = tx.iter_mut().map(|n| n.ses().pds().stats().timeouts).sum();
    (Metrics::new(st, q_p99, &done, 0), timeouts)
}

#[test]
fn nscc_keeps_the_incast_queue_short_without_drops() {
    for seed in [1u64, 2, 3] {
        let with = run(Cc::Nscc, seed);
        let without = run(Cc::None, seed);
        with.print(seed, "RUD + NSCC");
        without.print(seed, "RUD, no CC");
        with.assert_meets("NSCC", &without, 2 * ECN_K);
    }
}

/// RCCC: the receiver's pull pacer admits the eight senders at its own rate. Its bound on the
/// queue is the credit window: the speculative credit the eight senders start with (1.5 BDP each).
#[test]
fn rccc_credits_pace_the_incast_at_the_receivers_rate() {
    let window = SENDERS * RcccConfig::new(RATE, Duration::from_micros(8), 4200).speculative as usize;
    for seed in [1u64, 2, 3] {
        let with = run(Cc::Rccc, seed);
        let without = run(Cc::None, seed);
        with.print(seed, "RUD + RCCC");
        without.print(seed, "RUD, no CC");
        with.assert_meets("RCCC", &without, (2 * ECN_K).min(window));
    }
}

/// Trimming at the bottleneck: what would be tail-dropped arrives as a header, the receiver NACKs it
/// TRIMMED and the sender resends at once, instead of after its retransmission timer. Without
/// congestion control: no tail drop at all and far fewer timer expiries than the same incast with
/// drops; with NSCC (which counts a trim as a loss), the thresholds still hold.
#[test]
fn trimming_turns_incast_losses_into_immediate_retransmissions() {
    for seed in [1u64, 2, 3] {
        let (dropping, drop_timeouts) = run_with(Cc::None, seed, false);
        let (trimming, trim_timeouts) = run_with(Cc::None, seed, true);
        let (nscc, _) = run_with(Cc::Nscc, seed, true);
        dropping.print(seed, "RUD, no CC");
        trimming.print(seed, "RUD, trim");
        nscc.print(seed, "RUD + NSCC, trim");
        println!("seed {seed} PDS timer expiries: {drop_timeouts} dropping, {trim_timeouts} trimming");
        assert_eq!(trimming.drops, 0, "{trimming:?}");
        assert!(trimming.trimmed > 1000, "{trimming:?}");
        assert!(trim_timeouts * 10 <= drop_timeouts, "{trim_timeouts} vs {drop_timeouts}");
        nscc.assert_meets("NSCC with trimming", &dropping, 2 * ECN_K);
    }
}
