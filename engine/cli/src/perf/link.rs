//! A side's datapath in a two-process run: which backend, port, faults and capture file it has
//! ([`Link`]), and opening it as a verbs context through the engine's opener
//! ([`engine::datapath::link::Link`]).

use super::hello::RemoteError;
use engine::datapath::link::{self, CaptureLog, OpenError, Protocol, RxIcrc, TxFaults};
pub use engine::datapath::link::{Backend, CaptureFile, XdpQueue};
use engine::progress::Idle;
use engine::verbs::{Context, Mtu};
use std::net::Ipv4Addr;

/// Which side this process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Wait for a client.
    Server,
    /// Connect to a server at this host (name or address).
    Client(String),
}

/// A side's datapath settings before its local address is known (`pingpong`, `perf --perftest`:
/// the address comes from the exchange connection).
#[derive(Debug, Clone)]
pub struct Net {
    /// Kernel UDP or AF_XDP.
    pub backend: Backend,
    /// The AF_XDP queue (AF_XDP).
    pub xdp: Option<XdpQueue>,
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

impl Net {
    /// Kernel UDP on port 4791, verifying ICRCs, no faults, no capture.
    pub fn udp() -> Net {
        Net {
            backend: Backend::Udp,
            xdp: None,
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
            backend: self.backend,
            xdp: self.xdp.clone(),
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
    /// The AF_XDP queue (AF_XDP).
    pub xdp: Option<XdpQueue>,
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

impl Link {
    /// The engine's description of this side's datapath, carrying `protocol`.
    pub fn datapath(&self, protocol: Protocol) -> link::Link {
        link::Link {
            backend: self.backend,
            local: self.local,
            xdp: self.xdp.clone(),
            protocol,
            faults: self.tx_faults,
            seed: self.seed,
            capture: self.capture.clone(),
        }
    }
}

/// What the command line says when a link cannot be opened: the engine's reason, with the
/// `--mtu` that would do where one would.
pub fn open_error(e: OpenError) -> RemoteError {
    RemoteError(match e {
        OpenError::NetdevMtu { payload, needs, dev, has } => {
            let fits = Mtu::for_netdev(has as u32).map_or(0, |m| m.bytes());
            format!(
                "path MTU {payload} needs a netdev MTU of at least {needs} and {dev} has {has}: use --mtu {fits}"
            )
        }
        OpenError::NeedsMultiBuffer { payload, dev, why, carries } => format!(
            "path MTU {payload} needs multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6+), and AF_XDP on {dev} is \
             single-buffer: {why}. A single-buffer frame is one 4096-byte UMEM chunk: use --mtu {carries}"
        ),
        e => e.to_string(),
    })
}

/// Opens this side's datapath (UDP or AF_XDP, with `link`'s egress faults and, if it asks, its
/// capture file and another UDP port than 4791) as a verbs context at path MTU `mtu`, refused
/// when the interface or the datapath cannot carry it.
pub fn open_context(link: &Link, mtu: Mtu) -> Result<(Context, Option<CaptureLog>), RemoteError> {
    let dp = link.datapath(Protocol::Roce { udp_port: link.udp_port, rx_icrc: link.rx_icrc, mtu });
    let (ctx, opened) = Context::open_link(&dp).map_err(open_error)?;
    if let Some(e) = opened.short_of(&dp) {
        return Err(open_error(e));
    }
    if mtu.bytes() > ctx.port_mtu().bytes() {
        return Err(RemoteError(format!(
            "path MTU {} is above this datapath's {}: use --mtu {}",
            mtu.bytes(),
            ctx.port_mtu().bytes(),
            ctx.port_mtu().bytes()
        )));
    }
    Ok((ctx, opened.capture))
}

/// Writes out what the capture still buffers: the frames in the file, or why writing failed.
pub fn finish_capture(log: &CaptureLog) -> Result<u64, String> {
    log.flush().map_err(|e| e.to_string())
}
