//! `softrdma devinfo`: the backends, the devices each offers, their ports, MTUs, GIDs and limits
//! (as `ibv_devinfo` lists RDMA devices).

use engine::verbs::LIMITS;
use engine::verbs::Mtu;
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};

/// One network interface with an IPv4 address the UDP backend can bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Interface name.
    pub name: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Netdev MTU.
    pub mtu: u32,
    /// Whether the interface is up.
    pub up: bool,
}

/// The host's interfaces with IPv4 addresses.
pub fn host_ports() -> Vec<HostPort> {
    let mut out = Vec::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return out };
    for a in addrs {
        let Some(ip) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()).map(|s| s.ip()) else { continue };
        let mtu = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", a.interface_name))
            .ok()
            .and_then(|m| m.trim().parse().ok())
            .unwrap_or(1500);
        let up = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP);
        out.push(HostPort { name: a.interface_name, ip, mtu, up });
    }
    out
}

/// Receive queues of an interface (`/sys/class/net/IF/queues/rx-*`; AF_XDP binds one, `--queue`).
fn rx_queues(name: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count())
        .unwrap_or(0)
}

/// The interfaces the afxdp backend can use: every one with an IPv4 address but loopback, with its
/// receive queues and the path MTU it carries (multi-buffer AF_XDP takes frames beyond one 4 KiB
/// buffer, so the netdev MTU decides, as for rxe).
fn afxdp_devices(ports: &[HostPort]) -> String {
    let mut s = String::new();
    for p in ports.iter().filter(|p| !p.ip.is_loopback()) {
        let mtu = Mtu::for_netdev(p.mtu)
            .map_or("none (netdev MTU below 336)".to_string(), |m| m.bytes().to_string());
        let state = if p.up { "ACTIVE" } else { "DOWN" };
        let _ = writeln!(
            s,
            "  {} ({}): port 1 {state}, rx queues {}, netdev MTU {}, active_mtu {mtu}, GID ::ffff:{}",
            p.name,
            p.ip,
            rx_queues(&p.name),
            p.mtu,
            p.ip
        );
    }
    if s.is_empty() {
        s = "  (no interface with an IPv4 address besides loopback)\n".into();
    }
    s
}

/// What the AF_XDP probe (opening an AF_XDP socket) says about the `afxdp` backend.
fn afxdp_line(probe: std::io::Result<()>) -> String {
    match probe {
        Ok(()) => "afxdp (AF_XDP on one queue of an interface: --dev IFACE)".to_string(),
        Err(e) => match e.raw_os_error() {
            Some(nix::libc::EPERM | nix::libc::EACCES) => {
                "afxdp: not for this process (AF_XDP needs root, or CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW)"
                    .to_string()
            }
            Some(nix::libc::EAFNOSUPPORT) => {
                "afxdp: not available (this kernel has no AF_XDP sockets)".to_string()
            }
            _ => format!("afxdp: not available (opening an AF_XDP socket: {e})"),
        },
    }
}

/// The report.
pub fn report() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "backends: sim (in-process simulated network), udp (kernel UDP sockets, unprivileged), {}",
        afxdp_line(engine::datapath::afxdp::probe())
    );
    let _ = writeln!(s, "\nsim: two devices per `softrdma perf` run");
    for (name, ip) in [("sim0", "10.0.0.1"), ("sim1", "10.0.0.2")] {
        let _ = writeln!(s, "  {name}: port 1 ACTIVE, active_mtu 4096, GID ::ffff:{ip}");
    }
    let _ = writeln!(s, "\nudp: one device per IPv4 address (bind it with --local)");
    for p in host_ports() {
        let gid = IpAddr::V4(p.ip);
        let mtu = Mtu::for_netdev(p.mtu)
            .map_or("none (netdev MTU below 336)".to_string(), |m| m.bytes().to_string());
        let state = if p.up { "ACTIVE" } else { "DOWN" };
        let _ = writeln!(
            s,
            "  {} ({}): port 1 {state}, netdev MTU {}, active_mtu {mtu}, GID ::ffff:{gid}",
            p.name, p.ip, p.mtu
        );
    }
    let probe = engine::datapath::afxdp::probe();
    if probe.is_ok() {
        let _ =
            writeln!(s, "\nafxdp: one device per interface and queue (--dev IFACE [--queue N] --local IP)");
        s += &afxdp_devices(&host_ports());
    } else {
        let _ = writeln!(s, "\n{}", afxdp_line(probe));
    }
    let l = LIMITS;
    let _ = writeln!(
        s,
        "\nlimits: max_msg_sz {}, max_qp_wr {}, max_sge {}, max_inline_data {}, max_rd_atomic {}, \
         max_dest_rd_atomic {}, max_srq_wr {}, qp types RC UC UD, SRQ, atomics CMP_AND_SWP FETCH_AND_ADD",
        l.max_msg_sz,
        l.max_qp_wr,
        l.max_sge,
        l.max_inline_data,
        l.max_rd_atomic,
        l.max_rd_atomic,
        l.max_srq_wr
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn afxdp_lists_every_interface_but_loopback() {
        let port =
            |name: &str, ip: [u8; 4], mtu| HostPort { name: name.into(), ip: ip.into(), mtu, up: true };
        let list = afxdp_devices(&[port("lo", [127, 0, 0, 1], 65536), port("veth7", [10, 9, 0, 1], 9000)]);
        assert!(!list.contains("lo ") && list.contains("veth7 (10.9.0.1)"), "{list}");
        assert!(list.contains("active_mtu 4096") && list.contains("rx queues"), "{list}");
        assert!(afxdp_devices(&[port("lo", [127, 0, 0, 1], 65536)]).contains("no interface"));
    }

    #[test]
    fn rxe_mtu_rule() {
        assert_eq!(Mtu::for_netdev(1500), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::for_netdev(9000), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_netdev(4176), Some(Mtu::Mtu4096));
        assert_eq!(Mtu::for_netdev(4175), Some(Mtu::Mtu2048));
        assert_eq!(Mtu::for_netdev(300), None);
    }

    #[test]
    fn the_afxdp_line_says_why_the_backend_cannot_be_used() {
        use std::io::Error;
        assert!(afxdp_line(Ok(())).starts_with("afxdp (AF_XDP"));
        assert!(afxdp_line(Err(Error::from_raw_os_error(libc::EPERM))).contains("needs root"));
        assert!(afxdp_line(Err(Error::from_raw_os_error(libc::EAFNOSUPPORT))).contains("no AF_XDP"));
        assert!(afxdp_line(Err(Error::from_raw_os_error(libc::EMFILE))).contains("opening an AF_XDP socket"));
        // This process: root in CI, where AF_XDP works.
        let line = report();
        if rustix::process::geteuid().is_root() {
            assert!(line.contains("afxdp (AF_XDP"), "{line}");
        }
        assert!(!line.contains("not available yet"));
    }

    #[test]
    fn loopback_is_listed() {
        assert!(host_ports().iter().any(|p| p.ip == Ipv4Addr::LOCALHOST));
        assert!(report().contains("GID ::ffff:127.0.0.1"));
    }
}
