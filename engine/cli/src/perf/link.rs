//! A side's datapath in a two-process run: which backend, port, faults and capture file it has
//! ([`Link`]), and opening it as a verbs context.

use super::hello::RemoteError;
use engine::datapath::Datapath;
use engine::datapath::afxdp::{AfXdpPort, XdpMode};
use engine::datapath::capture::{Capture, CaptureLog};
use engine::datapath::udp::{RxIcrc, UdpPort};
use engine::datapath::wrap::{Faulty, RocePort, TxFaults};
use engine::progress::Idle;
use engine::verbs::{Context, Mtu};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// Which side this process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Wait for a client.
    Server,
    /// Connect to a server at this host (name or address).
    Client(String),
}

/// The datapath of this process's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// Kernel UDP sockets.
    Udp,
    /// AF_XDP on a queue of an interface.
    AfXdp {
        /// Interface.
        dev: String,
        /// RX/TX queue.
        queue: u32,
        /// Native driver mode instead of generic.
        driver: bool,
        /// Multi-buffer AF_XDP (`XDP_USE_SG`, path MTU 4096) where the kernel has it and the run
        /// needs it (driver mode, or a path MTU above 2048); false for a single-buffer socket
        /// (path MTU 2048).
        multi_buffer: bool,
    },
}

/// A side's datapath settings before its local address is known (`pingpong`, `perf --perftest`:
/// the address comes from the exchange connection).
#[derive(Debug, Clone)]
pub struct Net {
    /// Kernel UDP or AF_XDP.
    pub backend: Backend,
    /// UDP port (4791).
    pub udp_port: u16,
    /// What received ICRCs are checked against (UDP backend).
    pub rx_icrc: RxIcrc,
    /// Faults injected on this side's egress.
    pub tx_faults: TxFaults,
    /// Seed of the faults.
    pub seed: u64,
    /// Write every frame sent and received to this pcap file, as the frames pass.
    pub capture: Option<CaptureFile>,
}

/// A pcap file a run writes as frames pass (`--capture FILE`, `--snaplen BYTES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFile {
    /// Where.
    pub path: PathBuf,
    /// At most this many bytes of each frame ([`engine::datapath::capture::SNAPLEN`]: all).
    pub snaplen: u16,
}

impl CaptureFile {
    /// `dp` writing what passes to this file.
    pub fn open<D: Datapath>(&self, dp: D) -> Result<Capture<D>, RemoteError> {
        Capture::create(dp, &self.path, self.snaplen)
            .map_err(|e| RemoteError(format!("creating the capture file {}: {e}", self.path.display())))
    }
}

impl Net {
    /// Kernel UDP on port 4791, verifying ICRCs, no faults, no capture.
    pub fn udp() -> Net {
        Net {
            backend: Backend::Udp,
            udp_port: wire::ROCEV2_UDP_PORT,
            rx_icrc: RxIcrc::Verify,
            tx_faults: TxFaults::default(),
            seed: 1,
            capture: None,
        }
    }

    /// The link of a side at `local` whose exchange uses `tcp_port`.
    pub fn link(&self, local: Ipv4Addr, tcp_port: u16) -> Link {
        Link {
            backend: self.backend.clone(),
            local,
            udp_port: self.udp_port,
            tcp_port,
            rx_icrc: self.rx_icrc,
            tx_faults: self.tx_faults,
            seed: self.seed,
            capture: self.capture.clone(),
            wait: Idle::Spin,
        }
    }
}

/// How this process's side talks to the network.
#[derive(Debug, Clone)]
pub struct Link {
    /// Kernel UDP or AF_XDP.
    pub backend: Backend,
    /// Local IPv4 address.
    pub local: Ipv4Addr,
    /// UDP port this side receives on (4791; another between softrdma processes, which tell each
    /// other their ports in the exchange).
    pub udp_port: u16,
    /// TCP port of the exchange.
    pub tcp_port: u16,
    /// What received ICRCs are checked against.
    pub rx_icrc: RxIcrc,
    /// Faults injected on this side's egress.
    pub tx_faults: TxFaults,
    /// Seed of the faults.
    pub seed: u64,
    /// Write every frame sent and received to this pcap file, as the frames pass (`--capture`).
    pub capture: Option<CaptureFile>,
    /// What a round with nothing to do does: spin, or sleep on the datapath (`--wait`).
    pub wait: Idle,
}

/// The largest path MTU a single-buffer AF_XDP socket carries (a frame in one 4096-byte chunk).
const SINGLE_BUFFER_MTU: u32 = 2048;

/// Opens this side's datapath (UDP or AF_XDP, with `link`'s egress faults and, if it asks, its
/// capture file and another UDP port than 4791) as a verbs context, after checking that path MTU
/// `mtu` fits the interface.
pub fn open_context(link: &Link, mtu: Mtu) -> Result<(Context, Option<CaptureLog>), RemoteError> {
    let (local, udp_port) = (link.local, link.udp_port);
    // The kernel refuses (DF set) datagrams larger than the link: check the path MTU fits it.
    if let Some(p) = crate::devinfo::host_ports().into_iter().find(|p| p.ip == local) {
        if mtu.bytes() + 80 > p.mtu {
            let fits = Mtu::for_netdev(p.mtu).map_or(0, |m| m.bytes());
            return Err(RemoteError(format!(
                "path MTU {} needs a netdev MTU of at least {} and {} has {}: use --mtu {fits}",
                mtu.bytes(),
                mtu.bytes() + 80,
                p.name,
                p.mtu
            )));
        }
    }
    let (ctx, capture) = match &link.backend {
        Backend::Udp => {
            let port = UdpPort::bind(local, udp_port, link.rx_icrc)
                .map_err(|e| RemoteError(format!("binding {local}:{udp_port}: {e}")))?
                .with_mtu(mtu);
            open_on(port, link)?
        }
        Backend::AfXdp { dev, queue, driver, multi_buffer } => {
            let mode = if *driver { XdpMode::Driver } else { XdpMode::Generic };
            // A path MTU whose frames fit one UMEM chunk needs no descriptor chains, and in generic
            // mode a single-buffer socket costs the kernel less per frame (64-byte WRITEs on veth:
            // 0.54 against 0.45 Mmsg/s, medians of 5). Driver mode keeps multi-buffer: veth refuses
            // a single-buffer program once its MTU is above a page.
            let sg = *multi_buffer && (*driver || mtu.bytes() > SINGLE_BUFFER_MTU);
            let port = AfXdpPort::open_with(dev, *queue, local, mode, udp_port, sg)
                .map_err(|e| RemoteError(format!("AF_XDP on {dev} queue {queue}: {e}")))?;
            if let (true, Err(why)) = (mtu.bytes() > port.port_mtu().bytes(), port.multi_buffer()) {
                return Err(RemoteError(format!(
                    "path MTU {} needs multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6+), and AF_XDP on {dev} is \
                     single-buffer: {why}. A single-buffer frame is one 4096-byte UMEM chunk: use --mtu {}",
                    mtu.bytes(),
                    port.port_mtu().bytes()
                )));
            }
            open_on(port.with_mtu(mtu), link)?
        }
    };
    if mtu.bytes() > ctx.port_mtu().bytes() {
        return Err(RemoteError(format!(
            "path MTU {} is above this datapath's {}: use --mtu {}",
            mtu.bytes(),
            ctx.port_mtu().bytes(),
            ctx.port_mtu().bytes()
        )));
    }
    Ok((ctx, capture))
}

/// A context on `port` with `link`'s egress faults; the capture decorator only with a capture
/// file, and [`RocePort`] only on another UDP port than 4791 (outside the capture, which so holds
/// the frames with the ports they had on the wire).
fn open_on<D: Datapath + Send + 'static>(
    port: D,
    link: &Link,
) -> Result<(Context, Option<CaptureLog>), RemoteError> {
    let dp = Faulty::new(port, link.tx_faults, link.seed);
    let other_port = (link.udp_port != wire::ROCEV2_UDP_PORT).then_some(link.udp_port);
    let Some(file) = &link.capture else {
        return Ok(match other_port {
            None => (Context::open(dp), None),
            Some(p) => (Context::open(RocePort::new(dp, p)), None),
        });
    };
    let dp = file.open(dp)?;
    let log = dp.log();
    Ok(match other_port {
        None => (Context::open(dp), Some(log)),
        Some(p) => (Context::open(RocePort::new(dp, p)), Some(log)),
    })
}

/// Writes out what the capture still buffers: the frames in the file, or why writing failed.
pub fn finish_capture(log: &CaptureLog) -> Result<u64, String> {
    log.flush().map_err(|e| e.to_string())
}
