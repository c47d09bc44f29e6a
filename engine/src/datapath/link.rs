//! Opening a real datapath, once for every caller: `softrdma perf`/`pingpong`/`perftest` (RoCE),
//! the UET perf, the verbs library's devices and the libfabric provider's endpoints all describe
//! what they want as a [`Link`] and open it with [`Link::open`]. The policy lives here only:
//!
//! - **The netdev MTU check.** The kernel refuses (don't-fragment) or the link drops a frame longer
//!   than the interface's MTU: a payload per packet whose frames do not fit the interface holding
//!   the link's address is refused before anything is bound ([`OpenError::NetdevMtu`]).
//! - **The AF_XDP buffer policy.** A payload whose frames fit one 4096-byte UMEM chunk (at most
//!   [`SINGLE_BUFFER_PAYLOAD`] bytes) gets a single-buffer socket in generic mode, which costs the
//!   kernel less per frame (64-byte RoCE WRITEs on veth: 0.54 against 0.45 Mmsg/s, medians of 5);
//!   a larger payload, or driver mode (veth refuses a single-buffer program once its MTU is above
//!   a page), asks for multi-buffer (`XDP_USE_SG`) unless the caller forbids it. A kernel without
//!   multi-buffer gets a single-buffer socket ([`AfXdpPort::open_with`]); what the link then
//!   carries is in [`Opened::max_payload`], and a caller that needs more is told why
//!   ([`OpenError::NeedsMultiBuffer`]).
//! - **The decorators**, in one order: the port, then [`Faulty`] (the egress faults; with none it
//!   passes every frame), then [`Capture`] (with a capture file), then [`RocePort`] (RoCEv2 on a
//!   UDP port other than 4791; outside the capture, which so holds the frames with the ports they
//!   had on the wire).
//!
//! The caller gets the datapath with its concrete type ([`OnDatapath`]), so the decorators are not
//! called through a vtable unless the caller boxes the result.

use super::Datapath;
use super::afxdp::AfXdpPort;
use super::capture::Capture;
use super::udp::UdpPort;
use super::wrap::{Faulty, RocePort};
use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use wire::ib::Mtu;

// What a user of the opener names to describe a link, so that it needs no other datapath module.
pub use super::afxdp::{XdpMode, mac_of};
pub use super::capture::CaptureLog;
pub use super::udp::RxIcrc;
pub use super::wrap::TxFaults;

/// Which datapath a device or endpoint runs on (`--backend`, `SOFTRDMA_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The simulated network (`nicsim`), in one process: opened on a
    /// [`SimNet`](super::sim::SimNet), not by [`Link::open`].
    Sim,
    /// Kernel UDP sockets (unprivileged).
    Udp,
    /// AF_XDP on a queue of an interface (root, or CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW).
    AfXdp,
}

impl Backend {
    /// The name on the command line and in `SOFTRDMA_BACKEND`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Udp => "udp",
            Backend::AfXdp => "afxdp",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "sim" => Ok(Backend::Sim),
            "udp" => Ok(Backend::Udp),
            "afxdp" => Ok(Backend::AfXdp),
            o => Err(format!("{o}: expected sim, udp or afxdp")),
        }
    }
}

/// The AF_XDP queue a link uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpQueue {
    /// Interface.
    pub dev: String,
    /// RX/TX queue.
    pub queue: u32,
    /// Generic or native (driver) XDP.
    pub mode: XdpMode,
    /// Whether multi-buffer AF_XDP may be asked for where the link needs it (false: a
    /// single-buffer socket whatever the payload, `--xdp-single-buffer`).
    pub multi_buffer: bool,
}

/// What the link carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// RoCEv2.
    Roce {
        /// The UDP port (4791; another between softrdma processes, which tell each other theirs).
        udp_port: u16,
        /// What received ICRCs are checked against (kernel UDP).
        rx_icrc: RxIcrc,
        /// The largest path MTU the link carries.
        mtu: Mtu,
    },
    /// UET on its UDP port 4793.
    Uet {
        /// The largest payload per packet.
        max_payload: usize,
    },
}

/// Bytes of Ethernet, IPv4, UDP and transport headers a RoCEv2 packet adds to its payload, as
/// [`Mtu::for_netdev`] counts them (the netdev MTU excludes the 14 bytes of Ethernet).
pub const ROCE_HEADROOM: usize = 80;

/// Bytes of headers a UET packet adds to its payload on a UDP link, at most: IPv4 and UDP, PDS and
/// SES headers, and a TSS header with its ICV.
pub const UET_HEADROOM: usize = 128;

/// The largest payload per packet whose frames fit one 4096-byte UMEM chunk, i.e. what a
/// single-buffer AF_XDP socket carries (RoCE path MTU 2048).
pub const SINGLE_BUFFER_PAYLOAD: usize = 2048;

/// A pcap file a link writes as frames pass (`--capture FILE`, `--snaplen BYTES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFile {
    /// Where.
    pub path: PathBuf,
    /// At most this many bytes of each frame ([`super::capture::SNAPLEN`]: all).
    pub snaplen: u16,
}

/// A real datapath as its user wants it.
#[derive(Debug, Clone)]
pub struct Link {
    /// Kernel UDP or AF_XDP ([`Backend::Sim`] is refused: [`OpenError::Sim`]).
    pub backend: Backend,
    /// Local IPv4 address.
    pub local: Ipv4Addr,
    /// The AF_XDP queue ([`Backend::AfXdp`] needs one).
    pub xdp: Option<XdpQueue>,
    /// RoCEv2 or UET, and the payload per packet.
    pub protocol: Protocol,
    /// Faults injected on egress.
    pub faults: TxFaults,
    /// Seed of the faults.
    pub seed: u64,
    /// Write every frame sent and received to this pcap file, as the frames pass.
    pub capture: Option<CaptureFile>,
}

/// What [`Link::open`] found, handed to the user with the datapath.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The capture's log, with a capture file.
    pub capture: Option<CaptureLog>,
    /// The largest payload per packet the datapath carries now (the protocol's, or
    /// [`SINGLE_BUFFER_PAYLOAD`] on a single-buffer AF_XDP socket).
    pub max_payload: usize,
    /// Whether a UET node must check UDP checksums itself: true on AF_XDP; false on kernel UDP,
    /// where the kernel checked what a socket delivers.
    pub require_checksum: bool,
    /// Why the AF_XDP socket is single-buffer, when it is.
    pub single_buffer: Option<String>,
}

/// Takes the datapath [`Link::open`] made, with its concrete type.
pub trait OnDatapath {
    /// What the user makes of it.
    type Output;
    /// Called once, with the decorated datapath.
    fn on<D: Datapath + Send + 'static>(self, dp: D, opened: Opened) -> Self::Output;
}

/// Why a link could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The simulated network is not a link ([`Backend::Sim`]).
    Sim,
    /// [`Backend::AfXdp`] without [`Link::xdp`].
    NoQueue,
    /// The payload per packet needs a longer netdev MTU than the interface holding the address has.
    NetdevMtu {
        /// The payload per packet asked for.
        payload: usize,
        /// The netdev MTU it needs.
        needs: usize,
        /// The interface.
        dev: String,
        /// Its MTU.
        has: usize,
    },
    /// Binding the UDP socket or opening the AF_XDP socket failed.
    Bind {
        /// What was being bound: `ip:port`, or `dev queue N`.
        what: String,
        /// Why.
        err: io::Error,
    },
    /// The payload needs multi-buffer AF_XDP and the socket is single-buffer.
    NeedsMultiBuffer {
        /// The payload per packet asked for.
        payload: usize,
        /// The interface.
        dev: String,
        /// Why the socket is single-buffer.
        why: String,
        /// What it carries.
        carries: usize,
    },
    /// Creating the capture file failed.
    Capture {
        /// The file.
        path: PathBuf,
        /// Why.
        err: io::Error,
    },
}

impl OpenError {
    /// The OS error behind a [`OpenError::Bind`], if any (EADDRINUSE, EBUSY: another socket holds
    /// the port or queue).
    pub fn os_error(&self) -> Option<&io::Error> {
        match self {
            OpenError::Bind { err, .. } | OpenError::Capture { err, .. } => Some(err),
            _ => None,
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Sim => f.write_str("the simulated network is opened on a SimNet, not as a link"),
            OpenError::NoQueue => f.write_str("AF_XDP needs an interface"),
            OpenError::NetdevMtu { payload, needs, dev, has } => {
                write!(
                    f,
                    "a payload of {payload} bytes needs a netdev MTU of at least {needs} and {dev} has {has}"
                )
            }
            OpenError::Bind { what, err } => write!(f, "{what}: {err}"),
            OpenError::NeedsMultiBuffer { payload, dev, why, carries } => write!(
                f,
                "a payload of {payload} bytes needs multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6+), and AF_XDP \
                 on {dev} is single-buffer ({why}): it carries {carries}"
            ),
            OpenError::Capture { path, err } => {
                write!(f, "creating the capture file {}: {err}", path.display())
            }
        }
    }
}

impl std::error::Error for OpenError {}

/// The interface holding `ip` and its MTU, if the host has one.
pub fn netdev_of(ip: Ipv4Addr) -> Option<(String, usize)> {
    let name = nix::ifaddrs::getifaddrs()
        .ok()?
        .find(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|s| s.ip())) == Some(ip))?
        .interface_name;
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()?;
    Some((name, mtu))
}

impl Link {
    /// RoCEv2 on port 4791 at path MTU `mtu` over `backend` at `local`: ICRCs verified, no
    /// faults, no capture.
    pub fn roce(backend: Backend, local: Ipv4Addr, xdp: Option<XdpQueue>, mtu: Mtu) -> Link {
        let protocol = Protocol::Roce { udp_port: wire::ROCEV2_UDP_PORT, rx_icrc: RxIcrc::Verify, mtu };
        Link { backend, local, xdp, protocol, faults: TxFaults::default(), seed: 1, capture: None }
    }

    /// UET with `max_payload` bytes per packet over `backend` at `local`: no faults, no capture.
    pub fn uet(backend: Backend, local: Ipv4Addr, xdp: Option<XdpQueue>, max_payload: usize) -> Link {
        let protocol = Protocol::Uet { max_payload };
        Link { backend, local, xdp, protocol, faults: TxFaults::default(), seed: 1, capture: None }
    }

    /// The payload per packet the link must carry.
    pub fn payload(&self) -> usize {
        match self.protocol {
            Protocol::Roce { mtu, .. } => mtu.bytes() as usize,
            Protocol::Uet { max_payload } => max_payload,
        }
    }

    /// The UDP port the link receives on.
    fn udp_port(&self) -> u16 {
        match self.protocol {
            Protocol::Roce { udp_port, .. } => udp_port,
            Protocol::Uet { .. } => wire::uet::UDP_PORT,
        }
    }

    /// Checks the payload against the netdev MTU, opens the port, decorates it and hands it to
    /// `user`.
    pub fn open<U: OnDatapath>(&self, user: U) -> Result<U::Output, OpenError> {
        let payload = self.payload();
        let headroom = match self.protocol {
            Protocol::Roce { .. } => ROCE_HEADROOM,
            Protocol::Uet { .. } => UET_HEADROOM,
        };
        if let Some((dev, has)) = netdev_of(self.local) {
            if payload + headroom > has {
                return Err(OpenError::NetdevMtu { payload, needs: payload + headroom, dev, has });
            }
        }
        let (local, port) = (self.local, self.udp_port());
        match self.backend {
            Backend::Sim => Err(OpenError::Sim),
            Backend::Udp => {
                let (rx_icrc, mtu) = match self.protocol {
                    Protocol::Roce { rx_icrc, mtu, .. } => (rx_icrc, Some(mtu)),
                    Protocol::Uet { .. } => (RxIcrc::Absent, None),
                };
                let bind = |err| OpenError::Bind { what: format!("binding {local}:{port}"), err };
                let udp = UdpPort::bind(local, port, rx_icrc).map_err(bind)?;
                let udp = match mtu {
                    Some(m) => udp.with_mtu(m),
                    None => udp,
                };
                let opened = Opened {
                    capture: None,
                    max_payload: payload,
                    require_checksum: false,
                    single_buffer: None,
                };
                self.decorate(udp, opened, user)
            }
            Backend::AfXdp => {
                let x = self.xdp.as_ref().ok_or(OpenError::NoQueue)?;
                let sg = x.multi_buffer && (x.mode == XdpMode::Driver || payload > SINGLE_BUFFER_PAYLOAD);
                let xsk = AfXdpPort::open_with(&x.dev, x.queue, local, x.mode, port, sg).map_err(|err| {
                    OpenError::Bind { what: format!("AF_XDP on {} queue {}", x.dev, x.queue), err }
                })?;
                let single_buffer = xsk.multi_buffer().err().map(str::to_string);
                let carries =
                    if single_buffer.is_none() { payload } else { payload.min(SINGLE_BUFFER_PAYLOAD) };
                let xsk = match self.protocol {
                    Protocol::Roce { mtu, .. } => xsk.with_mtu(mtu),
                    Protocol::Uet { .. } => xsk,
                };
                let opened =
                    Opened { capture: None, max_payload: carries, require_checksum: true, single_buffer };
                self.decorate(xsk, opened, user)
            }
        }
    }

    /// The decorators around `port`, in their one order, handed to `user`.
    fn decorate<D: Datapath + Send + 'static, U: OnDatapath>(
        &self,
        port: D,
        mut opened: Opened,
        user: U,
    ) -> Result<U::Output, OpenError> {
        let dp = Faulty::new(port, self.faults, self.seed);
        let other_port = match self.protocol {
            Protocol::Roce { udp_port, .. } if udp_port != wire::ROCEV2_UDP_PORT => Some(udp_port),
            _ => None,
        };
        let Some(file) = &self.capture else {
            return Ok(match other_port {
                None => user.on(dp, opened),
                Some(p) => user.on(RocePort::new(dp, p), opened),
            });
        };
        let dp = Capture::create(dp, &file.path, file.snaplen)
            .map_err(|err| OpenError::Capture { path: file.path.clone(), err })?;
        opened.capture = Some(dp.log());
        Ok(match other_port {
            None => user.on(dp, opened),
            Some(p) => user.on(RocePort::new(dp, p), opened),
        })
    }
}

impl Opened {
    /// [`OpenError::NeedsMultiBuffer`] when the link's payload is more than this single-buffer
    /// AF_XDP socket carries, for a user that cannot do with less (a RoCE run at a given path MTU);
    /// one that can (a device, a provider's endpoint) takes [`Opened::max_payload`] instead.
    pub fn short_of(&self, link: &Link) -> Option<OpenError> {
        let (x, why) = (link.xdp.as_ref()?, self.single_buffer.as_ref()?);
        let payload = link.payload();
        (self.max_payload < payload).then(|| OpenError::NeedsMultiBuffer {
            payload,
            dev: x.dev.clone(),
            why: why.clone(),
            carries: self.max_payload,
        })
    }
}
