//! `softrdma perf --transport rud|rod|rudi|uud`: UET on the simulated network with an RC run of the
//! same operation beside it, or one side per process over kernel UDP or AF_XDP.

use std::process::ExitCode;

use engine::datapath::link::Backend;

use engine::verbs::{Mtu, QpType};
use softrdma::perf::{self, AtomicOp, Mode, PerfConfig, PerfOp};

use super::args::{AtomicArg, CcArg, ModeArg, OpArg, PerfArgs, SesHeadersArg};
use super::output::{self, RunRecord};
use super::remote::{remote_side, write_capture};

/// `softrdma perf OP --transport rud|rod|rudi|uud`: UET on the simulated network, then RC with the
/// same operation, size, messages and link for comparison.
pub(crate) fn run_uet_perf(a: &PerfArgs, transport: ses::DeliveryMode) -> ExitCode {
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
        tclass: engine::uet::TrafficClass { data: a.tclass, control: a.ack_tclass.unwrap_or(a.tclass) },
        forms: match a.ses_headers {
            SesHeadersArg::Compact => ses::HeaderForms::Compact,
            SesHeadersArg::Standard => ses::HeaderForms::Standard,
        },
    };
    // A server takes the test from its client.
    if !a.server {
        if let Err(why) = cfg.check() {
            return refuse(why);
        }
    }
    if a.backend() != Backend::Sim {
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
    let mut record = RunRecord::default();
    let (line, verified, errors, lost) = match mode {
        Mode::Bw => bench.run_bw().map(|r| {
            record.bw(&r, serde_json::json!(bench.counters()));
            (perf::bw_line(&r), r.verified, r.errors, r.lost)
        }),
        Mode::Lat => bench.run_lat().map(|r| {
            record.lat(&r, serde_json::json!(bench.counters()));
            (perf::lat_line(&r), r.verified, r.errors, r.lost)
        }),
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
        threads: 1,
        mode,
        mtu: Mtu::from_bytes(a.mtu()).unwrap_or(Mtu::Mtu4096),
        link,
        seed: a.seed,
        tx_depth: a.tx_depth as usize,
        retries: a.retries,
        tap: false,
        baseline: false,
        dcqcn: None,
        traffic_class: a.tclass << 2,
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
    let title = format!(
        "perf {} {}, UET {}, {} B per packet, simulated link ({:?}, loss {})",
        a.op_name(),
        if mode == Mode::Bw { "bandwidth" } else { "latency" },
        name(transport),
        cfg.max_payload,
        link.latency,
        link.loss
    );
    let params =
        output::params(a, a.op_name(), a.transport_name(), if mode == Mode::Bw { "bw" } else { "lat" });
    if let Err(e) = record.write(a, &title, params, (verified, errors, lost)) {
        return refuse(&e);
    }
    println!("verified: {verified} messages, {errors} errors");
    if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// A UET run with one side per process over kernel UDP or AF_XDP (UDP port 4793).
pub(crate) fn run_uet_remote(a: &PerfArgs, cfg: softrdma::perf::uet::UetPerfConfig) -> ExitCode {
    use softrdma::perf::uet;
    if a.udp_port != wire::ROCEV2_UDP_PORT {
        eprintln!("softrdma perf: UET runs on UDP port 4793; --udp-port applies to RoCE runs");
        return ExitCode::from(2);
    }
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
    if let Some(path) = &a.capture {
        let written = o.capture.as_ref().map(softrdma::perf::remote::finish_capture);
        if let Err(code) = write_capture(path, written.as_ref()) {
            return code;
        }
    }
    let rule = perf::LINE;
    println!("{rule}");
    println!(
        "                    {:?} test, UET {} over {} ({})",
        cfg.op,
        format!("{:?}", cfg.transport).to_uppercase(),
        if a.backend() == Backend::AfXdp { "AF_XDP" } else { "kernel UDP" },
        if client { "client" } else { "server" }
    );
    println!(
        " size: {}   messages: {}   payload per packet: {}\n Build: {}\n{rule}",
        cfg.size,
        cfg.iters,
        cfg.max_payload,
        perf::build_kind()
    );
    let mut record = RunRecord::default();
    let counters = serde_json::json!([o.counters]);
    if let Some(r) = &o.bw {
        println!("{}\n{}", perf::BW_COLUMNS, perf::bw_line(r));
        record.bw(r, counters);
    } else if let Some(r) = &o.lat {
        println!("{}\n{}", perf::LAT_COLUMNS, perf::lat_line(r));
        record.lat(r, counters);
    } else {
        record.counters_only(counters);
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
    let mut params = output::params(a, a.op_name(), a.transport_name(), if cfg.lat { "lat" } else { "bw" });
    params["role"] = if client { "client" } else { "server" }.into();
    params["size"] = cfg.size.into();
    params["iters"] = cfg.iters.into();
    params["max_payload"] = cfg.max_payload.into();
    let title = format!(
        "perf {} {}, UET {}, {} B per packet, over {}",
        a.op_name(),
        if cfg.lat { "latency" } else { "bandwidth" },
        format!("{:?}", cfg.transport).to_uppercase(),
        cfg.max_payload,
        if a.backend() == Backend::AfXdp { "AF_XDP" } else { "kernel UDP" }
    );
    if let Err(e) = record.write(a, &title, params, (o.verified, o.errors, o.lost)) {
        eprintln!("softrdma perf: {e}");
        return ExitCode::from(2);
    }
    println!("verified: {} messages, {} errors", o.verified, o.errors);
    if o.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
