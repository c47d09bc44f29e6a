//! Datapaths: where a device's frames go. The progress engine in [`crate::verbs::Context`] is the
//! only caller; it takes time from the datapath, so the simulated network runs on virtual time.
//!
//! **Back-pressure.** A datapath never drops a frame it was handed because it has no room for it
//! now (a full AF_XDP ring, a full socket buffer): [`Datapath::transmit`] hands such a frame back as
//! [`TxError::Full`], and the engine keeps it, produces nothing more, and offers the same frame
//! again first when the datapath has room (after the next [`Datapath::flush`], or when
//! [`Datapath::wait_fd`] turns writable). Only a frame the datapath can never send is dropped
//! ([`TxError::Failed`], counted by the datapath). The fast path costs nothing more than before:
//! the result of the call the datapath already makes. A datapath that batches frames (kernel UDP:
//! one `sendmmsg` per [`Datapath::flush`]) may hold some it took when the kernel has no room; it
//! says so with [`Datapath::tx_waiting`], and idle loops then wait for the descriptor to turn
//! writable too.

pub mod afxdp;
pub mod capture;
mod icrc_pick;
pub mod link;
pub mod sim;
pub mod udp;
pub mod wrap;

use frame::Frame;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Why [`Datapath::transmit`] did not send a frame.
#[derive(Debug)]
pub enum TxError {
    /// No room now (full ring or socket buffer): the frame comes back untouched. The caller keeps
    /// it, sends nothing else, and offers this same frame again first, later.
    Full(Frame),
    /// The frame cannot be sent (no link, not a frame this datapath can carry, a socket error that
    /// retrying will not cure): it is dropped, and the datapath counts it.
    Failed(&'static str),
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::Full(_) => f.write_str("the datapath is full"),
            TxError::Failed(why) => f.write_str(why),
        }
    }
}

/// One port of a backend, as the progress engine sees it.
pub trait Datapath {
    /// The time the protocol cores are given: virtual for the simulator, monotonic otherwise.
    fn now(&self) -> Duration;
    /// The port's MAC address.
    fn mac(&self) -> [u8; 6];
    /// The port's GID as an IP address.
    fn gid(&self) -> IpAddr;
    /// The MAC of a neighbour, if known (it may wait a while for the kernel to resolve it: for
    /// the control path, e.g. connecting a QP).
    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]>;
    /// [`resolve`](Datapath::resolve) for the data path, which must never wait: a neighbour not
    /// known yet is asked for and `None` returned (the packet is dropped and its retransmission
    /// finds it). The default is `resolve`, for datapaths whose `resolve` does not wait.
    fn resolve_now(&self, ip: IpAddr) -> Option<[u8; 6]> {
        self.resolve(ip)
    }
    /// A buffer to build a frame in.
    fn alloc(&mut self) -> Frame;
    /// Sends a frame, or hands it back when there is no room for it now (see [`TxError`] and the
    /// module documentation).
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError>;
    /// The next received frame, if any.
    fn receive(&mut self) -> Option<Frame>;
    /// Returns a buffer.
    fn recycle(&mut self, frame: Frame);
    /// The largest RoCE payload per packet the link carries (rxe: the largest IB MTU below the
    /// netdev MTU minus 80, roce-wire.md §1.8).
    fn port_mtu(&self) -> wire::ib::Mtu {
        wire::ib::Mtu::Mtu4096
    }
    /// Whether the link is up.
    fn link_up(&self) -> bool {
        true
    }
    /// The UDP source port frames leave with, when the datapath decides it (a kernel socket sends
    /// from its bound port, and the ICRC covers the port).
    fn udp_src_port(&self) -> Option<u16> {
        None
    }
    /// Pushes out frames transmitted since the last call (one system call for a batch); called at
    /// the end of every progress round.
    fn flush(&mut self) {}
    /// Whether frames [`transmit`](Datapath::transmit) took still wait in the datapath for room
    /// (the kernel refused a batch for now at the last [`flush`](Datapath::flush)): an idle loop
    /// then also wakes when [`wait_fd`](Datapath::wait_fd) turns writable, and the next flush
    /// sends them.
    fn tx_waiting(&self) -> bool {
        false
    }
    /// How soon the datapath wants another [`flush`](Datapath::flush) when nothing else wakes the
    /// loop: frames it took that the kernel left unsent with no event to say when it will take
    /// them (an AF_XDP socket in copy mode whose driver queue was full: it transmits only in the
    /// system call, and nothing signals the queue's room to the socket). `None`: nothing waits.
    fn flush_retry_in(&self) -> Option<Duration> {
        None
    }
    /// A descriptor to sleep on instead of polling: readable when a frame may have arrived,
    /// writable when a refused frame may now fit (poll(2) it for both). `None` (the simulator, on
    /// virtual time): there is nothing to sleep on, so idle loops spin.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// The datapath's own counters, named.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A boxed datapath is one: for owners that pick the backend at run time (the provider's fabrics).
impl<D: Datapath + ?Sized> Datapath for Box<D> {
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn mac(&self) -> [u8; 6] {
        (**self).mac()
    }
    fn gid(&self) -> IpAddr {
        (**self).gid()
    }
    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        (**self).resolve(ip)
    }
    fn resolve_now(&self, ip: IpAddr) -> Option<[u8; 6]> {
        (**self).resolve_now(ip)
    }
    fn alloc(&mut self) -> Frame {
        (**self).alloc()
    }
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        (**self).transmit(frame)
    }
    fn receive(&mut self) -> Option<Frame> {
        (**self).receive()
    }
    fn recycle(&mut self, frame: Frame) {
        (**self).recycle(frame)
    }
    fn port_mtu(&self) -> wire::ib::Mtu {
        (**self).port_mtu()
    }
    fn link_up(&self) -> bool {
        (**self).link_up()
    }
    fn udp_src_port(&self) -> Option<u16> {
        (**self).udp_src_port()
    }
    fn flush(&mut self) {
        (**self).flush()
    }
    fn tx_waiting(&self) -> bool {
        (**self).tx_waiting()
    }
    fn flush_retry_in(&self) -> Option<Duration> {
        (**self).flush_retry_in()
    }
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        (**self).wait_fd()
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        (**self).counters()
    }
}
