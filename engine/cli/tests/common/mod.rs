//! Helpers shared by the integration tests of the `softrdma` tool.
#![allow(dead_code, unreachable_pub)]

pub mod netns;
pub mod proc;

use std::path::{Path, PathBuf};

/// `../shared` beside the project root, where the reference captures live (never copied in).
pub fn shared() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    assert!(
        p.join("captures").is_dir(),
        "the reference material is expected at {} (a checkout of shared/ beside the project)",
        p.display()
    );
    p
}

/// Every file under `dir` with the given extension, sorted.
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Runs the `softrdma` binary built for these tests.
pub fn softrdma(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_softrdma")).args(args).output().unwrap()
}

/// A fresh scratch directory for one test (removed by the test when it passes).
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("softrdma-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The number right after `key` in a counters line of `text` (`key` ends where the number starts).
pub fn count(text: &str, key: &str) -> u64 {
    text.split(key)
        .nth(1)
        .and_then(|t| t.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
}
