//! Unmodified libibverbs programs over softrdma (issue 28, acceptance 1): Debian's `ibverbs-utils`
//! and `perftest` binaries under `softrdma run`, between two network namespaces joined by a veth
//! (MTU 9000), over kernel UDP and over AF_XDP. Each server runs in namespace a, its client in b,
//! both under `softrdma run --backend B --dev <their veth>`; every pair must exit 0 within its
//! timeout. The pairs are one table: a failure names its tool and arguments and shows both sides'
//! output, and every pair runs even when one fails. Needs root, iproute2 and the Debian tools
//! (`scripts/setup.sh`): without them the test says so and skips, except under CI (CI=true), where
//! it fails. It runs the library `softrdma run` finds (beside the softrdma binary, or SOFTRDMA_LIB).

mod common;

use common::netns::Netns;
use common::proc::{Running, assert_all_passed, listens, record, run_in};
use std::time::{Duration, Instant};

/// One pair at a time: each moves traffic through the veth on a 2-core machine, and the TCP
/// ports of the tools' exchanges must not meet.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The Debian programs the test runs.
const TOOLS: [&str; 14] = [
    "ibv_devices",
    "ibv_devinfo",
    "ibv_rc_pingpong",
    "ibv_uc_pingpong",
    "ibv_ud_pingpong",
    "ibv_srq_pingpong",
    "ib_write_bw",
    "ib_read_bw",
    "ib_send_bw",
    "ib_atomic_bw",
    "ib_write_lat",
    "ib_read_lat",
    "ib_send_lat",
    "ib_atomic_lat",
];

/// The namespaces' network: the server (namespace a) is `.1`, the client (b) `.2`.
const NET: &str = "10.96.0";

fn can_run(name: &str) -> bool {
    common::proc::can_run_tools(name, &TOOLS, "ibverbs-utils and perftest")
}

/// Two namespaces and the backend the tools run over.
struct Bed {
    n: Netns,
    backend: &'static str,
}

impl Bed {
    fn server_ip(&self) -> String {
        format!("{NET}.1")
    }

    /// `softrdma run --backend B --dev <veth of ns> -- ARGS` in namespace `ns` ("a" or "b").
    fn spawn(&self, ns: char, args: &[String]) -> Running {
        run_in(&self.n, ns, self.backend, args)
    }

    /// The device `softrdma run` gives a program in namespace `ns`.
    fn device(&self, ns: char) -> String {
        format!("softrdma_{}", if ns == 'a' { &self.n.va } else { &self.n.vb })
    }

    /// One program alone in namespace `ns`, checked by `check` (which returns what is wrong).
    fn single(&self, ns: char, args: &[&str], check: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let side = self.spawn(ns, &args).finish(Instant::now() + Duration::from_secs(30));
        let wrong = if side.ok() { check(&side.stdout()) } else { Some("it failed".into()) };
        match wrong {
            None => Ok(()),
            Some(w) => Err(format!("{args:?} in namespace {ns}: {w}\n{}", side.describe("it"))),
        }
    }

    /// One server/client pair: the server in namespace a, started first; the client in b once the
    /// server listens on `port`, with the server's address last. Both must exit 0 and the client
    /// print what [`Expect`] says.
    fn pair(&self, p: &Pair, port: u16) -> Result<(), String> {
        let args = |ns: char| {
            let mut a: Vec<String> = vec![p.tool.to_string()];
            a.extend(p.args.iter().map(|s| s.to_string()));
            a.extend(["-d".to_string(), self.device(ns), "-p".to_string(), port.to_string()]);
            a
        };
        let (server_args, mut client_args) = (args('a'), args('b'));
        client_args.push(self.server_ip());
        let name = format!("{}: server {server_args:?}, client {client_args:?}", p.name);
        let start = Instant::now();
        let deadline = start + p.timeout;
        let mut server = self.spawn('a', &server_args);
        while !listens(server.child.id(), port) {
            if server.exited() || Instant::now() >= start + Duration::from_secs(30) {
                let s = server.finish(Instant::now());
                return Err(format!(
                    "{name}\nthe server never listened on TCP port {port}\n{}",
                    s.describe("server")
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let client = self.spawn('b', &client_args);
        let c = client.finish(deadline);
        // The server ends once the client is done (or gave up): a little time past the client.
        let s = server.finish(Instant::now() + Duration::from_secs(10));
        let wrong = if s.ok() && c.ok() { p.expect.wrong(&c.stdout()) } else { Some("a side failed".into()) };
        match wrong {
            None => {
                eprintln!("{} ok in {:.1} s", p.name, start.elapsed().as_secs_f64());
                Ok(())
            }
            Some(w) => Err(format!("{name}: {w}\n{}\n{}", s.describe("server"), c.describe("client"))),
        }
    }
}

/// One row of the table: a tool, its arguments besides `-d DEV -p PORT [SERVER]`, what its client
/// must print, and how long the pair may take.
struct Pair {
    name: String,
    tool: &'static str,
    args: Vec<&'static str>,
    expect: Expect,
    timeout: Duration,
}

/// What the client prints when the run went through.
enum Expect {
    /// The rdma-core examples' "N iters in S seconds".
    Iters(u32),
    /// A row of perftest's result table for this message size (its first column).
    Row(u32),
}

impl Expect {
    /// What is missing from the client's stdout `out`.
    fn wrong(&self, out: &str) -> Option<String> {
        match *self {
            Expect::Iters(n) => {
                let want = format!("{n} iters in ");
                (!out.contains(&want)).then(|| format!("the client did not print {want:?}"))
            }
            Expect::Row(size) => {
                let has = out.lines().any(|l| l.split_whitespace().next() == Some(size.to_string().as_str()));
                (!has).then(|| format!("the client's result table has no row for {size} bytes"))
            }
        }
    }
}

/// Every pair of the acceptance. `ibv_ud_pingpong` has no `-s 65536` (a UD message is one packet)
/// and `ib_atomic_bw` no `-a` (perftest refuses: "Message size cannot be changed for Atomic tests").
fn pairs() -> Vec<Pair> {
    let mut v = Vec::new();
    for tool in ["ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong"] {
        let mut variants: Vec<Vec<&'static str>> = vec![vec![], vec!["-e"]];
        if tool != "ibv_ud_pingpong" {
            variants.push(vec!["-s", "65536"]);
        }
        for extra in variants {
            let mut args = vec!["-g", "1", "-n", "200"];
            args.extend(&extra);
            v.push(Pair {
                name: format!("{tool} {}", extra.join(" ")).trim_end().to_string(),
                tool,
                args,
                expect: Expect::Iters(200),
                timeout: Duration::from_secs(60),
            });
        }
    }
    let perftest: [(&'static str, &[&'static str], u32); 9] = [
        ("ib_write_bw", &[], 65536),
        ("ib_read_bw", &[], 65536),
        ("ib_send_bw", &[], 65536),
        ("ib_atomic_bw", &["-A", "CMP_AND_SWAP"], 8),
        ("ib_atomic_bw", &["-A", "FETCH_AND_ADD"], 8),
        ("ib_write_lat", &[], 2),
        ("ib_read_lat", &[], 2),
        ("ib_send_lat", &[], 2),
        ("ib_atomic_lat", &[], 8),
    ];
    for (tool, extra, size) in perftest {
        let mut args = vec!["-x", "1", "-n", "200"];
        args.extend(extra);
        v.push(Pair {
            name: format!("{tool} {}", extra.join(" ")).trim_end().to_string(),
            tool,
            args,
            expect: Expect::Row(size),
            timeout: Duration::from_secs(120),
        });
    }
    // All sizes, 2 B to 8 MiB: fewer iterations, each size is a full run.
    for tool in ["ib_write_bw", "ib_read_bw", "ib_send_bw"] {
        v.push(Pair {
            name: format!("{tool} -a"),
            tool,
            args: vec!["-x", "1", "-a", "-n", "20"],
            expect: Expect::Row(8 << 20),
            timeout: Duration::from_secs(300),
        });
    }
    v
}

/// Runs every program of the acceptance over `backend`; fails with every failing pair's output.
fn tools_over(backend: &'static str, tag: char, first_port: u16) {
    let name = format!("netns_verbs ({backend})");
    if !can_run(&name) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Without the library nothing below can work: say so once.
    let lib = common::softrdma(&["run", "--dev", "lo", "--", "true"]);
    assert!(
        lib.status.success(),
        "{name}: `softrdma run` cannot run anything: {}",
        String::from_utf8_lossy(&lib.stderr)
    );
    let bed = Bed { n: Netns::new(tag, NET), backend };
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    for ns in ['a', 'b'] {
        let (dev, ip) = (bed.device(ns), format!("{NET}.{}", if ns == 'a' { 1 } else { 2 }));
        let r = bed.single(ns, &["ibv_devices"], |out| {
            (!out.contains(&dev)).then(|| format!("{dev} is not listed"))
        });
        record(&mut passed, &mut failed, format!("ibv_devices ({ns})"), r);
        let r = bed.single(ns, &["ibv_devinfo", "-v"], |out| devinfo_wrong(out, &dev, &ip));
        record(&mut passed, &mut failed, format!("ibv_devinfo -v ({ns})"), r);
    }
    for (i, p) in pairs().iter().enumerate() {
        let r = bed.pair(p, first_port + i as u16);
        record(&mut passed, &mut failed, p.name.clone(), r);
    }
    assert_all_passed(&name, &passed, &failed);
}

/// What is wrong with `ibv_devinfo -v`'s report of `dev` at address `ip` on a veth of MTU 9000:
/// it names the device, its port is active with the largest active MTU, and GID 1 is the
/// IPv4-mapped address (rdma-core prints RoCE v2 GIDs as IPv6 text).
fn devinfo_wrong(out: &str, dev: &str, ip: &str) -> Option<String> {
    let field = |name: &str| out.lines().find(|l| l.trim_start().starts_with(name)).map(str::trim);
    if !out.contains(&format!("hca_id:\t{dev}")) {
        return Some(format!("no hca_id {dev}"));
    }
    if field("state:").is_none_or(|l| !l.contains("PORT_ACTIVE")) {
        return Some("the port is not PORT_ACTIVE".into());
    }
    if field("active_mtu:").is_none_or(|l| !l.contains("4096")) {
        return Some("active_mtu is not 4096 (netdev MTU 9000)".into());
    }
    let gid = format!("::ffff:{ip}");
    if field("GID[  1]:").is_none_or(|l| !l.contains(&gid)) {
        return Some(format!("GID[  1] is not {gid}"));
    }
    None
}

#[test]
fn verbs_tools_between_namespaces_over_kernel_udp() {
    tools_over("udp", 'v', 19000);
}

#[test]
fn verbs_tools_between_namespaces_over_afxdp() {
    tools_over("afxdp", 'w', 19100);
}
