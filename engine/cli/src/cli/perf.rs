//! `softrdma perf` over RoCE on the simulated network: the options checked, the runs made size by
//! size, the table printed; UET, perftest-peer and two-process runs are handed on.

use std::process::ExitCode;

use engine::datapath::link::Backend;

use engine::roce::dcqcn::DcqcnConfig;
use engine::verbs::{Mtu, QpType};
use softrdma::perf::{self, AtomicOp, Mode, PerfConfig, PerfOp};

use super::args::{AtomicArg, CcArg, ModeArg, OpArg, PerfArgs, PerfTransportArg};
use super::output::{self, RunRecord};
use super::perftest::run_perftest;
use super::remote::run_remote;
use super::uet::run_uet_perf;

pub(crate) fn run_perf(a: PerfArgs) -> ExitCode {
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
    let link_fits = if a.backend() != Backend::Sim && shaping {
        Err("--link-gbps, --ecn-kb and --trim shape the simulated links")
    } else if a.trim > 0 && uet.is_none() {
        Err("--trim is UET packet trimming (--transport rud or rod)")
    } else if a.trim > 0 && a.trim < 128 {
        Err("--trim keeps at least 128 bytes (Ethernet, IPv4, UDP, PDS and SES headers)")
    } else {
        Ok(())
    };
    let lat = matches!(a.mode, ModeArg::Lat);
    let outputs =
        output_conflict(&a, lat).or_else(|| threads_conflict(&a, lat, uet.is_some())).map_or(Ok(()), Err);
    if let Err(why) = cc_fits.and(link_fits).map_err(String::from).and(outputs) {
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
    if a.cm && qp_type == QpType::Ud {
        eprintln!("softrdma perf: --cm connects RC and UC QPs");
        return ExitCode::from(2);
    }
    if a.cm && a.udp_port != wire::ROCEV2_UDP_PORT {
        eprintln!("softrdma perf: --cm reaches the peer's QP1 on UDP port 4791: --udp-port does not apply");
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
    if a.backend() != Backend::Sim {
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
            traffic_class: a.tclass << 2,
            cm: a.cm,
            threads: a.threads as usize,
            shard: 0,
        };
        return run_remote(&a, test);
    }
    if a.cm {
        eprintln!(
            "softrdma perf: --cm connects two processes (--backend udp or afxdp, --server or --connect)"
        );
        return ExitCode::from(2);
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
    if a.snaplen != engine::datapath::capture::SNAPLEN {
        eprintln!(
            "softrdma perf: --snaplen cuts the frames of a real backend's --capture file; --pcap keeps whole frames"
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
        threads: a.threads as usize,
        mode,
        mtu: Mtu::from_bytes(a.mtu()).unwrap_or(Mtu::Mtu4096),
        link,
        seed: a.seed,
        tx_depth: a.tx_depth as usize,
        retries: a.retries,
        tap: a.pcap.is_some() || a.capture.is_some(),
        baseline: !a.no_baseline,
        dcqcn: (a.cc == CcArg::Dcqcn).then(|| DcqcnConfig::datacenter(a.cc_bps())),
        traffic_class: a.tclass << 2,
    };
    println!("{}", perf::header(&cfg));
    println!("{}", if mode == Mode::Bw { perf::BW_COLUMNS } else { perf::LAT_COLUMNS });
    let (mut verified, mut errors, mut lost, mut dups) = (0u64, 0u64, 0u64, 0u64);
    let mut tap = Vec::new();
    let mut record = RunRecord::default();
    for &size in &sizes {
        let run_cfg = PerfConfig {
            iters: if a.all_sizes { perf::sweep_iters(iters, size) } else { iters },
            ..cfg.clone()
        };
        if cfg.threads > 1 {
            match perf::threads::run_bw(&run_cfg, size) {
                Ok(r) => {
                    let names: Vec<String> = (0..2 * r.stats.len()).map(|i| format!("sim{i}")).collect();
                    let devices: Vec<_> = r.stats.iter().flat_map(|(sa, sb)| [sa, sb]).collect();
                    let named: Vec<_> =
                        names.iter().map(String::as_str).zip(devices.iter().copied()).collect();
                    println!("{}", perf::bw_line(&r.row));
                    if let Some(base) = perf::baseline_line(&r.row) {
                        println!("{base}");
                    }
                    if a.counters {
                        for (name, s) in &named {
                            println!("{}", perf::counters_line(name, s));
                        }
                    }
                    record.bw(&r.row, output::counters(&named));
                    (verified, errors, lost, dups) = (
                        verified + r.row.verified,
                        errors + r.row.errors,
                        lost + r.row.lost,
                        dups + r.row.duplicates,
                    );
                }
                Err(e) => {
                    eprintln!("softrdma perf: size {size}: {e}");
                    errors += 1;
                }
            }
            continue;
        }
        let result = perf::Bench::new(&run_cfg, size).and_then(|mut b| {
            let line = match mode {
                Mode::Bw => {
                    let r = b.run_bw()?;
                    let mut s = perf::bw_line(&r);
                    if let Some(base) = perf::baseline_line(&r) {
                        s = format!("{s}\n{base}");
                    }
                    dups += r.duplicates;
                    let (sa, sb) = b.stats();
                    record.bw(&r, output::counters(&[("sim0", &sa), ("sim1", &sb)]));
                    (s, r.verified, r.errors, r.lost)
                }
                Mode::Lat => {
                    let r = b.run_lat()?;
                    let (sa, sb) = b.stats();
                    record.lat(&r, output::counters(&[("sim0", &sa), ("sim1", &sb)]));
                    let mut s = perf::lat_line(&r);
                    if let Some(base) = perf::lat_baseline_line(&r) {
                        s = format!("{s}\n{base}");
                    }
                    (s, r.verified, r.errors, r.lost)
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
    let title = format!(
        "perf {} {}, {}, {} QP(s), MTU {}, simulated link ({:?}, loss {})",
        a.op_name(),
        if mode == Mode::Bw { "bandwidth" } else { "latency" },
        a.transport_name(),
        cfg.qps,
        cfg.mtu.bytes(),
        cfg.link.latency,
        cfg.link.loss
    );
    let mut params =
        output::params(&a, a.op_name(), a.transport_name(), if mode == Mode::Bw { "bw" } else { "lat" });
    params["sizes"] = serde_json::json!(sizes);
    params["threads"] = serde_json::json!(cfg.threads);
    params["link"] = serde_json::json!({
        "latency_ns": cfg.link.latency.as_nanos() as u64,
        "loss": cfg.link.loss,
        "reorder": cfg.link.reorder,
        "duplicate": cfg.link.duplicate,
        "corrupt": cfg.link.corrupt,
    });
    if let Err(e) = record.write(&a, &title, params, (verified, errors, lost)) {
        eprintln!("softrdma perf: {e}");
        return ExitCode::from(2);
    }
    println!("verified: {verified} messages, {errors} errors");
    if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// Why `--threads` does not apply to this run, if it does not.
fn threads_conflict(a: &PerfArgs, lat: bool, uet: bool) -> Option<String> {
    let why = if a.threads == 1 {
        return None;
    } else if uet {
        "--threads shards RoCE QPs (--transport rc, uc or ud)"
    } else if lat {
        "--threads applies to bandwidth runs (latency runs use one QP)"
    } else if a.threads > a.qps {
        "--threads N shards the QPs over N engine threads: give at least N QPs (--qps)"
    } else if a.server {
        "--threads is the client's: the server takes it from the client's hello"
    } else if a.backend() == Backend::AfXdp && !a.xdp_driver {
        softrdma::perf::threads::GENERIC_XDP
    } else if a.perftest || a.cm {
        "--threads runs softrdma's own exchange, one per thread (not --perftest or --cm)"
    } else if a.pcap.is_some() || a.capture.is_some() {
        "--pcap and --capture record one datapath; with --threads each thread has its own"
    } else if a.plot.is_some() {
        "--plot draws one thread's goodput over time; with --threads the rows are summed, not sampled"
    } else if a.link_gbps.is_some() {
        "--link-gbps reports one cable's queues; with --threads each thread has its own"
    } else {
        return None;
    };
    Some(why.into())
}

/// Why `--plot` cannot draw this run, if it cannot (checked before the run, not after it).
fn output_conflict(a: &PerfArgs, lat: bool) -> Option<String> {
    let path = a.plot.as_ref()?;
    if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
        return Some(format!("{}: --plot writes SVG (name the file *.svg)", path.display()));
    }
    if a.server {
        return Some("--plot draws what the client measures: give it to the client".into());
    }
    (lat && a.all_sizes)
        .then(|| "--plot draws one latency histogram: give one --size, not --all-sizes".into())
}
