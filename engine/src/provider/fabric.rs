//! `fi_fabric`: what a provider's endpoints send over. Either softrdma's simulated network (a
//! switch; each endpoint is a device on it with an address the control plane assigned;
//! [`Fabric::open_sim`]) or kernel UDP on one of the host's IPv4 addresses (an endpoint is a socket
//! on UET's port 4793 there, one per address; peers are other processes or hosts;
//! [`Fabric::open_udp`]). Everything runs on the caller's thread with manual progress: reading a
//! completion queue or counter makes every endpoint of the fabric progress, and
//! [`CompletionQueue::sread`] waits for completions: in virtual time on the simulated network, on
//! the socket (spinning briefly, then sleeping until a datagram or a timer is due) over UDP.
//!
//! [`CompletionQueue::sread`]: super::CompletionQueue::sread

use std::cell::{RefCell, RefMut};
use std::net::{IpAddr, Ipv4Addr};
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use nicsim::{LinkConfig, SwitchId};

use super::control::ControlPlane;
use super::errno::{FiErrno, FiError};
use super::info::MAX_PAYLOAD;
use super::objects::FabricOps;
use super::stat::{StatNode, StatSink};
use crate::datapath::Datapath;
use crate::datapath::link::{Backend, Link, OnDatapath, Opened, UET_HEADROOM, XdpMode, XdpQueue};
use crate::datapath::sim::SimNet;
use crate::progress::{Idle, MAX_SLEEP, Waiter};
use crate::uet::UetNode;

/// What a fabric needs of its endpoints (`endpoint.rs`).
pub(super) trait Member {
    /// One round of progress; true if anything moved.
    fn progress(&mut self) -> bool;
    /// The endpoint's node: its timers, its socket.
    fn node(&self) -> &UetNode<Box<dyn Datapath>>;
    /// The endpoint's name and node for `softrdma stat` (`stat.rs`).
    fn stat(&mut self) -> StatNode<'_>;
}

/// What a fabric's endpoints send over.
enum Net {
    /// The simulated network: a switch, every endpoint's cable impaired by `link`.
    Sim { net: SimNet, switch: SwitchId, link: LinkConfig },
    /// The host's network at `ip`: kernel UDP sockets, or AF_XDP on queue 0 of interface `afxdp`;
    /// `epoch` starts the fabric's clock; `waiter` decides what an idle wait does (spin briefly,
    /// then sleep on the socket); `max_payload` fits a packet in the link's MTU
    /// ([`udp_max_payload`]).
    Host { ip: Ipv4Addr, afxdp: Option<String>, epoch: Instant, waiter: RefCell<Waiter>, max_payload: usize },
}

impl Net {
    fn now(&self) -> Duration {
        match self {
            Net::Sim { net, .. } => net.now(),
            Net::Host { epoch, .. } => epoch.elapsed(),
        }
    }
}

/// An endpoint's port on the fabric ([`FabricInner::open_port`]).
pub(super) struct Port {
    /// The endpoint's address.
    pub(super) ip: Ipv4Addr,
    pub(super) dp: Box<dyn Datapath>,
    /// Whether its node checks UDP checksums.
    pub(super) require_checksum: bool,
    /// Payload bytes per packet.
    pub(super) max_payload: usize,
}

pub(crate) struct FabricInner {
    net: Net,
    pub(super) control: ControlPlane,
    pub(super) endpoints: Vec<Weak<RefCell<dyn Member>>>,
    pub(super) seed: u64,
    /// Where the endpoints' counters go (`stat.rs`), if anywhere.
    pub(super) stat: Option<Box<dyn StatSink>>,
}

/// The payload per packet on a UDP fabric at `ip`: the largest power of two up to
/// [`MAX_PAYLOAD`] whose packets fit the MTU of the interface holding `ip` (the kernel refuses
/// larger datagrams: don't-fragment); [`MAX_PAYLOAD`] when the interface is not found.
pub fn udp_max_payload(ip: Ipv4Addr) -> usize {
    match crate::datapath::link::netdev_of(ip) {
        None => MAX_PAYLOAD,
        Some((_, m)) => {
            let room = m.saturating_sub(UET_HEADROOM).clamp(256, MAX_PAYLOAD);
            1 << room.ilog2()
        }
    }
}

/// An endpoint's boxed datapath from the engine's opener.
struct Boxed;

impl OnDatapath for Boxed {
    type Output = (Box<dyn Datapath>, Opened);
    fn on<D: Datapath + Send + 'static>(self, dp: D, opened: Opened) -> Self::Output {
        (Box::new(dp), opened)
    }
}

impl FabricInner {
    /// A port for a new endpoint: on the simulated network a device at `allocated` (the control
    /// plane's address) cabled to the switch; over UDP a socket on the fabric's address and UET's
    /// port (FI_EBUSY when another endpoint holds it); over AF_XDP a socket on queue 0 of the
    /// interface, steering UET's port to it. With the endpoint's address, whether its node must
    /// check UDP checksums (nobody else checks a simulated or AF_XDP frame; the kernel checked
    /// what a socket delivers), and the payload its packets carry.
    pub(super) fn open_port(&self, allocated: Ipv4Addr) -> Result<Port, FiError> {
        match &self.net {
            Net::Sim { net, switch, link } => {
                let name = format!("uet{}", self.endpoints.len());
                let port = net
                    .add_device(&name, IpAddr::V4(allocated))
                    .map_err(|e| FiError::new(FiErrno::EBUSY, e))?;
                net.with(|n| n.attach(port, *switch, *link, *link))
                    .map_err(|e| FiError::new(FiErrno::EINVAL, format!("link: {e:?}")))?;
                let dev = net.open(&name).map_err(|e| FiError::new(FiErrno::EBUSY, e))?;
                Ok(Port {
                    ip: allocated,
                    dp: Box::new(dev),
                    require_checksum: true,
                    max_payload: MAX_PAYLOAD,
                })
            }
            Net::Host { ip, afxdp, max_payload, .. } => {
                let (backend, xdp) = match afxdp {
                    None => (Backend::Udp, None),
                    Some(dev) => {
                        let q = XdpQueue {
                            dev: dev.clone(),
                            queue: 0,
                            mode: XdpMode::Generic,
                            multi_buffer: true,
                        };
                        (Backend::AfXdp, Some(q))
                    }
                };
                // A single-buffer AF_XDP socket carries less than the interface: the endpoint's
                // packets carry what it does (`Opened::max_payload`).
                let (dp, opened) = Link::uet(backend, *ip, xdp, *max_payload).open(Boxed).map_err(|e| {
                    let held = match e.os_error().and_then(std::io::Error::raw_os_error) {
                        Some(libc::EBUSY) if backend == Backend::AfXdp => {
                            " (another AF_XDP socket holds the queue: under `softrdma run`, the verbs \
                             library's device, which libfabric's verbs provider opens at start-up; run \
                             with --no-verbs)"
                        }
                        _ => "",
                    };
                    let busy = backend == Backend::AfXdp
                        || e.os_error().is_some_and(|e| e.kind() == std::io::ErrorKind::AddrInUse);
                    let errno = if busy { FiErrno::EBUSY } else { FiErrno::EINVAL };
                    FiError::new(errno, format!("{e}{held}"))
                })?;
                Ok(Port {
                    ip: *ip,
                    dp,
                    require_checksum: opened.require_checksum,
                    max_payload: opened.max_payload,
                })
            }
        }
    }
}

impl std::fmt::Debug for FabricInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricInner").field("endpoints", &self.endpoints.len()).finish_non_exhaustive()
    }
}

/// One round of every endpoint; true if anything moved. It runs on every `fi_cq_read`: the
/// endpoints are taken one at a time, with no list built per call. Then the counters go to the
/// fabric's stat sink if it is due (`stat.rs`).
fn progress(f: &RefCell<FabricInner>) -> bool {
    let mut moved = false;
    let mut i = 0;
    loop {
        // The fabric is not borrowed while an endpoint progresses (it may open or close one).
        let Some(ep) = f.borrow().endpoints.get(i).map(Weak::upgrade) else { break };
        if let Some(ep) = ep {
            moved |= ep.borrow_mut().progress();
        }
        i += 1;
    }
    stat_maybe_publish(f);
    moved
}

/// From a progress call: publishes the endpoints' counters when the stat sink is due (`stat.rs`).
/// Skipped while the fabric is borrowed (an endpoint opening or closing in the middle of a call).
fn stat_maybe_publish(f: &RefCell<FabricInner>) {
    let Ok(mut inner) = f.try_borrow_mut() else { return };
    let inner = &mut *inner;
    let Some(sink) = inner.stat.as_mut() else { return };
    if sink.due() {
        stat_publish(sink.as_mut(), &inner.endpoints, None);
    }
}

/// An endpoint of `fabric` closes: its last counters (`name`, `node`) go to the stat sink now,
/// with the others'.
pub(super) fn stat_closing(
    fabric: &Weak<RefCell<FabricInner>>,
    name: &str,
    node: &mut UetNode<Box<dyn Datapath>>,
) {
    let Some(f) = fabric.upgrade() else { return };
    let Ok(mut inner) = f.try_borrow_mut() else { return };
    let inner = &mut *inner;
    if let Some(sink) = inner.stat.as_mut() {
        stat_publish(sink.as_mut(), &inner.endpoints, Some(StatNode { name, node }));
    }
}

/// Hands `sink` the nodes of the live endpoints (those not borrowed at the moment: none is
/// between two of a fabric's calls) and `extra`.
fn stat_publish(
    sink: &mut dyn StatSink,
    endpoints: &[Weak<RefCell<dyn Member>>],
    extra: Option<StatNode<'_>>,
) {
    let live: Vec<Rc<RefCell<dyn Member>>> = endpoints.iter().filter_map(Weak::upgrade).collect();
    let mut held: Vec<RefMut<'_, dyn Member>> = live.iter().filter_map(|e| e.try_borrow_mut().ok()).collect();
    let mut nodes: Vec<StatNode<'_>> = held.iter_mut().map(|m| m.stat()).collect();
    nodes.extend(extra);
    sink.publish(&mut nodes);
}

/// The fabric as a [`nicsim::System`]: a pass is one round of every endpoint.
struct Driven<'a>(&'a RefCell<FabricInner>);

impl nicsim::System for Driven<'_> {
    type Error = std::convert::Infallible;

    fn pass(&mut self) -> Result<bool, Self::Error> {
        Ok(progress(self.0))
    }

    fn next_event(&self) -> Option<Duration> {
        let eps: Vec<_> = self.0.borrow().endpoints.iter().filter_map(Weak::upgrade).collect();
        let timer = eps.iter().filter_map(|e| e.borrow().node().poll_timeout()).min();
        let net = match &self.0.borrow().net {
            Net::Sim { net, .. } => net.next_event(),
            Net::Host { .. } => None,
        };
        net.into_iter().chain(timer).min()
    }

    fn now(&self) -> Duration {
        self.0.borrow().net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        if let Net::Sim { net, .. } = &self.0.borrow().net {
            net.advance_to(t);
        }
    }
}

/// Progress, or else: on the simulated network virtual time to the next event ([`nicsim::step`]),
/// false when nothing can happen any more; over UDP a wait (spin, then sleep on the endpoint's
/// socket until a datagram, room to send, or its next timer), true (a peer may always send).
fn step(f: &RefCell<FabricInner>) -> bool {
    if matches!(f.borrow().net, Net::Sim { .. }) {
        let Ok(moved) = nicsim::step(&mut Driven(f));
        return moved;
    }
    if progress(f) {
        return true;
    }
    let eps: Vec<_> = f.borrow().endpoints.iter().filter_map(Weak::upgrade).collect();
    let inner = f.borrow();
    let Net::Host { waiter, .. } = &inner.net else { return true };
    match eps.as_slice() {
        // One socket (the usual: one endpoint per process) is slept on; with several, a sleep
        // on one would miss the others' datagrams: they are polled.
        [ep] => {
            let _ = waiter.borrow_mut().after_round(ep.borrow().node(), false, None, MAX_SLEEP);
        }
        _ => std::thread::yield_now(),
    }
    true
}

impl FabricOps for RefCell<FabricInner> {
    fn progress(&self) -> bool {
        progress(self)
    }

    fn step(&self) -> bool {
        step(self)
    }

    fn now(&self) -> Duration {
        self.borrow().net.now()
    }

    fn may_use(&self, process: u32, job_id: u32) -> bool {
        self.borrow().control.may_use(process, job_id)
    }
}

/// `fi_fabric`: a simulated network with a switch, or kernel UDP on one of the host's addresses.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub(super) inner: Rc<RefCell<FabricInner>>,
}

impl Fabric {
    /// A simulated network whose privileged side is `control`; `seed` drives the network's
    /// impairments, `link` impairs every port's cable both ways.
    pub fn open_sim(seed: u64, link: LinkConfig, control: ControlPlane) -> Fabric {
        let net = SimNet::new(seed);
        let switch = net.with(|n| n.add_switch());
        Fabric::with_net(Net::Sim { net, switch, link }, control, seed)
    }

    /// Kernel UDP on the host address `ip`, whose privileged side is `control` (JobIDs; the
    /// address is `ip`, not one the control plane assigns). Its endpoint binds `ip`, UDP port
    /// 4793 (UET's): one endpoint per address, and its peers are other processes or hosts,
    /// reached at the addresses they give with [`Endpoint::getname`](super::Endpoint::getname).
    pub fn open_udp(ip: Ipv4Addr, control: ControlPlane) -> Fabric {
        Fabric::open_host(ip, None, control)
    }

    /// AF_XDP on queue 0 of interface `dev`, which holds `ip` (generic XDP; root, or
    /// CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW), otherwise as [`Fabric::open_udp`]: one endpoint,
    /// UET's UDP port steered to it. Opening the endpoint fails (FI_EBUSY, with the reason) when
    /// the socket cannot be made.
    pub fn open_afxdp(dev: &str, ip: Ipv4Addr, control: ControlPlane) -> Fabric {
        Fabric::open_host(ip, Some(dev.to_string()), control)
    }

    fn open_host(ip: Ipv4Addr, afxdp: Option<String>, control: ControlPlane) -> Fabric {
        let waiter = RefCell::new(Waiter::new(Idle::ADAPTIVE));
        let seed = u64::from(ip.to_bits()) ^ u64::from(std::process::id()) << 32;
        let max_payload = udp_max_payload(ip);
        Fabric::with_net(Net::Host { ip, afxdp, epoch: Instant::now(), waiter, max_payload }, control, seed)
    }

    fn with_net(net: Net, control: ControlPlane, seed: u64) -> Fabric {
        Fabric {
            inner: Rc::new(RefCell::new(FabricInner {
                net,
                control,
                endpoints: Vec::new(),
                seed,
                stat: None,
            })),
        }
    }

    /// Publishes the counters of this fabric's endpoints to `sink` from now on, replacing the sink
    /// before (`softrdma stat`: see `stat.rs`).
    pub fn set_stat_sink(&self, sink: Box<dyn StatSink>) {
        self.inner.borrow_mut().stat = Some(sink);
    }

    /// The control plane (the privileged side: JobID assignments, fallback).
    pub fn control(&self) -> RefMut<'_, ControlPlane> {
        RefMut::map(self.inner.borrow_mut(), |f| &mut f.control)
    }

    /// Makes every endpoint progress once; true if anything moved.
    pub fn progress(&self) -> bool {
        progress(&self.inner)
    }

    /// Progress, or virtual time to the next event; false when nothing can happen any more.
    pub fn step(&self) -> bool {
        step(&self.inner)
    }

    /// Virtual time.
    pub fn now(&self) -> Duration {
        self.inner.borrow().net.now()
    }

    /// On the simulated network, records every frame sent from now on (for
    /// [`Fabric::take_tap`]); nothing on the host's network (capture it there).
    pub fn enable_tap(&self) {
        if let Net::Sim { net, .. } = &self.inner.borrow().net {
            net.with(|n| n.enable_tap());
        }
    }

    /// The frames recorded since [`Fabric::enable_tap`].
    pub fn take_tap(&self) -> Vec<nicsim::TapRecord> {
        match &self.inner.borrow().net {
            Net::Sim { net, .. } => net.with(|n| n.take_tap()),
            Net::Host { .. } => Vec::new(),
        }
    }
}
