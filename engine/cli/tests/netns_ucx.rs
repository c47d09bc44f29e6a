//! UCX over softrdma (issue 54, acceptance 1): Debian's UCX 1.13 (`ucx-utils`, `libucx0`) under
//! `softrdma run`, between two network namespaces joined by a veth (MTU 9000), over kernel UDP and
//! over AF_XDP.
//! - `ucx_info -d`, with no UCX environment variable, lists `rc_verbs` and `ud_verbs` on the
//!   device (`softrdma_<veth>:1`): UCX finds it in `/dev/infiniband` and `/sys/class/infiniband`,
//!   which `softrdma run` lays out for the program.
//! - `ucx_perftest` runs `tag_lat`, `tag_bw`, `ucp_put_bw`, `ucp_get` and `ucp_am_lat` with
//!   `UCX_TLS=rc_verbs,ud_verbs:aux` (RC for the data; UCX's RC needs a transport of its own for
//!   the wire-up messages that connect its QPs, and takes UD, `:aux` only for that) and with
//!   `UCX_TLS=ud_verbs`: tcp is in neither list, so the bytes go through softrdma. UD has no
//!   one-sided operations: UCX emulates put and get over its messages there.
//!
//! Each server runs in namespace a, its client in b; both must exit 0 and the client print its
//! result line. The figures are printed (`cargo test -- --nocapture`). Needs root, iproute2 and
//! UCX (`scripts/setup.sh` installs `ucx-utils`): without them the test says so and skips, except
//! under CI (CI=true), where it fails.

mod common;

use common::netns::Netns;
use common::proc::{Running, assert_all_passed, listens, record, run_in};
use std::time::{Duration, Instant};

/// One run at a time: the veth and the two cores are shared, and the TCP port of
/// ucx_perftest's exchange must not meet.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const TOOLS: [&str; 2] = ["ucx_info", "ucx_perftest"];

/// The namespaces' network: the server (namespace a) is `.1`, the client (b) `.2`.
const NET: &str = "10.98.0";

/// The transports of the runs: RC (with UD for wire-up only) and UD.
const TLS: [&str; 2] = ["rc_verbs,ud_verbs:aux", "ud_verbs"];

/// The tests: name, message size, iterations.
const TESTS: [(&str, u32, u32); 5] = [
    ("tag_lat", 8, 2000),
    ("tag_bw", 65536, 500),
    ("ucp_put_bw", 1 << 20, 100),
    ("ucp_get", 1 << 20, 100),
    ("ucp_am_lat", 8, 2000),
];

/// `softrdma run` in namespace `ns` with `UCX_*` variables `env` for the program.
fn spawn(n: &Netns, ns: char, backend: &str, env: &[String], args: &[String]) -> Running {
    let mut full: Vec<String> = vec!["env".into()];
    full.extend(env.iter().cloned());
    full.extend(args.iter().cloned());
    run_in(n, ns, backend, &full)
}

/// The devices `ucx_info -d` lists for `transport` (its "# Transport:" / "# Device:" pairs).
fn devices_of(out: &str, transport: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut current: Option<&str> = None;
    for l in out.lines() {
        let l = l.trim_start_matches('#').trim();
        if let Some(t) = l.strip_prefix("Transport:") {
            current = Some(t.trim());
        } else if let Some(d) = l.strip_prefix("Device:")
            && current == Some(transport)
        {
            v.push(d.trim().to_string());
        }
    }
    v
}

/// `ucx_info -d` in namespace `ns`: rc_verbs and ud_verbs on the device, with no UCX variable.
fn listed(n: &Netns, ns: char, backend: &str) -> Result<(), String> {
    let dev = format!("softrdma_{}:1", if ns == 'a' { &n.va } else { &n.vb });
    // No UCX_* variable of the test's environment reaches UCX (`env -u` each; `env -i` would
    // drop the library's LD_PRELOAD too).
    let mut args: Vec<String> = vec!["env".into()];
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str().filter(|k| k.starts_with("UCX_")) {
            args.extend(["-u".into(), k.to_string()]);
        }
    }
    args.extend(["ucx_info".into(), "-d".into()]);
    let side = run_in(n, ns, backend, &args).finish(Instant::now() + Duration::from_secs(60));
    let out = side.stdout();
    let missing: Vec<&str> =
        ["rc_verbs", "ud_verbs"].into_iter().filter(|t| !devices_of(&out, t).contains(&dev)).collect();
    if side.ok() && missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "ucx_info -d in namespace {ns}: {missing:?} not listed on {dev}\n{}",
        side.describe("ucx_info")
    ))
}

/// One ucx_perftest pair; returns the client's final line.
fn perftest(
    n: &Netns,
    backend: &str,
    tls: &str,
    test: &str,
    size: u32,
    iters: u32,
    port: u16,
) -> Result<String, String> {
    let env = vec![format!("UCX_TLS={tls}")];
    let common = |v: &mut Vec<String>| v.extend(["ucx_perftest".into(), "-p".into(), port.to_string()]);
    let mut server = vec![];
    common(&mut server);
    let mut client = vec![];
    common(&mut client);
    client.extend([format!("{NET}.1"), "-t".into(), test.into(), "-s".into(), size.to_string()]);
    client.extend(["-n".into(), iters.to_string(), "-w".into(), "100".into(), "-f".into()]);
    let name = format!("{test} -s {size} with UCX_TLS={tls}");
    let start = Instant::now();
    let mut s = spawn(n, 'a', backend, &env, &server);
    while !listens(s.child.id(), port) {
        if s.exited() || start.elapsed() > Duration::from_secs(30) {
            let s = s.finish(Instant::now());
            return Err(format!("{name}: the server never listened on {port}\n{}", s.describe("server")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = spawn(n, 'b', backend, &env, &client).finish(Instant::now() + Duration::from_secs(120));
    let s = s.finish(Instant::now() + Duration::from_secs(10));
    let out = c.stdout();
    // With -f the result is one line of figures, the iterations first.
    let fin = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(iters.to_string().as_str()))
        .map(str::to_string);
    match fin {
        Some(f) if c.ok() && s.ok() => {
            eprintln!("{backend} {name}: {f} ({:.1} s)", start.elapsed().as_secs_f64());
            Ok(f)
        }
        _ => Err(format!("{name}: failed\n{}\n{}", s.describe("server"), c.describe("client"))),
    }
}

fn ucx_over(backend: &'static str, tag: char, first_port: u16) {
    let name = format!("netns_ucx ({backend})");
    if !common::proc::can_run_tools(&name, &TOOLS, "ucx-utils and libucx0") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = Netns::new(tag, NET);
    // UCX keeps 15 characters of a memory domain's name (UCT_MD_NAME_MAX): softrdma_<veth> must
    // fit, so the veth ends get short names (each namespace has its own interface names).
    for (ns, dev, short) in [(n.a.clone(), &mut n.va, "ucxa"), (n.b.clone(), &mut n.vb, "ucxb")] {
        for args in [
            &["link", "set", dev, "down"][..],
            &["link", "set", dev, "name", short],
            &["link", "set", short, "up"],
        ] {
            common::netns::ip(&[&["-n", ns.as_str()][..], args].concat());
        }
        *dev = short.to_string();
    }
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for ns in ['a', 'b'] {
        record(&mut passed, &mut failed, format!("ucx_info -d ({ns})"), listed(&n, ns, backend));
    }
    let mut port = first_port;
    for tls in TLS {
        for (test, size, iters) in TESTS {
            let r = perftest(&n, backend, tls, test, size, iters, port).map(drop);
            record(&mut passed, &mut failed, format!("{test} ({tls})"), r);
            port += 1;
        }
    }
    assert_all_passed(&name, &passed, &failed);
}

#[test]
fn ucx_lists_the_device_and_runs_perftest_over_udp() {
    ucx_over("udp", 'u', 13400);
}

#[test]
fn ucx_lists_the_device_and_runs_perftest_over_afxdp() {
    ucx_over("afxdp", 'x', 13500);
}
