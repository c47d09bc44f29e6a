//! A C program written against libfabric-dev's headers (`tests/c/uet_fabric_check.c`), compiled
//! here with `cc` and run under `softrdma run` as two processes over kernel UDP on loopback
//! (issue 32): tagged sends with wildcard receives, a 1 MiB rendezvous send, RMA write and read,
//! fetch-add and compare-swap on the server's own memory, and a write from another JobID answered
//! with FI_EACCES (prov_errno BAD_JOB_ID) in `fi_cq_readerr`; every byte checked by the program.
//! Then an unreadable service file (missing, a directory) makes `fi_getinfo` find nothing, with
//! the reason on standard error. Needs `cc` and `libfabric-dev` (`scripts/setup.sh`): without them
//! the test says so and skips, except under CI (CI=true), where it fails.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Compiles the program into the test's scratch directory; `None` (skipped) without a compiler
/// or libfabric's headers.
fn compile(name: &str) -> Option<PathBuf> {
    let header = Path::new("/usr/include/rdma/fabric.h");
    let cc = Command::new("cc").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !header.is_file() || !cc.is_ok_and(|s| s.success()) {
        let why = "cc or libfabric's headers are missing (scripts/setup.sh installs gcc and libfabric-dev)";
        assert!(std::env::var_os("CI").is_none(), "{name} cannot run under CI: {why}");
        eprintln!("{name}: skipped: {why}");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/uet_fabric_check.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("uet_fabric_check");
    let r = Command::new("cc")
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-lfabric")
        .output()
        .unwrap();
    assert!(r.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&r.stderr));
    Some(out)
}

/// `softrdma run` (kernel UDP on `local`, no verbs library) of the program as `role`, with the
/// JobIDs `jobs` (the control plane's assignment) and `extra` environment.
fn command(prog: &Path, role: &str, local: &str, jobs: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_softrdma"));
    c.args(["run", "--backend", "udp", "--local", local, "--no-verbs", "--", "env"])
        .arg(format!("SOFTRDMA_JOB_ID={jobs}"))
        .args(extra)
        .arg(prog)
        .arg(role);
    c
}

fn spawn(prog: &Path, role: &str, local: &str, jobs: &str) -> Child {
    command(prog, role, local, jobs, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child's first line ("ADDR <hex>"), or what it said before it stopped.
fn address(c: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    line
}

/// Waits (at most 60 s) for `c` and gives its output.
fn finish(mut c: Child) -> Output {
    let end = Instant::now() + Duration::from_secs(60);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().unwrap()
}

fn describe(who: &str, o: &Output) -> String {
    format!(
        "{who}: {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_c_program_sends_tagged_and_large_messages_and_does_rma_and_atomics_on_its_own_memory() {
    let name = "a_c_program_sends_tagged_and_large_messages_and_does_rma_and_atomics_on_its_own_memory";
    let Some(prog) = compile(name) else { return };
    // The server's own JobID is 20, the client's 10; each also serves the other's.
    let mut server = spawn(&prog, "server", "127.0.92.2", "20,10");
    let mut client = spawn(&prog, "client", "127.0.92.1", "10,20");
    let (sa, ca) = (address(&mut server), address(&mut client));
    if sa.starts_with("ADDR ") && ca.starts_with("ADDR ") {
        server.stdin.as_mut().unwrap().write_all(ca.as_bytes()).unwrap();
        client.stdin.as_mut().unwrap().write_all(sa.as_bytes()).unwrap();
    }
    let (s, c) = (finish(server), finish(client));
    let report = format!("{}\n{}", describe("server", &s), describe("client", &c));
    assert!(s.status.success() && c.status.success(), "{report}");
    let (so, co) = (String::from_utf8_lossy(&s.stdout), String::from_utf8_lossy(&c.stdout));
    assert!(so.contains("server ok") && co.contains("client ok"), "{report}");
    assert!(co.contains("refused: Permission denied / SES return code 27 (BAD_JOB_ID)"), "{report}");
}

#[test]
fn an_unreadable_service_file_is_refused_at_getinfo_with_the_reason() {
    let name = "an_unreadable_service_file_is_refused_at_getinfo_with_the_reason";
    let Some(prog) = compile(name) else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("a-directory-not-a-service-file");
    std::fs::create_dir_all(&dir).unwrap();
    for (path, reason) in [
        ("/nonexistent/uet-services", "No such file or directory"),
        (dir.to_str().unwrap(), "Is a directory"),
    ] {
        let var = format!("UET_PROVIDER_SERVICE_PATH={path}");
        let o = command(&prog, "getinfo", "127.0.92.3", "10", &[&var]).output().unwrap();
        let report = describe("getinfo", &o);
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && out.contains("getinfo: -61 (No data available)"), "{report}");
        assert!(err.contains(&format!("configuration refused: service file {path}: {reason}")), "{report}");
    }
}
