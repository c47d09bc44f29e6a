//! Datapaths: where a device's frames go. The progress engine in [`crate::verbs::Context`] is the
//! only caller; it takes time from the datapath, so the simulated network runs on virtual time.

pub mod afxdp;
pub mod capture;
pub mod sim;
pub mod udp;
pub mod wrap;

use frame::Frame;
use std::net::IpAddr;
use std::time::Duration;

/// One port of a backend, as the progress engine sees it.
pub trait Datapath {
    /// The time the protocol cores are given: virtual for the simulator, monotonic otherwise.
    fn now(&self) -> Duration;
    /// The port's MAC address.
    fn mac(&self) -> [u8; 6];
    /// The port's GID as an IP address.
    fn gid(&self) -> IpAddr;
    /// The MAC of a neighbour, if known.
    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]>;
    /// A buffer to build a frame in.
    fn alloc(&mut self) -> Frame;
    /// Sends a frame.
    fn transmit(&mut self, frame: Frame) -> Result<(), &'static str>;
    /// The next received frame, if any.
    fn receive(&mut self) -> Option<Frame>;
    /// Returns a buffer.
    fn recycle(&mut self, frame: Frame);
    /// The largest RoCE payload per packet the link carries (rxe: the largest IB MTU below the
    /// netdev MTU minus 80, roce-wire.md §1.8).
    fn port_mtu(&self) -> crate::roce::types::Mtu {
        crate::roce::types::Mtu::Mtu4096
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
    /// The datapath's own counters, named.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
