//! Running the Debian tools as tests do: a process whose output is drained on threads, waited
//! for until a deadline, and described when it failed.

use super::netns::Netns;
use std::io::Read;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// What one side printed and how it ended.
pub struct Side {
    pub output: Output,
    pub timed_out: bool,
}

impl Side {
    pub fn ok(&self) -> bool {
        !self.timed_out && self.output.status.success()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn describe(&self, who: &str) -> String {
        let how = if self.timed_out {
            "killed after the timeout".to_string()
        } else {
            self.output.status.to_string()
        };
        format!(
            "--- {who}: {how}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
}

/// A running side whose pipes are drained on threads (so a chatty tool never blocks on a full
/// pipe while the other side is waited for).
pub struct Running {
    pub child: Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

impl Running {
    pub fn new(mut child: Child) -> Running {
        let out = drain(child.stdout.take().expect("piped"));
        let err = drain(child.stderr.take().expect("piped"));
        Running { child, out, err }
    }

    pub fn exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    /// Waits until `deadline`, then kills it; collects what it printed.
    pub fn finish(mut self, deadline: Instant) -> Side {
        let mut timed_out = false;
        while !self.exited() {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                timed_out = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = self.child.wait().expect("wait");
        let stdout = self.out.join().unwrap_or_default();
        let stderr = self.err.join().unwrap_or_default();
        Side { output: Output { status, stdout, stderr }, timed_out }
    }
}

/// Whether the process `pid` (in its own network namespace) listens on TCP `port`.
pub fn listens(pid: u32, port: u16) -> bool {
    let local = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let mut cols = l.split_whitespace();
                let (addr, state) = (cols.nth(1), cols.nth(1));
                addr.is_some_and(|a| a.ends_with(&local)) && state == Some("0A")
            })
        })
    })
}

/// Files a result under passed or failed (printing a failure's name at once).
pub fn record(
    passed: &mut Vec<String>,
    failed: &mut Vec<(String, String)>,
    name: String,
    r: Result<(), String>,
) {
    match r {
        Ok(()) => passed.push(name),
        Err(e) => {
            eprintln!("{name} FAILED");
            failed.push((name, e));
        }
    }
}

/// Fails the test `name` if any result filed by [`record`] failed: how many, their names, what
/// passed, and each failure's report.
pub fn assert_all_passed(name: &str, passed: &[String], failed: &[(String, String)]) {
    assert!(
        failed.is_empty(),
        "{name}: {} of {} failed ({}); passed: {}\n\n{}",
        failed.len(),
        failed.len() + passed.len(),
        failed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
        passed.join(", "),
        failed.iter().map(|(_, e)| e.as_str()).collect::<Vec<_>>().join("\n\n")
    );
}

/// `softrdma run --backend B --dev <veth of ns> -- ARGS` in namespace `ns` (`a` or `b`) of `n`.
pub fn run_in(n: &Netns, ns: char, backend: &str, args: &[String]) -> Running {
    let (name, dev) = if ns == 'a' { (&n.a, &n.va) } else { (&n.b, &n.vb) };
    let mut full = vec!["run", "--backend", backend, "--dev", dev, "--"];
    full.extend(args.iter().map(String::as_str));
    Running::new(n.spawn(name, &full))
}

/// Whether test `name` can run the Debian programs `tools` besides root and iproute2 (they have no
/// `--version` that succeeds, so they are looked for in PATH; `scripts/setup.sh` installs them);
/// under CI it must.
pub fn can_run_tools(name: &str, tools: &[&str], packages: &str) -> bool {
    if !super::netns::can_run(name, &[]) {
        return false;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = |t: &str| std::env::split_paths(&path).any(|d| d.join(t).is_file());
    if let Some(t) = tools.iter().find(|t| !found(t)) {
        let why = format!("{t} is missing (scripts/setup.sh installs {packages})");
        assert!(std::env::var_os("CI").is_none(), "{name} cannot run under CI: {why}");
        eprintln!("{name}: skipped: {why}");
        return false;
    }
    true
}
