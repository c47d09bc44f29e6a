//! The `softrdma` command-line tool.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use engine::roce::dcqcn::DcqcnConfig;
use engine::verbs::{Mtu, QpType};
use softrdma::perf::{self, AtomicOp, Mode, PerfConfig, PerfOp};
use softrdma::{capture, corpus, decode};
use wire::uet::UetConfig;

/// Userspace RoCEv2 and Ultra Ethernet Transport engine.
#[derive(Parser)]
#[command(name = "softrdma", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print one line per RoCEv2 or UET frame of pcap/pcapng captures; other frames are counted and
    /// skipped.
    Decode {
        /// Check every frame's ICRC (RoCEv2) or CRC trailer (UET with --uet-crc) and checksums, and
        /// that its parsed form re-emits byte for byte; exit non-zero if any frame is bad.
        #[arg(long)]
        verify: bool,
        /// One JSON object per frame (JSON Lines) on stdout; the summary goes to stderr.
        #[arg(long)]
        json: bool,
        /// Also decode native-IP UET carried in this IP protocol number (253 is the usual choice).
        #[arg(long, value_name = "PROTO")]
        uet_ip_proto: Option<u8>,
        /// UET packets without TSS end with a 4-byte CRC32C trailer.
        #[arg(long)]
        uet_crc: bool,
        /// Capture files (pcap or pcapng, Ethernet link type).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Measure bandwidth or latency between two endpoints over the simulated network (one process,
    /// one thread), perftest style, checking every delivered byte.
    Perf(Box<PerfArgs>),
    /// List the backends, their devices, ports, MTUs, GIDs and limits.
    Devinfo,
    /// Ping-pong compatible with rdma-core's ibv_rc_pingpong, ibv_uc_pingpong and ibv_ud_pingpong
    /// (either side can be the stock tool), over kernel UDP or AF_XDP.
    Pingpong(PingpongArgs),
    /// Write a deterministic corpus of well-formed frames to a pcap file.
    Gen {
        /// Which corpus.
        #[arg(value_enum)]
        kind: GenKind,
        /// Output pcap file.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum GenKind {
    /// Every RoCEv2 opcode of RC, UC, UD and CNP (FLUSH and ATOMIC_WRITE included), IPv4 and IPv6,
    /// plus every AETH syndrome kind. RD is decode-only.
    Roce,
    /// Every UET PDS packet type and CP control type, SES header format and extension header, with and
    /// without TSS, over UDP 4793 and native IP (protocol 253): decode with `--uet-ip-proto 253`.
    Uet,
}

#[derive(Args)]
struct PerfArgs {
    /// Operation to measure.
    #[arg(value_enum)]
    op: OpArg,
    /// Transport: RC; UC (send, write) and UD (send) may lose messages, which are counted, never
    /// delivered corrupt. UET: RUD, ROD (send, tsend, write, read), RUDI (write, read to an
    /// idempotent-safe key), UUD (send; datagrams may be lost) - on the simulated network, with an
    /// RC run of the same operation printed for comparison.
    #[arg(long, value_enum, default_value = "rc")]
    transport: PerfTransportArg,
    /// Receives come from a shared receive queue (RC and UD).
    #[arg(long)]
    srq: bool,
    /// Message size in bytes [default: 65536 for bw, 2 for lat, 8 for atomic].
    #[arg(long, conflicts_with = "all_sizes", value_parser = clap::value_parser!(u32).range(1..=0x80_0000))]
    size: Option<u32>,
    /// Every size from 2 bytes to 8 MiB (fewer iterations for large sizes, as the table shows).
    #[arg(long)]
    all_sizes: bool,
    /// Messages per QP and size [default: 5000 for bw, 1000 for lat].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    iters: Option<u64>,
    /// Queue pairs (bandwidth mode).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    qps: u16,
    /// Bandwidth or latency.
    #[arg(long, value_enum, default_value = "bw")]
    mode: ModeArg,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 [default: 4096; with --perftest, the largest the
    /// interface carries, and the smaller of both sides'].
    #[arg(long, value_parser = parse_mtu)]
    mtu: Option<u32>,
    /// Messages in flight per QP (bw mode).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=4096))]
    tx_depth: u32,
    /// Probability a frame is lost (each direction).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    loss: f64,
    /// Probability a frame is delayed past later ones.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    reorder: f64,
    /// Probability a frame is delivered twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    dup: f64,
    /// Probability a frame gets a flipped bit (the ICRC check drops it).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    corrupt: f64,
    /// One-way link latency in microseconds (virtual time).
    #[arg(long, default_value_t = 1.0, value_parser = parse_latency)]
    latency_us: f64,
    /// Seed of the simulated impairments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Retries without progress before RETRY_EXC_ERR (0-7 is verbs' retry_cnt; more uses the
    /// max_retries extension, for very lossy links).
    #[arg(long, default_value_t = 1000)]
    retries: u32,
    /// Which atomic `perf atomic` runs.
    #[arg(long, value_enum, default_value = "fetch-add")]
    atomic: AtomicArg,
    /// UET runs: seal every packet with the Transport Security Sublayer (AES-256-GCM, cluster
    /// key mode, a test key both sides derive from --seed) and print, on the simulated network,
    /// the same bytes sealed and opened in a plain loop on this thread as the baseline.
    #[arg(long)]
    tss: bool,
    /// Congestion control: nscc (UET sender windows from delay and ECN) or rccc (UET receiver
    /// credits) on rud/rod, dcqcn (RoCE rate control by CNPs) on rc. Senders mark ECT(0) (nscc,
    /// dcqcn). It has work to do where a queue builds: on the simulated network, give the links a
    /// rate (--link-gbps) and the run prints each direction's drops, CE marks and queue p99.
    #[arg(long, value_enum, default_value = "none")]
    cc: CcArg,
    /// Rate of the simulated links in Gb/s, each with a 1 MB queue [default: unlimited]. Congestion
    /// control assumes this line rate (100 Gb/s when unlimited or on a real datapath).
    #[arg(long, value_parser = parse_gbps)]
    link_gbps: Option<f64>,
    /// ECN marking threshold of the simulated links in KB (with --link-gbps) [default: 100 with
    /// --cc nscc or dcqcn, else off]. With dcqcn, marking is RED-like: rising from 0 at 5 KB to 20 %
    /// at the threshold, every frame above it.
    #[arg(long, value_name = "KB")]
    ecn_kb: Option<u32>,
    /// Simulated links (with --link-gbps) trim what their queue has no room for to this many bytes
    /// (UET packet trimming: the receiver NACKs it TRIMMED and the sender resends at once) instead
    /// of dropping it. 0: tail drop.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=9000))]
    trim: u32,
    /// Write every frame the endpoints send (before impairments) to this pcap file.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Skip the single-thread TX+RX baseline printed under bandwidth rows.
    #[arg(long)]
    no_baseline: bool,
    /// Datapath: the in-process simulated network (both sides here), kernel UDP sockets or AF_XDP
    /// (one side per process: --server or --connect; AF_XDP needs --dev and root).
    /// [default: sim; udp with --perftest]
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Be the peer of perftest's ib_{write,read,send,atomic}_{bw,lat} (the stock tools): their TCP
    /// exchange (version, MTU, QP/rkey/address handshakes, reports) and traffic pattern, RC, either
    /// role (--server, or --connect HOST); the local address is the exchange connection's.
    #[arg(long)]
    perftest: bool,
    /// RC local ACK timeout exponent, 4.096 us x 2^N (--perftest; perftest's 14 is 67 ms).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u8).range(1..=31))]
    timeout: u8,
    /// Receives the SEND receiver keeps posted (--perftest, like perftest's -r).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=16384))]
    rx_depth: u32,
    /// Wait for a client (real backends); the client chooses the test.
    #[arg(long, conflicts_with = "connect")]
    server: bool,
    /// Connect to the server at this host (real backends).
    #[arg(long, value_name = "HOST")]
    connect: Option<String>,
    /// Local IPv4 address to bind [default: the address routing towards --connect; with
    /// --perftest, the exchange connection's, which --local fixes for both roles].
    #[arg(long, value_name = "IP")]
    local: Option<std::net::Ipv4Addr>,
    /// Interface for AF_XDP.
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// Queue of --dev for AF_XDP.
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// AF_XDP in the driver (native XDP) instead of generic (SKB) mode.
    #[arg(long)]
    xdp_driver: bool,
    /// TCP port of the out-of-band exchange.
    #[arg(long, default_value_t = softrdma::perf::remote::DEFAULT_TCP_PORT)]
    tcp_port: u16,
    /// UDP port of RoCEv2 on the UDP backend.
    #[arg(long, default_value_t = 4791)]
    udp_port: u16,
    /// What the UDP backend checks of received ICRCs: verify (softrdma peers, IP ID 0) or trust
    /// (peers such as rdma_rxe that send other IP IDs; counted) [default: verify; trust with
    /// --perftest].
    #[arg(long, value_enum)]
    rx_icrc: Option<RxIcrcArg>,
    /// Real backends: drop this share of the frames this side sends (seeded by --seed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    tx_loss: f64,
    /// Real backends: send this share of frames after the next one.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    tx_reorder: f64,
    /// Real backends: send this share of frames twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    tx_dup: f64,
    /// Real backends: flip a bit in this share of frames (the peer's ICRC check drops them).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    tx_corrupt: f64,
    /// Print each side's counters (frames, ICRC drops, retries, timeouts, NAKs, RNR, duplicates).
    #[arg(long)]
    counters: bool,
    /// Write every frame this side sends and receives, as the engine built or rebuilt it, to a
    /// pcap file (on the simulated backend: the same as --pcap).
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
}

impl PerfArgs {
    /// The simulated cable's settings (both directions) from `--latency-us`, `--loss`, `--reorder`,
    /// `--dup` and `--corrupt`.
    fn sim_link(&self) -> nicsim::LinkConfig {
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
    fn link_bps(&self) -> Option<u64> {
        self.link_gbps.map(|g| (g * 1e9) as u64)
    }

    /// The line rate congestion control assumes, bits per second.
    fn cc_bps(&self) -> u64 {
        self.link_bps().unwrap_or(100_000_000_000)
    }

    /// The unloaded round trip congestion control assumes: both ways' latency plus 2 us of
    /// serialization and processing on the simulated network, 20 us on a real datapath.
    fn cc_rtt(&self) -> std::time::Duration {
        if self.backend() == BackendArg::Sim {
            std::time::Duration::from_nanos((2.0 * self.latency_us * 1000.0) as u64 + 2_000)
        } else {
            std::time::Duration::from_micros(20)
        }
    }
    fn rx_icrc(&self) -> engine::datapath::udp::RxIcrc {
        use engine::datapath::udp::RxIcrc;
        match self.rx_icrc {
            Some(RxIcrcArg::Trust) => RxIcrc::Trust,
            Some(RxIcrcArg::Verify) => RxIcrc::Verify,
            None if self.perftest => RxIcrc::Trust,
            None => RxIcrc::Verify,
        }
    }

    fn tx_faults(&self) -> engine::datapath::wrap::TxFaults {
        engine::datapath::wrap::TxFaults {
            loss: self.tx_loss,
            reorder: self.tx_reorder,
            duplicate: self.tx_dup,
            corrupt: self.tx_corrupt,
        }
    }

    fn mtu(&self) -> u32 {
        self.mtu.unwrap_or(4096)
    }

    fn backend(&self) -> BackendArg {
        self.backend.unwrap_or(if self.perftest { BackendArg::Udp } else { BackendArg::Sim })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    Sim,
    Udp,
    Afxdp,
}

#[derive(Clone, Copy, ValueEnum)]
enum RxIcrcArg {
    Verify,
    Trust,
}

#[derive(Args)]
struct PingpongArgs {
    /// Transport.
    #[arg(value_enum)]
    transport: TransportArg,
    /// Server to connect to (client role); without it, wait for a client (server role).
    server: Option<String>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Local IPv4 address (the client connects from it, the server listens on it) [default: any;
    /// the exchange connection's local address is the GID].
    #[arg(long, value_name = "IP")]
    local: Option<std::net::Ipv4Addr>,
    /// Message size [default: 4096, UD: 2048].
    #[arg(short = 's', long)]
    size: Option<u32>,
    /// Path MTU.
    #[arg(short = 'm', long, default_value_t = 1024, value_parser = parse_mtu)]
    mtu: u32,
    /// Receives kept posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500, value_parser = clap::value_parser!(u32).range(2..=16384))]
    rx_depth: u32,
    /// Iterations.
    #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    iters: u64,
    /// RC local ACK timeout exponent (4.096 us x 2^N): the tools' 14 is 67 ms. On lossy links a
    /// shorter one lets the retransmission of a last message whose ACK was lost reach the peer
    /// before it tears its QP down.
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u8).range(1..=31))]
    timeout: u8,
    /// Validate received buffers, as the tools' -c does (the client zeroes the first byte of each
    /// 4 KiB page before its first send; every receive must carry them).
    #[arg(short = 'c', long)]
    chk: bool,
    /// Accepted for compatibility: the device is the UDP socket on the exchange's local address.
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Accepted for compatibility: the GID is the exchange connection's local address.
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Verify received ICRCs against headers rebuilt with IP ID 0 (softrdma peers); by default
    /// the UDP backend trusts them, because rxe sends IP IDs a UDP socket cannot see (AF_XDP always
    /// verifies: it sees the whole frame).
    #[arg(long)]
    verify_icrc: bool,
    /// Datapath: kernel UDP sockets, or AF_XDP on --dev (root).
    #[arg(long, value_enum, default_value = "udp")]
    backend: BackendArg,
    /// Interface for AF_XDP (the one carrying the exchange connection's address).
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// Queue of --dev for AF_XDP.
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// Drop this share of the frames this side sends (seeded by --seed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_prob)]
    tx_loss: f64,
    /// Seed of --tx-loss.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum OpArg {
    Send,
    /// Tagged send (UET transports).
    Tsend,
    Write,
    Read,
    Atomic,
}

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Rc,
    Uc,
    Ud,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PerfTransportArg {
    Rc,
    Uc,
    Ud,
    Rud,
    Rod,
    Rudi,
    Uud,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Bw,
    Lat,
}

#[derive(Clone, Copy, ValueEnum)]
enum AtomicArg {
    FetchAdd,
    CmpSwap,
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    Mtu::from_bytes(v).map(|_| v).ok_or_else(|| "the MTU must be 256, 512, 1024, 2048 or 4096".into())
}

fn parse_prob(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?} is not a probability between 0 and 1")),
    }
}

fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.001..=10_000.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a link rate between 0.001 and 10000 Gb/s")),
    }
}

/// `--cc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CcArg {
    None,
    Nscc,
    Rccc,
    Dcqcn,
}

fn parse_latency(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1e6).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a latency between 0 and 1000000 microseconds")),
    }
}

fn run_perf(a: PerfArgs) -> ExitCode {
    let uet = match a.transport {
        PerfTransportArg::Rud => Some(ses::DeliveryMode::Rud),
        PerfTransportArg::Rod => Some(ses::DeliveryMode::Rod),
        PerfTransportArg::Rudi => Some(ses::DeliveryMode::Rudi),
        PerfTransportArg::Uud => Some(ses::DeliveryMode::Uud),
        _ => None,
    };
    let cc_fits = match a.cc {
        CcArg::None => Ok(()),
        CcArg::Nscc | CcArg::Rccc if uet.is_none() => {
            Err("nscc and rccc are UET congestion controls (--transport rud or rod)")
        }
        CcArg::Dcqcn if a.transport != PerfTransportArg::Rc => Err("dcqcn runs on RC QPs (--transport rc)"),
        CcArg::Dcqcn if a.perftest => Err("--perftest runs the stock tools' test, without DCQCN"),
        _ => Ok(()),
    };
    let shaping = a.link_gbps.is_some() || a.ecn_kb.is_some() || a.trim > 0;
    let link_fits = if a.backend() != BackendArg::Sim && shaping {
        Err("--link-gbps, --ecn-kb and --trim shape the simulated links")
    } else if a.trim > 0 && uet.is_none() {
        Err("--trim is UET packet trimming (--transport rud or rod)")
    } else if a.trim > 0 && a.trim < 128 {
        Err("--trim keeps at least 128 bytes (Ethernet, IPv4, UDP, PDS and SES headers)")
    } else {
        Ok(())
    };
    if let Err(why) = cc_fits.and(link_fits) {
        eprintln!("softrdma perf: {why}");
        return ExitCode::from(2);
    }
    if let Some(transport) = uet {
        return run_uet_perf(&a, transport);
    }
    let op = match a.op {
        OpArg::Tsend => {
            eprintln!("softrdma perf: tsend is a UET operation (--transport rud, rod or uud)");
            return ExitCode::from(2);
        }
        OpArg::Send => PerfOp::Send,
        OpArg::Write => PerfOp::Write,
        OpArg::Read => PerfOp::Read,
        OpArg::Atomic => PerfOp::Atomic,
    };
    let mode = match a.mode {
        ModeArg::Bw => Mode::Bw,
        ModeArg::Lat => Mode::Lat,
    };
    if a.perftest {
        return run_perftest(&a, op, mode);
    }
    let qp_type = match a.transport {
        PerfTransportArg::Uc => QpType::Uc,
        PerfTransportArg::Ud => QpType::Ud,
        _ => QpType::Rc,
    };
    let unsupported = match qp_type {
        QpType::Rc => None,
        QpType::Uc if matches!(op, PerfOp::Read | PerfOp::Atomic) => Some("UC carries send and write only"),
        QpType::Ud if op != PerfOp::Send => Some("UD carries send only"),
        _ => None,
    };
    if let Some(why) = unsupported {
        eprintln!("softrdma perf: {why}");
        return ExitCode::from(2);
    }
    if a.srq && (qp_type == QpType::Uc || op != PerfOp::Send) {
        eprintln!("softrdma perf: --srq applies to send over RC or UD");
        return ExitCode::from(2);
    }
    if qp_type != QpType::Rc && (a.all_sizes || a.size.is_some_and(|s| s < 8)) {
        eprintln!("softrdma perf: UC and UD runs need --size >= 8 (each message carries its number)");
        return ExitCode::from(2);
    }
    if qp_type == QpType::Ud && a.size.is_some_and(|s| s > a.mtu()) {
        eprintln!("softrdma perf: a UD message must fit one packet: --size at most --mtu ({})", a.mtu());
        return ExitCode::from(2);
    }
    if op == PerfOp::Atomic && (a.all_sizes || a.size.is_some_and(|s| s != 8)) {
        eprintln!("softrdma perf: atomics move 8 bytes; --size and --all-sizes do not apply");
        return ExitCode::from(2);
    }
    if mode == Mode::Lat && a.qps > 1 {
        eprintln!("softrdma perf: latency runs use one QP; --qps applies to bandwidth runs");
        return ExitCode::from(2);
    }
    let sizes = if a.all_sizes {
        perf::all_sizes()
    } else {
        let default = match (op, mode) {
            (PerfOp::Atomic, _) => 8,
            (_, Mode::Bw) if qp_type == QpType::Ud => a.mtu() as usize,
            (_, Mode::Bw) => 65536,
            (_, Mode::Lat) if qp_type != QpType::Rc => 8,
            (_, Mode::Lat) => 2,
        };
        vec![a.size.map_or(default, |s| s as usize)]
    };
    let iters = a.iters.unwrap_or(if mode == Mode::Bw { 5000 } else { 1000 });
    let link = a.sim_link();
    if a.backend() != BackendArg::Sim {
        let test = perf::remote::Test {
            op,
            atomic: if matches!(a.atomic, AtomicArg::CmpSwap) {
                AtomicOp::CmpSwap
            } else {
                AtomicOp::FetchAdd
            },
            qp_type,
            mode,
            size: sizes[0],
            iters,
            qps: a.qps as usize,
            mtu: Mtu::from_bytes(a.mtu()).unwrap_or(Mtu::Mtu4096),
            depth: a.tx_depth as usize,
            seed: a.seed,
            dcqcn_bps: (a.cc == CcArg::Dcqcn).then(|| a.cc_bps()),
        };
        return run_remote(&a, test);
    }
    if a.server || a.connect.is_some() {
        eprintln!("softrdma perf: --server and --connect need a real datapath (--backend udp)");
        return ExitCode::from(2);
    }
    if a.tx_loss + a.tx_reorder + a.tx_dup + a.tx_corrupt > 0.0 {
        eprintln!(
            "softrdma perf: --tx-* faults are for real backends; the simulated link takes --loss, --reorder, --dup, --corrupt"
        );
        return ExitCode::from(2);
    }
    let cfg = PerfConfig {
        op,
        qp_type,
        srq: a.srq,
        atomic: if matches!(a.atomic, AtomicArg::CmpSwap) { AtomicOp::CmpSwap } else { AtomicOp::FetchAdd },
        sizes: sizes.clone(),
        iters,
        qps: a.qps as usize,
        mode,
        mtu: Mtu::from_bytes(a.mtu()).unwrap_or(Mtu::Mtu4096),
        link,
        seed: a.seed,
        tx_depth: a.tx_depth as usize,
        retries: a.retries,
        tap: a.pcap.is_some() || a.capture.is_some(),
        baseline: !a.no_baseline,
        dcqcn: (a.cc == CcArg::Dcqcn).then(|| DcqcnConfig::datacenter(a.cc_bps())),
    };
    println!("{}", perf::header(&cfg));
    println!("{}", if mode == Mode::Bw { perf::BW_COLUMNS } else { perf::LAT_COLUMNS });
    let (mut verified, mut errors, mut lost, mut dups) = (0u64, 0u64, 0u64, 0u64);
    let mut tap = Vec::new();
    for &size in &sizes {
        let run_cfg = PerfConfig {
            iters: if a.all_sizes { perf::sweep_iters(iters, size) } else { iters },
            ..cfg.clone()
        };
        let result = perf::Bench::new(&run_cfg, size).and_then(|mut b| {
            let line = match mode {
                Mode::Bw => {
                    let r = b.run_bw()?;
                    let mut s = perf::bw_line(&r);
                    if let Some(base) = perf::baseline_line(&r) {
                        s = format!("{s}\n{base}");
                    }
                    dups += r.duplicates;
                    (s, r.verified, r.errors, r.lost)
                }
                Mode::Lat => {
                    let r = b.run_lat()?;
                    (perf::lat_line(&r), r.verified, r.errors, r.lost)
                }
            };
            tap.extend(b.pair().net.with(|n| n.take_tap()));
            let mut line = line;
            if a.link_gbps.is_some() {
                line.0 = format!("{}\n{}", line.0, perf::link_report(&b.pair().net, ["sim0", "sim1"]));
            }
            if a.counters {
                let (sa, sb) = b.stats();
                let (ca, cb) = (perf::counters_line("sim0", &sa), perf::counters_line("sim1", &sb));
                return Ok((format!("{}\n{ca}\n{cb}", line.0), line.1, line.2, line.3));
            }
            Ok(line)
        });
        match result {
            Ok((line, v, e, l)) => {
                println!("{line}");
                verified += v;
                errors += e;
                lost += l;
            }
            Err(e) => {
                eprintln!("softrdma perf: size {size}: {e}");
                errors += 1;
            }
        }
    }
    println!("{}", perf::LINE);
    if mode == Mode::Lat {
        println!(" latency: wall-clock time from post to completion, one message outstanding");
    }
    if let Some(path) = a.pcap.as_ref().or(a.capture.as_ref()) {
        let written = std::fs::File::create(path)
            .map_err(|e| e.to_string())
            .and_then(|f| nicsim::write_pcap(std::io::BufWriter::new(f), &tap).map_err(|e| e.to_string()));
        match written {
            Ok(()) => println!(" wrote {} frames to {}", tap.len(), path.display()),
            Err(e) => {
                eprintln!("softrdma perf: writing {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    if qp_type != QpType::Rc {
        println!(
            " lost: {lost} messages (an unreliable transport drops whole messages; none arrived corrupt)"
        );
        if dups > 0 {
            println!(" duplicates: {dups} messages delivered twice by duplicated frames (UD), checked too");
        }
    }
    println!("verified: {verified} messages, {errors} errors");
    if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// `softrdma perf OP --transport rud|rod|rudi|uud`: UET on the simulated network, then RC with the
/// same operation, size, messages and link for comparison.
fn run_uet_perf(a: &PerfArgs, transport: ses::DeliveryMode) -> ExitCode {
    use softrdma::perf::uet::{UetBench, UetCc, UetOp, UetPerfConfig};
    let refuse = |why: &str| {
        eprintln!("softrdma perf: {why}");
        ExitCode::from(2)
    };
    let op = match a.op {
        OpArg::Send => UetOp::Send,
        OpArg::Tsend => UetOp::Tsend,
        OpArg::Write => UetOp::Write,
        OpArg::Read => UetOp::Read,
        OpArg::Atomic if matches!(a.atomic, AtomicArg::CmpSwap) => UetOp::CmpSwap,
        OpArg::Atomic => UetOp::FetchAdd,
    };
    if a.perftest {
        return refuse("--perftest peers speak RoCE (RC)");
    }
    if a.srq || a.qps != 1 || a.all_sizes {
        return refuse("UET runs take one size and no --srq / --qps");
    }
    let mode = if matches!(a.mode, ModeArg::Lat) { Mode::Lat } else { Mode::Bw };
    let default_size = match (op, mode) {
        (UetOp::FetchAdd | UetOp::CmpSwap, _) => 8,
        (_, Mode::Bw) => 65536,
        (_, Mode::Lat) => 2,
    };
    let size = a.size.map_or(default_size, |s| s as usize);
    let iters = a.iters.unwrap_or(if mode == Mode::Bw { 5000 } else { 1000 });
    let link = a.sim_link();
    let cfg = UetPerfConfig {
        op,
        transport,
        lat: mode == Mode::Lat,
        size,
        iters,
        depth: a.tx_depth as usize,
        max_payload: a.mtu() as usize,
        link,
        seed: a.seed,
        max_retries: a.retries,
        tss: a.tss,
        cc: match a.cc {
            CcArg::Nscc => UetCc::Nscc,
            CcArg::Rccc => UetCc::Rccc,
            CcArg::None | CcArg::Dcqcn => UetCc::None,
        },
        cc_bps: a.cc_bps(),
        cc_rtt: a.cc_rtt(),
    };
    // A server takes the test from its client.
    if !a.server {
        if let Err(why) = cfg.check() {
            return refuse(why);
        }
    }
    if a.backend() != BackendArg::Sim {
        return run_uet_remote(a, cfg);
    }
    if a.server || a.connect.is_some() {
        return refuse("--server and --connect need a real datapath (--backend udp or afxdp)");
    }
    let name = |t: ses::DeliveryMode| format!("{t:?}").to_uppercase();
    let what = match op {
        UetOp::Send => "Send",
        UetOp::Tsend => "Tagged_Send",
        UetOp::Write => "RMA_Write",
        UetOp::Read => "RMA_Read",
        UetOp::FetchAdd => "Fetch_Add",
        UetOp::CmpSwap => "Compare_Swap",
    };
    let rule = perf::LINE;
    println!("{rule}\n                    {what} test, UET {} over the simulated network", name(transport));
    println!(
        " size: {size}   messages: {iters}   payload per packet: {}   in flight: {}\n Build: {}\n{rule}",
        cfg.max_payload,
        cfg.depth(),
        perf::build_kind()
    );
    println!("{}", if mode == Mode::Bw { perf::BW_COLUMNS } else { perf::LAT_COLUMNS });
    let mut bench = match UetBench::new(cfg) {
        Ok(b) => b,
        Err(e) => return refuse(&e.to_string()),
    };
    if a.pcap.is_some() {
        bench.enable_tap();
    }
    let (line, verified, errors, lost) = match mode {
        Mode::Bw => bench.run_bw().map(|r| (perf::bw_line(&r), r.verified, r.errors, r.lost)),
        Mode::Lat => bench.run_lat().map(|r| (perf::lat_line(&r), r.verified, r.errors, r.lost)),
    }
    .unwrap_or_else(|e| (format!(" UET run failed: {e}"), 0, 1, 0));
    println!("{line}");
    if a.link_gbps.is_some() {
        println!("{}", bench.link_report());
    }
    // Only a sealed (--tss) bandwidth run measures the AEAD baseline.
    if let Some((r, b)) = bench.last_bw().and_then(|r| Some((r, r.baseline?))) {
        let moved = (cfg.size as u64 * cfg.iters) as usize;
        let floor = softrdma::perf::uet::tss_floor(moved, cfg.max_payload, cfg.size);
        let base = b.bytes_per_sec() / 1e6;
        let (engine, with_checks) = (r.engine_rate() / 1e6, r.average() / 1e6);
        let share = 100.0 * r.check_time.as_secs_f64() / r.wall.as_secs_f64().max(1e-9);
        println!(
            " TSS baseline: {} bytes sealed and opened with AES-256-GCM (aws-lc-rs) in {}-byte packets on this thread, in slices of about {} MiB between the run's steps (so both see the same machine speed): {base:.1} MB/s",
            b.bytes,
            cfg.max_payload,
            softrdma::perf::uet::AeadBaseline::SLICE >> 20
        );
        println!(
            " this run: {engine:.1} MB/s of engine time = {:.1} % of the baseline (wall-clock minus the {share:.1} % spent making and checking messages, as the RC lines count); {with_checks:.1} MB/s = {:.1} % with them",
            100.0 * engine / base,
            100.0 * with_checks / base
        );
        println!(
            " TSS floor (the same messages sealed into frames, opened and copied out, no protocol; its own baseline interleaved the same way, {:.1} MB/s): {:.1} MB/s = {:.1} % of that baseline ({:.1} MB/s = {:.1} % with making and checking them)",
            floor.baseline,
            floor.engine,
            100.0 * floor.engine / floor.baseline,
            floor.all,
            100.0 * floor.all / floor.baseline,
        );
    }
    if a.counters {
        for c in bench.counters() {
            println!("{c}");
        }
    }
    if let Some(path) = &a.pcap {
        let tap = bench.take_tap();
        let written = std::fs::File::create(path)
            .map_err(|e| e.to_string())
            .and_then(|f| nicsim::write_pcap(std::io::BufWriter::new(f), &tap).map_err(|e| e.to_string()));
        match written {
            Ok(()) => println!(" wrote {} frames to {}", tap.len(), path.display()),
            Err(e) => return refuse(&format!("writing {}: {e}", path.display())),
        }
    }
    // The same operation over RC on the same simulated link, in the same run.
    let rc_op = match op {
        UetOp::Send | UetOp::Tsend => PerfOp::Send,
        UetOp::Write => PerfOp::Write,
        UetOp::Read => PerfOp::Read,
        UetOp::FetchAdd | UetOp::CmpSwap => PerfOp::Atomic,
    };
    let rc = PerfConfig {
        op: rc_op,
        qp_type: QpType::Rc,
        srq: false,
        atomic: if op == UetOp::CmpSwap { AtomicOp::CmpSwap } else { AtomicOp::FetchAdd },
        sizes: vec![size],
        iters,
        qps: 1,
        mode,
        mtu: Mtu::from_bytes(a.mtu()).unwrap_or(Mtu::Mtu4096),
        link,
        seed: a.seed,
        tx_depth: a.tx_depth as usize,
        retries: a.retries,
        tap: false,
        baseline: false,
        dcqcn: None,
    };
    let rc_line = perf::Bench::new(&rc, size).and_then(|mut b| match mode {
        Mode::Bw => b.run_bw().map(|r| perf::bw_line(&r)),
        Mode::Lat => b.run_lat().map(|r| perf::lat_line(&r)),
    });
    match rc_line {
        Ok(l) => println!(" RC, same operation and link, same run:\n{l}"),
        Err(e) => println!(" RC comparison failed: {e}"),
    }
    println!("{rule}");
    if mode == Mode::Lat {
        println!(
            " latency: wall-clock time from post to completion (sends: until received), one message outstanding"
        );
    }
    if transport == ses::DeliveryMode::Uud {
        println!(
            " lost: {lost} messages (an unreliable transport drops whole messages; none arrived corrupt)"
        );
    }
    println!("verified: {verified} messages, {errors} errors");
    if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Which side this process is on a real datapath, with its link: `Ok((None, link))` for a server,
/// `Ok((Some(host), link))` for a client. `udp_port` is the protocol's port (4791 or 4793).
fn remote_side(a: &PerfArgs, udp_port: u16) -> Result<(Option<String>, perf::remote::Link), ExitCode> {
    let Some(backend) = real_backend(a) else { return Err(ExitCode::from(2)) };
    let link = |local| perf::remote::Link {
        backend: backend.clone(),
        local,
        udp_port,
        tcp_port: a.tcp_port,
        rx_icrc: a.rx_icrc(),
        tx_faults: a.tx_faults(),
        seed: a.seed,
        capture: a.capture.is_some(),
    };
    match (&a.connect, a.server) {
        (None, false) => {
            eprintln!(
                "softrdma perf: a real datapath runs one side per process: give --server or --connect HOST"
            );
            Err(ExitCode::from(2))
        }
        (None, true) => {
            let Some(local) = a.local else {
                eprintln!("softrdma perf: the server needs --local IP (the address clients reach)");
                return Err(ExitCode::from(2));
            };
            println!(" waiting for a client on {local}:{} (UDP {local}:{udp_port})", a.tcp_port);
            Ok((None, link(local)))
        }
        (Some(host), _) => {
            let towards = host.parse().ok().or_else(|| {
                use std::net::ToSocketAddrs;
                (host.as_str(), 0).to_socket_addrs().ok()?.find_map(|s| match s.ip() {
                    std::net::IpAddr::V4(v4) => Some(v4),
                    std::net::IpAddr::V6(_) => None,
                })
            });
            let Some(local) = a.local.or_else(|| towards.and_then(perf::remote::local_ip_towards)) else {
                eprintln!("softrdma perf: cannot tell the local address towards {host}: give --local IP");
                return Err(ExitCode::from(2));
            };
            Ok((Some(host.clone()), link(local)))
        }
    }
}

/// A UET run with one side per process over kernel UDP or AF_XDP (UDP port 4793).
fn run_uet_remote(a: &PerfArgs, cfg: softrdma::perf::uet::UetPerfConfig) -> ExitCode {
    use softrdma::perf::uet;
    let (host, link) = match remote_side(a, wire::uet::UDP_PORT) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = match host {
        None => uet::serve(&link).map(|(c, o)| (c, o, false)),
        Some(host) => uet::run_client(&host, &link, &cfg).map(|o| (cfg, o, true)),
    };
    let (cfg, o, client) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("softrdma perf: {e}");
            return ExitCode::from(2);
        }
    };
    if let (Some(path), Some(log)) = (&a.capture, &o.capture) {
        let frames = log.borrow().clone();
        if let Err(code) = write_capture(path, &frames) {
            return code;
        }
    }
    let rule = perf::LINE;
    println!("{rule}");
    println!(
        "                    {:?} test, UET {} over {} ({})",
        cfg.op,
        format!("{:?}", cfg.transport).to_uppercase(),
        if a.backend() == BackendArg::Afxdp { "AF_XDP" } else { "kernel UDP" },
        if client { "client" } else { "server" }
    );
    println!(
        " size: {}   messages: {}   payload per packet: {}\n Build: {}\n{rule}",
        cfg.size,
        cfg.iters,
        cfg.max_payload,
        perf::build_kind()
    );
    if let Some(r) = &o.bw {
        println!("{}\n{}", perf::BW_COLUMNS, perf::bw_line(r));
    }
    if let Some(r) = &o.lat {
        println!("{}\n{}", perf::LAT_COLUMNS, perf::lat_line(r));
    }
    if a.counters {
        println!("{}", o.counters);
    }
    println!("{rule}");
    if cfg.transport == ses::DeliveryMode::Uud {
        println!(
            " lost: {} messages (an unreliable transport drops whole messages; none arrived corrupt)",
            o.lost
        );
    }
    println!("verified: {} messages, {} errors", o.verified, o.errors);
    if o.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn run_pingpong(a: &PingpongArgs) -> ExitCode {
    use engine::datapath::udp::RxIcrc;
    let qp_type = match a.transport {
        TransportArg::Rc => QpType::Rc,
        TransportArg::Uc => QpType::Uc,
        TransportArg::Ud => QpType::Ud,
    };
    let mtu = Mtu::from_bytes(a.mtu).unwrap_or(Mtu::Mtu1024);
    let size = a.size.map_or(if qp_type == QpType::Ud { 2048 } else { 4096 }, |s| s as usize);
    if qp_type == QpType::Ud && size > 4096 {
        eprintln!("softrdma pingpong: a UD message must fit one packet (at most 4096 bytes)");
        return ExitCode::from(2);
    }
    let _ = (&a.ib_dev, a.gid_idx);
    let backend = match (a.backend, &a.dev) {
        (BackendArg::Udp, _) => perf::remote::Backend::Udp,
        (BackendArg::Afxdp, Some(dev)) => {
            perf::remote::Backend::AfXdp { dev: dev.clone(), queue: a.queue, driver: false }
        }
        (BackendArg::Afxdp, None) => {
            eprintln!("softrdma pingpong: --backend afxdp needs --dev IFACE");
            return ExitCode::from(2);
        }
        (BackendArg::Sim, _) => {
            eprintln!("softrdma pingpong: the peer is another process: --backend udp or afxdp");
            return ExitCode::from(2);
        }
    };
    let net = perf::remote::Net {
        backend,
        rx_icrc: if a.verify_icrc { RxIcrc::Verify } else { RxIcrc::Trust },
        tx_faults: engine::datapath::wrap::TxFaults { loss: a.tx_loss, ..Default::default() },
        seed: a.seed,
        ..perf::remote::Net::udp()
    };
    let o = softrdma::pingpong::Options {
        net,
        qp_type,
        server: a.server.clone(),
        port: a.port,
        local: a.local,
        size,
        mtu,
        rx_depth: a.rx_depth,
        iters: a.iters,
        chk: a.chk,
        timeout: a.timeout,
    };
    match softrdma::pingpong::run(&o) {
        Ok(r) => {
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            println!(
                "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
                r.bytes,
                r.bytes as f64 * 8.0 / secs / 1e6
            );
            println!("{} iters in {secs:.2} seconds = {:.2} usec/iter", r.iters, secs * 1e6 / r.iters as f64);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("softrdma pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The real datapath `a` asks for (printing why not, if it cannot be had).
fn real_backend(a: &PerfArgs) -> Option<perf::remote::Backend> {
    use perf::remote::Backend;
    match (a.backend(), &a.dev) {
        (BackendArg::Afxdp, Some(dev)) => {
            Some(Backend::AfXdp { dev: dev.clone(), queue: a.queue, driver: a.xdp_driver })
        }
        (BackendArg::Afxdp, None) => {
            eprintln!("softrdma perf: --backend afxdp needs --dev IFACE");
            None
        }
        (BackendArg::Udp, _) => Some(Backend::Udp),
        (BackendArg::Sim, _) => {
            eprintln!("softrdma perf: this mode needs a real datapath (--backend udp or afxdp)");
            None
        }
    }
}

fn write_capture(path: &std::path::Path, frames: &[nicsim::TapRecord]) -> Result<(), ExitCode> {
    let written = std::fs::File::create(path)
        .map_err(|e| e.to_string())
        .and_then(|f| nicsim::write_pcap(std::io::BufWriter::new(f), frames).map_err(|e| e.to_string()));
    match written {
        Ok(()) => {
            println!(" wrote {} frames to {}", frames.len(), path.display());
            Ok(())
        }
        Err(e) => {
            eprintln!("softrdma perf: writing {}: {e}", path.display());
            Err(ExitCode::from(2))
        }
    }
}

/// `perf --perftest`: one side against perftest's stock tools.
fn run_perftest(a: &PerfArgs, op: PerfOp, mode: Mode) -> ExitCode {
    let refuse = |why: &str| {
        eprintln!("softrdma perf --perftest: {why}");
        ExitCode::from(2)
    };
    if a.transport != PerfTransportArg::Rc || a.srq || a.qps != 1 || a.all_sizes {
        return refuse(
            "perftest peers run RC with one QP and one size (no --transport, --srq, --qps, --all-sizes)",
        );
    }
    if a.loss + a.reorder + a.dup + a.corrupt > 0.0 || a.pcap.is_some() {
        return refuse("the simulated link's options do not apply: use --tx-loss etc. and --capture");
    }
    let server = match (&a.connect, a.server) {
        (Some(host), _) => Some(host.clone()),
        (None, true) => None,
        (None, false) => return refuse("give --server (wait for the stock client) or --connect HOST"),
    };
    let size = match (op, a.size) {
        (PerfOp::Atomic, Some(s)) if s != 8 => return refuse("atomics move 8 bytes"),
        (_, Some(s)) => s as usize,
        (PerfOp::Atomic, None) => 8,
        (_, None) if mode == Mode::Bw => 65536,
        (_, None) => 2,
    };
    let Some(backend) = real_backend(a) else { return ExitCode::from(2) };
    let o = softrdma::perftest::Options {
        op,
        atomic: if matches!(a.atomic, AtomicArg::CmpSwap) { AtomicOp::CmpSwap } else { AtomicOp::FetchAdd },
        mode,
        server,
        tcp_port: a.tcp_port,
        local: a.local,
        size,
        iters: a.iters.unwrap_or(if mode == Mode::Bw { 5000 } else { 1000 }),
        mtu: a.mtu.and_then(Mtu::from_bytes),
        timeout: a.timeout,
        tx_depth: a.tx_depth as usize,
        rx_depth: a.rx_depth as usize,
        net: perf::remote::Net {
            backend,
            udp_port: a.udp_port,
            rx_icrc: a.rx_icrc(),
            tx_faults: a.tx_faults(),
            seed: a.seed,
            capture: a.capture.is_some(),
        },
    };
    if o.server.is_none() {
        println!(" waiting for a perftest client on TCP port {}", o.tcp_port);
    }
    let out = match softrdma::perftest::run(&o) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("softrdma perf --perftest: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", softrdma::perftest::render(&o, &out));
    if let Some(path) = &a.capture {
        if let Err(code) = write_capture(path, &out.captured) {
            return code;
        }
    }
    if a.counters {
        println!("{}", perf::counters_line(if out.client { "client" } else { "server" }, &out.stats));
        let dp: Vec<String> = out.datapath.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(" datapath: {}", dp.join(", "));
    }
    ExitCode::SUCCESS
}

/// One side of a two-process run over the UDP backend.
fn run_remote(a: &PerfArgs, test: perf::remote::Test) -> ExitCode {
    use perf::remote;
    if a.all_sizes {
        eprintln!("softrdma perf: --all-sizes runs on the simulated backend only");
        return ExitCode::from(2);
    }
    let (host, link) = match remote_side(a, a.udp_port) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = match host {
        None => remote::serve(&link).map(|(t, o)| (t, o, false)),
        Some(host) => remote::run_client(&host, &link, &test).map(|o| (test.clone(), o, true)),
    };
    let (t, o, client): (perf::remote::Test, perf::remote::Outcome, bool) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("softrdma perf: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &a.capture {
        if let Err(code) = write_capture(path, &o.captured) {
            return code;
        }
    }
    let what = match t.op {
        PerfOp::Send => "Send",
        PerfOp::Write => "RDMA_Write",
        PerfOp::Read => "RDMA_Read",
        PerfOp::Atomic => "Atomic",
    };
    let transport = match t.qp_type {
        QpType::Rc => "RC",
        QpType::Uc => "UC",
        QpType::Ud => "UD",
    };
    println!("{}", perf::LINE);
    println!(
        "                    {what} test, {transport} over {} ({})",
        if a.backend() == BackendArg::Afxdp { "AF_XDP" } else { "kernel UDP" },
        if client { "client" } else { "server" }
    );
    println!(
        " Number of qps: {}   MTU: {}   size: {}   iterations: {}\n Build: {}",
        t.qps,
        t.mtu.bytes(),
        t.size,
        t.iters,
        perf::build_kind()
    );
    println!("{}", perf::LINE);
    if client && t.mode == Mode::Lat {
        let mut h = match hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("softrdma perf: {e}");
                return ExitCode::from(2);
            }
        };
        for &ns in &o.latencies {
            h.saturating_record(ns);
        }
        println!("{}", perf::LAT_COLUMNS);
        let row = perf::LatRow {
            size: t.size,
            wall_ns: h.clone(),
            virtual_ns: h,
            verified: o.verified,
            errors: o.errors,
            lost: o.lost,
        };
        println!("{}", perf::lat_line(&row));
        if t.qp_type != QpType::Rc {
            println!(" latency on UC/UD: post to the local completion (sent), not to the receipt");
        }
    } else if client {
        let secs = o.wall.as_secs_f64().max(1e-9);
        println!("{}", perf::BW_COLUMNS);
        let msgs = (t.iters * t.qps as u64) as f64;
        let avg = o.bytes as f64 / secs;
        println!(
            " {:<10} {:<14} {:<18} {:<20.2} {:<15.6} {:.2}",
            t.size,
            t.iters,
            "-",
            avg / (1u64 << 20) as f64,
            msgs / secs / 1e6,
            avg * 8.0 / 1e9
        );
    }
    if t.qp_type != QpType::Rc {
        println!(
            " lost: {} messages (an unreliable transport drops whole messages; none arrived corrupt)",
            o.lost
        );
    }
    let who = match (t.op, t.qp_type) {
        (PerfOp::Send, _) | (PerfOp::Write, QpType::Uc) => "the server checked every message it received",
        (PerfOp::Write, _) => {
            "RDMA WRITE has no receive-side signal: the server checked that every target slot holds the last message written to it"
        }
        _ => "the client checked every READ response or atomic result",
    };
    println!(" checks: {who}");
    if a.counters {
        println!("{}", perf::counters_line(if client { "client" } else { "server" }, &o.stats));
        let dp: Vec<String> = o.datapath.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(" datapath: {}", dp.join(", "));
    }
    println!("verified: {} messages, {} errors", o.verified, o.errors);
    if o.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn main() -> ExitCode {
    engine::restore_default_sigpipe();
    let cli = Cli::parse();
    match cli.command {
        Command::Perf(args) => run_perf(*args),
        Command::Pingpong(a) => run_pingpong(&a),
        Command::Devinfo => {
            print!("{}", softrdma::devinfo::report());
            ExitCode::SUCCESS
        }
        Command::Decode { verify, json, uet_ip_proto, uet_crc, files } => {
            let uet = UetConfig { crc: uet_crc, ip_proto: uet_ip_proto };
            let opts = decode::Options { verify, json, uet };
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let stats = match decode::run(&files, &opts, &mut out) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("softrdma decode: {e:#}");
                    return ExitCode::from(2);
                }
            };
            let summary = stats.summary();
            if json {
                eprintln!("{summary}");
            } else {
                println!("{summary}");
            }
            if verify && stats.bad() > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
        }
        Command::Gen { kind, out } => {
            let frames: Vec<Vec<u8>> = match kind {
                GenKind::Roce => corpus::roce_corpus().into_iter().map(|g| g.bytes).collect(),
                GenKind::Uet => corpus::uet_corpus(),
            };
            match capture::write_file(&out, &frames) {
                Ok(()) => {
                    println!("wrote {} frames to {}", frames.len(), out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("softrdma gen: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
