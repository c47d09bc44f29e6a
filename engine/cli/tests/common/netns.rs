//! Two network namespaces joined by a veth pair (MTU 9000), for the tests that run one `softrdma`
//! side in each. Needs root and iproute2 ([`can_run`]).

use std::process::{Child, Command, Stdio};

/// Runs `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Namespaces `a` and `b` with veth ends `va` and `vb`; deleted on drop.
pub struct Netns {
    pub a: String,
    pub b: String,
    pub va: String,
    pub vb: String,
}

impl Netns {
    /// Two namespaces and a veth pair named after `tag` and the process (so parallel tests differ),
    /// addressed `{net}.1/24` (in `a`) and `{net}.2/24` (in `b`).
    pub fn new(tag: char, net: &str) -> Netns {
        Netns::with_queues(tag, net, 1)
    }

    /// [`Netns::new`] with `queues` RX and TX queues on each veth end.
    pub fn with_queues(tag: char, net: &str, queues: u32) -> Netns {
        let id = std::process::id() % 100_000;
        let n = Netns {
            a: format!("sr-{tag}a-{id}"),
            b: format!("sr-{tag}b-{id}"),
            va: format!("sr{tag}a{id}"),
            vb: format!("sr{tag}b{id}"),
        };
        ip(&["netns", "add", &n.a]);
        ip(&["netns", "add", &n.b]);
        let q = queues.to_string();
        let qs = ["numtxqueues", &q, "numrxqueues", &q];
        ip(&[&["link", "add", &n.va][..], &qs, &["type", "veth", "peer", "name", &n.vb], &qs].concat());
        ip(&["link", "set", &n.va, "netns", &n.a]);
        ip(&["link", "set", &n.vb, "netns", &n.b]);
        let (addr_a, addr_b) = (format!("{net}.1/24"), format!("{net}.2/24"));
        for (ns, dev, addr) in [(&n.a, &n.va, &addr_a), (&n.b, &n.vb, &addr_b)] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "mtu", "9000", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }

    /// `softrdma` in namespace `ns` (`ip netns exec` execs it: the child's PID is softrdma's).
    pub fn spawn(&self, ns: &str, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_softrdma")])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn softrdma in a namespace")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Whether this machine can run test `name`, which also runs each of `tools` (`scripts/setup.sh`
/// installs them); under CI it must.
pub fn can_run(name: &str, tools: &[&str]) -> bool {
    let root = rustix::process::geteuid().is_root();
    let ip = Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success());
    let missing =
        tools.iter().find(|t| !Command::new(t).arg("--version").output().is_ok_and(|o| o.status.success()));
    let why = match (root, ip, missing) {
        (true, true, None) => return true,
        (false, _, _) => "it needs root (network namespaces, veth)".to_string(),
        (true, false, _) => "iproute2 (ip) is missing".to_string(),
        (true, true, Some(t)) => format!("{t} is missing (scripts/setup.sh installs it)"),
    };
    assert!(std::env::var_os("CI").is_none(), "{name} cannot run under CI: {why}");
    eprintln!("{name}: skipped: {why}");
    false
}
