//! Issue 32, acceptance 4: the libfabric path against the native one over the same veth (two
//! namespaces, MTU 9000, kernel UDP), in one run: `fi_pingpong -p softrdma -e rdm` (Debian's
//! `libfabric-bin`, through `libsoftrdma-fi.so` under `softrdma run`) next to
//! `softrdma perf send --transport rud --mode lat`, for 64-byte and 1 MiB messages.
//!
//! What is compared: the time one message takes. `fi_pingpong` prints `usec/xfer`, half a round
//! trip of two messages; `perf send --mode lat` prints post-to-completion of one message, its
//! delivery and the PDS ACK back: for 64 bytes that is a round trip, so the libfabric figure
//! compared is `2 x usec/xfer`; for 1 MiB the message dominates both, and `usec/xfer` is compared
//! with `t_typical`. Bandwidth is size over that time. `SOFTRDMA_BENCH_ROUNDS` rounds (default 3),
//! each running both sides; the ratios (libfabric over native, lower is better) are taken within a
//! round and their median printed. Needs root, iproute2 and `fi_pingpong`; says why and stops
//! otherwise. Results go to stdout and `target/bench/libfabric.json`.
//!
//! `cargo build --release -p softrdma && cargo bench -p benches --bench libfabric`
//!
//! Measured on the development VM (UDP, two runs of 5 rounds, medians): 64 B 0.86x and 1.00x (about
//! 21 against 22 us), 1 MiB 1.12x and 0.97x (about 1.9 ms both; the machine's speed drifts by tens of
//! percent between runs).

use benches::netns::{Netns, in_ns, row};
use serde_json::json;
use std::process::Command;
use std::time::Duration;

/// The native run: `perf send --transport rud --mode lat` of `size` bytes, `iters` times; the
/// client's t_typical in microseconds.
fn native(n: &Netns, softrdma: &str, size: usize, iters: u32) -> Option<f64> {
    let common = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["perf", "send", "--transport", "rud", "--mode", "lat", "--backend", "udp"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--size".into(), size.to_string(), "--iters".into(), iters.to_string()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let sargs = common(&["--server", "--local", &n.addr_b]);
    let server = in_ns(&n.b, softrdma, &sargs.iter().map(String::as_str).collect::<Vec<_>>()).spawn().ok()?;
    std::thread::sleep(Duration::from_millis(300));
    let cargs = common(&["--connect", &n.addr_b, "--local", &n.addr_a]);
    let client =
        in_ns(&n.a, softrdma, &cargs.iter().map(String::as_str).collect::<Vec<_>>()).output().ok()?;
    let _ = server.wait_with_output();
    let out = String::from_utf8_lossy(&client.stdout);
    // bytes iters t_min t_max t_typical ...
    row(&out, "t_typical").get(4).copied()
}

/// `fi_pingpong -e rdm -S size -I iters` under `softrdma run`; the client's usec/xfer.
fn libfabric(n: &Netns, softrdma: &str, size: usize, iters: u32) -> Option<f64> {
    let (s, i) = (size.to_string(), iters.to_string());
    let pp = |dev: &str, peer: Option<&str>| -> Vec<String> {
        let mut v: Vec<String> = ["run", "--dev", dev, "--", "env", "SOFTRDMA_JOB_ID=7", "fi_pingpong"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["-p", "softrdma", "-e", "rdm", "-S", &s, "-I", &i].iter().map(|x| x.to_string()));
        v.extend(peer.map(str::to_string));
        v
    };
    let sargs = pp(&n.vb, None);
    let server = in_ns(&n.b, softrdma, &sargs.iter().map(String::as_str).collect::<Vec<_>>()).spawn().ok()?;
    std::thread::sleep(Duration::from_millis(500));
    let cargs = pp(&n.va, Some(&n.addr_b));
    let client =
        in_ns(&n.a, softrdma, &cargs.iter().map(String::as_str).collect::<Vec<_>>()).output().ok()?;
    let _ = server.wait_with_output();
    let out = String::from_utf8_lossy(&client.stdout);
    // bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    out.lines().nth(1).and_then(|l| l.split_whitespace().nth(6)).and_then(|x| x.parse().ok())
}

/// The median of `v` ([`benches::summarize`]); NaN for none.
fn median(v: &[f64]) -> f64 {
    benches::summarize(v).map_or(f64::NAN, |s| s.p50)
}

fn main() {
    if !rustix::process::geteuid().is_root() {
        println!("libfabric: skipped: needs root (network namespaces, veth)");
        return;
    }
    if !Command::new("sh").args(["-c", "command -v fi_pingpong"]).output().is_ok_and(|o| o.status.success()) {
        println!("libfabric: skipped: fi_pingpong is missing (scripts/setup.sh installs libfabric-bin)");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ok = Command::new("cargo").args(["build", "--release", "-p", "softrdma"]).current_dir(&root).status();
    assert!(ok.is_ok_and(|s| s.success()), "cargo build --release -p softrdma");
    let softrdma = root.join("target/release/softrdma").to_str().unwrap().to_string();
    let n = match Netns::new("fab", "10.93.0") {
        Ok(n) => n,
        Err(e) => {
            println!("libfabric: skipped: {e}");
            return;
        }
    };
    let rounds: usize = std::env::var("SOFTRDMA_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    // (size, iterations, how many one-way messages the native figure is)
    let cases: [(usize, u32, f64); 2] = [(64, 5000, 2.0), (1 << 20, 200, 1.0)];
    let mut results = Vec::new();
    for (size, iters, ways) in cases {
        let (mut fi, mut nat, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for round in 1..=rounds.max(1) {
            let f = libfabric(&n, &softrdma, size, iters).map(|x| x * ways);
            let s = native(&n, &softrdma, size, iters);
            if let (Some(f), Some(s)) = (f, s) {
                println!(
                    "  round {round}: {size} B: fi_pingpong {f:.2} us, perf send --transport rud {s:.2} us ({:.2}x)",
                    f / s
                );
                fi.push(f);
                nat.push(s);
                ratio.push(f / s);
            } else {
                println!("  round {round}: {size} B: a run failed (fi_pingpong {f:?}, perf {s:?})");
            }
        }
        let (f, s, r) = (median(&fi), median(&nat), median(&ratio));
        let mbps = |us: f64| size as f64 / us;
        println!(
            "libfabric {size} B over UDP (veth): fi_pingpong -e rdm {f:.2} us ({:.1} MB/s), perf send --transport rud {s:.2} us ({:.1} MB/s): {r:.2}x (median of {} rounds; target <= 1.2x)",
            mbps(f),
            mbps(s),
            ratio.len()
        );
        results
            .push(json!({"size": size, "fi_pingpong_us": f, "perf_rud_us": s, "ratio": r, "rounds": ratio}));
    }
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("libfabric.json"),
        serde_json::to_string_pretty(&json!({"transport": "udp", "results": results})).unwrap_or_default(),
    );
    println!("  recorded in target/bench/libfabric.json");
}
