//! The files a kernel RDMA device shows, for a device of this library: what `softrdma run` lays
//! out in the program's private view of `/sys/class` (and `/dev/infiniband`), so that middleware
//! that looks for a device there (UCX lists an `ibv_device` only if `/dev/infiniband/<dev_name>`
//! is a character device it may open, then reads `/sys/class/infiniband/<name>/...`) finds it as
//! it finds an rxe device.
//!
//! The tree is described, not written: [`device_tree`] returns the entries (paths relative to
//! `/sys/class`), the tool creates them. The contents follow the kernel's formats (rxe's where
//! they differ between drivers) and agree with what the library's verbs answer: the GUID, the
//! GID table, the port's state and rate.

use crate::config::{self, DevInfo, GID_TABLE_LEN};
use engine::datapath::link::Backend;
use std::net::Ipv4Addr;

/// One entry of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir(String),
    /// A read-only file and its contents.
    File(String, String),
    /// A symbolic link and its target.
    Link(String, String),
}

/// The firmware version the device reports (`fw_ver`, in `ibv_query_device` and sysfs).
pub(crate) const FW_VER: &str = concat!("softrdma ", env!("CARGO_PKG_VERSION"));

/// The `uverbs` ABI version rxe's provider declares (`RXE_UVERBS_ABI_VERSION`).
const PROVIDER_ABI: u32 = 2;

/// The kernel's uverbs ABI (`/sys/class/infiniband_verbs/abi_version`).
pub const UVERBS_ABI: u32 = 6;

/// Where the tree goes: `class/...` under `/sys`; the character device is
/// `/dev/infiniband/uverbs<N>`.
pub const SYS_ROOT: &str = "/sys";

/// The entries for the device on `iface` with address `ip`, numbered `uverbs<n>`, whose character
/// device has number `dev` (major, minor): `class/infiniband/softrdma_<iface>/...` and
/// `class/infiniband_verbs/uverbs<n>/...`, parents first. `up` is the interface's state.
pub fn device_tree(iface: &str, ip: Ipv4Addr, n: u32, dev: (u32, u32), up: bool) -> Vec<Entry> {
    let info = config::info(iface.to_string(), ip, Backend::Udp, wire::ROCEV2_UDP_PORT, true);
    tree(&info, n, dev, up, &NetDevice::of(iface))
}

/// What the interface's own device (a PCI NIC) offers the RDMA device's `device` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NetDevice {
    /// The real path of `/sys/class/net/<iface>/device`, if the interface has one (veth and lo
    /// have none).
    path: Option<String>,
    /// The CPUs of the machine as a sysfs mask (`local_cpus` of a device without locality).
    cpus: String,
}

impl NetDevice {
    fn of(iface: &str) -> NetDevice {
        let path = std::fs::canonicalize(format!("/sys/class/net/{iface}/device"))
            .ok()
            .map(|p| p.display().to_string());
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
        let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        let nbits = cpu_list(&possible).into_iter().max().map_or(1, |m| m + 1);
        NetDevice { path, cpus: cpu_mask(&cpu_list(&online), nbits) }
    }
}

/// The CPUs of a sysfs list (`0-3,8`).
fn cpu_list(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            // A bound on what a list from a broken file can make us allocate.
            out.extend((a..=b.min(a.saturating_add(8192))).take(8193));
        }
    }
    out
}

/// `cpus` as the kernel prints a mask of `nbits` bits (`%*pb`): 32-bit groups in hex, most
/// significant first, separated by commas, the first as wide as its bits need.
fn cpu_mask(cpus: &[u32], nbits: u32) -> String {
    let nbits = nbits.clamp(1, 8192);
    let words = nbits.div_ceil(32) as usize;
    let mut w = vec![0u32; words];
    for &c in cpus.iter().filter(|&&c| c < nbits) {
        w[(c / 32) as usize] |= 1 << (c % 32);
    }
    let first_bits = nbits - 32 * (words as u32 - 1);
    let mut s = format!("{:0width$x}", w[words - 1], width = first_bits.div_ceil(4) as usize);
    for x in w[..words - 1].iter().rev() {
        s.push_str(&format!(",{x:08x}"));
    }
    s
}

/// A 64-bit GUID as sysfs prints it (`node_guid`: four groups of four hex digits).
fn guid_text(g: u64) -> String {
    let b = g.to_be_bytes();
    format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// A GID as sysfs prints it (`gids/N`: eight groups of four hex digits).
fn gid_text(g: &[u8; 16]) -> String {
    g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

fn tree(info: &DevInfo, n: u32, dev: (u32, u32), up: bool, netdev: &NetDevice) -> Vec<Entry> {
    let ib = format!("class/infiniband/{}", info.name);
    let port = format!("{ib}/ports/1");
    let file = |p: &str, s: &str| Entry::File(p.to_string(), format!("{s}\n"));
    let dir = |p: &str| Entry::Dir(p.to_string());
    let guid = guid_text(info.guid());
    let mut t = vec![
        dir("class/infiniband"),
        dir(&ib),
        file(&format!("{ib}/node_type"), "1: CA"),
        file(&format!("{ib}/node_guid"), &guid),
        file(&format!("{ib}/sys_image_guid"), &guid),
        file(&format!("{ib}/fw_ver"), FW_VER),
        file(&format!("{ib}/hca_type"), "softrdma"),
        file(&format!("{ib}/hw_rev"), "0x0"),
        file(&format!("{ib}/board_id"), "softrdma"),
        file(&format!("{ib}/node_desc"), &info.name),
    ];
    match &netdev.path {
        // A NIC's RDMA device sits under the NIC: `device` is the NIC's own directory, where
        // UCX finds its PCI address, NUMA node and local CPUs.
        Some(p) => t.push(Entry::Link(format!("{ib}/device"), p.clone())),
        None => t.extend([
            dir(&format!("{ib}/device")),
            file(&format!("{ib}/device/numa_node"), "-1"),
            file(&format!("{ib}/device/local_cpus"), &netdev.cpus),
        ]),
    }
    t.extend([
        dir(&format!("{ib}/ports")),
        dir(&port),
        file(&format!("{port}/state"), if up { "4: ACTIVE" } else { "1: DOWN" }),
        file(&format!("{port}/phys_state"), if up { "5: LinkUp" } else { "3: Disabled" }),
        file(&format!("{port}/link_layer"), "Ethernet"),
        // As `ibv_query_port` answers: width 1X, speed SDR.
        file(&format!("{port}/rate"), "2.5 Gb/sec (1X SDR)"),
        file(&format!("{port}/lid"), "0x0"),
        file(&format!("{port}/sm_lid"), "0x0"),
        file(&format!("{port}/sm_sl"), "0"),
        file(&format!("{port}/lid_mask_count"), "0"),
        file(&format!("{port}/cap_mask"), "0x00010000"),
        dir(&format!("{port}/pkeys")),
        file(&format!("{port}/pkeys/0"), "0xffff"),
        dir(&format!("{port}/gids")),
        dir(&format!("{port}/gid_attrs")),
        dir(&format!("{port}/gid_attrs/types")),
        dir(&format!("{port}/gid_attrs/ndevs")),
    ]);
    for (i, g) in (0..GID_TABLE_LEN).filter_map(|i| Some((i, info.gid(i)?))) {
        t.push(file(&format!("{port}/gids/{i}"), &gid_text(&g)));
        t.push(file(&format!("{port}/gid_attrs/types/{i}"), "RoCE v2"));
        t.push(file(&format!("{port}/gid_attrs/ndevs/{i}"), &info.iface));
    }
    let uv = format!("class/infiniband_verbs/uverbs{n}");
    t.extend([
        dir("class/infiniband_verbs"),
        dir(&uv),
        file(&format!("{uv}/ibdev"), &info.name),
        file(&format!("{uv}/abi_version"), &PROVIDER_ABI.to_string()),
        file(&format!("{uv}/dev"), &format!("{}:{}", dev.0, dev.1)),
    ]);
    t
}

/// The `uverbs<N>` whose `ibdev` names `name` in the program's `/sys/class/infiniband_verbs`,
/// if the tool laid the tree out there (none when the program runs without the view).
pub(crate) fn uverbs_of(name: &str) -> Option<String> {
    let dir = format!("{SYS_ROOT}/class/infiniband_verbs");
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let n = e.file_name().into_string().ok()?;
        let ibdev = std::fs::read_to_string(e.path().join("ibdev")).ok()?;
        (n.starts_with("uverbs") && ibdev.trim() == name).then_some(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DevInfo {
        DevInfo {
            name: "softrdma_veth0".into(),
            iface: "veth0".into(),
            ip: Ipv4Addr::new(10, 0, 0, 1),
            mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            netdev_mtu: 1500,
            ifindex: 3,
            backend: Backend::Udp,
            udp_port: 4791,
            verify_icrc: true,
        }
    }

    fn file<'a>(t: &'a [Entry], path: &str) -> Option<&'a str> {
        t.iter().find_map(|e| match e {
            Entry::File(p, s) if p == path => Some(s.as_str()),
            _ => None,
        })
    }

    #[test]
    fn the_tree_describes_the_device_as_rxe_shows_one() {
        let nd = NetDevice { path: None, cpus: "3".into() };
        let t = tree(&info(), 2, (1, 3), true, &nd);
        let ib = "class/infiniband/softrdma_veth0";
        assert_eq!(file(&t, &format!("{ib}/node_type")), Some("1: CA\n"));
        assert_eq!(file(&t, &format!("{ib}/node_guid")), Some("5054:00ff:fe12:3456\n"));
        assert_eq!(file(&t, &format!("{ib}/fw_ver")), Some(format!("{FW_VER}\n").as_str()));
        assert_eq!(file(&t, &format!("{ib}/device/numa_node")), Some("-1\n"));
        assert_eq!(file(&t, &format!("{ib}/device/local_cpus")), Some("3\n"));
        let p = format!("{ib}/ports/1");
        assert_eq!(file(&t, &format!("{p}/state")), Some("4: ACTIVE\n"));
        assert_eq!(file(&t, &format!("{p}/link_layer")), Some("Ethernet\n"));
        for i in 0..2 {
            assert_eq!(file(&t, &format!("{p}/gids/{i}")), Some("0000:0000:0000:0000:0000:ffff:0a00:0001\n"));
            assert_eq!(file(&t, &format!("{p}/gid_attrs/types/{i}")), Some("RoCE v2\n"));
            assert_eq!(file(&t, &format!("{p}/gid_attrs/ndevs/{i}")), Some("veth0\n"));
        }
        assert_eq!(file(&t, &format!("{p}/gids/2")), None);
        let uv = "class/infiniband_verbs/uverbs2";
        assert_eq!(file(&t, &format!("{uv}/ibdev")), Some("softrdma_veth0\n"));
        assert_eq!(file(&t, &format!("{uv}/dev")), Some("1:3\n"));
        // Every entry's parent comes before it.
        for (i, e) in t.iter().enumerate() {
            let path = match e {
                Entry::Dir(p) | Entry::File(p, _) | Entry::Link(p, _) => p,
            };
            if let Some((parent, _)) = path.rsplit_once('/').filter(|(p, _)| *p != "class") {
                assert!(t[..i].contains(&Entry::Dir(parent.to_string())), "{path} before {parent}");
            }
        }
        let down = tree(&info(), 0, (1, 3), false, &nd);
        assert_eq!(file(&down, &format!("{p}/phys_state")), Some("3: Disabled\n"));
    }

    #[test]
    fn a_nic_lends_its_own_device_directory() {
        let nd = NetDevice { path: Some("/sys/devices/pci0000:00/0000:00:03.0".into()), cpus: "3".into() };
        let t = tree(&info(), 0, (1, 3), true, &nd);
        let link = "class/infiniband/softrdma_veth0/device";
        assert!(t.contains(&Entry::Link(link.into(), "/sys/devices/pci0000:00/0000:00:03.0".into())));
        assert_eq!(file(&t, &format!("{link}/numa_node")), None);
    }

    #[test]
    fn cpu_masks_print_as_the_kernel_prints_them() {
        assert_eq!(cpu_list("0-1\n"), [0, 1]);
        assert_eq!(cpu_list("0-2,8"), [0, 1, 2, 8]);
        assert_eq!(cpu_mask(&[0, 1], 2), "3");
        assert_eq!(cpu_mask(&[0, 1, 2, 3, 4, 5, 6, 7], 8), "ff");
        assert_eq!(cpu_mask(&[0, 33], 40), "02,00000001");
        assert_eq!(cpu_mask(&(0..64).collect::<Vec<_>>(), 64), "ffffffff,ffffffff");
        // A broken list is bounded, not an allocation without end.
        assert!(cpu_list("0-4294967295").len() <= 8193);
    }
}
