//! Records whether this build is profile-guided (`scripts/pgo.sh` passes `-Cprofile-use`), so that
//! `softrdma perf` can say which build its numbers come from.

fn main() {
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    // `-Cprofile-use=P` is one flag; `-C profile-use=P` is two, the second `profile-use=P`.
    let pgo = flags.split('\x1f').any(|f| f.trim_start_matches("-C").starts_with("profile-use"));
    println!("cargo::rustc-env=SOFTRDMA_PGO={}", if pgo { "1" } else { "0" });
}
