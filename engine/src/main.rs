//! The `softrdma` command-line tool.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use engine::{capture, corpus, decode};

/// Userspace RoCEv2 and Ultra Ethernet Transport engine.
#[derive(Parser)]
#[command(name = "softrdma", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print one line per RoCEv2 frame of pcap/pcapng captures; non-RoCE frames are counted and skipped.
    Decode {
        /// Check every RoCEv2 frame's ICRC and checksums, and that its parsed form re-emits byte for
        /// byte; exit non-zero if any frame is bad.
        #[arg(long)]
        verify: bool,
        /// One JSON object per frame (JSON Lines) on stdout; the summary goes to stderr.
        #[arg(long)]
        json: bool,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { verify, json, files } => {
            let opts = decode::Options { verify, json };
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let stats = match decode::run(&files, &opts, &mut out) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("softrdma decode: {e:#}");
                    return ExitCode::from(2);
                }
            };
            let summary = format!(
                "roce frames: {} ok, {} bad ({} non-RoCE frames skipped)",
                stats.ok, stats.bad, stats.skipped
            );
            if json {
                eprintln!("{summary}");
            } else {
                println!("{summary}");
            }
            if verify && stats.bad > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
        }
        Command::Gen { kind, out } => {
            let frames: Vec<Vec<u8>> = match kind {
                GenKind::Roce => corpus::roce_corpus().into_iter().map(|g| g.bytes).collect(),
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
