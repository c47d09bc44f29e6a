//! Issue 6, acceptance 4: the real datapaths between two network namespaces joined by a veth pair
//! (MTU 9000), in one run: RC WRITE bandwidth and SEND latency (post to completion: one round trip,
//! p50/p99) over AF_XDP and over kernel UDP, next to a kernel UDP ping-pong baseline (busy-polling
//! non-blocking sockets) and a kernel packet-rate baseline (sendmmsg/recvmmsg, 64-byte datagrams,
//! batches of 32). Needs root and iproute2; prints why and stops otherwise. Results go to stdout and
//! `target/bench/datapaths.json`.
//!
//! This machine's speed drifts by more than the margins measured here, so the bench runs
//! `SOFTRDMA_BENCH_ROUNDS` rounds (default 3), each the kernel baselines followed by every
//! softrdma run; a ratio is taken within its round, and the medians over the rounds are printed.
//!
//! `cargo build --release -p softrdma && cargo bench -p benches --bench datapaths`
//!
//! Measured on the 2-core development VM, veth pair, medians of 3 alternating `perf` runs: batching
//! the UDP datapath's system calls (`sendmmsg`/`recvmmsg`, 32 datagrams per `sendmmsg`) took 64 KiB
//! WRITEs from 225 to 283 MB/s at path MTU 1024 and from 382 to 481 at 2048, and the 2-byte round trip
//! from 11.5 to 9.6 us; GSO sends then took the 2048 case from about 430 to 1,330-1,540 MB/s (a veth
//! takes a GSO send whole). In generic AF_XDP mode a single-buffer socket costs the kernel less per
//! frame than a multi-buffer one: 64-byte WRITEs 0.54 against 0.45 Mmsg/s, which is why path MTUs up to
//! 2048 use one.

use benches::netns::{Netns, in_ns, row};
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrIn, recvmmsg, sendmmsg};
use serde_json::json;
use std::io::IoSlice;
use std::io::IoSliceMut;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

const A: &str = "10.97.0.1";
const B: &str = "10.97.0.2";

/// Child role: echo UDP datagrams on `addr:7000`, busy-polling a non-blocking socket, for `secs`.
fn echo(addr: &str, secs: u64) {
    let s = UdpSocket::bind((addr, 7000)).expect("bind echo");
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 2048];
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if let Ok((n, from)) = s.recv_from(&mut b) {
            let _ = s.send_to(&b[..n], from);
        }
    }
}

/// Child role: `n` 64-byte ping-pongs to `peer:7000`, busy-polling; prints p50 and p99 RTT in ns.
fn ping(local: &str, peer: &str, n: usize) {
    let s = UdpSocket::bind((local, 0)).expect("bind ping");
    s.set_nonblocking(true).unwrap();
    let dst: SocketAddrV4 = format!("{peer}:7000").parse().unwrap();
    let mut rtts = Vec::with_capacity(n);
    let mut b = [0u8; 64];
    for _ in 0..n + 100 {
        let t0 = Instant::now();
        s.send_to(&[7u8; 64], dst).unwrap();
        loop {
            if s.recv_from(&mut b).is_ok() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(1) {
                break;
            }
        }
        rtts.push(t0.elapsed().as_nanos() as u64);
    }
    let mut r = rtts.split_off(100);
    r.sort();
    println!("{} {}", r[r.len() / 2], r[r.len() * 99 / 100]);
}

/// Child role: receive 64-byte datagrams on `addr:7001` with recvmmsg for `secs`; prints the count.
fn sink(addr: &str, secs: u64) {
    let s = UdpSocket::bind((addr, 7001)).expect("bind sink");
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut bufs = vec![[0u8; 64]; 32];
    let mut count = 0u64;
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let mut slices: Vec<[IoSliceMut; 1]> = bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
        let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
        if let Ok(r) = recvmmsg(s.as_raw_fd(), &mut hdrs, slices.iter_mut(), MsgFlags::empty(), None) {
            count += r.count() as u64;
        }
    }
    println!("{count}");
}

/// Child role: blast 64-byte datagrams to `peer:7001` with sendmmsg (batches of 32) for `secs`.
fn blast(local: &str, peer: &str, secs: u64) {
    let s = UdpSocket::bind((local, 0)).expect("bind blast");
    let dst = SockaddrIn::from(format!("{peer}:7001").parse::<SocketAddrV4>().unwrap());
    let payload = [9u8; 64];
    let slices: Vec<[IoSlice; 1]> = (0..32).map(|_| [IoSlice::new(&payload)]).collect();
    let addrs = vec![Some(dst); 32];
    let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let _ = sendmmsg(s.as_raw_fd(), &mut hdrs, slices.iter(), &addrs, [], MsgFlags::empty());
    }
}

/// Runs softrdma perf with a server in B and a client in A; returns the client's output.
fn perf(n: &Netns, softrdma: &str, backend: &str, args: &[&str]) -> String {
    let mut sa: Vec<&str> = args[..2].to_vec();
    sa.extend(["--backend", backend, "--server", "--local", B, "--dev", &n.vb]);
    let server = in_ns(&n.b, softrdma, &sa).spawn().expect("server");
    let mut ca = args.to_vec();
    ca.extend(["--backend", backend, "--connect", B, "--local", A, "--dev", &n.va]);
    let client = in_ns(&n.a, softrdma, &ca).output().expect("client");
    let _ = server.wait_with_output();
    String::from_utf8_lossy(&client.stdout).into_owned()
}

const BACKENDS: [&str; 2] = ["afxdp", "udp"];

/// One backend's numbers in one round.
struct Backend {
    backend: &'static str,
    write_64k_gbps: f64,
    lat_p50_us: f64,
    lat_p99_us: f64,
    rate_mpps: f64,
    verified: bool,
}

/// One round: the kernel baselines, then every backend, one after the other (so that a drift of
/// this machine's speed hits both sides of a ratio alike).
struct Round {
    udp_p50_us: f64,
    udp_p99_us: f64,
    kernel_pps: f64,
    softrdma: Vec<Backend>,
}

fn measure_round(n: &Netns, me: &str, softrdma: &str) -> Round {
    let echo_child = in_ns(&n.b, me, &["--child", "echo", B, "8"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let p = in_ns(&n.a, me, &["--child", "ping", A, B, "20000"]).output().unwrap();
    let _ = echo_child.wait_with_output();
    let pp: Vec<f64> =
        String::from_utf8_lossy(&p.stdout).split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let (udp_p50_us, udp_p99_us) =
        (pp.first().copied().unwrap_or(f64::NAN) / 1000.0, pp.get(1).copied().unwrap_or(f64::NAN) / 1000.0);
    let sink_child = in_ns(&n.b, me, &["--child", "sink", B, "3"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = in_ns(&n.a, me, &["--child", "blast", A, B, "2"]).output();
    let got = sink_child.wait_with_output().unwrap();
    let kernel_pps = String::from_utf8_lossy(&got.stdout).trim().parse::<f64>().unwrap_or(0.0) / 2.0;
    let softrdma = BACKENDS
        .iter()
        .map(|&backend| {
            let bw = perf(
                n,
                softrdma,
                backend,
                &["perf", "write", "--size", "65536", "--mtu", "2048", "--iters", "20000"],
            );
            let lat = perf(
                n,
                softrdma,
                backend,
                &["perf", "send", "--mode", "lat", "--size", "64", "--mtu", "2048", "--iters", "20000"],
            );
            let rate = perf(
                n,
                softrdma,
                backend,
                &["perf", "write", "--size", "64", "--mtu", "2048", "--iters", "200000"],
            );
            // bw row: bytes iters avg[MB/s] Mpps Gb/s ("-" peak is skipped); lat row: bytes iters min max typical avg p99 p99.9
            let (bw_row, lat_row, rate_row) = (row(&bw, "#bytes"), row(&lat, "t_min"), row(&rate, "#bytes"));
            let at = |r: &[f64], i: usize| r.get(i).copied().unwrap_or(f64::NAN);
            Backend {
                backend,
                write_64k_gbps: at(&bw_row, 4),
                lat_p50_us: at(&lat_row, 4),
                lat_p99_us: at(&lat_row, 6),
                rate_mpps: at(&rate_row, 3),
                verified: [&bw, &lat, &rate].iter().all(|o| o.contains(" 0 errors")),
            }
        })
        .collect();
    Round { udp_p50_us, udp_p99_us, kernel_pps, softrdma }
}

/// The median of `v` ([`benches::summarize`]); NaN for none.
fn median(v: &[f64]) -> f64 {
    benches::summarize(v).map_or(f64::NAN, |s| s.p50)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let a = |k: usize| args.get(i + k).map(String::as_str).unwrap_or_default();
        match a(1) {
            "echo" => echo(a(2), a(3).parse().unwrap_or(10)),
            "ping" => ping(a(2), a(3), a(4).parse().unwrap_or(10_000)),
            "sink" => sink(a(2), a(3).parse().unwrap_or(3)),
            "blast" => blast(a(2), a(3), a(4).parse().unwrap_or(2)),
            r => eprintln!("unknown child role {r}"),
        }
        return;
    }
    if !rustix::process::geteuid().is_root() {
        println!("datapaths: skipped: needs root (network namespaces, veth, AF_XDP)");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let softrdma = root.join("target/release/softrdma");
    if !softrdma.exists() {
        let ok =
            Command::new("cargo").args(["build", "--release", "-p", "softrdma"]).current_dir(&root).status();
        assert!(ok.is_ok_and(|s| s.success()), "cargo build --release -p softrdma");
    }
    let softrdma = softrdma.to_str().unwrap().to_string();
    let me = std::env::current_exe().unwrap().to_str().unwrap().to_string();
    let n = match Netns::new("bench", "10.97.0") {
        Ok(n) => n,
        Err(e) => {
            println!("datapaths: skipped: {e}");
            return;
        }
    };
    let rounds: usize = std::env::var("SOFTRDMA_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let mut all = Vec::new();
    for round in 1..=rounds.max(1) {
        let r = measure_round(&n, &me, &softrdma);
        let rates: Vec<String> = r
            .softrdma
            .iter()
            .map(|s| format!("{} {:.2}x", s.backend, s.rate_mpps * 1e6 / r.kernel_pps))
            .collect();
        println!(
            "  round {round}/{rounds}: kernel packet rate {:.3} Mpps; RC WRITE 64 B over {}",
            r.kernel_pps / 1e6,
            rates.join(", ")
        );
        all.push(r);
    }
    let med = |f: &dyn Fn(&Round) -> f64| median(&all.iter().map(f).collect::<Vec<_>>());
    let (udp_p50, udp_p99) = (med(&|r| r.udp_p50_us), med(&|r| r.udp_p99_us));
    let kernel_pps = med(&|r| r.kernel_pps);
    println!(
        "datapaths over a veth pair between two namespaces (MTU 9000, path MTU 2048), medians of {} interleaved rounds",
        all.len()
    );
    println!("  kernel UDP ping-pong (busy-poll, 64 B): RTT p50 {udp_p50:.2} us, p99 {udp_p99:.2} us");
    println!("  kernel packet rate (sendmmsg/recvmmsg, 64 B, batches of 32): {:.3} Mpps", kernel_pps / 1e6);
    let mut results = Vec::new();
    for (i, backend) in BACKENDS.iter().enumerate() {
        let m = |f: &dyn Fn(&Backend) -> f64| med(&|r| f(&r.softrdma[i]));
        let (gbps, lat_p50, lat_p99, mpps) =
            (m(&|b| b.write_64k_gbps), m(&|b| b.lat_p50_us), m(&|b| b.lat_p99_us), m(&|b| b.rate_mpps));
        // Each ratio is taken within its round (the kernel baseline right before), then the median.
        let lat_ratio = med(&|r| r.softrdma[i].lat_p50_us / r.udp_p50_us);
        let rate_ratio = med(&|r| r.softrdma[i].rate_mpps * 1e6 / r.kernel_pps);
        let verified = all.iter().all(|r| r.softrdma[i].verified);
        println!(
            "  softrdma {backend:<5}: RC WRITE 64 KiB {gbps:.2} Gb/s; SEND 64 B post-to-completion p50 {lat_p50:.2} us ({lat_ratio:.2}x the UDP ping-pong), p99 {lat_p99:.2} us; RC WRITE 64 B {mpps:.3} Mpps ({rate_ratio:.2}x the kernel packet rate); data verified: {verified}"
        );
        results.push(json!({
            "backend": backend,
            "write_64k_gbps": gbps,
            "send_lat_p50_us": lat_p50,
            "send_lat_p99_us": lat_p99,
            "send_lat_p50_vs_udp_pingpong": lat_ratio,
            "write_64b_mpps": mpps,
            "write_64b_vs_kernel_pps": rate_ratio,
            "verified": verified,
            "rounds": all.iter().map(|r| {
                let b = &r.softrdma[i];
                json!({"kernel_pps": r.kernel_pps, "udp_pingpong_p50_us": r.udp_p50_us, "write_64k_gbps": b.write_64k_gbps,
                       "send_lat_p50_us": b.lat_p50_us, "write_64b_mpps": b.rate_mpps, "verified": b.verified})
            }).collect::<Vec<_>>(),
        }));
    }
    let json = json!({"rounds": all.len(), "udp_pingpong_p50_us": udp_p50, "udp_pingpong_p99_us": udp_p99, "kernel_pps": kernel_pps, "softrdma": results});
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ =
        std::fs::write(dir.join("datapaths.json"), serde_json::to_string_pretty(&json).unwrap_or_default());
    println!("  recorded in target/bench/datapaths.json");
}
