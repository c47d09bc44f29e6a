//! `softrdma perf --perftest`: one side against perftest's stock tools.

use std::process::ExitCode;

use engine::verbs::Mtu;
use softrdma::perf::{self, AtomicOp, Mode, PerfOp};

use super::args::{AtomicArg, PerfArgs, PerfTransportArg};
use super::remote::{real_backend, write_capture};

/// `perf --perftest`: one side against perftest's stock tools.
pub(crate) fn run_perftest(a: &PerfArgs, op: PerfOp, mode: Mode) -> ExitCode {
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
    let Some((backend, xdp)) = real_backend(a) else { return ExitCode::from(2) };
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
        traffic_class: a.tclass << 2,
        net: perf::remote::Net {
            backend,
            xdp,
            udp_port: a.udp_port,
            rx_icrc: a.rx_icrc(),
            tx_faults: a.tx_faults(),
            seed: a.seed,
            capture: a.capture_file(),
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
        if let Err(code) = write_capture(path, out.captured.as_ref()) {
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
