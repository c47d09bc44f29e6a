//! Open MPI over softrdma's libfabric provider (issue 55), unmodified and with no shim: Debian 12's
//! Open MPI 4.1 (`openmpi-bin`) and mpi4py (`python3-mpi4py`), two ranks in two network
//! namespaces joined by a veth, launched by `scripts/mpi-netns.sh` (mpirun under `softrdma run`,
//! its rsh agent entering the other namespace under `softrdma run`; the JobID is the one
//! `softrdma run` assigns, no variable set). Both of Open MPI's libfabric routes:
//!
//! - `--mca pml cm --mca mtl ofi`: tagged messages with FI_DIRECTED_RECV and FI_ORDER_SAS;
//! - `--mca pml ob1 --mca btl self,ofi --mca btl_ofi_mode 2`: the BTL's RMA and atomics on
//!   regions registered on the domain (provider keys, virtual addresses), and its messages. Its
//!   default mode (0) is one-sided only: Open MPI 4.1's ob1 then has no BTL to send with and
//!   crashes in MPI_Barrier with any provider, so the BTL runs with both (mode 2), the one-sided
//!   part included.
//!
//! Each runs mpi4py's `helloworld` and `ringtest` (`python3 -m mpi4py.bench`, the package has no
//! demo directory), and the BTL a one-sided program (MPI windows: put, get, accumulate,
//! fetch-and-op, compare-and-swap), over kernel UDP and AF_XDP, clear and sealed by TSS; nothing else may be
//! printed (at finalize in particular). Needs root, iproute2, `openmpi-bin` and `python3-mpi4py`
//! (`scripts/setup.sh`): without them the test says so and skips, except under CI (CI=true),
//! where it fails.

mod common;

use common::proc::Running;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's Python, which `python3-mpi4py` installs into.
const PYTHON: &str = "/usr/bin/python3";

/// The one-sided program: each rank puts into, gets from and applies atomics to its peer's
/// window, then checks its own.
const ONE_SIDED: &str = r#"
import array, sys
from mpi4py import MPI
c = MPI.COMM_WORLD
r, peer = c.rank, 1 - c.rank
mem = MPI.Alloc_mem(64)
mem[:] = bytes(64)
win = MPI.Win.Create(mem, 1, comm=c)
win.Fence()
win.Put([bytearray([r + 1]) * 32, MPI.BYTE], peer, target=[0, 32, MPI.BYTE])
win.Fence()
got = bytearray(32)
win.Get([got, MPI.BYTE], peer, target=[0, 32, MPI.BYTE])
win.Fence()
win.Accumulate([array.array('q', [r + 10]), MPI.INT64_T], peer, target=[32, 1, MPI.INT64_T], op=MPI.SUM)
win.Fence()
old = array.array('q', [0])
win.Lock(peer)
win.Fetch_and_op([array.array('q', [100]), MPI.INT64_T], [old, MPI.INT64_T], peer, 32, MPI.SUM)
win.Unlock(peer)
c.Barrier()
swapped = array.array('q', [0])
win.Lock(peer)
win.Compare_and_swap([array.array('q', [7]), MPI.INT64_T], [array.array('q', [r + 110]), MPI.INT64_T],
                     [swapped, MPI.INT64_T], peer, 32)
win.Unlock(peer)
c.Barrier()
mine = bytes(mem)
ok = (mine[:32] == bytes([peer + 1]) * 32 and got == bytearray([r + 1]) * 32
      and old[0] == r + 10 and swapped[0] == r + 110
      and array.array('q', mine[32:40])[0] == 7)
win.Free()
MPI.Free_mem(mem)
print("one-sided rank %d: %s" % (r, "ok" if ok else "WRONG %r %r %r %r" % (mine, got, old, swapped)))
sys.exit(0 if ok else 1)
"#;

fn can_run(name: &str) -> bool {
    if !common::proc::can_run_tools(name, &["mpirun"], "openmpi-bin") {
        return false;
    }
    let mpi4py = Command::new(PYTHON).args(["-c", "import mpi4py"]).status().is_ok_and(|s| s.success());
    if !mpi4py {
        let why = format!("{PYTHON} has no mpi4py (scripts/setup.sh installs python3-mpi4py)");
        assert!(std::env::var_os("CI").is_none(), "{name} cannot run under CI: {why}");
        eprintln!("{name}: skipped: {why}");
    }
    mpi4py
}

/// `scripts/mpi-netns.sh` with `opts`, then mpirun's `args`; its output once it ended.
fn mpi(opts: &[&str], args: &[&str]) -> common::proc::Side {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/mpi-netns.sh");
    let child = Command::new("bash")
        .arg(script)
        .args(["--softrdma", env!("CARGO_BIN_EXE_softrdma")])
        .args(opts)
        .arg("--")
        .args(args)
        .env_remove("SOFTRDMA_JOB_ID")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/mpi-netns.sh");
    Running::new(child).finish(Instant::now() + Duration::from_secs(180))
}

#[test]
fn open_mpi_runs_mpi4py_over_mtl_ofi_and_btl_ofi_on_udp_and_afxdp_clear_and_sealed() {
    if !can_run("open_mpi_runs_mpi4py_over_mtl_ofi_and_btl_ofi_on_udp_and_afxdp_clear_and_sealed") {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let one_sided = dir.join("one_sided.py");
    std::fs::write(&one_sided, ONE_SIDED).unwrap();
    let one_sided = one_sided.to_str().unwrap();
    let routes: [(&str, &[&str]); 2] = [
        ("mtl ofi", &["--mca", "pml", "cm", "--mca", "mtl", "ofi"]),
        ("btl ofi", &["--mca", "pml", "ob1", "--mca", "btl", "self,ofi", "--mca", "btl_ofi_mode", "2"]),
    ];
    // (program, what each rank prints)
    let programs: [(&[&str], &[&str]); 3] = [
        (
            &["-m", "mpi4py.bench", "helloworld"],
            &["Hello, World! I am process 0 of 2 on", "Hello, World! I am process 1 of 2 on"],
        ),
        (&["-m", "mpi4py.bench", "ringtest", "-n", "4096", "-l", "50"], &["time for 50 loops = "]),
        (&[one_sided], &["one-sided rank 0: ok", "one-sided rank 1: ok"]),
    ];
    for backend in ["udp", "afxdp"] {
        for tss in [false, true] {
            for (route, mca) in routes {
                // One-sided over the BTL: with pml cm, Open MPI's osc components find no BTL of
                // their own (btl ofi cannot open a second endpoint beside the MTL's: one per
                // address, UET's port).
                let n = if route == "btl ofi" { 3 } else { 2 };
                for &(program, expect) in &programs[..n] {
                    let mut opts = vec!["--backend", backend];
                    if tss {
                        opts.push("--tss");
                    }
                    let args = [mca, &[PYTHON][..], program].concat();
                    let what =
                        format!("{route} over {backend}{}: {program:?}", if tss { ", TSS" } else { "" });
                    let o = mpi(&opts, &args);
                    assert!(o.ok(), "{what}:\n{}", o.describe("mpirun"));
                    let out = format!("{}{}", o.stdout(), String::from_utf8_lossy(&o.output.stderr));
                    for e in expect {
                        assert!(out.contains(e), "{what}: {e:?} missing:\n{}", o.describe("mpirun"));
                    }
                    // Nothing else: no warning at start, no error at finalize. `softrdma run`
                    // says the JobID it assigned, once, in mpirun's namespace. mpirun's rsh
                    // launcher races its agent (its setpgid after fork fails with EACCES once the
                    // child has exec'd, and says so now and then), before any rank runs.
                    let other: Vec<&str> = out
                        .lines()
                        // Ranks' lines reach mpirun's stdout interleaved: one rank's newline
                        // can land after the other's text, leaving a blank line.
                        .filter(|l| !l.trim().is_empty())
                        .filter(|l| !expect.iter().any(|e| l.contains(e)))
                        .filter(|l| !l.starts_with("softrdma run: JobID "))
                        .filter(|l| {
                            !(l.contains("plm:rsh: Warning: setpgid(") && l.contains("Permission denied"))
                        })
                        .collect();
                    assert!(other.is_empty(), "{what}: printed more:\n{}", o.describe("mpirun"));
                    assert_eq!(out.matches("softrdma run: JobID ").count(), 1, "{what}:\n{out}");
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
