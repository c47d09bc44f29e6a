//! The kernel UDP datapath: RoCEv2 over an unprivileged UDP socket bound to port 4791 of one local
//! IPv4 address (roce-wire.md §1.9).
//!
//! **Sending.** The engine builds whole frames; this datapath hands the kernel the UDP payload (BTH
//! through ICRC), each datagram to its own destination. `transmit` queues the frame in a batch of
//! up to 64 (`mmsg::TX_BATCH`) datagrams, which goes to the kernel with one `sendmmsg` (`sendto`
//! for a lone one) at the end of the progress round ([`Datapath::flush`]) or when it is full.
//! Where the kernel can segment UDP (`UDP_SEGMENT`, Linux 4.18+), a run of datagrams of one size
//! to one destination (the last may be shorter) goes as one message of the batch, a GSO send: the
//! kernel's stack handles the run once and cuts it into the datagrams at the device, or not at all
//! where the device takes it whole (veth; a NIC with UDP segmentation offload), so a 64 KiB
//! message costs a few sends, not one per packet. Linux refuses GSO without UDP checksums, so the
//! datagrams then carry one (the ICRC masks it; rxe accepts it); without GSO the socket sends
//! checksum 0 (`SO_NO_CHECK`), as rxe does.
//!
//! The ICRC covers the IP header the kernel writes, so the socket is unconnected with
//! don't-fragment set (`IP_PMTUDISC_DO`): Linux then gives a datagram IP ID 0 and the segments of
//! a GSO send IDs 0, 1, 2..., and each segment's ICRC is amended for its ID before the send
//! ([`wire::ib::icrc::amend`], no pass over the packet). Every frame leaves from the bound port,
//! which QPs use as their UDP source port ([`Datapath::udp_src_port`]). Each datagram leaves with
//! the TOS byte of the frame's IPv4 header (the QP's traffic class: DSCP and ECN, roce-wire.md
//! §1.3) as an `IP_TOS` control message. TOS, TTL and the UDP checksum are masked by the ICRC. The socket is non-blocking: what the kernel refuses for want
//! of room (`EAGAIN`/`EWOULDBLOCK`, `ENOBUFS`) stays queued, in order, and goes with the next
//! flush; the engine sleeps until the socket turns writable ([`Datapath::wait_fd`],
//! [`Datapath::tx_waiting`]). A frame that finds the batch full and the kernel still without room
//! goes back to the engine as [`TxError::Full`]. Only a datagram the kernel will never take (larger
//! than the path MTU, no route) is dropped, counted in [`UdpCounters::tx_failed`] (the engine is
//! not told: it was told the frame was taken; a reliable QP sends it again), and the datagrams
//! queued after it go on.
//!
//! **Receiving.** `receive` polls the socket with `recvfrom` and, once polls find a backlog, takes
//! up to 32 (`mmsg::RX_BATCH`) datagrams with one `recvmmsg` (`udp/mmsg.rs` says why both),
//! straight into frames of the datapath's pool. Where the kernel can coalesce received datagrams
//! (`UDP_GRO`, Linux 5.0+), it hands the socket a run of same-size datagrams from one sender as
//! one buffer (a GSO send that a veth passed whole, or packets a NIC's or virtio-net's GRO joined),
//! so its stack handles the run once; every call then reads into 64 KiB buffers and the run is cut
//! into its datagrams, one frame each (a copy, cheaper than the kernel's work per datagram it
//! saves). A UDP socket shows neither the IP header nor the
//! sender's IP ID. The datapath rebuilds the Ethernet, IPv4 and UDP headers from what the socket
//! does give (addresses, ports, length, and the TOS byte with `IP_RECVTOS`: DSCP, and the ECN
//! bits a congested router marked CE) and, with [`RxIcrc::Verify`], finds the sender's IP ID from
//! the ICRC ([`wire::ib::icrc::verify_any_ipv4_id`]: the CRC is linear, so the difference between
//! the ICRC sent and the one computed with the ID tried names the ID; the ID after the last one
//! found is tried, so the next segment of a GSO send matches at once) and writes it into the
//! rebuilt header. The engine then checks the ICRC over exactly the header that was on the wire, so
//! everything the ICRC covers is verified whatever ID the sender used (a GSO segment's, or
//! rdma_rxe's own); the kernel has already checked the UDP checksum when there was one.
//! [`RxIcrc::Trust`] skips that check (the rebuilt frame gets a freshly computed ICRC, counted in
//! [`UdpCounters::icrc_trusted`]), and [`RxIcrc::Absent`] is for UET, which has no ICRC.

mod mmsg;

use super::{Datapath, TxError};
use frame::{Frame, FramePool};
use mmsg::{RxBatch, Segmentation, TxBatch};
use rustix::net::sockopt::{self, Ipv4PathMtuDiscovery};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};
use wire::ethernet::{self, EthernetAddress, ethertype};
use wire::frame::ETH_IPV4_UDP_LEN as HEADERS;
use wire::ib::Mtu;
use wire::ib::icrc;
use wire::ipv4::{self, DONT_FRAGMENT, PROTO_UDP};
use wire::{EthernetRepr, Ipv4Repr, UdpChecksum, UdpRepr, udp};

/// The MAC address frames are built with (the kernel routes; MACs never reach a wire).
const PLACEHOLDER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0];

/// What the receive path verifies of the ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxIcrc {
    /// Verify it over the rebuilt headers, with whatever IP ID the sender used (the ID is found
    /// from the ICRC and written into the rebuilt header).
    Verify,
    /// Do not verify it; counted.
    Trust,
    /// The frames carry no ICRC (UET over UDP): nothing to verify or amend.
    Absent,
}

/// Counters of the UDP datapath.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// Datagrams sent.
    pub tx: u64,
    /// Frames handed back to the engine because the batch was full and the kernel had no room for
    /// it (full socket buffer); the engine sent them again later (back-pressure; nothing was lost).
    pub tx_full: u64,
    /// Frames dropped because they can never be sent: not an IPv4/UDP frame, or a send error
    /// other than a full buffer (larger than the path MTU, no route...).
    pub tx_failed: u64,
    /// The `errno` of the last send error counted in `tx_failed` (0: none).
    pub tx_last_errno: i32,
    /// `sendmmsg` calls, refused ones included (with `tx` and `sendto_calls`: datagrams per
    /// call).
    pub sendmmsg_calls: u64,
    /// `sendto` calls, for a batch of one datagram.
    pub sendto_calls: u64,
    /// Send calls (either kind) the kernel refused for want of room (the batch waited).
    pub send_refused: u64,
    /// Datagrams received.
    pub rx: u64,
    /// `recvmmsg` calls (a backlog).
    pub recvmmsg_calls: u64,
    /// Datagrams they took (over `recvmmsg_calls`: datagrams per call).
    pub recvmmsg_datagrams: u64,
    /// `recvfrom` calls (polls of a socket without a backlog).
    pub recvfrom_calls: u64,
    /// Receive calls (either kind) that found nothing.
    pub rx_empty: u64,
    /// Datagrams too large for a frame buffer (dropped).
    pub rx_oversized: u64,
    /// Datagrams that came in a run the kernel coalesced (`UDP_GRO`: one receive buffer for a
    /// run of same-size datagrams from one sender, cut apart here).
    pub rx_coalesced: u64,
    /// Frames whose ICRC was recomputed instead of verified ([`RxIcrc::Trust`]).
    pub icrc_trusted: u64,
    /// Frames whose ICRC matched with an IP ID other than 0 ([`RxIcrc::Verify`]), written back
    /// into the rebuilt header: a GSO batch's segments (IDs 0, 1, 2...), or rdma_rxe's IDs.
    pub ip_id_recovered: u64,
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
    /// Datagrams transmitted and not sent yet.
    tx: TxBatch,
    /// Why a queued datagram could not be sent, not told to the engine yet: the next `transmit`
    /// returns it ([`TxError::Failed`]), so a wrong path MTU or a missing route stops a run with
    /// that reason instead of showing only as retransmissions.
    failure: Option<&'static str>,
    /// Datagrams received and not handed out yet.
    rx: RxBatch,
    /// The IP ID a received datagram most likely has: one after the last one found.
    next_ip_id: u16,
}

impl UdpPort {
    /// Binds `ip:port` (4791 to talk to RoCEv2 peers), non-blocking, don't-fragment, with large
    /// socket buffers.
    pub fn bind(ip: Ipv4Addr, port: u16, rx_icrc: RxIcrc) -> io::Result<UdpPort> {
        super::icrc_pick::pick();
        let socket = UdpSocket::bind(SocketAddrV4::new(ip, port))?;
        let port = socket.local_addr()?.port();
        socket.set_nonblocking(true)?;
        sockopt::set_ip_mtu_discover(&socket, Ipv4PathMtuDiscovery::DO)?;
        // Each received datagram's TOS byte, for the rebuilt header.
        sockopt::set_ip_recvtos(&socket, true)?;
        // GSO needs UDP checksums (Linux refuses it with SO_NO_CHECK); without it, checksum 0 as
        // rxe sends.
        let segmentation = if crate::sys::udp_gso_supported(&socket) {
            Segmentation::Gso { icrc: rx_icrc != RxIcrc::Absent }
        } else {
            crate::sys::set_udp_no_check(&socket, true)?;
            Segmentation::Off
        };
        let rx = if crate::sys::set_udp_gro(&socket) { RxBatch::new().with_gro() } else { RxBatch::new() };
        socket_buffers(&socket);
        Ok(UdpPort {
            socket,
            ip,
            port,
            start: Instant::now(),
            pool: FramePool::default(),
            rx_icrc,
            counters: UdpCounters::default(),
            mtu: Mtu::Mtu4096,
            tx: TxBatch::new(segmentation),
            failure: None,
            rx,
            next_ip_id: 0,
        })
    }

    /// Sends one datagram per message header, without GSO (and with UDP checksum 0, as rxe).
    pub fn without_gso(mut self) -> io::Result<UdpPort> {
        crate::sys::set_udp_no_check(&self.socket, true)?;
        self.tx = TxBatch::new(Segmentation::Off);
        Ok(self)
    }

    /// Limits the path MTU QPs on this port may use (the largest IB MTU that fits the link: rxe
    /// takes the netdev MTU minus 80).
    pub fn with_mtu(mut self, mtu: Mtu) -> UdpPort {
        self.mtu = mtu;
        self
    }

    /// The port's counters.
    pub fn counters(&self) -> UdpCounters {
        UdpCounters { rx_coalesced: self.rx.coalesced, ..self.counters }
    }

    /// The socket's local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sends what the batch holds, as far as the kernel takes it.
    fn send_batch(&mut self) {
        let sent = self.tx.send(self.socket.as_fd(), &mut self.pool);
        self.counters.sendmmsg_calls += sent.sendmmsg;
        self.counters.sendto_calls += sent.sendto;
        self.counters.send_refused += sent.refused;
        self.counters.tx += sent.sent;
        self.counters.tx_failed += sent.failed;
        if let Some(e) = sent.last_error {
            self.counters.tx_last_errno = e;
            self.failure = Some(match e {
                libc::EMSGSIZE => "sendto: the datagram is larger than the path MTU",
                libc::ENETUNREACH | libc::EHOSTUNREACH => "sendto: no route to the peer",
                libc::EPERM | libc::EACCES => "sendto: refused by the host (firewall?)",
                _ => "sendto failed",
            });
        }
    }
}

impl Drop for UdpPort {
    /// Frames the engine was told were taken get one last, non-blocking try.
    fn drop(&mut self) {
        if !self.tx.is_empty() {
            self.send_batch();
        }
    }
}

/// Writes Ethernet, IPv4 (TOS `tos`, ID 0, DF, TTL 64) and UDP (checksum 0) headers for `payload`
/// bytes from `src` to `dst` into the first [`HEADERS`] bytes of `b`.
fn rebuild_headers(
    b: &mut [u8],
    src: SocketAddrV4,
    dst: SocketAddrV4,
    tos: u8,
    payload: usize,
) -> wire::Result<()> {
    let mac = EthernetAddress(PLACEHOLDER_MAC);
    let eth = EthernetRepr { dst_addr: mac, src_addr: mac, vlan_tags: [None; 2], ethertype: ethertype::IPV4 };
    let ip = Ipv4Repr {
        dscp_ecn: tos,
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

/// Sets the identification of the IPv4 header at the start of `ip` (and its header checksum).
fn set_ipv4_id(ip: &mut [u8], id: u16) {
    if let Ok(mut p) = ipv4::Packet::new_checked(&mut *ip) {
        p.set_ident(id);
        p.fill_checksum();
    }
}

/// Where an IPv4 frame the engine built goes, where in it its UDP payload (BTH through ICRC) is,
/// and its TOS byte; `None` for anything else. Only what the send needs is read: the engine built
/// the headers.
fn udp_destination(f: &[u8]) -> Option<(SocketAddrV4, Range<usize>, u8)> {
    let eth = ethernet::Frame::new_checked(f).ok()?;
    if eth.ethertype() != ethertype::IPV4 {
        return None;
    }
    let ip = ipv4::Packet::new_checked(f.get(ethernet::HEADER_LEN..)?).ok()?;
    let at = ethernet::HEADER_LEN + ip.header_len();
    let dgram = udp::Packet::new_checked(f.get(at..)?).ok()?;
    Some((SocketAddrV4::new(ip.dst_addr(), dgram.dst_port()), at + udp::HEADER_LEN..f.len(), ip.dscp_ecn()))
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
        ip.to_canonical().is_ipv4().then_some(PLACEHOLDER_MAC)
    }

    fn alloc(&mut self) -> Frame {
        self.pool.get()
    }

    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        let Some((dst, payload, tos)) = udp_destination(frame.as_slice()) else {
            self.counters.tx_failed += 1;
            self.pool.put(frame);
            return Err(TxError::Failed("not an IPv4/UDP frame"));
        };
        if let Some(why) = self.failure.take() {
            // A datagram sent earlier failed for good: say so now. This frame is dropped with it
            // (counted), as a frame that failed itself would be.
            self.counters.tx_failed += 1;
            self.pool.put(frame);
            return Err(TxError::Failed(why));
        }
        if self.tx.is_full() {
            self.send_batch();
            if self.tx.is_full() {
                self.counters.tx_full += 1;
                return Err(TxError::Full(frame));
            }
        }
        if let Err(frame) = self.tx.push(frame, payload, dst, tos) {
            // Not full (above), and the payload range is the frame's: not reached.
            self.counters.tx_full += 1;
            return Err(TxError::Full(frame));
        }
        if self.tx.is_full() {
            self.send_batch();
        }
        Ok(())
    }

    fn receive(&mut self) -> Option<Frame> {
        loop {
            let got = match self.rx.pop() {
                Some(got) => got,
                None if self.rx.take_drained() => return None,
                None => {
                    let took = self.rx.take(self.socket.as_fd(), &mut self.pool, HEADERS);
                    let c = &mut self.counters;
                    if took.batch {
                        c.recvmmsg_calls += 1;
                        c.recvmmsg_datagrams += took.datagrams as u64;
                    } else {
                        c.recvfrom_calls += 1;
                    }
                    if took.datagrams == 0 {
                        c.rx_empty += 1;
                        return None;
                    }
                    continue;
                }
            };
            let (mut frame, n) = (got.frame, got.len);
            let Some(src) = got.from else {
                self.pool.put(frame);
                continue;
            };
            self.counters.rx += 1;
            if got.truncated || HEADERS + n >= frame::FRAME_CAPACITY {
                self.counters.rx_oversized += 1;
                self.pool.put(frame);
                continue;
            }
            let dst = SocketAddrV4::new(self.ip, self.port);
            if rebuild_headers(frame.buffer_mut(), src, dst, got.tos, n).is_err() {
                self.pool.put(frame);
                continue; // a payload too long for an IPv4 datagram
            }
            frame.set_len(HEADERS + n);
            let ip = &mut frame.as_mut_slice()[ethernet::HEADER_LEN..];
            let checked = match self.rx_icrc {
                RxIcrc::Absent => false,
                RxIcrc::Trust => {
                    let filled = icrc::fill(ip).is_ok();
                    self.counters.icrc_trusted += u64::from(filled);
                    filled
                }
                // The sender's IP ID goes back into the rebuilt header, so the engine (and a
                // capture) sees the frame as it was on the wire. A frame no ID makes right is left
                // as it is: the engine drops it.
                // The search starts from the ID after the last one found: the next segment of a
                // GSO send, whose ICRC then matches at once (no search).
                RxIcrc::Verify => {
                    ip[4..6].copy_from_slice(&self.next_ip_id.to_be_bytes());
                    let id = icrc::verify_any_ipv4_id(ip);
                    set_ipv4_id(ip, *id.as_ref().unwrap_or(&0));
                    if let Ok(id) = id {
                        self.next_ip_id = id.wrapping_add(1);
                        if id != 0 {
                            self.counters.ip_id_recovered += 1;
                        }
                    }
                    id.is_ok()
                }
            };
            if checked {
                // The engine need not compute the CRC again (a wrapper that changes the frame
                // clears this).
                frame.mark_icrc_checked();
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

    fn flush(&mut self) {
        if !self.tx.is_empty() {
            self.send_batch();
        }
    }

    fn tx_waiting(&self) -> bool {
        !self.tx.is_empty()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.socket.as_fd())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = UdpPort::counters(self);
        let mut v = vec![
            ("udp datagrams sent", c.tx),
            ("udp sendmmsg calls", c.sendmmsg_calls),
            ("udp sendto calls (a lone datagram)", c.sendto_calls),
            ("udp send calls refused (socket buffer full)", c.send_refused),
            ("udp sends deferred (socket buffer full)", c.tx_full),
            ("udp sends failed", c.tx_failed),
            ("udp datagrams received", c.rx),
            ("udp recvmmsg calls", c.recvmmsg_calls),
            ("udp datagrams by recvmmsg", c.recvmmsg_datagrams),
            ("udp recvfrom polls", c.recvfrom_calls),
            ("udp datagrams in runs the kernel coalesced (gro)", c.rx_coalesced),
            ("udp receive calls that found nothing", c.rx_empty),
            ("udp oversized dropped", c.rx_oversized),
            ("icrc not verified (--rx-icrc trust)", c.icrc_trusted),
            ("udp ip ids recovered from the icrc", c.ip_id_recovered),
        ];
        // What never reached the socket: its receive buffer was full (a flood, or a receiver slower
        // than its sender). The kernel counts what it would have queued: a datagram, or a run of
        // them a GSO sender sent in one piece (up to 64, kept whole for this UDP_GRO socket).
        if let Ok(d) = crate::sys::socket_drops(&self.socket) {
            v.push((
                "udp datagrams (a coalesced run once) dropped by the kernel (receive buffer full)",
                d.into(),
            ));
        }
        if c.tx_failed > 0 {
            v.push(("udp last send error (errno)", c.tx_last_errno.unsigned_abs().into()));
        }
        v
    }
}

/// Bytes asked for each of a socket's buffers: a send window of RC requests (256 PSNs, up to
/// 1 MiB at path MTU 4096) and the coalesced runs behind it fit several times over, so a receiver
/// that falls behind for a few milliseconds (a VM's vCPU the host runs something else on) loses
/// nothing.
const SOCKET_BUFFER: usize = 8 << 20;

/// Sizes the socket's buffers to [`SOCKET_BUFFER`]: past `net.core.[rw]mem_max` when the process
/// may (`SO_RCVBUFFORCE` and `SO_SNDBUFFORCE`, `CAP_NET_ADMIN`), else as far as those caps allow
/// (a Debian VM's default is 208 KiB: 200 packets of path MTU 1024, less than one window).
fn socket_buffers(socket: &UdpSocket) {
    if sockopt::set_socket_recv_buffer_size_force(socket, SOCKET_BUFFER).is_err() {
        let _ = sockopt::set_socket_recv_buffer_size(socket, SOCKET_BUFFER);
    }
    if sockopt::set_socket_send_buffer_size_force(socket, SOCKET_BUFFER).is_err() {
        let _ = sockopt::set_socket_send_buffer_size(socket, SOCKET_BUFFER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `CAP_NET_ADMIN` the buffers reach [`SOCKET_BUFFER`] whatever `net.core.rmem_max`
    /// says (Linux reports twice what was set); without it, as much as the caps allow.
    #[test]
    fn socket_buffers_pass_the_system_caps_when_allowed() {
        let port = UdpPort::bind(Ipv4Addr::LOCALHOST, 0, RxIcrc::Verify).unwrap();
        let (rx, tx) = (
            sockopt::socket_recv_buffer_size(&port.socket).unwrap(),
            sockopt::socket_send_buffer_size(&port.socket).unwrap(),
        );
        if rustix::process::geteuid().is_root() {
            assert!(rx >= 2 * SOCKET_BUFFER && tx >= 2 * SOCKET_BUFFER, "receive {rx} B, send {tx} B");
        } else {
            eprintln!("not root: SO_RCVBUFFORCE is not allowed; buffers {rx} B and {tx} B");
        }
    }

    #[test]
    fn rebuilt_headers_parse() {
        let mut b = [0u8; 64];
        let src = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4791);
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791);
        rebuild_headers(&mut b, src, dst, 0x6A, 22).unwrap();
        let (eth, ip_at) = wire::EthernetRepr::parse(&b).unwrap();
        assert_eq!((eth.ethertype, ip_at), (ethertype::IPV4, 14));
        let p = wire::ipv4::Packet::new_checked(&b[14..]).unwrap();
        let ip = wire::Ipv4Repr::parse(&p).unwrap();
        assert_eq!((ip.dscp_ecn, ip.ident, ip.flags_frag, ip.ttl, ip.protocol), (0x6A, 0, 0x4000, 64, 17));
        assert_eq!((ip.src_addr, ip.dst_addr, ip.payload_len), (*src.ip(), *dst.ip(), 30));
        let u = udp::Packet::new_checked(&b[34..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len(), u.checksum()), (4791, 4791, 30, 0));
        assert_eq!(udp_destination(&b[..HEADERS + 22]), Some((dst, HEADERS..HEADERS + 22, 0x6A)));
    }

    /// A RoCEv2-shaped frame from `src` to `dst` with `payload` bytes after the UDP header (a
    /// BTH-sized head, `fill` bytes, the ICRC), IP ID 0 and a good ICRC.
    fn roce_frame(src: SocketAddrV4, dst: SocketAddrV4, payload: usize, fill: u8) -> Frame {
        roce_frame_tos(src, dst, 0, payload, fill)
    }

    /// [`roce_frame`] with TOS byte `tos`.
    fn roce_frame_tos(src: SocketAddrV4, dst: SocketAddrV4, tos: u8, payload: usize, fill: u8) -> Frame {
        let mut f = Frame::new();
        let b = f.buffer_mut();
        rebuild_headers(b, src, dst, tos, payload).unwrap();
        b[HEADERS..HEADERS + payload].fill(fill);
        icrc::fill(&mut b[ethernet::HEADER_LEN..HEADERS + payload]).unwrap();
        f.set_len(HEADERS + payload);
        f
    }

    /// A datagram whose ICRC verifies is marked checked (the engine skips its own pass); one whose
    /// ICRC no IP ID makes right is not (the engine computes it and drops the frame).
    #[test]
    fn only_a_datagram_whose_icrc_verifies_is_marked_checked() {
        let mut port = UdpPort::bind(Ipv4Addr::new(127, 0, 18, 8), 0, RxIcrc::Verify).unwrap();
        let peer = UdpSocket::bind("127.0.18.9:0").unwrap();
        let (SocketAddr::V4(to), SocketAddr::V4(from)) =
            (port.local_addr().unwrap(), peer.local_addr().unwrap())
        else {
            unreachable!("bound to IPv4")
        };
        let good = roce_frame(from, to, 100, 7);
        let mut bad = good.as_slice()[HEADERS..].to_vec();
        bad[20] ^= 1;
        peer.send_to(&good.as_slice()[HEADERS..], to).unwrap();
        peer.send_to(&bad, to).unwrap();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(5);
        while got.len() < 2 && Instant::now() < end {
            if let Some(f) = port.receive() {
                let ip = &f.as_slice()[ethernet::HEADER_LEN..];
                got.push((f.icrc_checked(), icrc::verify(ip).is_ok()));
                port.recycle(f);
            }
        }
        assert_eq!(got, [(true, true), (false, false)]);
    }

    /// Runs of same-size datagrams to one destination go as GSO sends; the kernel gives their
    /// segments IP IDs 0, 1, 2..., the sender amends each ICRC for its ID, and the receiver finds
    /// the ID from the ICRC: every frame verifies, with the ID it had on the wire. The receiver
    /// takes each run as one buffer (UDP_GRO) and cuts it into its datagrams. A port without GSO
    /// (checksum 0, one datagram per header) talks to it both ways.
    #[test]
    fn gso_runs_arrive_as_datagrams_whose_icrc_names_their_ip_id() {
        let ip = |d| Ipv4Addr::new(127, 0, 18, d);
        let mut a = UdpPort::bind(ip(5), 0, RxIcrc::Verify).unwrap();
        let mut b = UdpPort::bind(ip(6), 0, RxIcrc::Verify).unwrap();
        let mut plain = UdpPort::bind(ip(7), 0, RxIcrc::Verify).unwrap().without_gso().unwrap();
        let (at, bt, pt) = (a.local_addr().unwrap(), b.local_addr().unwrap(), plain.local_addr().unwrap());
        let v4 = |s: SocketAddr| match s {
            SocketAddr::V4(s) => s,
            SocketAddr::V6(_) => unreachable!("bound to IPv4"),
        };
        let (at, bt, pt) = (v4(at), v4(bt), v4(pt));
        if !crate::sys::udp_gso_supported(&a.socket) {
            eprintln!("skipped: this kernel has no UDP GSO");
            return;
        }
        // 40 of 1,040 bytes (a run of 39 and a shorter last one), to b; 3 to plain in between.
        let mut sent = Vec::new();
        for i in 0..43u8 {
            let (to, len) = match i {
                20..=22 => (pt, 1_040),
                42 => (bt, 500),
                _ => (bt, 1_040),
            };
            a.transmit(roce_frame(at, to, len, i)).unwrap();
            sent.push((to, len, i));
        }
        a.flush();
        plain.transmit(roce_frame(pt, bt, 1_040, 99)).unwrap();
        plain.flush();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(5);
        while got.len() < 44 && Instant::now() < end {
            for (port, to) in [(&mut b, bt), (&mut plain, pt)] {
                while let Some(f) = port.receive() {
                    let ip = &f.as_slice()[ethernet::HEADER_LEN..];
                    assert_eq!(icrc::verify(ip), Ok(()), "verifies with the ID written back");
                    assert!(f.icrc_checked(), "marked: the engine does not compute it again");
                    let id = u16::from_be_bytes([ip[4], ip[5]]);
                    got.push((to, f.len() - HEADERS, f.as_slice()[HEADERS + 1], id));
                    port.recycle(f);
                }
            }
        }
        got.sort_by_key(|&(_, _, fill, _)| fill);
        let mut want: Vec<_> = sent.iter().map(|&(to, len, i)| (to, len, i, 0)).collect();
        want.push((bt, 1_040, 99, 0));
        // Frames to b: IDs 0..19 (the run ends at the frames to plain), then 0..19 again (the run
        // after them, ending with the shorter one); plain's three: 0, 1, 2; plain's own: 0.
        for (k, w) in want.iter_mut().enumerate() {
            w.3 = match k {
                0..=19 => k as u16,
                20..=22 => k as u16 - 20,
                23..=42 => k as u16 - 23,
                _ => 0,
            };
        }
        assert_eq!(got, want);
        assert_eq!(a.counters().sendmmsg_calls, 1, "one call, three runs");
        assert_eq!(b.counters().ip_id_recovered, 38);
        // With UDP_GRO the kernel hands the socket each GSO run whole, cut apart here.
        // (Linux 5.0+; GSO came in 4.18.)
        if crate::sys::set_udp_gro(&b.socket) {
            assert!(b.counters().rx_coalesced >= 40, "{:?}", b.counters());
        }
    }

    /// Each datagram leaves with its frame's TOS byte (the QP's traffic class, ECN bits included)
    /// and the receiver's rebuilt header carries it: lone datagrams (`sendto` for TOS 0, else a
    /// `sendmmsg` of one) and GSO runs, which end where the TOS changes; received by polls and
    /// batches (coalesced runs with `UDP_GRO`). The ICRC, which masks the TOS, still verifies.
    #[test]
    fn the_tos_byte_of_each_frame_crosses_the_socket() {
        let ip = |d| Ipv4Addr::new(127, 0, 18, d);
        let mut a = UdpPort::bind(ip(10), 0, RxIcrc::Verify).unwrap();
        let mut b = UdpPort::bind(ip(11), 0, RxIcrc::Verify).unwrap();
        let v4 = |s: SocketAddr| match s {
            SocketAddr::V4(s) => s,
            SocketAddr::V6(_) => unreachable!("bound to IPv4"),
        };
        let (at, bt) = (v4(a.local_addr().unwrap()), v4(b.local_addr().unwrap()));
        // DSCP 26 (AF31), 26 with ECT(0), ECT(0) alone, EF (46), 0.
        let toses = [0x68u8, 0x6A, 0x02, 0xB8, 0];
        let mut want = Vec::new();
        for (i, &tos) in toses.iter().enumerate() {
            let fill = 200 + i as u8;
            a.transmit(roce_frame_tos(at, bt, tos, 100, fill)).unwrap();
            a.flush();
            want.push((fill, tos));
        }
        for i in 0..40u8 {
            let tos = toses[usize::from(i / 8)];
            a.transmit(roce_frame_tos(at, bt, tos, 1_040, i)).unwrap();
            want.push((i, tos));
        }
        a.flush();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(5);
        while got.len() < want.len() && Instant::now() < end {
            while let Some(f) = b.receive() {
                let ip = &f.as_slice()[ethernet::HEADER_LEN..];
                assert_eq!(icrc::verify(ip), Ok(()));
                got.push((f.as_slice()[HEADERS + 1], ip[1]));
                b.recycle(f);
            }
        }
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
        let c = a.counters();
        assert_eq!(c.tx, 45, "{c:?}");
        assert_eq!(c.sendto_calls, 1, "only the lone datagram of TOS 0 goes by sendto: {c:?}");
    }

    /// Datagrams too large for a frame are counted and dropped, whether a poll (`recvfrom`) or a
    /// batch (`recvmmsg`) took them, and the rest arrive whole and in order.
    #[test]
    fn oversized_datagrams_are_dropped_by_polls_and_batches() {
        let mut port = UdpPort::bind(Ipv4Addr::new(127, 0, 18, 1), 0, RxIcrc::Verify).unwrap();
        let peer = UdpSocket::bind("127.0.18.2:0").unwrap();
        let to = port.local_addr().unwrap();
        let fits = frame::FRAME_CAPACITY - HEADERS - 1;
        let len = |i: usize| if i % 3 == 1 { fits + 1 + i } else { 1 + i % 7 * (fits / 7) };
        let mut want = Vec::new();
        for i in 0..100 {
            peer.send_to(&vec![i as u8; len(i)], to).unwrap();
            if len(i) <= fits {
                want.push((i as u8, len(i)));
            }
        }
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(5);
        while got.len() < want.len() && Instant::now() < end {
            while let Some(f) = port.receive() {
                let b = f.as_slice();
                assert!(b[HEADERS..].iter().all(|&x| x == b[HEADERS]));
                got.push((b[HEADERS], b.len() - HEADERS));
                port.recycle(f);
            }
        }
        assert_eq!(got, want);
        let c = port.counters();
        assert_eq!((c.rx, c.rx_oversized), (100, 100 - want.len() as u64), "{c:?}");
        assert!(c.recvmmsg_datagrams > 50 && c.recvfrom_calls > 0, "both ways were used: {c:?}");
    }

    /// Datagrams the kernel dropped because the socket's receive buffer was full are counted (from
    /// the socket itself), so what was sent adds up: received + dropped by the kernel.
    #[test]
    fn kernel_drops_are_counted() {
        let mut port = UdpPort::bind(Ipv4Addr::new(127, 0, 18, 3), 0, RxIcrc::Verify).unwrap();
        let peer = UdpSocket::bind("127.0.18.4:0").unwrap();
        let to = port.local_addr().unwrap();
        let drops = |p: &UdpPort| {
            let c = Datapath::counters(p);
            c.iter().find(|(k, _)| k.contains("dropped by the kernel")).map(|&(_, v)| v).expect("counted")
        };
        assert_eq!(drops(&port), 0);
        // Far more than any receive buffer holds, none taken meanwhile.
        let sent = 20_000u64;
        for i in 0..sent {
            peer.send_to(&[i as u8; 1000], to).unwrap();
        }
        let mut got = 0u64;
        let end = Instant::now() + Duration::from_secs(5);
        while got + drops(&port) < sent && Instant::now() < end {
            while let Some(f) = port.receive() {
                got += 1;
                port.recycle(f);
            }
        }
        assert!(drops(&port) > 0, "the buffer overflowed");
        assert_eq!(got + drops(&port), sent, "received {got}, dropped {}", drops(&port));
    }
}
