//! The options of `softrdma perf` and `softrdma pingpong`, what they default to and how they are
//! checked as they are parsed.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use engine::datapath::link::Backend;
use engine::verbs::Mtu;

/// `--ses-headers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SesHeadersArg {
    /// The compact forms where allowed.
    Compact,
    /// The standard header only.
    Standard,
}

#[derive(Args)]
pub(crate) struct PerfArgs {
    /// Operation to measure.
    #[arg(value_enum)]
    pub(crate) op: OpArg,
    /// Transport: RC; UC (send, write) and UD (send) may lose messages, which are counted, never
    /// delivered corrupt. UET: RUD, ROD (send, tsend, write, read), RUDI (write, read to an
    /// idempotent-safe key), UUD (send; datagrams may be lost) - on the simulated network, with an
    /// RC run of the same operation printed for comparison.
    #[arg(long, value_enum, default_value = "rc")]
    pub(crate) transport: PerfTransportArg,
    /// Receives come from a shared receive queue (RC and UD).
    #[arg(long)]
    pub(crate) srq: bool,
    /// Message size in bytes [default: 65536 for bw, 2 for lat, 8 for atomic].
    #[arg(long, conflicts_with = "all_sizes", value_parser = clap::value_parser!(u32).range(1..=0x80_0000))]
    pub(crate) size: Option<u32>,
    /// Every size from 2 bytes to 8 MiB (fewer iterations for large sizes, as the table shows).
    #[arg(long)]
    pub(crate) all_sizes: bool,
    /// Messages per QP and size [default: 5000 for bw, 1000 for lat].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) iters: Option<u64>,
    /// Queue pairs (bandwidth mode), each running --iters messages; RC WRITE and READ share one
    /// ring of message slots among them, served in turn (engine/cli/docs/perf.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16384))]
    pub(crate) qps: u16,
    /// Engine threads (bandwidth mode): the QPs are sharded over them. On the simulated network
    /// each thread owns both ends of its share on a cable of its own; between two processes each
    /// client thread has its own exchange with the server (which starts as many), and its own UDP
    /// port (--udp-port + thread) or AF_XDP queue (--queue + thread). The row adds their bytes over
    /// the slowest thread's time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) threads: u16,
    /// Bandwidth or latency.
    #[arg(long, value_enum, default_value = "bw")]
    pub(crate) mode: ModeArg,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 [default: 4096; with --perftest, the largest the
    /// interface carries, and the smaller of both sides'].
    #[arg(long, value_parser = parse_mtu)]
    pub(crate) mtu: Option<u32>,
    /// Messages in flight per QP (bw mode).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) tx_depth: u32,
    /// Probability a frame is lost (each direction).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) loss: f64,
    /// Probability a frame is delayed past later ones.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) reorder: f64,
    /// Probability a frame is delivered twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) dup: f64,
    /// Probability a frame gets a flipped bit (the ICRC check drops it).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) corrupt: f64,
    /// One-way link latency in microseconds (virtual time).
    #[arg(long, default_value_t = 1.0, value_parser = parse_latency)]
    pub(crate) latency_us: f64,
    /// Seed of the simulated impairments.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Retries without progress before RETRY_EXC_ERR (0-7 is verbs' retry_cnt; more uses the
    /// max_retries extension, for very lossy links).
    #[arg(long, default_value_t = 1000)]
    pub(crate) retries: u32,
    /// Which atomic `perf atomic` runs.
    #[arg(long, value_enum, default_value = "fetch-add")]
    pub(crate) atomic: AtomicArg,
    /// UET runs: seal every packet with the Transport Security Sublayer (AES-256-GCM, cluster
    /// key mode, a test key both sides derive from --seed) and print, on the simulated network,
    /// the same bytes sealed and opened in a plain loop on this thread as the baseline.
    #[arg(long)]
    pub(crate) tss: bool,
    /// The DSCP (0-63) in the IP header. UET: of every packet carrying a SES header (requests,
    /// responses), as a libfabric domain's `tclass` gives it (engine::provider::tclass). RoCE: every
    /// QP's traffic class (`ah_attr.grh.traffic_class`) is DSCP << 2, the TOS byte of all its
    /// packets, ACKs and responses included (ECN bits 0; ECT(0) with --cc dcqcn).
    #[arg(long, value_name = "DSCP", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..64))]
    pub(crate) tclass: u8,
    /// UET runs: the DSCP of the PDS's ACKs, NACKs and control packets [default: --tclass]. The
    /// UEC reference provider sends ACKs as EF (46).
    #[arg(long, value_name = "DSCP", value_parser = clap::value_parser!(u8).range(0..64))]
    pub(crate) ack_tclass: Option<u8>,
    /// UET runs: the SES request headers sent. compact: the 20- and 32-byte forms for single-packet
    /// sends, RMA and atomics where the specification allows them; standard: the 44-byte header
    /// for every request (ses/README.md, "SES header forms").
    #[arg(long, value_enum, default_value = "compact")]
    pub(crate) ses_headers: SesHeadersArg,
    /// Congestion control: nscc (UET sender windows from delay and ECN) or rccc (UET receiver
    /// credits) on rud/rod, dcqcn (RoCE rate control by CNPs) on rc. Senders mark ECT(0) (nscc,
    /// dcqcn). It has work to do where a queue builds: on the simulated network, give the links a
    /// rate (--link-gbps) and the run prints each direction's drops, CE marks and queue p99.
    #[arg(long, value_enum, default_value = "none")]
    pub(crate) cc: CcArg,
    /// Rate of the simulated links in Gb/s, each with a 1 MB queue [default: unlimited]. Congestion
    /// control assumes this line rate (100 Gb/s when unlimited or on a real datapath).
    #[arg(long, value_parser = parse_gbps)]
    pub(crate) link_gbps: Option<f64>,
    /// ECN marking threshold of the simulated links in KB (with --link-gbps) [default: 100 with
    /// --cc nscc or dcqcn, else off]. With dcqcn, marking is RED-like: rising from 0 at 5 KB to 20 %
    /// at the threshold, every frame above it.
    #[arg(long, value_name = "KB")]
    pub(crate) ecn_kb: Option<u32>,
    /// Simulated links (with --link-gbps) trim what their queue has no room for to this many bytes
    /// (UET packet trimming: the receiver NACKs it TRIMMED and the sender resends at once) instead
    /// of dropping it. 0: tail drop.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=9000))]
    pub(crate) trim: u32,
    /// Write every frame the endpoints send (before impairments) to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
    /// Skip the single-thread TX+RX baseline printed under bandwidth rows.
    #[arg(long)]
    pub(crate) no_baseline: bool,
    /// Datapath: the in-process simulated network (both sides here), kernel UDP sockets or AF_XDP
    /// (one side per process: --server or --connect; AF_XDP needs --dev and root).
    /// [default: sim; udp with --perftest]
    #[arg(long, value_parser = backend_parser(&["sim", "udp", "afxdp"]))]
    pub(crate) backend: Option<Backend>,
    /// Be the peer of perftest's ib_{write,read,send,atomic}_{bw,lat} (the stock tools): their TCP
    /// exchange (version, MTU, QP/rkey/address handshakes, reports) and traffic pattern, RC, either
    /// role (--server, or --connect HOST); the local address is the exchange connection's.
    #[arg(long)]
    pub(crate) perftest: bool,
    /// Connect the QPs through the connection manager (REQ/REP/RTU to QP1, rdma_cm's TCP port
    /// space, port --tcp-port) instead of by the exchange's QP numbers and PSNs; RC and UC, two
    /// softrdma processes (the client decides: the server follows the client's hello).
    #[arg(long, conflicts_with = "perftest")]
    pub(crate) cm: bool,
    /// RC local ACK timeout exponent, 4.096 us x 2^N (--perftest; perftest's 14 is 67 ms).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u8).range(1..=31))]
    pub(crate) timeout: u8,
    /// Receives the SEND receiver keeps posted (--perftest, like perftest's -r).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub(crate) rx_depth: u32,
    /// Wait for a client (real backends); the client chooses the test.
    #[arg(long, conflicts_with = "connect")]
    pub(crate) server: bool,
    /// Connect to the server at this host (real backends).
    #[arg(long, value_name = "HOST")]
    pub(crate) connect: Option<String>,
    /// Local IPv4 address to bind [default: the address routing towards --connect; with
    /// --perftest, the exchange connection's, which --local fixes for both roles].
    #[arg(long, value_name = "IP")]
    pub(crate) local: Option<std::net::Ipv4Addr>,
    /// Interface for AF_XDP.
    #[arg(long, value_name = "IFACE")]
    pub(crate) dev: Option<String>,
    /// Queue of --dev for AF_XDP.
    #[arg(long, default_value_t = 0)]
    pub(crate) queue: u32,
    /// AF_XDP in the driver (native XDP) instead of generic (SKB) mode.
    #[arg(long)]
    pub(crate) xdp_driver: bool,
    /// AF_XDP without multi-buffer (XDP_USE_SG): every frame one 4096-byte UMEM chunk, path MTU
    /// up to 2048 (what a kernel older than 6.6 gets anyway).
    #[arg(long)]
    pub(crate) xdp_single_buffer: bool,
    /// TCP port of the out-of-band exchange.
    #[arg(long, default_value_t = softrdma::perf::remote::DEFAULT_TCP_PORT)]
    pub(crate) tcp_port: u16,
    /// UDP port this side receives RoCEv2 on (UDP and AF_XDP backends). softrdma peers tell each
    /// other their ports in the exchange; perftest peers (--perftest) are sent to on 4791.
    #[arg(long, default_value_t = 4791)]
    pub(crate) udp_port: u16,
    /// What the UDP backend checks of received ICRCs: verify (whatever IP ID the sender used: it
    /// is found from the ICRC) or trust (not checked; counted).
    #[arg(long, value_enum, default_value = "verify")]
    pub(crate) rx_icrc: RxIcrcArg,
    /// Real backends: drop this share of the frames this side sends (seeded by --seed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) tx_loss: f64,
    /// Real backends: send this share of frames after the next one.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) tx_reorder: f64,
    /// Real backends: send this share of frames twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) tx_dup: f64,
    /// Real backends: flip a bit in this share of frames (the peer's ICRC check drops them).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) tx_corrupt: f64,
    /// Print each side's counters (frames, ICRC drops, retries, timeouts, NAKs, RNR, duplicates).
    #[arg(long)]
    pub(crate) counters: bool,
    /// Also write the run as one JSON document to FILE: its parameters, every row with the
    /// table's figures, the baseline and ratio, each side's counters, the totals.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Also draw the run into FILE.svg: bandwidth and message rate against message size (with
    /// the baseline), one size's goodput over time, or the latency histogram with its
    /// percentiles (--mode lat).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,
    /// Write every frame this side sends and receives, as the engine built or rebuilt it, to a
    /// pcap file while the run goes on (on the simulated backend: the same as --pcap).
    #[arg(long, value_name = "FILE")]
    pub(crate) capture: Option<PathBuf>,
    /// Real backends: keep at most BYTES of each frame in the --capture file (its length on the
    /// wire is kept), as tcpdump -s does: 128 holds every RoCE and UET header, for runs too long
    /// to store every payload.
    #[arg(long, value_name = "BYTES", default_value_t = engine::datapath::capture::SNAPLEN,
          value_parser = clap::value_parser!(u16).range(14..))]
    pub(crate) snaplen: u16,
    /// Real backends: what a round with nothing to do does: spin (busy polling: a core at 100 %,
    /// the lowest latency) or adaptive (spin --spin-us, then sleep on the socket until a frame
    /// arrives, the datapath has room again, a timer is due or the peer writes).
    #[arg(long, value_enum, default_value = "adaptive")]
    pub(crate) wait: WaitArg,
    /// Microseconds --wait adaptive spins before it sleeps.
    #[arg(long, value_name = "US", default_value_t = 50)]
    pub(crate) spin_us: u64,
}

impl PerfArgs {
    /// The capture file of a real backend's run (`--capture`, `--snaplen`).
    pub(crate) fn capture_file(&self) -> Option<softrdma::perf::remote::CaptureFile> {
        let path = self.capture.clone()?;
        Some(softrdma::perf::remote::CaptureFile { path, snaplen: self.snaplen })
    }

    /// The simulated cable's settings (both directions) from `--latency-us`, `--loss`, `--reorder`,
    /// `--dup` and `--corrupt`.
    pub(crate) fn sim_link(&self) -> nicsim::LinkConfig {
        let marking = matches!(self.cc, CcArg::Nscc | CcArg::Dcqcn);
        let ecn_kb = self.ecn_kb.unwrap_or(if marking { 100 } else { 0 });
        let red = self.cc == CcArg::Dcqcn && ecn_kb > 5;
        nicsim::LinkConfig {
            latency: std::time::Duration::from_nanos((self.latency_us * 1000.0) as u64),
            bandwidth_bps: self.link_bps().unwrap_or(0),
            ecn_threshold: ecn_kb as usize * 1000,
            ecn_min: if red { 5_000 } else { 0 },
            ecn_pmax: if red { 0.2 } else { 0.0 },
            trim_to: self.trim as usize,
            trim_dscp: engine::uet::TRIMMED_DSCP,
            loss: self.loss,
            reorder: self.reorder,
            duplicate: self.dup,
            corrupt: self.corrupt,
            ..nicsim::LinkConfig::default()
        }
    }

    /// `--link-gbps` in bits per second.
    pub(crate) fn link_bps(&self) -> Option<u64> {
        self.link_gbps.map(|g| (g * 1e9) as u64)
    }

    /// The line rate congestion control assumes, bits per second.
    pub(crate) fn cc_bps(&self) -> u64 {
        self.link_bps().unwrap_or(100_000_000_000)
    }

    /// The unloaded round trip congestion control assumes: both ways' latency plus 2 us of
    /// serialization and processing on the simulated network, 20 us on a real datapath.
    pub(crate) fn cc_rtt(&self) -> std::time::Duration {
        if self.backend() == Backend::Sim {
            std::time::Duration::from_nanos((2.0 * self.latency_us * 1000.0) as u64 + 2_000)
        } else {
            std::time::Duration::from_micros(20)
        }
    }
    pub(crate) fn rx_icrc(&self) -> engine::datapath::udp::RxIcrc {
        use engine::datapath::udp::RxIcrc;
        match self.rx_icrc {
            RxIcrcArg::Trust => RxIcrc::Trust,
            RxIcrcArg::Verify => RxIcrc::Verify,
        }
    }

    pub(crate) fn tx_faults(&self) -> engine::datapath::wrap::TxFaults {
        engine::datapath::wrap::TxFaults {
            loss: self.tx_loss,
            reorder: self.tx_reorder,
            duplicate: self.tx_dup,
            corrupt: self.tx_corrupt,
        }
    }

    pub(crate) fn mtu(&self) -> u32 {
        self.mtu.unwrap_or(4096)
    }

    /// The operation as the command line names it.
    pub(crate) fn op_name(&self) -> &'static str {
        match self.op {
            OpArg::Send => "send",
            OpArg::Tsend => "tsend",
            OpArg::Write => "write",
            OpArg::Read => "read",
            OpArg::Atomic => "atomic",
        }
    }

    /// The transport as the command line names it.
    pub(crate) fn transport_name(&self) -> &'static str {
        match self.transport {
            PerfTransportArg::Rc => "rc",
            PerfTransportArg::Uc => "uc",
            PerfTransportArg::Ud => "ud",
            PerfTransportArg::Rud => "rud",
            PerfTransportArg::Rod => "rod",
            PerfTransportArg::Rudi => "rudi",
            PerfTransportArg::Uud => "uud",
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        self.backend.unwrap_or(if self.perftest { Backend::Udp } else { Backend::Sim })
    }

    /// `--wait` and `--spin-us` as the engine's idle policy.
    pub(crate) fn idle(&self) -> engine::progress::Idle {
        use engine::progress::Idle;
        match self.wait {
            WaitArg::Spin => Idle::Spin,
            WaitArg::Adaptive => Idle::Adaptive(std::time::Duration::from_micros(self.spin_us)),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum WaitArg {
    Spin,
    Adaptive,
}

/// `--backend`: the engine's [`Backend`] by name, one of `names` (listed in the help).
pub(crate) fn backend_parser(
    names: &'static [&'static str],
) -> impl clap::builder::TypedValueParser<Value = Backend> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<Backend>())
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum RxIcrcArg {
    Verify,
    Trust,
}

#[derive(Args)]
pub(crate) struct PingpongArgs {
    /// Transport.
    #[arg(value_enum)]
    pub(crate) transport: TransportArg,
    /// Server to connect to (client role); without it, wait for a client (server role).
    pub(crate) server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub(crate) port: u16,
    /// Local IPv4 address (the client connects from it, the server listens on it) [default: any;
    /// the exchange connection's local address is the GID].
    #[arg(long, value_name = "IP")]
    pub(crate) local: Option<std::net::Ipv4Addr>,
    /// Message size [default: 4096, UD: 2048].
    #[arg(short = 's', long)]
    pub(crate) size: Option<u32>,
    /// Path MTU.
    #[arg(short = 'm', long, default_value_t = 1024, value_parser = parse_mtu)]
    pub(crate) mtu: u32,
    /// Receives kept posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500, value_parser = clap::value_parser!(u32).range(2..=16384))]
    pub(crate) rx_depth: u32,
    /// Iterations.
    #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) iters: u64,
    /// RC local ACK timeout exponent (4.096 us x 2^N): the tools' 14 is 67 ms. On lossy links a
    /// shorter one lets the retransmission of a last message whose ACK was lost reach the peer
    /// before it tears its QP down.
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u8).range(1..=31))]
    pub(crate) timeout: u8,
    /// Validate received buffers, as the tools' -c does (the client zeroes the first byte of each
    /// 4 KiB page before its first send; every receive must carry them).
    #[arg(short = 'c', long)]
    pub(crate) chk: bool,
    /// Accepted for compatibility: the device is the UDP socket on the exchange's local address.
    #[arg(short = 'd', long = "ib-dev")]
    pub(crate) ib_dev: Option<String>,
    /// Accepted for compatibility: the GID is the exchange connection's local address.
    #[arg(short = 'g', long = "gid-idx")]
    pub(crate) gid_idx: Option<u32>,
    /// What the UDP backend checks of received ICRCs: verify (whatever IP ID the sender used: it
    /// is found from the ICRC) or trust (not checked; counted). AF_XDP always verifies.
    #[arg(long, value_enum, default_value = "verify")]
    pub(crate) rx_icrc: RxIcrcArg,
    /// Datapath: kernel UDP sockets, or AF_XDP on --dev (root).
    #[arg(long, value_parser = backend_parser(&["sim", "udp", "afxdp"]), default_value = "udp")]
    pub(crate) backend: Backend,
    /// Interface for AF_XDP (the one carrying the exchange connection's address).
    #[arg(long, value_name = "IFACE")]
    pub(crate) dev: Option<String>,
    /// Queue of --dev for AF_XDP.
    #[arg(long, default_value_t = 0)]
    pub(crate) queue: u32,
    /// Drop this share of the frames this side sends (seeded by --seed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    pub(crate) tx_loss: f64,
    /// Seed of --tx-loss.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Connect through the connection manager (REQ/REP/RTU on QP1, rdma_cm's TCP port space,
    /// port -p) instead of the tools' TCP exchange: against `softrdma pingpong --cm` or any rdma_cm
    /// peer; RC and UC; the server needs --local.
    #[arg(long)]
    pub(crate) cm: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum OpArg {
    Send,
    /// Tagged send (UET transports).
    Tsend,
    Write,
    Read,
    Atomic,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum TransportArg {
    Rc,
    Uc,
    Ud,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PerfTransportArg {
    Rc,
    Uc,
    Ud,
    Rud,
    Rod,
    Rudi,
    Uud,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ModeArg {
    Bw,
    Lat,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AtomicArg {
    FetchAdd,
    CmpSwap,
}

pub(crate) fn parse_mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    Mtu::from_bytes(v).map(|_| v).ok_or_else(|| "the MTU must be 256, 512, 1024, 2048 or 4096".into())
}

pub(crate) fn parse_prob(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a probability between 0 and 1")),
    }
}

pub(crate) fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.001..=10_000.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a link rate between 0.001 and 10000 Gb/s")),
    }
}

/// `--cc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CcArg {
    None,
    Nscc,
    Rccc,
    Dcqcn,
}

pub(crate) fn parse_latency(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1e6).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a latency between 0 and 1000000 microseconds")),
    }
}
