//! Issue 6, acceptance 4: the real datapaths between two network namespaces joined by a veth pair
//! (MTU 9000), in one run: RC WRITE bandwidth and SEND latency (post to completion: one round trip,
//! p50/p99) over AF_XDP and over kernel UDP, next to a kernel UDP ping-pong baseline (busy-polling
//! non-blocking sockets) and a kernel packet-rate baseline (sendmmsg/recvmmsg, 64-byte datagrams,
//! batches of 32). Needs root and iproute2; prints why and stops otherwise. Results go to stdout and
//! `target/bench/datapaths.json`.
//!
//! `cargo build --release -p softrdma && cargo bench -p benches --bench datapaths`

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
    // Kernel baselines.
    let echo_child = in_ns(&n.b, &me, &["--child", "echo", B, "8"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let p = in_ns(&n.a, &me, &["--child", "ping", A, B, "20000"]).output().unwrap();
    let _ = echo_child.wait_with_output();
    let pp: Vec<f64> =
        String::from_utf8_lossy(&p.stdout).split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let (udp_p50, udp_p99) =
        (pp.first().copied().unwrap_or(f64::NAN) / 1000.0, pp.get(1).copied().unwrap_or(f64::NAN) / 1000.0);
    let sink_child = in_ns(&n.b, &me, &["--child", "sink", B, "3"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = in_ns(&n.a, &me, &["--child", "blast", A, B, "2"]).output();
    let got = sink_child.wait_with_output().unwrap();
    let kernel_pps = String::from_utf8_lossy(&got.stdout).trim().parse::<f64>().unwrap_or(0.0) / 2.0;

    let mut results = Vec::new();
    for backend in ["afxdp", "udp"] {
        let bw = perf(
            &n,
            &softrdma,
            backend,
            &["perf", "write", "--size", "65536", "--mtu", "2048", "--iters", "20000"],
        );
        let bw_row = row(&bw, "#bytes");
        let lat = perf(
            &n,
            &softrdma,
            backend,
            &["perf", "send", "--mode", "lat", "--size", "64", "--mtu", "2048", "--iters", "20000"],
        );
        let lat_row = row(&lat, "t_min");
        let rate = perf(
            &n,
            &softrdma,
            backend,
            &["perf", "write", "--size", "64", "--mtu", "2048", "--iters", "200000"],
        );
        let rate_row = row(&rate, "#bytes");
        // bw row: bytes iters avg[MB/s] Mpps Gb/s ("-" peak is skipped); lat row: bytes iters min max typical avg p99 p99.9
        results.push(json!({
            "backend": backend,
            "write_64k_gbps": bw_row.get(4).copied(),
            "send_lat_p50_us": lat_row.get(4).copied(),
            "send_lat_p99_us": lat_row.get(6).copied(),
            "write_64b_mpps": rate_row.get(3).copied(),
            "verified": bw.contains(" 0 errors") && lat.contains(" 0 errors") && rate.contains(" 0 errors"),
        }));
    }
    println!("datapaths over a veth pair between two namespaces (MTU 9000, path MTU 2048)");
    println!("  kernel UDP ping-pong (busy-poll, 64 B): RTT p50 {udp_p50:.2} us, p99 {udp_p99:.2} us");
    println!("  kernel packet rate (sendmmsg/recvmmsg, 64 B, batches of 32): {:.3} Mpps", kernel_pps / 1e6);
    for r in &results {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "  softrdma {:<5}: RC WRITE 64 KiB {:.2} Gb/s; SEND 64 B post-to-completion p50 {:.2} us ({:.2}x the UDP ping-pong), p99 {:.2} us; RC WRITE 64 B {:.3} Mpps ({:.2}x the kernel packet rate); data verified: {}",
            r["backend"].as_str().unwrap_or(""),
            f("write_64k_gbps"),
            f("send_lat_p50_us"),
            f("send_lat_p50_us") / udp_p50,
            f("send_lat_p99_us"),
            f("write_64b_mpps"),
            f("write_64b_mpps") * 1e6 / kernel_pps,
            r["verified"]
        );
    }
    let json = json!({"udp_pingpong_p50_us": udp_p50, "udp_pingpong_p99_us": udp_p99, "kernel_pps": kernel_pps, "softrdma": results});
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ =
        std::fs::write(dir.join("datapaths.json"), serde_json::to_string_pretty(&json).unwrap_or_default());
    println!("  recorded in target/bench/datapaths.json");
}
