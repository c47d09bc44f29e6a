//! The `softrdma` command-line tool.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use engine::{capture, corpus, decode};
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
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
