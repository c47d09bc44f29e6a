//! `softrdma perf` with one side per process over kernel UDP or AF_XDP: which side this process is,
//! its datapath, the RoCE run and its report, and writing what it captured.

use std::process::ExitCode;

use engine::verbs::QpType;
use softrdma::perf::{self, Mode, PerfOp};

use super::args::PerfArgs;
use super::output::{self, RunRecord};
use engine::datapath::link::{Backend, XdpQueue};

/// Which side this process is on a real datapath, with its link: `Ok((None, link))` for a server,
/// `Ok((Some(host), link))` for a client. `udp_port` is the protocol's port (4791 or 4793).
pub(crate) fn remote_side(
    a: &PerfArgs,
    udp_port: u16,
) -> Result<(Option<String>, perf::remote::Link), ExitCode> {
    let Some((backend, xdp)) = real_backend(a) else { return Err(ExitCode::from(2)) };
    if u64::from(a.qps) > perf::hello::MAX_QPS {
        eprintln!(
            "softrdma perf: a two-process run carries at most {} QPs in its exchange (--qps {}); more run on the simulated backend",
            perf::hello::MAX_QPS,
            a.qps
        );
        return Err(ExitCode::from(2));
    }
    let link = |local| perf::remote::Link {
        backend,
        xdp: xdp.clone(),
        local,
        udp_port,
        tcp_port: a.tcp_port,
        rx_icrc: a.rx_icrc(),
        tx_faults: a.tx_faults(),
        seed: a.seed,
        capture: a.capture_file(),
        wait: a.idle(),
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
            let Some(local) = a.local.or_else(|| towards.and_then(|t| softrdma::oob::route_source(t).ok()))
            else {
                eprintln!("softrdma perf: cannot tell the local address towards {host}: give --local IP");
                return Err(ExitCode::from(2));
            };
            Ok((Some(host.clone()), link(local)))
        }
    }
}

/// The real datapath `a` asks for, with its AF_XDP queue (printing why not, if it cannot be had).
pub(crate) fn real_backend(a: &PerfArgs) -> Option<(Backend, Option<XdpQueue>)> {
    use engine::datapath::afxdp::XdpMode;
    match (a.backend(), &a.dev) {
        (Backend::AfXdp, Some(dev)) => Some((
            Backend::AfXdp,
            Some(XdpQueue {
                dev: dev.clone(),
                queue: a.queue,
                mode: if a.xdp_driver { XdpMode::Driver } else { XdpMode::Generic },
                multi_buffer: !a.xdp_single_buffer,
            }),
        )),
        (Backend::AfXdp, None) => {
            eprintln!("softrdma perf: --backend afxdp needs --dev IFACE");
            None
        }
        (Backend::Udp, _) => Some((Backend::Udp, None)),
        (Backend::Sim, _) => {
            eprintln!("softrdma perf: this mode needs a real datapath (--backend udp or afxdp)");
            None
        }
    }
}

/// Reports on the capture file `--capture` named, which the run wrote as frames passed (and
/// completed when it ended).
pub(crate) fn write_capture(
    path: &std::path::Path,
    written: Option<&Result<u64, String>>,
) -> Result<(), ExitCode> {
    match written.cloned().unwrap_or(Ok(0)) {
        Ok(frames) => {
            println!(" wrote {frames} frames to {}", path.display());
            Ok(())
        }
        Err(e) => {
            eprintln!("softrdma perf: writing {}: {e}", path.display());
            Err(ExitCode::from(2))
        }
    }
}

/// One side of a two-process run over the UDP backend.
pub(crate) fn run_remote(a: &PerfArgs, test: perf::remote::Test) -> ExitCode {
    if a.all_sizes {
        eprintln!("softrdma perf: --all-sizes runs on the simulated backend only");
        return ExitCode::from(2);
    }
    let (host, link) = match remote_side(a, a.udp_port) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = match host {
        None => perf::threads::serve(&link).map(|(t, o)| (t, o, false)),
        Some(host) => perf::threads::run_client(&host, &link, &test).map(|o| (test.clone(), o, true)),
    };
    let (t, shards, client): (perf::remote::Test, Vec<perf::remote::Outcome>, bool) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("softrdma perf: {e}");
            return ExitCode::from(2);
        }
    };
    let o = perf::threads::merged(&shards);
    if let Some(path) = &a.capture {
        if let Err(code) = write_capture(path, o.captured.as_ref()) {
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
        if a.backend() == Backend::AfXdp { "AF_XDP" } else { "kernel UDP" },
        if client { "client" } else { "server" }
    );
    println!(
        " Number of qps: {}   MTU: {}   size: {}   iterations: {}{}\n Connected by: {}\n Build: {}",
        t.qps,
        t.mtu.bytes(),
        t.size,
        t.iters,
        match (t.threads, &link.xdp) {
            (1, _) => String::new(),
            (n, None) => {
                format!(
                    "   engine threads: {n}, each with its own QPs and UDP port ({} + thread)",
                    link.udp_port
                )
            }
            (n, Some(XdpQueue { dev, queue, .. })) => {
                format!(
                    "   engine threads: {n}, each with its own QPs and AF_XDP queue of {dev} ({queue} + thread)"
                )
            }
        },
        if t.cm { "the connection manager (REQ/REP/RTU)" } else { "the exchange's QP numbers and PSNs" },
        perf::build_kind()
    );
    println!("{}", perf::LINE);
    let mut record = RunRecord::default();
    let side = if client { "client" } else { "server" };
    let names: Vec<String> = match shards.len() {
        1 => vec![side.to_string()],
        _ => (0..shards.len()).map(|i| format!("{side} thread {i}")).collect(),
    };
    let named: Vec<(&str, &engine::verbs::Stats)> =
        names.iter().map(String::as_str).zip(shards.iter().map(|o| &o.stats)).collect();
    let counters = output::counters(&named);
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
            baseline: None,
        };
        println!("{}", perf::lat_line(&row));
        record.lat(&row, counters);
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
        let mut row = perf::BwRow::measured(
            t.size,
            t.iters * t.qps as u64,
            o.wall,
            o.wall,
            o.verified,
            o.errors,
            o.lost,
        );
        row.iters = t.iters;
        record.bw_measured(&row, counters);
    } else {
        record.counters_only(counters);
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
        for ((name, stats), o) in named.iter().zip(&shards) {
            println!("{}", perf::counters_line(name, stats));
            let dp: Vec<String> = o.datapath.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!(" datapath: {}", dp.join(", "));
        }
    }
    let mut params =
        output::params(a, a.op_name(), a.transport_name(), if t.mode == Mode::Bw { "bw" } else { "lat" });
    params["role"] = side.into();
    params["size"] = t.size.into();
    params["iters"] = t.iters.into();
    params["qps"] = t.qps.into();
    params["threads"] = t.threads.into();
    params["mtu"] = t.mtu.bytes().into();
    params["connected_by"] = (if t.cm { "cm" } else { "exchange" }).into();
    params["datapath_counters"] =
        o.datapath.iter().map(|(k, v)| ((*k).to_string(), serde_json::json!(v))).collect();
    let title = format!(
        "perf {} {}, {}, {} QP(s), MTU {}, over {}",
        a.op_name(),
        if t.mode == Mode::Bw { "bandwidth" } else { "latency" },
        a.transport_name(),
        t.qps,
        t.mtu.bytes(),
        if a.backend() == Backend::AfXdp { "AF_XDP" } else { "kernel UDP" },
    );
    if let Err(e) = record.write(a, &title, params, (o.verified, o.errors, o.lost)) {
        eprintln!("softrdma perf: {e}");
        return ExitCode::from(2);
    }
    println!("verified: {} messages, {} errors", o.verified, o.errors);
    if o.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
