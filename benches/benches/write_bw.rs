//! Issue 4, acceptance 4: `softrdma perf write --size 65536 --mtu 4096` against the physical-limit
//! baseline (headers + copy + ICRC, then ICRC check + copy, in a plain loop on the same thread),
//! interleaved runs, median and best window of each, and the ratio. Also the baseline at shifted
//! destination alignments (the memcpy cliff of performance.md). Results go to stdout and to
//! `target/bench/write_bw.json`.
//!
//! `cargo bench -p benches --bench write_bw` (ROUNDS=n to change the number of rounds).

use benches::summarize;
use softrdma::perf::{Bench, baseline};

const SIZE: usize = 65536;
const ITERS: u64 = 5000;
/// Destination shifts: 64 puts `(dst - src) mod 4096` at 10, inside the 1..=31 window where glibc's
/// `rep movsb` is 25-50x slower (performance.md); 0 and 128 are outside it.
const SHIFTS: [usize; 3] = [0, 64, 128];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // cargo bench passes --bench; a plain `cargo test` of this target passes nothing and runs once.
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let cfg = benches::perf_write(SIZE, 1, ITERS);
    let (mut engine_wall, mut engine_only, mut base) = (Vec::new(), Vec::new(), Vec::new());
    let mut misaligned = Vec::new();
    for _ in 0..rounds {
        let row = Bench::new(&cfg, SIZE)?.run_bw()?;
        if row.errors != 0 || row.verified != ITERS {
            return Err(format!("engine run failed its checks: {row:?}").into());
        }
        engine_wall.push(row.average());
        engine_only.push(row.engine_rate());
        let b = baseline::run(SIZE, 4096, ITERS, 0);
        if !b.intact {
            return Err("baseline copy is not intact".into());
        }
        base.push(b.bytes_per_sec());
        for shift in SHIFTS {
            misaligned.push((shift, baseline::run(SIZE, 4096, ITERS / 5, shift).bytes_per_sec()));
        }
    }
    let gb = |x: f64| x / 1e9;
    let (w, e, b) =
        (summarize(&engine_wall).unwrap(), summarize(&engine_only).unwrap(), summarize(&base).unwrap());
    println!("write_bw: {SIZE}-byte RDMA WRITEs, MTU 4096, one thread, {rounds} interleaved rounds");
    println!(
        "  engine (wall clock, data checks included): p50 {:.2} GB/s, best {:.2} GB/s",
        gb(w.p50),
        gb(w.best)
    );
    println!(
        "  engine (data checks excluded):             p50 {:.2} GB/s, best {:.2} GB/s",
        gb(e.p50),
        gb(e.best)
    );
    println!(
        "  baseline TX+RX plain loop:                 p50 {:.2} GB/s, best {:.2} GB/s",
        gb(b.p50),
        gb(b.best)
    );
    println!("  ratio engine/baseline: p50 {:.3} (with checks {:.3})", e.p50 / b.p50, w.p50 / b.p50);
    let mut shifted = Vec::new();
    for shift in SHIFTS {
        let rates: Vec<f64> = misaligned.iter().filter(|m| m.0 == shift).map(|m| m.1).collect();
        let s = summarize(&rates).unwrap();
        // MIDDLE payloads sit 54 bytes into a page-aligned frame.
        let d = (shift + 4096 - 54) % 4096;
        println!(
            "  baseline, destination shifted {shift:>3} bytes ((dst - src) mod 4096 = {d:>4}): p50 {:.2} GB/s",
            gb(s.p50)
        );
        shifted.push(serde_json::json!({"shift": shift, "p50_bytes_per_sec": s.p50}));
    }
    let json = serde_json::json!({
        "size": SIZE, "mtu": 4096, "iters": ITERS, "rounds": rounds,
        "engine_wall": {"p50": w.p50, "best": w.best},
        "engine_excluding_checks": {"p50": e.p50, "best": e.best},
        "baseline": {"p50": b.p50, "best": b.best},
        "ratio_p50": e.p50 / b.p50,
        "ratio_p50_with_checks": w.p50 / b.p50,
        "baseline_shifted": shifted,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("write_bw.json"), serde_json::to_string_pretty(&json)?)?;
    println!("  recorded in target/bench/write_bw.json");
    Ok(())
}
