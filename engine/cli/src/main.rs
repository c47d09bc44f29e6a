//! `softrdma`, the command-line tool: parses the command line and runs the subcommand - `perf`
//! (bandwidth and latency runs, every byte checked, over the simulated network, kernel UDP or
//! AF_XDP, or against perftest's tools), `pingpong` (against rdma-core's), `devinfo`, `run`, `decode`
//! and `gen`. The work is done by the `softrdma` library and the `engine` crate; `cli/` holds the
//! options and each subcommand's run.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use softrdma::{capture, corpus, decode};
use wire::uet::UetConfig;

use cli::args::{PerfArgs, PingpongArgs};
use cli::perf::run_perf;
use cli::pingpong::run_pingpong;

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
    /// Measure bandwidth or latency perftest style, checking every delivered byte
    ///
    /// RoCE (RC, UC, UD) or UET (RUD, ROD, RUDI, UUD), both ends in this process on the simulated network (the
    /// default), or one side per process over kernel UDP or AF_XDP (--backend, --server/--connect),
    /// or against perftest's tools (--perftest).
    Perf(Box<PerfArgs>),
    /// List the backends, their devices, ports, MTUs, GIDs and limits.
    Devinfo,
    /// Ping-pong compatible with rdma-core's ibv_rc_pingpong, ibv_uc_pingpong and ibv_ud_pingpong
    /// (either side can be the stock tool), over kernel UDP or AF_XDP.
    Pingpong(PingpongArgs),
    /// Send hostile datagrams at a RoCEv2 or UET receiver (garbage, spoofed SYNs, messages that
    /// never finish), to check that it refuses them, counts them and keeps its memory bounded.
    Flood(cli::flood::FloodArgs),
    /// Live counters of running softrdma processes (all, or PID): per device and per QP, as
    /// `rdma statistic` shows a NIC's, and per UET node and PDC
    ///
    /// Every process running devices or UET nodes (perf, in-process or one side per process) publishes its
    /// counters every half second in the stat directory (SOFTRDMA_STAT_DIR, default
    /// /tmp/softrdma-stat).
    Stat {
        /// Only this process.
        pid: Option<u32>,
        /// The counters as JSON (one array of processes).
        #[arg(long)]
        json: bool,
    },
    /// Run an unmodified libibverbs program (perftest, rdma-core's tools, your own) over softrdma
    ///
    /// Preloads libsoftrdma_ibverbs.so, describes the device (softrdma_IFACE) in the environment
    /// and executes PROGRAM in place of softrdma.
    Run(cli::run::RunArgs),
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

/// Logs to stderr as `SOFTRDMA_LOG` asks (tracing's env-filter syntax: `debug`,
/// `roce=debug,pds=info`...); nothing, and no cost beyond a disabled callsite, without it.
fn init_log() -> Result<(), String> {
    let Ok(filter) = std::env::var("SOFTRDMA_LOG") else { return Ok(()) };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .map_err(|e| format!("SOFTRDMA_LOG={filter:?}: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init()
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    engine::restore_default_sigpipe();
    if let Err(e) = init_log() {
        eprintln!("softrdma: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Perf(args) => run_perf(*args),
        Command::Pingpong(a) => run_pingpong(&a),
        Command::Flood(a) => cli::flood::run_flood(&a),
        Command::Run(a) => cli::run::run_program(a),
        Command::Stat { pid, json } => match softrdma::stat::read(pid) {
            Ok(procs) if procs.is_empty() => {
                let which = pid.map_or("no softrdma process".to_string(), |p| format!("process {p}"));
                eprintln!("softrdma stat: {which} publishes counters in {}", softrdma::stat::dir().display());
                ExitCode::FAILURE
            }
            Ok(procs) => {
                if json {
                    println!("{}", serde_json::Value::Array(procs));
                } else {
                    print!("{}", softrdma::stat::render(&procs));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("softrdma stat: {e}");
                ExitCode::from(2)
            }
        },
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
