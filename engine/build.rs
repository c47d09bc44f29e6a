//! Records whether this build is profile-guided (`scripts/pgo.sh` passes `-Cprofile-use`), so that
//! `softrdma perf` can say which build its numbers come from.

fn main() {
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let pgo = flags.split('\x1f').any(|f| f.starts_with("-Cprofile-use") || f.starts_with("-C profile-use"));
    println!("cargo::rustc-env=SOFTRDMA_PGO={}", if pgo { "1" } else { "0" });
}
