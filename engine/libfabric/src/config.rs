//! Which host address the provider's fabric runs on, from the environment `softrdma run` sets (the
//! variables of the verbs library) or a user sets by hand:
//!
//! - `SOFTRDMA_LOCAL`: the IPv4 address;
//! - else `SOFTRDMA_DEV`: the first IPv4 address of that interface;
//! - else the first IPv4 address of an interface that is up, the loopback only if nothing else is.
//!
//! `SOFTRDMA_BACKEND=afxdp` runs the fabric over AF_XDP on queue 0 of the interface holding that
//! address (root, or CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW) instead of kernel UDP (`udp`, the
//! default).
//!
//! `fi_getinfo` with FI_SOURCE and a node (an IPv4 address) overrides them for that offer. The
//! UET variables (`UET_PROVIDER_*`, the service file) are `engine::provider::ProviderConfig`'s.
//!
//! The environment also plays the privileged control plane of the UEC mapping (JobIDs are never
//! taken from the program): `SOFTRDMA_JOB_ID` lists the JobIDs assigned to this process
//! (comma-separated, 24 bits, not 16777215), the first being its endpoints' JobID under the
//! default (indirect) method; `SOFTRDMA_JOB_FALLBACK=1` enables the fallback JobID 16777215 for a
//! process without one (its endpoints then need `UET_PROVIDER_INITIATOR_ID`). The security binding
//! (TSS keys) comes from the environment too: [`crate::security`].

use engine::provider::ControlPlane;
use std::net::Ipv4Addr;

/// The process identity the control plane assigns JobIDs to (one program, one process).
pub const PROCESS: u32 = 1;

/// The control plane from `get` (see the module documentation).
fn control_from(get: impl Fn(&str) -> Option<String>) -> Result<ControlPlane, String> {
    let mut cp = ControlPlane::new();
    if let Some(v) = get("SOFTRDMA_JOB_ID").filter(|v| !v.is_empty()) {
        for j in v.split(',') {
            let job: u32 =
                j.trim().parse().map_err(|_| format!("SOFTRDMA_JOB_ID={v}: {j:?} is not a number"))?;
            cp.assign_job(PROCESS, job).map_err(|e| format!("SOFTRDMA_JOB_ID={v}: {}", e.what))?;
        }
    }
    match get("SOFTRDMA_JOB_FALLBACK").as_deref() {
        None | Some("" | "0") => {}
        Some("1") => cp.enable_fallback(true),
        Some(o) => return Err(format!("SOFTRDMA_JOB_FALLBACK={o}: expected 0 or 1")),
    }
    Ok(cp)
}

/// The control plane the environment describes, with its security binding
/// ([`crate::security`]).
pub fn control_plane() -> Result<ControlPlane, String> {
    let get = |k: &str| std::env::var(k).ok();
    let mut cp = control_from(get)?;
    cp.bind_security(crate::security::security_from(get)?);
    Ok(cp)
}

/// Interfaces and their IPv4 addresses, in the kernel's order; whether each is up and the loopback.
fn interfaces() -> Vec<(String, Ipv4Addr, bool, bool)> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    addrs
        .filter_map(|a| {
            let ip = a.address?.as_sockaddr_in()?.ip();
            let up = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP);
            let lo = a.flags.contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK);
            Some((a.interface_name, ip, up, lo))
        })
        .collect()
}

/// The interface holding `ip` (the name of the provider's domain there), else the address itself.
pub fn interface_of(ip: Ipv4Addr) -> String {
    interfaces().into_iter().find(|i| i.1 == ip).map_or_else(|| ip.to_string(), |i| i.0)
}

/// The address from `get` (a variable source: the environment, or a map in tests) and the
/// interfaces `ifs` (name, address, up, loopback), or why there is none.
fn choose(
    get: impl Fn(&str) -> Option<String>,
    ifs: &[(String, Ipv4Addr, bool, bool)],
) -> Result<Ipv4Addr, String> {
    let var = |k: &str| get(k).filter(|v| !v.is_empty());
    if let Some(v) = var("SOFTRDMA_LOCAL") {
        return v.parse().map_err(|_| format!("SOFTRDMA_LOCAL={v}: not an IPv4 address"));
    }
    if let Some(dev) = var("SOFTRDMA_DEV") {
        return ifs
            .iter()
            .find(|i| i.0 == dev)
            .map(|i| i.1)
            .ok_or_else(|| format!("SOFTRDMA_DEV={dev}: no such interface with an IPv4 address"));
    }
    let up = || ifs.iter().filter(|i| i.2);
    up().find(|i| !i.3)
        .or_else(|| up().next())
        .map(|i| i.1)
        .ok_or_else(|| "no interface is up with an IPv4 address (set SOFTRDMA_LOCAL)".to_string())
}

/// The host address the environment names (see the module documentation).
pub fn local_ip() -> Result<Ipv4Addr, String> {
    choose(|k| std::env::var(k).ok(), &interfaces())
}

/// The datapath from `get`: `None` for kernel UDP, or the interface holding `ip` (of `ifs`) for
/// AF_XDP.
fn backend_from(
    get: impl Fn(&str) -> Option<String>,
    ifs: &[(String, Ipv4Addr, bool, bool)],
    ip: Ipv4Addr,
) -> Result<Option<String>, String> {
    match get("SOFTRDMA_BACKEND").filter(|v| !v.is_empty()).as_deref() {
        None | Some("udp") => Ok(None),
        Some("afxdp") => ifs
            .iter()
            .find(|i| i.1 == ip)
            .map(|i| Some(i.0.clone()))
            .ok_or_else(|| format!("SOFTRDMA_BACKEND=afxdp: no interface holds {ip}")),
        Some(o) => Err(format!("SOFTRDMA_BACKEND={o}: expected udp or afxdp")),
    }
}

/// The datapath the environment names for the fabric at `ip`: `None` for kernel UDP, or the
/// interface for AF_XDP.
pub fn backend(ip: Ipv4Addr) -> Result<Option<String>, String> {
    backend_from(|k| std::env::var(k).ok(), &interfaces(), ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn variables_then_interfaces() {
        let ifs = vec![
            ("lo".to_string(), Ipv4Addr::LOCALHOST, true, true),
            ("eth0".to_string(), Ipv4Addr::new(10, 0, 0, 1), false, false),
            ("eth1".to_string(), Ipv4Addr::new(10, 0, 1, 1), true, false),
        ];
        let with = |vars: &[(&str, &str)]| {
            let m: HashMap<String, String> =
                vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            choose(|k| m.get(k).cloned(), &ifs)
        };
        assert_eq!(with(&[]), Ok(Ipv4Addr::new(10, 0, 1, 1)), "the first up, not the loopback");
        assert_eq!(with(&[("SOFTRDMA_DEV", "eth0")]), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(
            with(&[("SOFTRDMA_LOCAL", "10.9.9.9"), ("SOFTRDMA_DEV", "eth0")]),
            Ok(Ipv4Addr::new(10, 9, 9, 9))
        );
        assert!(with(&[("SOFTRDMA_LOCAL", "ten")]).unwrap_err().contains("SOFTRDMA_LOCAL=ten"));
        assert!(with(&[("SOFTRDMA_DEV", "wlan9")]).unwrap_err().contains("wlan9"));
        let be = |v: &str, ip: Ipv4Addr| {
            backend_from(|k| (k == "SOFTRDMA_BACKEND").then(|| v.to_string()), &ifs, ip)
        };
        assert_eq!(be("", Ipv4Addr::LOCALHOST), Ok(None));
        assert_eq!(be("afxdp", Ipv4Addr::new(10, 0, 1, 1)), Ok(Some("eth1".to_string())));
        assert!(be("afxdp", Ipv4Addr::new(10, 9, 9, 9)).unwrap_err().contains("10.9.9.9"));
        assert!(be("dpdk", Ipv4Addr::LOCALHOST).unwrap_err().contains("dpdk"));
        let only_lo = &ifs[..1];
        let cp = |v: &[(&str, &str)]| {
            let m: HashMap<String, String> = v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            control_from(|k| m.get(k).cloned())
        };
        let c = cp(&[("SOFTRDMA_JOB_ID", "10, 20")]).unwrap();
        assert_eq!((c.jobs_of(PROCESS), c.fallback()), (&[10, 20][..], false));
        assert!(cp(&[("SOFTRDMA_JOB_FALLBACK", "1")]).unwrap().fallback());
        assert!(cp(&[("SOFTRDMA_JOB_ID", "16777215")]).unwrap_err().contains("fallback"));
        assert!(cp(&[("SOFTRDMA_JOB_ID", "x")]).unwrap_err().contains("\"x\""));
        assert!(cp(&[("SOFTRDMA_JOB_FALLBACK", "yes")]).is_err());
        assert_eq!(choose(|_| None, only_lo), Ok(Ipv4Addr::LOCALHOST));
        assert!(choose(|_| None, &[]).is_err());
    }
}
