//! The AF_XDP datapath: kernel bypass on one queue of a network interface (needs root, or
//! CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW).
//!
//! An XDP program (loaded with raw `bpf()` calls, attached through a BPF link so it is detached when
//! the process exits or is killed) redirects IPv4 UDP to port 4791 on the bound queue into an AF_XDP
//! socket and passes everything else (ARP, ICMP, TCP, other UDP) to the kernel, so the host keeps its
//! address and its control traffic. The engine writes whole frames itself: its own MAC, the
//! neighbour's MAC from the kernel's ARP table (`/proc/net/arp`, asked for with a throwaway UDP
//! datagram when missing; the data path never waits for it, `neigh`), IPv4 with ID 0 and DF. Generic (SKB) mode works on any driver, veth
//! included; driver mode is used when asked.
//!
//! **Path MTU 4096: multi-buffer.** UMEM chunks are 4096 bytes, and a frame with a 4096-byte RoCE
//! payload (about 4170 bytes) does not fit one. The socket is bound with `XDP_USE_SG` (Linux 6.6+)
//! and the program loaded with `BPF_F_XDP_HAS_FRAGS`: a longer frame goes and comes as a chain of
//! descriptors, one chunk each, `XDP_PKT_CONTD` on all but the last (`chain`). TX publishes a
//! chain whole or hands the frame back; RX puts a chain together in one [`Frame`] and returns every
//! chunk to the FILL ring, dropping (and counting) a chain longer than a frame. The port MTU is
//! then 4096. A kernel that refuses the flag gets a single-buffer socket, frames of one chunk, and
//! path MTU 2048 ([`AfXdpPort::multi_buffer`] says why; the CLI says so for `--mtu 4096`). Either
//! way the interface's own MTU must carry the frames (4096 + 80 bytes for path MTU 4096).
//!
//! **Wake-ups and back-pressure.** The socket is bound with `XDP_USE_NEED_WAKEUP`: the kernel sets
//! a flag on the TX ring (always, in copy mode) or the FILL ring (native zero-copy drivers whose
//! receive queue ran dry) when it needs a system call to go on, and this datapath makes one only
//! then: `send` for TX at the end of a round ([`Datapath::flush`], repeated while the kernel takes
//! descriptors: copy mode moves at most a batch per call), `recv` for FILL when the RX ring is
//! empty, and once as soon as entries go back on a FILL ring that asks (`ring::FillWakeup`). When the TX chunks or ring slots a frame needs (two for a chain) are not free, `transmit`
//! takes back the completed chunks, kicks the kernel, and if there is still no room hands the frame
//! back ([`TxError::Full`]); the engine offers it again later. The socket's descriptor
//! ([`Datapath::wait_fd`]) is what idle loops sleep on: readable when the RX ring has frames,
//! writable when the TX ring has room.
//!
//! This module and `engine::sys` are the only places with `unsafe`; every block says why it holds.
#![allow(unsafe_code)]

mod bpf;
mod chain;
mod looped;
mod neigh;
mod ring;

use super::{Datapath, TxError};
use chain::{RxChain, RxStep};
use frame::{Frame, FramePool};
use ring::Ring;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::time::{Duration, Instant};
use wire::ib::Mtu;

/// Bytes per UMEM chunk: a whole frame, or one buffer of a multi-buffer frame.
const CHUNK: usize = 4096;
/// Descriptors a frame takes on TX at most (a full [`frame::FRAME_CAPACITY`] frame).
const MAX_TX_PARTS: usize = frame::FRAME_CAPACITY.div_ceil(CHUNK);
/// Chunks in the UMEM: half receive, half transmit.
const CHUNKS: usize = 4096;
/// Entries per ring.
const RING: u32 = 2048;
/// How long opening waits for a queue a socket closed a moment ago still holds (`EBUSY`).
const BUSY_WAIT: Duration = Duration::from_secs(1);
/// TX wake-ups per [`Datapath::flush`] at most (copy mode sends up to 32 descriptors per call, so
/// this drains a full ring).
const MAX_FLUSH_KICKS: u32 = RING / 32 + 1;
/// How soon a flush that left frames in a copy-mode TX ring tries again
/// ([`AfXdpPort::flush_retry_in`]): about what a virtio or NIC queue takes to send a few frames.
const TX_RETRY: Duration = Duration::from_micros(100);

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// Generic (SKB) XDP: any driver, copies.
    Generic,
    /// Native XDP in the driver, when it supports it.
    Driver,
}

/// Counters of the AF_XDP datapath.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// Frames sent.
    pub tx: u64,
    /// Frames handed back to the engine for want of a free UMEM chunk or room in the TX ring, after
    /// taking back completions and kicking the kernel (back-pressure: sent again later, not lost).
    pub tx_full: u64,
    /// Frames dropped because they can never be sent (empty, or longer than a UMEM chunk on a
    /// socket without multi-buffer).
    pub tx_failed: u64,
    /// Frames sent as a chain of descriptors (multi-buffer: longer than a UMEM chunk).
    pub tx_multi: u64,
    /// Frames received.
    pub rx: u64,
    /// Frames received as a chain of descriptors (multi-buffer).
    pub rx_multi: u64,
    /// Received packets dropped while put together from their descriptors: longer than a frame
    /// holds ([`frame::FRAME_CAPACITY`]), or a descriptor outside the UMEM. Their chunks go back
    /// to the FILL ring like any other.
    pub rx_chains_dropped: u64,
    /// Wake-up system calls for transmission (only when the kernel asks).
    pub tx_kicks: u64,
    /// Flushes that left frames in the TX ring because the kernel took none at a wake-up (copy
    /// mode with the driver's queue full): the next try is `TX_RETRY` later at the latest.
    pub tx_busy: u64,
    /// Wake-up system calls for the FILL ring (only when the kernel asks: native zero-copy mode).
    pub fill_kicks: u64,
}

/// The UMEM: an anonymous, page-aligned mapping shared with the kernel.
struct Umem {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone (unmapped on drop) and is reached only through
// `&mut self`; moving it to another thread moves that sole ownership with it.
unsafe impl Send for Umem {}

impl Umem {
    fn new(len: usize) -> io::Result<Umem> {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: mmap succeeded, so the pointer is non-null.
        Ok(Umem { base: unsafe { NonNull::new_unchecked(p.cast()) }, len })
    }

    /// Bytes `addr..addr + len` of the UMEM, or `None` outside it.
    ///
    /// # Safety
    /// The range lies in chunks this side owns now, not the kernel: a TX chunk taken from the free
    /// list and not yet on the TX ring, or an RX chunk whose descriptor was popped from the RX ring
    /// and that is not yet back on the FILL ring. The slice must be dropped before that changes.
    unsafe fn chunk(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let end = (addr as usize).checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: the range is inside the mapping (checked), and by this function's contract the
        // kernel neither reads nor writes it while the slice lives; `&mut self` keeps this side
        // from making a second slice meanwhile.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(addr as usize), len) })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping was created with this length; the socket using it is closed first
        // (field order of `AfXdpPort`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a live value of the size passed, laid out as the kernel expects for
    // SOL_XDP option `opt`; the kernel only reads it during the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The MAC address of interface `dev` (`/sys/class/net/DEV/address`).
pub fn mac_of(dev: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{dev}: no MAC address")));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad MAC"))?;
    }
    Ok(mac)
}

/// Asks the kernel to resolve `ip` (from `local`): a datagram to the discard port makes it ARP.
fn ask_arp(local: Ipv4Addr, ip: Ipv4Addr) {
    if let Ok(s) = std::net::UdpSocket::bind((local, 0)) {
        let _ = s.send_to(&[], (ip, 9));
    }
}

/// The MAC of `ip` in the kernel's ARP table, on `dev`, if complete.
fn arp_lookup(ip: Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    let table = std::fs::read_to_string("/proc/net/arp").ok()?;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 6 && f[0] == ip.to_string() && f[5] == dev && f[2] == "0x2" {
            let mut mac = [0u8; 6];
            for (m, p) in mac.iter_mut().zip(f[3].split(':')) {
                *m = u8::from_str_radix(p, 16).ok()?;
            }
            return Some(mac);
        }
    }
    None
}

/// The socket and what it owns: UMEM, rings, the free TX chunks.
struct Xsk {
    // Dropped in this order: rings, socket, then the UMEM.
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    umem: Umem,
    free_tx: Vec<u64>,
}

impl Xsk {
    /// A socket with its UMEM and rings, bound to queue `queue` of `ifindex`, with `XDP_USE_SG`
    /// when `sg`. `Err(Bind(e))` when the bind failed (`e` has the kernel's errno): to try again,
    /// open a new socket (a failed bind may have taken the FILL and COMPLETION rings with it).
    fn open(ifindex: u32, queue: u32, mode: XdpMode, sg: bool) -> Result<Xsk, XskError> {
        let xsk = xdp_socket()?;
        let umem = Umem::new(CHUNK * CHUNKS)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.base.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: CHUNK as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&xsk, libc::XDP_UMEM_REG, &reg)?;
        for opt in
            [libc::XDP_UMEM_FILL_RING, libc::XDP_UMEM_COMPLETION_RING, libc::XDP_RX_RING, libc::XDP_TX_RING]
        {
            setsockopt(&xsk, opt, &RING)?;
        }
        // SAFETY: a zeroed xdp_mmap_offsets is a valid value (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` and `len` are live and sized for XDP_MMAP_OFFSETS; the kernel writes at most
        // `len` bytes and updates `len`.
        let r = unsafe {
            libc::getsockopt(
                xsk.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error().into());
        }
        let rx = Ring::map(xsk.as_fd(), &off.rx, RING, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = Ring::map(xsk.as_fd(), &off.tx, RING, libc::XDP_PGOFF_TX_RING as u64)?;
        let mut fill = Ring::map(xsk.as_fd(), &off.fr, RING, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = Ring::map(xsk.as_fd(), &off.cr, RING, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        for i in 0..RING as u64 {
            fill.push(i * CHUNK as u64);
        }
        let free_tx = (RING as u64..CHUNKS as u64).map(|i| i * CHUNK as u64).collect();
        // Need-wakeup on both rings: the kernel flags TX and FILL when it needs a system call, and
        // this side makes one only then (see the module documentation).
        let bind_flags = libc::XDP_USE_NEED_WAKEUP
            | if sg { libc::XDP_USE_SG } else { 0 }
            | match mode {
                XdpMode::Generic => libc::XDP_COPY,
                XdpMode::Driver => 0,
            };
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: bind_flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sxdp` is a live sockaddr_xdp and its size is passed; the kernel only reads it.
        let r = unsafe {
            libc::bind(
                xsk.as_raw_fd(),
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as u32,
            )
        };
        if r != 0 {
            return Err(XskError::Bind(io::Error::last_os_error()));
        }
        Ok(Xsk { rx, tx, fill, comp, fd: xsk, umem, free_tx })
    }

    /// [`Xsk::open`], again on a new socket while the bind fails with `EBUSY`, for up to
    /// [`BUSY_WAIT`]: a socket closed on this queue a moment ago (a process that just exited) keeps
    /// it until the kernel lets go of it from a work queue, shortly after the close.
    fn open_when_free(ifindex: u32, queue: u32, mode: XdpMode, sg: bool) -> Result<Xsk, XskError> {
        let until = Instant::now() + BUSY_WAIT;
        loop {
            match Xsk::open(ifindex, queue, mode, sg) {
                Err(XskError::Bind(e)) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => return r,
            }
        }
    }
}

/// Why [`Xsk::open`] failed.
enum XskError {
    /// Setting the socket up (socket, UMEM, rings).
    Setup(io::Error),
    /// The bind, with the kernel's errno.
    Bind(io::Error),
}

impl From<io::Error> for XskError {
    fn from(e: io::Error) -> XskError {
        XskError::Setup(e)
    }
}

/// One AF_XDP device: a queue of an interface with an IPv4 address.
pub struct AfXdpPort {
    // Dropped in this order: the socket (rings, socket, UMEM), then this port's share of the
    // program (detached when no queue of the interface is open in this process).
    xsk: Xsk,
    _attached: std::sync::Arc<bpf::Attachment>,
    /// Bound with `XDP_USE_SG`: frames longer than a chunk go and come as descriptor chains.
    sg: bool,
    /// Why the socket is not multi-buffer, when it is not.
    no_sg: Option<String>,
    /// The largest RoCE MTU the interface's own MTU carries (rxe's rule, netdev MTU minus 80), or
    /// less ([`AfXdpPort::with_mtu`]).
    link_mtu: Option<Mtu>,
    /// The received packet being put together from its descriptors.
    rx_chain: RxChain,
    dev: String,
    mac: [u8; 6],
    ip: Ipv4Addr,
    start: Instant,
    pool: FramePool,
    counters: XdpCounters,
    /// When to wake the kernel for the FILL ring.
    fill_wakeup: ring::FillWakeup,
    /// Neighbours asked for on the data path and not resolved yet ([`Datapath::resolve_now`]).
    pending: std::sync::Mutex<neigh::Pending>,
    /// Frames sent to our own address, to be received ([`looped`]).
    looped: looped::Looped,
}

impl std::fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("dev", &self.dev)
            .field("ip", &self.ip)
            .field("sg", &self.sg)
            .finish()
    }
}

/// A new AF_XDP socket, not bound yet.
fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() has no memory arguments; a non-negative result is a new descriptor.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether this process can use AF_XDP at all: it opens (and closes) an AF_XDP socket. The error
/// says why not: `EAFNOSUPPORT` for a kernel without AF_XDP, `EPERM` without the privileges
/// (root, or CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW).
pub fn probe() -> io::Result<()> {
    xdp_socket().map(drop)
}

impl AfXdpPort {
    /// Opens queue `queue` of `dev`, whose IPv4 address is `ip`: UMEM, rings, socket, XDP program
    /// steering UDP destination port `udp_port` (4791 for RoCEv2, 4793 for UET), multi-buffer or
    /// not (whether to ask is [`Link::open`](super::link::Link::open)'s policy). With
    /// `multi_buffer` the socket is bound with `XDP_USE_SG` (Linux 6.6+) and the program loaded as
    /// handling multi-buffer frames; a kernel that refuses the flag (`EINVAL`: older than 6.6;
    /// `EOPNOTSUPP`: a mode or driver without it) gets a single-buffer socket and path MTU 2048
    /// ([`AfXdpPort::multi_buffer`] says which, and why).
    pub fn open_with(
        dev: &str,
        queue: u32,
        ip: Ipv4Addr,
        mode: XdpMode,
        udp_port: u16,
        multi_buffer: bool,
    ) -> io::Result<AfXdpPort> {
        super::icrc_pick::pick();
        let ifindex =
            nix::net::if_::if_nametoindex(dev).map_err(|e| io::Error::other(format!("{dev}: {e}")))?;
        let mac = mac_of(dev)?;
        let context = |e: XskError, sg: bool| match e {
            XskError::Setup(e) => e,
            XskError::Bind(e) => {
                let flag = if sg { " with XDP_USE_SG" } else { "" };
                io::Error::new(e.kind(), format!("binding AF_XDP to {dev} queue {queue}{flag}: {e}"))
            }
        };
        let single = || Xsk::open_when_free(ifindex, queue, mode, false).map_err(|e| context(e, false));
        let (xsk, no_sg) = match multi_buffer.then(|| Xsk::open_when_free(ifindex, queue, mode, true)) {
            None => (single()?, Some("single-buffer AF_XDP was asked for".to_string())),
            Some(Ok(x)) => (x, None),
            Some(Err(XskError::Bind(e)))
                if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) =>
            {
                let why = if e.raw_os_error() == Some(libc::EINVAL) {
                    "the kernel refuses XDP_USE_SG (multi-buffer AF_XDP is Linux 6.6+)"
                } else {
                    "the driver has no multi-buffer AF_XDP in this mode"
                };
                (single()?, Some(format!("{why}: {e}")))
            }
            Some(Err(e)) => return Err(context(e, true)),
        };
        let sg = no_sg.is_none();
        let flags = match mode {
            XdpMode::Generic => bpf::XDP_FLAGS_SKB_MODE,
            XdpMode::Driver => bpf::XDP_FLAGS_DRV_MODE,
        };
        let attached = bpf::Attachment::shared(ifindex, udp_port, flags, sg)?;
        attached.set(queue, xsk.fd.as_raw_fd())?;
        Ok(AfXdpPort {
            xsk,
            _attached: attached,
            sg,
            no_sg,
            link_mtu: std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
                .ok()
                .and_then(|m| m.trim().parse().ok())
                .and_then(Mtu::for_netdev),
            rx_chain: RxChain::default(),
            dev: dev.to_string(),
            mac,
            ip,
            start: Instant::now(),
            pool: FramePool::default(),
            counters: XdpCounters::default(),
            fill_wakeup: Default::default(),
            pending: Default::default(),
            looped: Default::default(),
        })
    }

    /// Limits the path MTU QPs on this port may use, and the one a connection manager offers
    /// peers, to `mtu` (when below what the frames and the link carry).
    pub fn with_mtu(mut self, mtu: Mtu) -> AfXdpPort {
        if self.link_mtu.is_none_or(|l| mtu.bytes() < l.bytes()) {
            self.link_mtu = Some(mtu);
        }
        self
    }

    /// Whether the socket is multi-buffer (`XDP_USE_SG`: path MTU 4096), or why not.
    pub fn multi_buffer(&self) -> Result<(), &str> {
        match &self.no_sg {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    /// The port's counters.
    pub fn counters(&self) -> XdpCounters {
        self.counters
    }

    /// Takes back the chunks the kernel has sent (every descriptor of a chain completes).
    fn reclaim(&mut self) {
        while let Some(addr) = self.xsk.comp.pop() {
            self.xsk.free_tx.push(addr);
        }
    }

    /// The kernel's statistics of the socket (`XDP_STATISTICS`): what it dropped on the way in
    /// (RX ring full, FILL ring empty) and the descriptors it found invalid. A kernel older than
    /// 5.9 fills only the first three fields.
    fn kernel_stats(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: a zeroed xdp_statistics is a valid value (plain integers).
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` and `len` are live and sized for XDP_STATISTICS; the kernel writes at most
        // `len` bytes and updates `len`.
        let r = unsafe {
            libc::getsockopt(
                self.xsk.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut st as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        (r == 0).then_some(st)
    }

    /// Whether a frame of `parts` descriptors fits now: that many free TX chunks and TX ring slots.
    fn tx_room(&self, parts: usize) -> bool {
        self.xsk.free_tx.len() >= parts && self.xsk.tx.free() as usize >= parts
    }

    /// Wakes the kernel for the FILL ring (one empty, non-blocking receive).
    fn kick_fill(&mut self) {
        let _ = rustix::net::recv(&self.xsk.fd, &mut [0u8; 0][..], rustix::net::RecvFlags::DONTWAIT);
        self.counters.fill_kicks += 1;
    }

    /// Asks the kernel to look at the TX ring, if it says it needs asking (one empty, non-blocking
    /// send; in copy mode the kernel transmits up to a batch of descriptors in the call).
    fn kick_tx(&mut self) -> bool {
        if !self.xsk.tx.needs_wakeup() {
            return false;
        }
        let _ = rustix::net::send(&self.xsk.fd, &[], rustix::net::SendFlags::DONTWAIT);
        self.counters.tx_kicks += 1;
        true
    }
}

impl Datapath for AfXdpPort {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn gid(&self) -> IpAddr {
        IpAddr::V4(self.ip)
    }

    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        let IpAddr::V4(v4) = ip.to_canonical() else { return None };
        if v4 == self.ip {
            // Our own address: looped back in `transmit`.
            return Some(self.mac);
        }
        if let Some(mac) = arp_lookup(v4, &self.dev) {
            return Some(mac);
        }
        ask_arp(self.ip, v4);
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            if let Some(mac) = arp_lookup(v4, &self.dev) {
                return Some(mac);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn resolve_now(&self, ip: IpAddr) -> Option<[u8; 6]> {
        let IpAddr::V4(v4) = ip.to_canonical() else { return None };
        if v4 == self.ip {
            return Some(self.mac);
        }
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.resolve_now(v4, self.now(), || arp_lookup(v4, &self.dev), || ask_arp(self.ip, v4))
    }

    fn alloc(&mut self) -> Frame {
        self.pool.get()
    }

    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        if looped::is_to_self(frame.as_slice(), self.mac, self.ip) {
            return self.looped.push(frame).map_err(TxError::Full);
        }
        let len = frame.len();
        let parts = chain::tx_parts(len, CHUNK);
        if parts == 0 || parts > MAX_TX_PARTS || (parts > 1 && !self.sg) {
            self.counters.tx_failed += 1;
            self.pool.put(frame);
            return Err(TxError::Failed(if len == 0 {
                "an empty frame (AF_XDP refuses zero-length descriptors)"
            } else {
                "frame longer than an AF_XDP UMEM chunk, on a socket without multi-buffer (XDP_USE_SG)"
            }));
        }
        self.reclaim();
        if !self.tx_room(parts) {
            // Let the kernel send what waits and take back what it sent, then look again.
            if self.kick_tx() {
                self.reclaim();
            }
            if !self.tx_room(parts) {
                self.counters.tx_full += 1;
                return Err(TxError::Full(frame));
            }
        }
        // The whole chain or nothing: chunks and ring slots for every part are there (checked
        // above), and the descriptors are published together.
        let Some(first) = self.xsk.free_tx.len().checked_sub(parts) else { return Err(TxError::Full(frame)) };
        let mut descs = [libc::xdp_desc { addr: 0, len: 0, options: 0 }; MAX_TX_PARTS];
        for ((d, &addr), (range, options)) in
            descs.iter_mut().zip(&self.xsk.free_tx[first..]).zip(chain::tx_pieces(len, CHUNK))
        {
            let n = range.len();
            // SAFETY: `addr` is a chunk of `free_tx` (the completion ring gave it back, or it was
            // never handed out), owned by this side until the descriptor is pushed below, after
            // the copy; `n <= CHUNK` (`tx_pieces`).
            let dst = unsafe { self.xsk.umem.chunk(addr, n) };
            if let (Some(dst), Some(src)) = (dst, frame.as_slice().get(range)) {
                dst.copy_from_slice(src);
            }
            *d = libc::xdp_desc { addr, len: n as u32, options };
        }
        if !self.xsk.tx.push_all(&descs[..parts]) {
            return Err(TxError::Full(frame));
        }
        self.xsk.free_tx.truncate(first);
        self.counters.tx += 1;
        if parts > 1 {
            self.counters.tx_multi += 1;
        }
        self.pool.put(frame);
        Ok(())
    }

    fn receive(&mut self) -> Option<Frame> {
        if let Some(f) = self.looped.pop() {
            return Some(f);
        }
        loop {
            let Some(d) = self.xsk.rx.pop() else {
                // Nothing received: a native zero-copy driver whose FILL ring ran dry waits for a
                // wake-up (it says so in the ring's flags) before it receives again.
                if self.fill_wakeup.on_rx_empty(self.xsk.fill.needs_wakeup()) {
                    self.kick_fill();
                }
                return None;
            };
            // A packet longer than a chunk comes as a chain (XDP_USE_SG): XDP_PKT_CONTD on all
            // but its last descriptor.
            // SAFETY: `d` was just popped from the RX ring, so its chunk is this side's until it is
            // pushed on the FILL ring below, after `push` has copied the bytes out (`bytes` is not
            // used after that).
            let bytes = unsafe { self.xsk.umem.chunk(d.addr, d.len as usize) }.map(|b| &*b);
            let step = self.rx_chain.push(bytes, d.options & chain::XDP_PKT_CONTD != 0, &mut self.pool);
            // Every chunk goes back to the kernel for the next packet (chunk-aligned address; the
            // kernel hands out RX chunks only from the FILL ring, which has room for all of them).
            self.xsk.fill.push(d.addr - d.addr % CHUNK as u64);
            // A driver that ran dry can go on as soon as it has entries again: wake it now
            // rather than once the frames it received before have all been taken.
            if self.fill_wakeup.after_refill(self.xsk.fill.needs_wakeup()) {
                self.kick_fill();
            }
            match step {
                RxStep::More => {}
                RxStep::Done { frame, parts } => {
                    self.counters.rx += 1;
                    if parts > 1 {
                        self.counters.rx_multi += 1;
                    }
                    return Some(frame);
                }
                RxStep::Dropped(frame) => {
                    self.counters.rx_chains_dropped += 1;
                    self.pool.put(frame);
                }
            }
        }
    }

    fn recycle(&mut self, frame: Frame) {
        self.pool.put(frame);
    }

    /// What a frame buffer holds (4096 with multi-buffer sockets, else 2048), and no more than
    /// the interface's MTU carries: a path MTU others take from us (a CM exchange) must fit the
    /// link.
    fn port_mtu(&self) -> Mtu {
        let buffers = if self.sg { Mtu::Mtu4096 } else { Mtu::Mtu2048 };
        match self.link_mtu {
            Some(link) if link.bytes() < buffers.bytes() => link,
            _ => buffers,
        }
    }

    fn flush(&mut self) {
        // With XDP_USE_NEED_WAKEUP the kernel says when it needs a send() to look at the TX ring.
        // Copy mode always does, and sends at most a batch per call, in the call: kick while
        // descriptors wait and the kernel takes some. A zero-copy driver sends from its own
        // context after one kick (the ring does not drain in the call): one is enough.
        for _ in 0..MAX_FLUSH_KICKS {
            let waiting = self.xsk.tx.pending();
            if waiting == 0 || !self.kick_tx() {
                break;
            }
            if self.xsk.tx.pending() >= waiting {
                self.counters.tx_busy += 1;
                break;
            }
        }
    }

    /// Frames left in the TX ring of a socket the kernel wants woken (copy mode, whose driver
    /// queue was full): nothing tells the socket when the queue has room, so the loop comes back
    /// to kick again after `TX_RETRY`. Without it they waited for the next frame or timer to
    /// wake the loop (in the one-vCPU VMs of `vm-bench.sh`, a 64 KiB message's frames trickled
    /// out over 11 ms where they take 1.6).
    fn flush_retry_in(&self) -> Option<Duration> {
        (self.xsk.tx.pending() > 0 && self.xsk.tx.needs_wakeup()).then_some(TX_RETRY)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.xsk.fd.as_fd())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        let mut v = vec![
            ("af_xdp frames sent", c.tx),
            ("af_xdp sends deferred (tx ring full)", c.tx_full),
            ("af_xdp sends failed", c.tx_failed),
            ("af_xdp frames received", c.rx),
            ("af_xdp multi-buffer (XDP_USE_SG)", u64::from(self.sg)),
            ("af_xdp multi-buffer frames sent", c.tx_multi),
            ("af_xdp multi-buffer frames received", c.rx_multi),
            ("af_xdp rx chains dropped", c.rx_chains_dropped),
            ("af_xdp tx wake-ups", c.tx_kicks),
            ("af_xdp tx wake-ups the kernel sent nothing for (driver queue full)", c.tx_busy),
            ("af_xdp fill wake-ups", c.fill_kicks),
            ("af_xdp frames looped back (to our own address)", self.looped.count),
        ];
        if let Some(k) = self.kernel_stats() {
            v.extend([
                ("af_xdp kernel: rx dropped", k.rx_dropped),
                ("rx ring full", k.rx_ring_full),
                ("fill ring empty", k.rx_fill_ring_empty_descs),
                ("invalid descriptors", k.rx_invalid_descs + k.tx_invalid_descs),
            ]);
        }
        v
    }
}
