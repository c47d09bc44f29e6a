//! `softrdma run` as a user runs it (no root): its argument checks, the environment it hands the
//! program (LD_PRELOAD first, the SOFTRDMA_* contract), and that it becomes the program (same PID,
//! exit status and signals pass straight through, 126/127 as a shell). The preloaded library is
//! any shared object here (a copy of libm, named by SOFTRDMA_LIB): the real one, and programs
//! using it, are tested by netns_verbs.rs.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `softrdma run ARGS` with `lib` as SOFTRDMA_LIB (or none) and `preload` as LD_PRELOAD (or none).
fn run(args: &[&str], lib: Option<&Path>, preload: Option<&Path>) -> Output {
    command(args, lib, preload).output().unwrap()
}

fn command(args: &[&str], lib: Option<&Path>, preload: Option<&Path>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrdma"));
    c.arg("run").args(args);
    let vars = [
        "SOFTRDMA_LIB",
        "LD_PRELOAD",
        "SOFTRDMA_BACKEND",
        "SOFTRDMA_DEV",
        "SOFTRDMA_LOCAL",
        "SOFTRDMA_UDP_PORT",
    ];
    for var in vars {
        c.env_remove(var);
    }
    if let Some(lib) = lib {
        c.env("SOFTRDMA_LIB", lib);
    }
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    c
}

/// This system's libm (beside the libc this test runs on), a shared object any program can preload.
fn libm() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libc.so.6"))
        .expect("this test runs on glibc (libc.so.6 in /proc/self/maps)");
    let libm = Path::new(libc).with_file_name("libm.so.6");
    assert!(libm.is_file(), "no {}", libm.display());
    libm
}

/// A scratch directory with two copies of libm: `lib.so` (the "library") and `other.so`.
fn libs(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = common::scratch_dir(tag).canonicalize().unwrap();
    let (lib, other) = (dir.join("lib.so"), dir.join("other.so"));
    std::fs::copy(libm(), &lib).unwrap();
    std::fs::copy(libm(), &other).unwrap();
    (dir, lib, other)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let (dir, lib, _) = libs("run-args");
    let cases: [(&[&str], &str); 6] = [
        (&["--dev", "lo"], "softrdma run: no PROGRAM to run: softrdma run [OPTIONS] -- PROGRAM [ARGS...]"),
        (&["--dev", "lo", "--"], "no PROGRAM to run"),
        (
            &["--dev", "nosuch0", "--", "true"],
            "softrdma run: no interface nosuch0 (interfaces with IPv4 addresses: ",
        ),
        (
            &["--dev", "lo", "--local", "198.51.100.254", "--", "true"],
            "softrdma run: --local 198.51.100.254 is not an IPv4 address of lo (it has 127.0.0.1)",
        ),
        (
            &["--local", "198.51.100.254", "--", "true"],
            "softrdma run: --local 198.51.100.254 is not an IPv4 address of any interface",
        ),
        (
            &["--backend", "afxdp", "--local", "127.0.0.1", "--", "true"],
            "softrdma run: --backend afxdp needs --dev IFACE",
        ),
    ];
    for (args, message) in cases {
        let o = run(args, Some(&lib), None);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{args:?}: expected {message:?} in:\n{}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // clap's own checks: a backend that does not exist, an address that is not IPv4.
    for args in [&["--backend", "sim", "--", "true"][..], &["--local", "::1", "--", "true"]] {
        let o = run(args, Some(&lib), None);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_missing_library_says_how_to_build_it() {
    let o = run(&["--dev", "lo", "--", "true"], Some(Path::new("/nonexistent/libsoftrdma_ibverbs.so")), None);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("SOFTRDMA_LIB=/nonexistent/libsoftrdma_ibverbs.so is not a file")
            && e.contains("cargo build --release -p softrdma-ibverbs"),
        "{e}"
    );
}

/// The contract's `NAME=value` lines of `env`'s output, sorted.
fn env_of(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "{}", stderr(o));
    let names = ["LD_PRELOAD", "SOFTRDMA_BACKEND", "SOFTRDMA_DEV", "SOFTRDMA_LOCAL", "SOFTRDMA_UDP_PORT"];
    let mut vars: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.split_once('=').is_some_and(|(k, _)| names.contains(&k)))
        .map(str::to_string)
        .collect();
    vars.sort();
    vars
}

#[test]
fn the_program_gets_the_library_first_in_ld_preload_and_the_device_in_its_environment() {
    let (dir, lib, other) = libs("run-env");
    let (lib_s, other_s) = (lib.to_str().unwrap(), other.to_str().unwrap());
    let o = run(&["--dev", "lo", "--", "env"], Some(&lib), None);
    assert_eq!(
        env_of(&o),
        [
            format!("LD_PRELOAD={lib_s}"),
            "SOFTRDMA_BACKEND=udp".into(),
            "SOFTRDMA_DEV=lo".into(),
            "SOFTRDMA_LOCAL=127.0.0.1".into(),
            "SOFTRDMA_UDP_PORT=4791".into(),
        ]
    );
    // --local alone names the interface; what LD_PRELOAD held stays, after the library.
    let o = run(&["--local", "127.0.0.1", "--udp-port", "5000", "env"], Some(&lib), Some(&other));
    assert_eq!(
        env_of(&o),
        [
            format!("LD_PRELOAD={lib_s}:{other_s}"),
            "SOFTRDMA_BACKEND=udp".into(),
            "SOFTRDMA_DEV=lo".into(),
            "SOFTRDMA_LOCAL=127.0.0.1".into(),
            "SOFTRDMA_UDP_PORT=5000".into(),
        ]
    );
    // The program's own options are its own, dashes and all.
    let o =
        run(&["--dev", "lo", "--", "sh", "-c", "echo \"$@\"", "sh", "--dev", "-x", "1"], Some(&lib), None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "--dev -x 1\n");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn softrdma_run_becomes_the_program() {
    let (dir, lib, _) = libs("run-exec");
    let run_sh = |script: &str| run(&["--dev", "lo", "--", "sh", "-c", script], Some(&lib), None);
    assert_eq!(run_sh("exit 7").status.code(), Some(7));
    assert_eq!(run_sh("exit 0").status.code(), Some(0));
    // A signal ends it as it ends the program: nothing in between catches it.
    let o = run_sh("kill -TERM $$");
    assert_eq!(o.status.signal(), Some(libc::SIGTERM), "{:?} {}", o.status, stderr(&o));
    // Same process: the PID softrdma was started with is the program's.
    let child = command(&["--dev", "lo", "--", "sh", "-c", "echo $$"], Some(&lib), None)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), pid.to_string());
    // A shell's statuses when the program cannot run.
    let o = run(&["--dev", "lo", "--", "softrdma-no-such-program"], Some(&lib), None);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(stderr(&o).contains("softrdma-no-such-program: command not found"), "{}", stderr(&o));
    let not_executable = dir.join("script");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let o = run(&["--dev", "lo", "--", not_executable.to_str().unwrap()], Some(&lib), None);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    assert!(stderr(&o).contains("ermission denied"), "{}", stderr(&o));
    std::fs::remove_dir_all(dir).unwrap();
}
