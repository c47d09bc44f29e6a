//! Two network namespaces joined by a veth pair (MTU 9000) for the benchmarks that run one side in
//! each: `a` holds `va` with `{net}.1`, `b` holds `vb` with `{net}.2`. Deleted on drop.

use std::process::{Command, Stdio};

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip").args(args).output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("ip {args:?}: {}", String::from_utf8_lossy(&o.stderr)))
    }
}

/// The namespaces, their veth ends and addresses.
#[derive(Debug)]
pub struct Netns {
    /// Namespace of the first side.
    pub a: String,
    /// Namespace of the second side.
    pub b: String,
    /// The veth end in `a`.
    pub va: String,
    /// The veth end in `b`.
    pub vb: String,
    /// The address of `va`.
    pub addr_a: String,
    /// The address of `vb`.
    pub addr_b: String,
}

impl Netns {
    /// Creates the pair; names carry `tag` and the process id.
    pub fn new(tag: &str, net: &str) -> Result<Netns, String> {
        let id = std::process::id() % 100_000;
        let n = Netns {
            a: format!("sr{tag}-a-{id}"),
            b: format!("sr{tag}-b-{id}"),
            va: format!("sr{tag}a{id}"),
            vb: format!("sr{tag}b{id}"),
            addr_a: format!("{net}.1"),
            addr_b: format!("{net}.2"),
        };
        ip(&["netns", "add", &n.a])?;
        ip(&["netns", "add", &n.b])?;
        ip(&["link", "add", &n.va, "type", "veth", "peer", "name", &n.vb])?;
        ip(&["link", "set", &n.va, "netns", &n.a])?;
        ip(&["link", "set", &n.vb, "netns", &n.b])?;
        for (ns, dev, addr) in [(&n.a, &n.va, &n.addr_a), (&n.b, &n.vb, &n.addr_b)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "mtu", "9000", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(n)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// `exe ARGS` inside namespace `ns`, output piped.
pub fn in_ns(ns: &str, exe: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, exe]).args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// The numbers of the first table row after the line containing `header`.
pub fn row(out: &str, header: &str) -> Vec<f64> {
    out.lines()
        .skip_while(|l| !l.contains(header))
        .nth(1)
        .map(|l| l.split_whitespace().filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default()
}
