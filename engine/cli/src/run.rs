//! `softrdma run`: runs an unmodified libibverbs program over softrdma. It picks the interface and
//! address the program's device uses, finds `libsoftrdma_ibverbs.so` (package
//! `softrdma-ibverbs`), puts it first in `LD_PRELOAD` so the program's `ibv_*` references bind to
//! it, describes the device in the environment the library reads, and replaces itself with the
//! program (`exec`: same PID, the program's exit status and signals are the command's).
//!
//! The environment the library reads:
//! - `SOFTRDMA_BACKEND`: `udp` (kernel UDP sockets) or `afxdp`;
//! - `SOFTRDMA_DEV`: the interface (the device is `softrdma_<iface>`);
//! - `SOFTRDMA_LOCAL`: the IPv4 address the device uses (its RoCEv2 GID, index 1);
//! - `SOFTRDMA_UDP_PORT`: the UDP port it receives RoCEv2 on;
//! - `SOFTRDMA_JOB_ID`: the job's UET JobID, for the libfabric provider. `softrdma run` plays the
//!   UEC control plane's launcher: it assigns one when none is given (`--job-id N`, else the
//!   user's: [`user_job_seed`]) and prints it in its first line (`softrdma run: JobID N`), unless the
//!   environment holds one already (a launcher started under `softrdma run`, such as mpirun's
//!   remote agent, passes its job's JobID on to what it starts), which is kept.

use std::ffi::{OsStr, OsString};
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::devinfo::HostPort;

/// File name of the preloaded library.
pub const LIB_NAME: &str = "libsoftrdma_ibverbs.so";

/// Environment variable naming the library to preload instead of the one beside `softrdma`.
pub const LIB_ENV: &str = "SOFTRDMA_LIB";

/// Exit status of `softrdma run` when it fails before running the program (as `env`'s).
pub const EXIT_FAILED: u8 = 125;
/// Exit status when the program exists but cannot be executed (as a shell's).
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
/// Exit status when the program is not found (as a shell's).
pub const EXIT_NOT_FOUND: u8 = 127;

/// The datapath the library's device runs on: [`Backend::Udp`] or [`Backend::AfXdp`] (queue 0 of
/// the interface), named in `SOFTRDMA_BACKEND` by [`Backend::as_str`].
pub use engine::datapath::link::Backend;

/// What the command line asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The datapath.
    pub backend: Backend,
    /// The interface (`--dev`).
    pub dev: Option<String>,
    /// The local IPv4 address (`--local`).
    pub local: Option<Ipv4Addr>,
    /// The UDP port the device receives RoCEv2 on.
    pub udp_port: u16,
    /// The JobID to set in `SOFTRDMA_JOB_ID` ([`job_id`]), `None` to keep the environment's.
    pub job_id: Option<u32>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// The variable the libfabric provider reads its JobIDs from.
pub const JOB_ID_ENV: &str = "SOFTRDMA_JOB_ID";
/// The largest JobID (24 bits; 16777215 is UET's fallback JobID, never assigned).
pub const MAX_JOB_ID: u32 = 0xFF_FFFE;

/// The JobID of the run: `--job-id` if given (checked: 24 bits, not the fallback 16777215); else
/// none if `inherited` (the environment's `SOFTRDMA_JOB_ID`, non-empty) is kept; else one made
/// from `fresh()` ([`user_job_seed`]), 1 to [`MAX_JOB_ID`].
pub fn job_id(
    flag: Option<u32>,
    inherited: bool,
    fresh: impl FnOnce() -> u32,
) -> Result<Option<u32>, String> {
    match flag {
        Some(j) if j > MAX_JOB_ID => {
            Err(format!("--job-id {j}: a JobID is 24 bits, and 16777215 is UET's fallback JobID"))
        }
        Some(j) => Ok(Some(j)),
        None if inherited => Ok(None),
        None => Ok(Some(fresh() % MAX_JOB_ID + 1)),
    }
}

/// What the JobID `softrdma run` assigns is made from: the user's ID, so that every program a user
/// starts under `softrdma run`, on any host, is in one job and reaches the others (two sides of a
/// `fi_pingpong` started by hand), while other users' jobs are apart; `--job-id` separates jobs.
pub fn user_job_seed() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Everything needed to execute the program: checked, nothing left to infer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program (looked up in `PATH` unless it contains a `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables to set in its environment (`LD_PRELOAD` and the `SOFTRDMA_*` ones).
    pub env: Vec<(String, OsString)>,
}

/// The interface and address the device uses: `--dev` and `--local` checked against the host's
/// interfaces (`ports`, from [`crate::devinfo::host_ports`]), the missing one inferred from the
/// other. `exists` says whether an interface of that name exists at all (one without an IPv4
/// address is not among `ports`). Any address of 127.0.0.0/8 is the loopback interface's (the
/// kernel takes the whole block there), so two processes on one host can each have their own.
pub fn endpoint(
    ports: &[HostPort],
    exists: impl Fn(&str) -> bool,
    backend: Backend,
    dev: Option<&str>,
    local: Option<Ipv4Addr>,
) -> Result<(String, Ipv4Addr), String> {
    let addresses_of =
        |name: &str| ports.iter().filter(|p| p.name == name).map(|p| p.ip).collect::<Vec<Ipv4Addr>>();
    let list = |ips: &[Ipv4Addr]| ips.iter().map(|ip| ip.to_string()).collect::<Vec<_>>().join(", ");
    let all = || {
        let names: Vec<String> = ports.iter().map(|p| format!("{} ({})", p.name, p.ip)).collect();
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    };
    match (dev, local) {
        (Some(dev), local) => {
            let ips = addresses_of(dev);
            if ips.is_empty() {
                return Err(if exists(dev) {
                    format!("interface {dev} has no IPv4 address (the device's RoCEv2 GID is one)")
                } else {
                    format!("no interface {dev} (interfaces with IPv4 addresses: {})", all())
                });
            }
            match local {
                None => Ok((dev.to_string(), ips[0])),
                Some(ip) if ips.contains(&ip) || (ip.is_loopback() && ips[0].is_loopback()) => {
                    Ok((dev.to_string(), ip))
                }
                Some(ip) => {
                    Err(format!("--local {ip} is not an IPv4 address of {dev} (it has {})", list(&ips)))
                }
            }
        }
        (None, _) if backend == Backend::AfXdp => {
            Err("--backend afxdp needs --dev IFACE (the interface whose queue 0 it binds)".to_string())
        }
        (None, Some(ip)) => {
            match ports.iter().find(|p| p.ip == ip || (ip.is_loopback() && p.ip.is_loopback())) {
                Some(p) => Ok((p.name.clone(), ip)),
                None => Err(format!(
                    "--local {ip} is not an IPv4 address of any interface (they have: {})",
                    all()
                )),
            }
        }
        (None, None) => {
            // One per interface (its first address), if up and not loopback.
            let mut candidates: Vec<&HostPort> = Vec::new();
            for p in ports.iter().filter(|p| p.up && !p.ip.is_loopback()) {
                if !candidates.iter().any(|c| c.name == p.name) {
                    candidates.push(p);
                }
            }
            match candidates.as_slice() {
                [one] => Ok((one.name.clone(), one.ip)),
                [] => ports
                    .iter()
                    .find(|p| p.ip.is_loopback())
                    .map(|p| (p.name.clone(), p.ip))
                    .ok_or_else(|| "no interface with an IPv4 address: give --dev IFACE".to_string()),
                several => Err(format!(
                    "several interfaces could carry the device: give --dev IFACE or --local IP ({})",
                    several.iter().map(|p| format!("{} ({})", p.name, p.ip)).collect::<Vec<_>>().join(", ")
                )),
            }
        }
    }
}

/// How to build the library, for the messages that say it is missing.
fn build_hint() -> String {
    format!(
        "build it with `cargo build --release -p softrdma-ibverbs`, or name it with {LIB_ENV}=/path/to/{LIB_NAME}"
    )
}

/// The library to preload: `from_env` (the value of `SOFTRDMA_LIB`) if set, else the newer of
/// `<exe_dir>/libsoftrdma_ibverbs.so` and `<exe_dir>/deps/libsoftrdma_ibverbs.so` (where cargo
/// leaves it beside the `softrdma` binary; a plain `cargo build` refreshes only `deps/`, so an
/// older copy beside the binary, from a `cargo build -p softrdma-ibverbs`, must not win). The path is made absolute (the program may change its
/// directory before anything reads `LD_PRELOAD` again, and the dynamic loader takes it as is).
pub fn find_library(from_env: Option<&OsStr>, exe_dir: &Path) -> Result<PathBuf, String> {
    let found = match from_env {
        Some(p) if !p.is_empty() => {
            let path = Path::new(p);
            if !path.is_file() {
                return Err(format!("{LIB_ENV}={} is not a file; {}", path.display(), build_hint()));
            }
            path.to_path_buf()
        }
        _ => {
            let candidates = [exe_dir.join(LIB_NAME), exe_dir.join("deps").join(LIB_NAME)];
            let modified = |c: &PathBuf| std::fs::metadata(c).and_then(|m| m.modified()).ok();
            let newest =
                candidates.iter().filter(|c| c.is_file()).fold(None::<&PathBuf>, |best, c| match best {
                    Some(b) if modified(b) >= modified(c) => Some(b),
                    _ => Some(c),
                });
            match newest {
                Some(c) => c.clone(),
                None => {
                    return Err(format!(
                        "{LIB_NAME} is not beside softrdma ({} or {}); {}",
                        candidates[0].display(),
                        candidates[1].display(),
                        build_hint()
                    ));
                }
            }
        }
    };
    let abs = found.canonicalize().map_err(|e| format!("{}: {e}", found.display()))?;
    // The dynamic loader splits LD_PRELOAD at spaces and colons.
    if abs.as_os_str().as_bytes().iter().any(|b| matches!(b, b' ' | b':' | b'\t' | b'\n')) {
        return Err(format!(
            "{} cannot go in LD_PRELOAD (it splits at spaces and colons): use a path without them",
            abs.display()
        ));
    }
    Ok(abs)
}

/// `LD_PRELOAD` with `lib` first, followed by what `existing` held (without `lib` itself again).
pub fn ld_preload(lib: &Path, existing: Option<&OsStr>) -> OsString {
    let mut out = lib.as_os_str().to_owned();
    if let Some(existing) = existing {
        for entry in existing.as_bytes().split(|b| matches!(b, b' ' | b':')).filter(|e| !e.is_empty()) {
            if entry != lib.as_os_str().as_bytes() {
                out.push(":");
                out.push(OsStr::from_bytes(entry));
            }
        }
    }
    out
}

/// Checks the request against the host and builds the plan: `ports` are the host's interfaces,
/// `exists` whether an interface name exists, `library` finds the library (once the arguments are
/// known to be good; [`find_library`]) and `preload` is the current `LD_PRELOAD`.
pub fn plan(
    req: &Request,
    ports: &[HostPort],
    exists: impl Fn(&str) -> bool,
    library: impl FnOnce() -> Result<PathBuf, String>,
    preload: Option<&OsStr>,
) -> Result<Plan, String> {
    let Some((program, args)) = req.command.split_first() else {
        return Err("no PROGRAM to run: softrdma run [OPTIONS] -- PROGRAM [ARGS...]".to_string());
    };
    let (dev, local) = endpoint(ports, exists, req.backend, req.dev.as_deref(), req.local)?;
    let lib = library()?;
    let env = vec![
        ("LD_PRELOAD".to_string(), ld_preload(&lib, preload)),
        ("SOFTRDMA_BACKEND".to_string(), req.backend.as_str().into()),
        ("SOFTRDMA_DEV".to_string(), dev.into()),
        ("SOFTRDMA_LOCAL".to_string(), local.to_string().into()),
        ("SOFTRDMA_UDP_PORT".to_string(), req.udp_port.to_string().into()),
    ];
    let mut env = env;
    if let Some(j) = req.job_id {
        env.push((JOB_ID_ENV.to_string(), j.to_string().into()));
    }
    Ok(Plan { program: program.clone(), args: args.to_vec(), env })
}

/// Whether an interface named `name` exists in this network namespace.
pub fn interface_exists(name: &str) -> bool {
    nix::net::if_::if_nametoindex(name).is_ok()
}

/// Replaces this process with the program. Returns only if that fails: the message and the exit
/// status a shell gives (127 not found, 126 found but not executable).
pub fn exec(plan: &Plan) -> (String, u8) {
    let mut cmd = std::process::Command::new(&plan.program);
    cmd.args(&plan.args);
    for (k, v) in &plan.env {
        cmd.env(k, v);
    }
    let e = cmd.exec();
    let name = Path::new(&plan.program).display().to_string();
    match e.kind() {
        std::io::ErrorKind::NotFound => (format!("{name}: command not found"), EXIT_NOT_FOUND),
        _ => (format!("{name}: {e}"), EXIT_CANNOT_EXECUTE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, ip: [u8; 4], up: bool) -> HostPort {
        HostPort { name: name.into(), ip: ip.into(), mtu: 9000, up }
    }

    fn host() -> Vec<HostPort> {
        vec![
            port("lo", [127, 0, 0, 1], true),
            port("veth0", [10, 1, 0, 1], true),
            port("veth0", [10, 2, 0, 1], true),
        ]
    }

    fn exists(name: &str) -> bool {
        ["lo", "veth0", "dummy0"].contains(&name)
    }

    #[test]
    fn the_missing_one_of_dev_and_local_is_inferred() {
        let h = host();
        let ep = |dev, local| endpoint(&h, exists, Backend::Udp, dev, local);
        assert_eq!(ep(Some("veth0"), None), Ok(("veth0".into(), [10, 1, 0, 1].into())));
        assert_eq!(ep(Some("veth0"), Some([10, 2, 0, 1].into())), Ok(("veth0".into(), [10, 2, 0, 1].into())));
        assert_eq!(ep(None, Some([10, 2, 0, 1].into())), Ok(("veth0".into(), [10, 2, 0, 1].into())));
        assert_eq!(ep(None, Some([127, 0, 0, 1].into())), Ok(("lo".into(), [127, 0, 0, 1].into())));
        // Neither: the one interface besides loopback that is up.
        assert_eq!(ep(None, None), Ok(("veth0".into(), [10, 1, 0, 1].into())));
    }

    #[test]
    fn neither_dev_nor_local_needs_one_candidate() {
        let only_lo = [port("lo", [127, 0, 0, 1], true), port("veth1", [10, 3, 0, 1], false)];
        assert_eq!(
            endpoint(&only_lo, exists, Backend::Udp, None, None),
            Ok(("lo".into(), [127, 0, 0, 1].into()))
        );
        // The whole of 127.0.0.0/8 is the loopback interface's.
        let any_loopback = Some([127, 9, 8, 7].into());
        assert_eq!(
            endpoint(&only_lo, exists, Backend::Udp, None, any_loopback),
            Ok(("lo".into(), [127, 9, 8, 7].into()))
        );
        assert_eq!(
            endpoint(&only_lo, exists, Backend::Udp, Some("lo"), any_loopback),
            Ok(("lo".into(), [127, 9, 8, 7].into()))
        );
        let two = [port("veth0", [10, 1, 0, 1], true), port("veth1", [10, 3, 0, 1], true)];
        let e = endpoint(&two, exists, Backend::Udp, None, None).unwrap_err();
        assert!(e.contains("give --dev") && e.contains("veth0 (10.1.0.1)") && e.contains("veth1"), "{e}");
        assert!(endpoint(&[], exists, Backend::Udp, None, None).unwrap_err().contains("no interface"));
    }

    #[test]
    fn bad_dev_and_local_are_refused_with_what_there_is() {
        let h = host();
        let ep = |backend, dev, local| endpoint(&h, exists, backend, dev, local).unwrap_err();
        let e = ep(Backend::Udp, Some("nosuch0"), None);
        assert!(e.contains("no interface nosuch0") && e.contains("veth0 (10.1.0.1)"), "{e}");
        let e = ep(Backend::Udp, Some("dummy0"), None);
        assert!(e.contains("dummy0 has no IPv4 address"), "{e}");
        let e = ep(Backend::Udp, Some("veth0"), Some([127, 0, 0, 1].into()));
        assert!(
            e.contains("--local 127.0.0.1 is not an IPv4 address of veth0 (it has 10.1.0.1, 10.2.0.1)"),
            "{e}"
        );
        let e = ep(Backend::Udp, None, Some([192, 0, 2, 1].into()));
        assert!(e.contains("--local 192.0.2.1 is not an IPv4 address of any interface"), "{e}");
        let e = ep(Backend::AfXdp, None, Some([10, 1, 0, 1].into()));
        assert!(e.contains("--backend afxdp needs --dev"), "{e}");
        assert_eq!(
            endpoint(&h, exists, Backend::AfXdp, Some("veth0"), None),
            Ok(("veth0".into(), [10, 1, 0, 1].into()))
        );
    }

    #[test]
    fn the_library_goes_first_in_ld_preload_once() {
        let lib = Path::new("/opt/x/libsoftrdma_ibverbs.so");
        assert_eq!(ld_preload(lib, None), "/opt/x/libsoftrdma_ibverbs.so");
        assert_eq!(ld_preload(lib, Some(OsStr::new(""))), "/opt/x/libsoftrdma_ibverbs.so");
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/a.so /opt/x/libsoftrdma_ibverbs.so:/b.so"))),
            "/opt/x/libsoftrdma_ibverbs.so:/a.so:/b.so"
        );
    }

    #[test]
    fn the_library_is_found_from_the_environment_or_beside_the_binary() {
        let dir = std::env::temp_dir().join(format!("softrdma-run-unit-{}", std::process::id()));
        let deps = dir.join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        let e = find_library(None, &dir).unwrap_err();
        assert!(e.contains("cargo build --release -p softrdma-ibverbs") && e.contains("deps/"), "{e}");
        std::fs::write(deps.join(LIB_NAME), b"").unwrap();
        assert_eq!(find_library(None, &dir).unwrap(), deps.join(LIB_NAME).canonicalize().unwrap());
        std::fs::write(dir.join(LIB_NAME), b"").unwrap();
        let age = |p: &Path, secs: u64| {
            let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
            std::fs::File::options().write(true).open(p).unwrap().set_modified(t).unwrap();
        };
        // The newer of the two wins, whichever place it is in.
        age(&deps.join(LIB_NAME), 60);
        assert_eq!(
            find_library(Some(OsStr::new("")), &dir).unwrap(),
            dir.join(LIB_NAME).canonicalize().unwrap()
        );
        age(&dir.join(LIB_NAME), 120);
        assert_eq!(find_library(None, &dir).unwrap(), deps.join(LIB_NAME).canonicalize().unwrap());
        let other = dir.join("other.so");
        std::fs::write(&other, b"").unwrap();
        assert_eq!(find_library(Some(other.as_os_str()), &dir).unwrap(), other.canonicalize().unwrap());
        let e = find_library(Some(OsStr::new("/nonexistent/lib.so")), &dir).unwrap_err();
        assert!(
            e.starts_with("SOFTRDMA_LIB=/nonexistent/lib.so is not a file") && e.contains("cargo build"),
            "{e}"
        );
        let spaced = dir.join("a b.so");
        std::fs::write(&spaced, b"").unwrap();
        assert!(find_library(Some(spaced.as_os_str()), &dir).unwrap_err().contains("LD_PRELOAD"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_job_id_is_given_kept_or_assigned() {
        assert_eq!(job_id(Some(7), true, || unreachable!()), Ok(Some(7)), "--job-id wins");
        assert_eq!(job_id(Some(MAX_JOB_ID), false, || 0), Ok(Some(MAX_JOB_ID)));
        assert!(job_id(Some(16_777_215), false, || 0).unwrap_err().contains("fallback"));
        assert_eq!(job_id(None, true, || unreachable!()), Ok(None), "the environment's is kept");
        assert_eq!(job_id(None, false, || 41), Ok(Some(42)));
        // Whatever the seed, a JobID of 1 to MAX_JOB_ID.
        for r in [0, MAX_JOB_ID - 1, MAX_JOB_ID, u32::MAX] {
            let j = job_id(None, false, || r).unwrap().unwrap();
            assert!((1..=MAX_JOB_ID).contains(&j), "{r} -> {j}");
        }
    }

    #[test]
    fn the_plan_sets_the_contract() {
        let req = Request {
            backend: Backend::AfXdp,
            dev: Some("veth0".into()),
            local: None,
            udp_port: 5000,
            job_id: Some(4242),
            command: vec!["ib_write_bw".into(), "-x".into(), "1".into()],
        };
        let lib = || Ok(PathBuf::from("/l/libsoftrdma_ibverbs.so"));
        let p = plan(&req, &host(), exists, lib, Some(OsStr::new("/x.so"))).unwrap();
        assert_eq!(p.program, "ib_write_bw");
        assert_eq!(p.args, ["-x", "1"]);
        let env: Vec<(&str, &str)> = p.env.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
        assert_eq!(
            env,
            [
                ("LD_PRELOAD", "/l/libsoftrdma_ibverbs.so:/x.so"),
                ("SOFTRDMA_BACKEND", "afxdp"),
                ("SOFTRDMA_DEV", "veth0"),
                ("SOFTRDMA_LOCAL", "10.1.0.1"),
                ("SOFTRDMA_UDP_PORT", "5000"),
                ("SOFTRDMA_JOB_ID", "4242"),
            ]
        );
        // Arguments are checked before the library is looked for.
        let missing = || Err("no library".to_string());
        let none = Request { command: vec![], ..req.clone() };
        assert!(plan(&none, &host(), exists, missing, None).unwrap_err().contains("no PROGRAM"));
        let bad = Request { dev: Some("nosuch0".into()), ..req.clone() };
        assert!(plan(&bad, &host(), exists, missing, None).unwrap_err().contains("no interface nosuch0"));
        assert_eq!(plan(&req, &host(), exists, missing, None).unwrap_err(), "no library");
    }
}
