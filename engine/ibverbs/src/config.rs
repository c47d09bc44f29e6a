//! Which devices the library presents, from the environment `softrdma run` sets (or a user sets by
//! hand): one device per interface, named `softrdma_<interface>`.
//!
//! - `SOFTRDMA_BACKEND`: `udp` (default, the kernel's UDP sockets) or `afxdp`.
//! - `SOFTRDMA_DEV`: the interface; without it, the interface holding `SOFTRDMA_LOCAL`, or else
//!   every interface that is up and has an IPv4 address (the loopback only if nothing else).
//! - `SOFTRDMA_LOCAL`: the IPv4 address (default: the interface's first).
//! - `SOFTRDMA_UDP_PORT`: the UDP port RoCEv2 runs on (default 4791; both sides must agree).
//! - `SOFTRDMA_RX_ICRC`: `verify` (default) or `trust`. The kernel hands a UDP socket the payload
//!   only; the UDP backend rebuilds the headers and finds the sender's IP ID from the ICRC, so it
//!   checks everything else the ICRC covers. `trust` skips that (the UDP checksum, when the sender
//!   sent one, still covers every byte).

use engine::datapath::link::Backend;
use engine::verbs::Mtu;
use std::net::{IpAddr, Ipv4Addr};

/// One device the library presents.
#[derive(Debug, Clone)]
pub(crate) struct DevInfo {
    /// `softrdma_<iface>`.
    pub(crate) name: String,
    pub(crate) iface: String,
    pub(crate) ip: Ipv4Addr,
    pub(crate) mac: [u8; 6],
    /// The interface's MTU.
    pub(crate) netdev_mtu: u32,
    pub(crate) ifindex: u32,
    pub(crate) backend: Backend,
    pub(crate) udp_port: u16,
    pub(crate) verify_icrc: bool,
}

impl DevInfo {
    /// The largest RoCE MTU whose frames (payload plus 80 bytes of headers) fit the interface.
    pub(crate) fn active_mtu(&self) -> Mtu {
        Mtu::for_netdev(self.netdev_mtu).unwrap_or(Mtu::Mtu256)
    }

    /// The node GUID, from the MAC as rxe makes it (EUI-64), in network byte order.
    pub(crate) fn guid(&self) -> u64 {
        let m = self.mac;
        u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }

    /// GID table entry `index`: the IPv4-mapped RoCEv2 GID at both 0 and 1. rxe lists the
    /// interface's IPv6 link-local GID at 0 and the IPv4 one at 1, so the tools take `-g 1`; this
    /// engine carries RoCEv2 over IPv4 only, and a GID 0 that is listed must be one it can use:
    /// UCX refuses a port whose GID 0 is empty, and libfabric's verbs provider uses index 0
    /// unless told otherwise.
    pub(crate) fn gid(&self, index: usize) -> Option<[u8; 16]> {
        (index < GID_TABLE_LEN).then(|| self.ip.to_ipv6_mapped().octets())
    }
}

/// Entries of the GID table (`gid_tbl_len`).
pub(crate) const GID_TABLE_LEN: usize = 2;

fn sys(iface: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/{file}")).ok().map(|s| s.trim().to_string())
}

/// Interfaces and their IPv4 addresses, in the kernel's order; whether each is up.
fn interfaces() -> Vec<(String, Ipv4Addr, bool)> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    addrs
        .filter_map(|a| {
            let ip = a.address?.as_sockaddr_in()?.ip();
            let up = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP);
            Some((a.interface_name, ip, up))
        })
        .collect()
}

/// Why the environment names no usable device.
#[derive(Debug)]
pub(crate) struct ConfigError(pub(crate) String);

/// The devices the environment describes.
pub(crate) fn devices() -> Result<Vec<DevInfo>, ConfigError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let backend = match var("SOFTRDMA_BACKEND").as_deref() {
        None | Some("udp") => Backend::Udp,
        Some("afxdp") => Backend::AfXdp,
        Some(o) => return Err(ConfigError(format!("SOFTRDMA_BACKEND={o}: expected udp or afxdp"))),
    };
    let udp_port = match var("SOFTRDMA_UDP_PORT") {
        None => wire::ROCEV2_UDP_PORT,
        Some(p) => p.parse().map_err(|_| ConfigError(format!("SOFTRDMA_UDP_PORT={p}: not a port")))?,
    };
    let verify_icrc = match var("SOFTRDMA_RX_ICRC").as_deref() {
        None | Some("verify") => true,
        Some("trust") => false,
        Some(o) => return Err(ConfigError(format!("SOFTRDMA_RX_ICRC={o}: expected verify or trust"))),
    };
    let local: Option<Ipv4Addr> = match var("SOFTRDMA_LOCAL") {
        None => None,
        Some(s) => {
            Some(s.parse().map_err(|_| ConfigError(format!("SOFTRDMA_LOCAL={s}: not an IPv4 address")))?)
        }
    };
    let dev = var("SOFTRDMA_DEV");
    let ifs = interfaces();
    let mut chosen: Vec<(String, Ipv4Addr)> = match (&dev, local) {
        (Some(d), Some(ip)) => {
            if !ifs.iter().any(|(n, _, _)| n == d) && sys(d, "ifindex").is_none() {
                return Err(ConfigError(format!("SOFTRDMA_DEV={d}: no such interface")));
            }
            vec![(d.clone(), ip)]
        }
        (Some(d), None) => match ifs.iter().find(|(n, _, _)| n == d) {
            Some((n, ip, _)) => vec![(n.clone(), *ip)],
            None => {
                return Err(ConfigError(format!("SOFTRDMA_DEV={d}: no such interface with an IPv4 address")));
            }
        },
        (None, Some(ip)) => match ifs.iter().find(|(_, a, _)| *a == ip) {
            Some((n, _, _)) => vec![(n.clone(), ip)],
            None => return Err(ConfigError(format!("SOFTRDMA_LOCAL={ip}: no interface has this address"))),
        },
        (None, None) => {
            let mut v: Vec<(String, Ipv4Addr)> = Vec::new();
            for (n, ip, up) in &ifs {
                if *up && !ip.is_loopback() && !v.iter().any(|(m, _)| m == n) {
                    v.push((n.clone(), *ip));
                }
            }
            if v.is_empty() {
                v.extend(
                    ifs.iter()
                        .filter(|(_, ip, _)| ip.is_loopback())
                        .take(1)
                        .map(|(n, ip, _)| (n.clone(), *ip)),
                );
            }
            v
        }
    };
    chosen.dedup_by(|a, b| a.0 == b.0);
    Ok(chosen.into_iter().map(|(iface, ip)| info(iface, ip, backend, udp_port, verify_icrc)).collect())
}

/// The device on interface `iface` with address `ip`: its MAC, MTU and index read from the
/// interface.
pub(crate) fn info(
    iface: String,
    ip: Ipv4Addr,
    backend: Backend,
    udp_port: u16,
    verify_icrc: bool,
) -> DevInfo {
    DevInfo {
        name: format!("softrdma_{iface}"),
        // An interface without a MAC (a tunnel, the loopback) reads as the zero MAC.
        mac: engine::datapath::link::mac_of(&iface).unwrap_or([0; 6]),
        netdev_mtu: sys(&iface, "mtu").and_then(|m| m.parse().ok()).unwrap_or(1500),
        ifindex: sys(&iface, "ifindex").and_then(|m| m.parse().ok()).unwrap_or(0),
        iface,
        ip,
        backend,
        udp_port,
        verify_icrc,
    }
}

/// An IPv4-mapped GID as the address it maps, else `None` (this engine runs RoCEv2 over IPv4).
pub(crate) fn gid_to_ip(gid: &[u8; 16]) -> Option<IpAddr> {
    let v6 = std::net::Ipv6Addr::from(*gid);
    v6.to_ipv4_mapped().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_0_and_1_are_the_ipv4_one() {
        let d = DevInfo {
            name: "softrdma_x".into(),
            iface: "x".into(),
            ip: Ipv4Addr::new(10, 0, 0, 1),
            mac: [2, 0, 0, 0, 0, 1],
            netdev_mtu: 1500,
            ifindex: 3,
            backend: Backend::Udp,
            udp_port: 4791,
            verify_icrc: true,
        };
        let v4 = Some(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped().octets());
        assert_eq!((d.gid(0), d.gid(1)), (v4, v4));
        assert_eq!(d.gid(GID_TABLE_LEN), None);
    }
}
