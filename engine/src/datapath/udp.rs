//! The kernel UDP datapath: RoCEv2 over an unprivileged UDP socket bound to port 4791 of one local
//! IPv4 address (roce-wire.md §1.9).
//!
//! **Sending.** The engine builds whole frames; this datapath hands the kernel the UDP payload (BTH
//! through ICRC) with `sendto`. The ICRC covers the IP header the kernel writes, so the socket is
//! unconnected with don't-fragment set (`IP_PMTUDISC_DO`): Linux then sends IP ID 0, which is what the
//! engine's headers say, and every frame leaves from the bound port 4791, which QPs use as their UDP
//! source port ([`Datapath::udp_src_port`]). TOS, TTL and the UDP checksum are masked by the ICRC;
//! the socket sends UDP checksum 0 (`SO_NO_CHECK`), as rxe does. The socket is non-blocking: a
//! send the kernel refuses for want of room (`EAGAIN`/`EWOULDBLOCK`, `ENOBUFS`) hands the frame
//! back as [`TxError::Full`], and the engine sends it again when the socket turns writable (its
//! descriptor is [`Datapath::wait_fd`]); only a datagram the kernel will never take is dropped
//! ([`UdpCounters::tx_failed`]).
//!
//! **Receiving.** A UDP socket shows neither the IP header nor the sender's IP ID. The datapath
//! rebuilds the Ethernet, IPv4 and UDP headers from what `recvfrom` does give (addresses, ports,
//! length) with IP ID 0 and DF, so the engine's ICRC check verifies everything the ICRC covers
//! provided the sender used ID 0 (softrdma over UDP does; the kernel has already checked the UDP
//! checksum when there was one). [`RxIcrc::Trust`] is for peers that send other IP IDs (rdma_rxe
//! picks a random one): the rebuilt frame then gets a freshly computed ICRC, so nothing the ICRC
//! covers is verified, and [`UdpCounters::icrc_trusted`] says how many frames that was.

use super::{Datapath, TxError};
use crate::roce::types::Mtu;
use frame::{Frame, FramePool};
use rustix::net::sockopt::{self, Ipv4PathMtuDiscovery};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};
use wire::ethernet::{self, EthernetAddress, ethertype};
use wire::frame::ETH_IPV4_UDP_LEN as HEADERS;
use wire::ib::icrc;
use wire::ipv4::{self, DONT_FRAGMENT, PROTO_UDP};
use wire::{EthernetRepr, Ipv4Repr, UdpChecksum, UdpRepr, udp};

/// The MAC address frames are built with (the kernel routes; MACs never reach a wire).
const PLACEHOLDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0];

/// What the receive path verifies of the ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxIcrc {
    /// Verify it over the rebuilt headers, assuming the sender's IP ID was 0 (softrdma peers).
    Verify,
    /// Do not verify it (peers with other IP IDs, such as rdma_rxe); counted.
    Trust,
}

/// Counters of the UDP datapath.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// Datagrams sent.
    pub tx: u64,
    /// Sends the kernel refused for now (full socket buffer): the frame went back to the engine,
    /// which sent it again later (back-pressure; nothing was lost).
    pub tx_full: u64,
    /// Frames dropped because they can never be sent: not an IPv4/UDP frame, or a send error
    /// other than a full buffer (larger than the path MTU, no route...).
    pub tx_failed: u64,
    /// Datagrams received.
    pub rx: u64,
    /// Datagrams too large for a frame buffer (dropped).
    pub rx_oversized: u64,
    /// Frames whose ICRC was recomputed instead of verified ([`RxIcrc::Trust`]).
    pub icrc_trusted: u64,
}

/// One device on the UDP datapath: a socket on `ip:4791`.
#[derive(Debug)]
pub struct UdpPort {
    socket: UdpSocket,
    ip: Ipv4Addr,
    port: u16,
    start: Instant,
    pool: FramePool,
    rx_icrc: RxIcrc,
    counters: UdpCounters,
    mtu: Mtu,
}

impl UdpPort {
    /// Binds `ip:port` (4791 to talk to RoCEv2 peers), non-blocking, don't-fragment, with large
    /// socket buffers.
    pub fn bind(ip: Ipv4Addr, port: u16, rx_icrc: RxIcrc) -> io::Result<UdpPort> {
        let socket = UdpSocket::bind(SocketAddrV4::new(ip, port))?;
        let port = socket.local_addr()?.port();
        socket.set_nonblocking(true)?;
        sockopt::set_ip_mtu_discover(&socket, Ipv4PathMtuDiscovery::DO)?;
        // UDP checksum 0, as rxe sends (and no checksum offload artifacts in captures).
        crate::sys::set_udp_no_check(&socket, true)?;
        // Best effort: the kernel caps these at net.core.[rw]mem_max.
        let _ = sockopt::set_socket_recv_buffer_size(&socket, 8 << 20);
        let _ = sockopt::set_socket_send_buffer_size(&socket, 8 << 20);
        Ok(UdpPort {
            socket,
            ip,
            port,
            start: Instant::now(),
            pool: FramePool::default(),
            rx_icrc,
            counters: UdpCounters::default(),
            mtu: Mtu::Mtu4096,
        })
    }

    /// Limits the path MTU QPs on this port may use (the largest IB MTU that fits the link: rxe
    /// takes the netdev MTU minus 80).
    pub fn with_mtu(mut self, mtu: Mtu) -> UdpPort {
        self.mtu = mtu;
        self
    }

    /// The port's counters.
    pub fn counters(&self) -> UdpCounters {
        self.counters
    }

    /// The socket's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

/// Writes Ethernet, IPv4 (ID 0, DF, TTL 64) and UDP (checksum 0) headers for `payload` bytes from
/// `src` to `dst` into the first [`HEADERS`] bytes of `b`.
fn rebuild_headers(b: &mut [u8], src: SocketAddrV4, dst: SocketAddrV4, payload: usize) -> wire::Result<()> {
    let mac = EthernetAddress(PLACEHOLDER_MAC);
    let eth = EthernetRepr { dst_addr: mac, src_addr: mac, vlan_tags: [None; 2], ethertype: ethertype::IPV4 };
    let ip = Ipv4Repr {
        dscp_ecn: 0,
        ident: 0,
        flags_frag: DONT_FRAGMENT,
        ttl: 64,
        protocol: PROTO_UDP,
        src_addr: *src.ip(),
        dst_addr: *dst.ip(),
        options: &[],
        payload_len: udp::HEADER_LEN + payload,
    };
    let udp = UdpRepr { src_port: src.port(), dst_port: dst.port(), checksum: UdpChecksum::Zero };
    let at = eth.emit(b)?;
    let at = at + ip.emit(&mut b[at..])?;
    udp.emit(&mut b[at..], payload)?;
    Ok(())
}

/// Whether a failed `sendto` means "no room now, try again" (the socket is non-blocking): a full
/// socket buffer, or a device queue the kernel reports full.
fn refused_for_now(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
        || e.kind() == io::ErrorKind::Interrupted
        || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Where an IPv4 frame the engine built goes, and its UDP payload (BTH through ICRC); `None` for
/// anything else. Only what `sendto` needs is read: the engine built the headers.
fn udp_destination(f: &[u8]) -> Option<(SocketAddrV4, &[u8])> {
    let eth = ethernet::Frame::new_checked(f).ok()?;
    if eth.ethertype() != ethertype::IPV4 {
        return None;
    }
    let ip = ipv4::Packet::new_checked(&f[ethernet::HEADER_LEN..]).ok()?;
    let dgram = udp::Packet::new_checked(&f[ethernet::HEADER_LEN + ip.header_len()..]).ok()?;
    Some((SocketAddrV4::new(ip.dst_addr(), dgram.dst_port()), &dgram.into_inner()[udp::HEADER_LEN..]))
}

impl Datapath for UdpPort {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn mac(&self) -> [u8; 6] {
        PLACEHOLDER_MAC
    }

    fn gid(&self) -> IpAddr {
        IpAddr::V4(self.ip)
    }

    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        crate::roce::path::canonical(ip).is_ipv4().then_some(PLACEHOLDER_MAC)
    }

    fn alloc(&mut self) -> Frame {
        self.pool.get()
    }

    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        let Some((dst, payload)) = udp_destination(frame.as_slice()) else {
            self.counters.tx_failed += 1;
            self.pool.put(frame);
            return Err(TxError::Failed("not an IPv4/UDP frame"));
        };
        match self.socket.send_to(payload, dst) {
            Ok(_) => {
                self.counters.tx += 1;
                self.pool.put(frame);
                Ok(())
            }
            Err(e) if refused_for_now(&e) => {
                self.counters.tx_full += 1;
                Err(TxError::Full(frame))
            }
            Err(e) => {
                self.counters.tx_failed += 1;
                self.pool.put(frame);
                Err(TxError::Failed(match e.raw_os_error() {
                    Some(libc::EMSGSIZE) => "sendto: the datagram is larger than the path MTU",
                    Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => "sendto: no route to the peer",
                    Some(libc::EPERM | libc::EACCES) => "sendto: refused by the host (firewall?)",
                    _ => "sendto failed",
                }))
            }
        }
    }

    fn receive(&mut self) -> Option<Frame> {
        let mut frame = self.pool.get();
        loop {
            let (n, from) = match self.socket.recv_from(&mut frame.buffer_mut()[HEADERS..]) {
                Ok(r) => r,
                Err(_) => {
                    self.pool.put(frame);
                    return None;
                }
            };
            let SocketAddr::V4(src) = from else { continue };
            self.counters.rx += 1;
            if HEADERS + n >= frame::FRAME_CAPACITY {
                self.counters.rx_oversized += 1;
                continue;
            }
            let dst = SocketAddrV4::new(self.ip, self.port);
            if rebuild_headers(frame.buffer_mut(), src, dst, n).is_err() {
                continue; // a payload too long for an IPv4 datagram
            }
            frame.set_len(HEADERS + n);
            if self.rx_icrc == RxIcrc::Trust
                && icrc::fill(&mut frame.as_mut_slice()[ethernet::HEADER_LEN..]).is_ok()
            {
                self.counters.icrc_trusted += 1;
            }
            return Some(frame);
        }
    }

    fn recycle(&mut self, frame: Frame) {
        self.pool.put(frame);
    }

    fn port_mtu(&self) -> Mtu {
        self.mtu
    }

    fn udp_src_port(&self) -> Option<u16> {
        Some(self.port)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.socket.as_fd())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("udp datagrams sent", c.tx),
            ("udp sends deferred (socket buffer full)", c.tx_full),
            ("udp sends failed", c.tx_failed),
            ("udp datagrams received", c.rx),
            ("udp oversized dropped", c.rx_oversized),
            ("icrc not verified (--rx-icrc trust)", c.icrc_trusted),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilt_headers_parse() {
        let mut b = [0u8; 64];
        let src = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4791);
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791);
        rebuild_headers(&mut b, src, dst, 22).unwrap();
        let (eth, ip_at) = wire::EthernetRepr::parse(&b).unwrap();
        assert_eq!((eth.ethertype, ip_at), (ethertype::IPV4, 14));
        let p = wire::ipv4::Packet::new_checked(&b[14..]).unwrap();
        let ip = wire::Ipv4Repr::parse(&p).unwrap();
        assert_eq!((ip.ident, ip.flags_frag, ip.ttl, ip.protocol), (0, 0x4000, 64, 17));
        assert_eq!((ip.src_addr, ip.dst_addr, ip.payload_len), (*src.ip(), *dst.ip(), 30));
        let u = udp::Packet::new_checked(&b[34..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len(), u.checksum()), (4791, 4791, 30, 0));
        assert_eq!(udp_destination(&b[..HEADERS + 22]), Some((dst, &b[HEADERS..HEADERS + 22])));
    }
}
