//! Issue 33, acceptance 3: with logging off (no `SOFTRDMA_LOG`), `softrdma perf write` is as fast
//! as a build with every tracing call compiled out (`--features no-logging`, tracing's static max
//! level OFF). Both binaries are built here, the same way, into `target/logbench`; rounds
//! alternate them (which goes first alternating too, as this machine's speed drifts) and the
//! median of the rounds' ratios (logging off / compiled out) must be at least 0.98. A third
//! column runs the default build with `SOFTRDMA_LOG=info`, for reference.
//!
//! `cargo bench -p benches --bench logging` (`SOFTRDMA_BENCH_ROUNDS`, default 9). Results go to
//! stdout and `target/bench/logging.json`. The first build takes minutes (a fresh target
//! directory, so neither binary is profile-guided or otherwise different).
//!
//! Measured: median of 9 rounds' ratios 1.044x (4,519 against 4,484 MB/s), and 0.981x with
//! `SOFTRDMA_LOG=info`.

use benches::netns::row;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const ITERS: &str = "20000";

/// Builds `softrdma` with `features` into `target/logbench` and copies it to `name` there.
fn build(root: &Path, features: &[&str], name: &str) -> PathBuf {
    let dir = root.join("target/logbench");
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "--release", "-p", "softrdma", "--target-dir"]).arg(&dir).current_dir(root);
    if !features.is_empty() {
        c.args(["--features", &features.join(",")]);
    }
    // The profile the benchmark itself runs under must not leak into the builds.
    c.env_remove("RUSTFLAGS").env_remove("CARGO_ENCODED_RUSTFLAGS");
    let ok = c.status().expect("cargo build");
    assert!(ok.success(), "cargo build --release -p softrdma --features {features:?}");
    let to = dir.join(name);
    std::fs::copy(dir.join("release/softrdma"), &to).expect("copy the binary");
    to
}

/// One `perf write` run (the simulated network, 64 KiB messages): its average bandwidth, MB/s.
fn perf_write(bin: &Path, log: Option<&str>) -> f64 {
    let mut c = Command::new(bin);
    c.args(["perf", "write", "--no-baseline", "--iters", ITERS]).env_remove("SOFTRDMA_LOG");
    if let Some(filter) = log {
        c.env("SOFTRDMA_LOG", filter);
    }
    let o = c.output().expect("softrdma perf write");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("verified: 20000 messages, 0 errors"), "{out}");
    row(&out, "#bytes").get(3).copied().unwrap_or(f64::NAN)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("SOFTRDMA_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(9);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let off = build(&root, &["softrdma/no-logging"], "softrdma-no-logging");
    let on = build(&root, &[], "softrdma-logging");
    let (mut ratios, mut info_ratios) = (Vec::new(), Vec::new());
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (quiet, compiled_out) = if round % 2 == 0 {
            let q = perf_write(&on, None);
            (q, perf_write(&off, None))
        } else {
            let o = perf_write(&off, None);
            (perf_write(&on, None), o)
        };
        let info = perf_write(&on, Some("info"));
        println!(
            "  round {round}: logging off {quiet:.0} MB/s, compiled out {compiled_out:.0} MB/s ({:.3}x); \
             SOFTRDMA_LOG=info {info:.0} MB/s ({:.3}x)",
            quiet / compiled_out,
            info / compiled_out
        );
        ratios.push(quiet / compiled_out);
        info_ratios.push(info / compiled_out);
        a.push(quiet);
        b.push(compiled_out);
        c.push(info);
    }
    let (r, ri) = (median(&mut ratios), median(&mut info_ratios));
    let (ma, mb, mc) = (median(&mut a), median(&mut b), median(&mut c));
    println!(
        "logging: perf write --size 65536, logging off {ma:.0} MB/s vs tracing compiled out {mb:.0} MB/s (medians), \
         median of the rounds' ratios {r:.3}x: target >= 0.98 {}; with SOFTRDMA_LOG=info {mc:.0} MB/s, {ri:.3}x",
        if r >= 0.98 { "met" } else { "NOT met" }
    );
    let dir = root.join("target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let doc = json!({
        "rounds": rounds, "iters": ITERS,
        "mb_per_sec": {"logging_off": ma, "compiled_out": mb, "log_info": mc},
        "median_ratio": {"logging_off": r, "log_info": ri},
    });
    let _ = std::fs::write(dir.join("logging.json"), serde_json::to_string_pretty(&doc).unwrap());
}
