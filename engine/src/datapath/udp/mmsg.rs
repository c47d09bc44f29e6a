//! Batches of datagrams, one system call each: [`TxBatch`] queues what the UDP datapath transmits
//! and sends it with one `sendmmsg`; [`RxBatch`] receives up to [`RX_BATCH`] datagrams with one
//! `recvmmsg` and hands them out one by one. On a virtual machine a system call costs about as
//! much as the kernel's work on a small packet (`../shared/notes/performance.md`), so a call per
//! datagram halved the bandwidth.
//!
//! A batch of one is cheaper as a plain `sendto`/`recvmsg` (about 200 ns less here: `recvmmsg`
//! copies in a message header and an iovec even to find an empty socket): a lone datagram goes with
//! `sendto` (a `sendmmsg` of one when it has a TOS byte to send), and a socket is polled with
//! `recvmsg` until polls find datagrams [`STREAK`] times in a row (a backlog); `recvmmsg` takes
//! them from then on, until a batch comes back short. After a poll that found one datagram, or a
//! short batch, the next receive says "nothing" without a call (the socket was very likely empty;
//! the one after asks again). Ping-pong traffic and a receiver that keeps up so make one cheap call
//! per datagram, and a backlog one call per batch.
//!
//! **TOS.** Each datagram leaves with the TOS byte of the IPv4 header the engine built (a RoCE
//! QP's traffic class, a UET traffic class's DSCP, and the ECN bits): an `IP_TOS` control message
//! beside it when the byte is not 0, and a GSO run is of one TOS. A received datagram's TOS byte
//! comes from its `IP_TOS` control message (the socket has `IP_RECVTOS` on).
//!
//! The message headers are built on the stack for each call (nothing here holds a pointer between
//! calls); the frames are the datapath's pool's, so a steady stream allocates nothing.
//!
//! This module, `super::super::afxdp` and `engine::sys` are the only places with `unsafe`; every
//! block says why it holds.
#![allow(unsafe_code)]

use frame::{Frame, FramePool};
use rustix::net::SendFlags;
use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use wire::ib::icrc::Ipv4IdAmend;

/// Most datagrams queued for one `sendmmsg` (and so the most segments of one GSO send).
pub(super) const TX_BATCH: usize = 64;
/// Most segments of one GSO send (Linux's `UDP_MAX_SEGMENTS` up to 6.8; 128 since).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most UDP payload bytes of one GSO send: what one IPv4 datagram holds after its IP and UDP
/// headers.
const GSO_MAX_BYTES: usize = 65_535 - 20 - 8;
/// Most datagrams taken by one `recvmmsg`.
pub(super) const RX_BATCH: usize = 32;
/// Polls (`recvfrom`) in a row that must find a datagram before the socket is read with
/// `recvmmsg`.
pub(super) const STREAK: u32 = 2;
/// Bytes of a buffer for what `UDP_GRO` hands over at once: the most one IPv4 datagram holds
/// (GRO builds at most that much).
const GRO_BUF: usize = 65_536;
/// Most coalesced datagrams taken by one `recvmmsg` with `UDP_GRO`.
const GRO_BATCH: usize = RX_BATCH;
/// Room for the control messages of one received message, 8-byte aligned as `cmsghdr` must be:
/// `UDP_GRO` (a `c_int`) and `IP_TOS` (a byte), `CMSG_SPACE` 24 each on 64-bit Linux.
type Control = [u64; 6];

/// Whether a failed send means "no room now, try again" (the socket is non-blocking): a full
/// socket buffer, or a device queue the kernel reports full.
pub(super) fn refused_for_now(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
        || e.kind() == io::ErrorKind::Interrupted
        || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// A zeroed `sockaddr_in`.
const NO_ADDR: libc::sockaddr_in =
    libc::sockaddr_in { sin_family: 0, sin_port: 0, sin_addr: libc::in_addr { s_addr: 0 }, sin_zero: [0; 8] };

/// An empty `iovec`.
const NO_IOV: libc::iovec = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };

/// `N` zeroed message headers: null pointers and zero lengths, filled in by the caller.
fn zeroed_headers<const N: usize>() -> [libc::mmsghdr; N] {
    // SAFETY: `mmsghdr` is a plain C struct of integers and raw pointers (some of its padding
    // fields are private on some libcs, so it cannot be written out); all-zero bytes are a valid
    // value of each (null pointers, zero lengths and flags).
    unsafe { std::mem::zeroed() }
}

/// A datagram waiting to be sent: the frame holding it, where in the frame its UDP payload is, and
/// where it goes.
#[derive(Debug)]
struct Queued {
    frame: Frame,
    payload: Range<usize>,
    dst: SocketAddrV4,
    /// The IPv4 TOS byte the kernel is to write (DSCP and ECN, from the frame's IP header).
    tos: u8,
}

/// What one [`TxBatch::send`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sent {
    /// `sendmmsg` calls made.
    pub(super) sendmmsg: u64,
    /// `sendto` calls made (a lone datagram).
    pub(super) sendto: u64,
    /// Calls (either) the kernel refused for want of room (nothing sent).
    pub(super) refused: u64,
    /// Datagrams the kernel took.
    pub(super) sent: u64,
    /// Datagrams the kernel refused for good (dropped).
    pub(super) failed: u64,
    /// The error of the last datagram refused for good.
    pub(super) last_error: Option<i32>,
}

/// One control message carrying a `T`: its header, then the value (where `CMSG_DATA` points:
/// `cmsghdr` is a multiple of `CMSG_ALIGN` on Linux), the struct padded to `CMSG_SPACE`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Cmsg<T: Copy> {
    hdr: libc::cmsghdr,
    value: T,
}

impl<T: Copy> Cmsg<T> {
    fn set(&mut self, level: libc::c_int, kind: libc::c_int, value: T) {
        self.hdr.cmsg_len = (size_of::<libc::cmsghdr>() + size_of::<T>()) as _;
        self.hdr.cmsg_level = level;
        self.hdr.cmsg_type = kind;
        self.value = value;
    }
}

/// The control messages of one send: a GSO send's segment size (`UDP_SEGMENT`), then the TOS
/// byte (`IP_TOS`, as a `c_int`); a header points at the ones it has, consecutive as
/// `CMSG_NXTHDR` walks them.
#[repr(C)]
#[derive(Clone, Copy)]
struct TxControl {
    gso: Cmsg<u16>,
    tos: Cmsg<libc::c_int>,
}

/// How [`TxBatch`] sends runs of datagrams to one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Segmentation {
    /// One datagram per message header.
    Off,
    /// A run of datagrams of one size (the last may be shorter) to one destination goes as one
    /// GSO send (`UDP_SEGMENT`): the kernel cuts it into the datagrams, with IP IDs 0, 1, 2... when
    /// the socket is unconnected with don't-fragment set. Their ICRCs are amended for those IDs
    /// (`icrc`: the payloads are RoCEv2 packets, whose ICRC covers the IP ID).
    Gso { icrc: bool },
}

/// Datagrams transmitted and not sent yet, in order, at most [`TX_BATCH`].
#[derive(Debug)]
pub(super) struct TxBatch {
    queue: VecDeque<Queued>,
    segmentation: Segmentation,
    /// The ICRC amendment for the IP ID of the last run's datagram length (runs are mostly of one
    /// length: the path MTU's).
    id_amend: Option<Ipv4IdAmend>,
}

impl TxBatch {
    /// An empty batch.
    pub(super) fn new(segmentation: Segmentation) -> TxBatch {
        TxBatch { queue: VecDeque::with_capacity(TX_BATCH), segmentation, id_amend: None }
    }

    /// Whether no datagram waits.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether the batch has no room for another datagram.
    pub(super) fn is_full(&self) -> bool {
        self.queue.len() >= TX_BATCH
    }

    /// Queues the UDP payload `frame[payload]` to `dst`, to leave with IPv4 TOS byte `tos`; the
    /// frame comes back if the batch is full (or the range is not in the frame: nothing to send).
    pub(super) fn push(
        &mut self,
        frame: Frame,
        payload: Range<usize>,
        dst: SocketAddrV4,
        tos: u8,
    ) -> Result<(), Frame> {
        if self.is_full() || payload.start > payload.end || payload.end > frame.len() {
            return Err(frame);
        }
        self.queue.push_back(Queued { frame, payload, dst, tos });
        Ok(())
    }

    /// Sends what waits, in order, with as few `sendmmsg` calls as the kernel allows, until the
    /// batch is empty or the kernel has no room for now (the rest stays queued, in order). A
    /// datagram the kernel refuses for good (too large for the path MTU, no route, a pending
    /// error) is dropped and counted, and the rest go on. Sent and dropped frames go to `pool`.
    pub(super) fn send(&mut self, fd: BorrowedFd<'_>, pool: &mut FramePool) -> Sent {
        let mut out = Sent::default();
        while !self.queue.is_empty() {
            // A lone datagram with a TOS byte needs a control message: a `sendmmsg` of one.
            let r = if self.queue.len() == 1 && self.queue[0].tos == 0 {
                out.sendto += 1;
                self.send_lone(fd)
            } else {
                out.sendmmsg += 1;
                self.send_once(fd)
            };
            match r {
                Ok(0) => break, // Not for a non-empty batch; nothing to go on with if it happens.
                Ok(n) => {
                    out.sent += n as u64;
                    for q in self.queue.drain(..n.min(self.queue.len())) {
                        pool.put(q.frame);
                    }
                }
                Err(e) if refused_for_now(&e) => {
                    out.refused += 1;
                    break;
                }
                Err(e) => {
                    // `sendmmsg` fails only when its first datagram does (a later failure ends
                    // the call with a short count, and the next call starts with that datagram).
                    out.failed += 1;
                    out.last_error = e.raw_os_error();
                    if let Some(q) = self.queue.pop_front() {
                        pool.put(q.frame);
                    }
                }
            }
        }
        out
    }

    /// One `sendto` of the first queued datagram (TOS 0, the socket's): 1 if the kernel took it.
    fn send_lone(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let icrc = self.segmentation == Segmentation::Gso { icrc: true };
        let Some(q) = self.queue.front_mut() else { return Ok(0) };
        if icrc {
            // It may have been a later segment of a GSO send the kernel refused.
            set_ip_id(q, 0, &mut self.id_amend);
        }
        let payload = q.frame.as_slice().get(q.payload.clone()).unwrap_or_default();
        rustix::net::sendto(fd, payload, SendFlags::DONTWAIT, &q.dst).map(|_| 1).map_err(io::Error::from)
    }

    /// Splits the first [`TX_BATCH`] queued datagrams into the runs that go as one message header
    /// each (one datagram each without GSO), writes their lengths into `runs` and returns how many
    /// there are. With GSO, each datagram's IP ID (and ICRC) is set to its place in its run.
    fn runs(&mut self, runs: &mut [usize; TX_BATCH]) -> usize {
        let n = self.queue.len().min(TX_BATCH);
        let mut count = 0;
        let mut i = 0;
        while i < n {
            let (size, dst, tos) = (self.queue[i].payload.len(), self.queue[i].dst, self.queue[i].tos);
            let mut k = 1;
            if let Segmentation::Gso { icrc } = self.segmentation {
                let mut bytes = size;
                while i + k < n && k < GSO_MAX_SEGMENTS {
                    let q = &self.queue[i + k];
                    let len = q.payload.len();
                    if q.dst != dst || q.tos != tos || len > size || bytes + len > GSO_MAX_BYTES {
                        break;
                    }
                    k += 1;
                    bytes += len;
                    if len < size {
                        break; // Only the last segment may be shorter.
                    }
                }
                if icrc {
                    for (id, q) in self.queue.range_mut(i..i + k).enumerate() {
                        set_ip_id(q, id as u16, &mut self.id_amend);
                    }
                }
            }
            runs[count] = k;
            count += 1;
            i += k;
        }
        count
    }

    /// One `sendmmsg` of the first [`TX_BATCH`] queued datagrams: how many the kernel took.
    fn send_once(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let mut runs = [0usize; TX_BATCH];
        let count = self.runs(&mut runs);
        let mut names = [NO_ADDR; TX_BATCH];
        let mut iovs = [NO_IOV; TX_BATCH];
        // SAFETY: `TxControl` is C structs of integers; all-zero bytes are a valid value of each.
        let mut cmsgs: [TxControl; TX_BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs = zeroed_headers::<TX_BATCH>();
        for (q, iov) in self.queue.iter().zip(&mut iovs) {
            // In the frame ([`TxBatch::push`] checked it, and the queue owns the frame).
            let payload = q.frame.as_slice().get(q.payload.clone()).unwrap_or_default();
            // The kernel only reads through a send's iovec; the pointer is `*mut` by C's type.
            *iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
        }
        let iov_base = iovs.as_mut_ptr();
        let mut first = 0;
        for (((&k, name), cmsg), hdr) in runs[..count].iter().zip(&mut names).zip(&mut cmsgs).zip(&mut hdrs) {
            let q = &self.queue[first];
            *name = sockaddr_in(q.dst);
            hdr.msg_hdr.msg_name = (name as *mut libc::sockaddr_in).cast();
            hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = iov_base.wrapping_add(first);
            hdr.msg_hdr.msg_iovlen = k as _;
            if k > 1 {
                cmsg.gso.set(libc::SOL_UDP, libc::UDP_SEGMENT, q.payload.len() as u16);
            }
            if q.tos != 0 {
                cmsg.tos.set(libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(q.tos));
            }
            let (control, len) = match (k > 1, q.tos != 0) {
                (true, true) => ((&mut cmsg.gso as *mut Cmsg<u16>).cast(), size_of::<TxControl>()),
                (true, false) => ((&mut cmsg.gso as *mut Cmsg<u16>).cast(), size_of::<Cmsg<u16>>()),
                (false, true) => {
                    ((&mut cmsg.tos as *mut Cmsg<libc::c_int>).cast(), size_of::<Cmsg<libc::c_int>>())
                }
                (false, false) => (std::ptr::null_mut(), 0),
            };
            hdr.msg_hdr.msg_control = control;
            hdr.msg_hdr.msg_controllen = len as _;
            first += k;
        }
        // SAFETY: `hdrs[..count]` are initialised message headers; each points to its own
        // `names[i]` (a `sockaddr_in`, with its length), to its run's `msg_iovlen` consecutive
        // entries of `iovs` (the runs' lengths add up to at most the `TX_BATCH` filled ones), each
        // pointing into a frame of `self.queue` with its length, and to none or the part of its own
        // `cmsgs[i]` it has (a `UDP_SEGMENT` for a run of more than one, an `IP_TOS` for a TOS byte
        // other than 0: well-formed control messages, consecutive, with their total length).
        // The arrays live on this stack frame and the queue is borrowed (not changed) for the
        // whole call; the kernel reads the headers, addresses, control messages and payloads and
        // writes only `msg_len` of the headers.
        let r =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr(), count as _, libc::MSG_DONTWAIT as _) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(runs[..(r as usize).min(count)].iter().sum())
    }
}

/// Sets the IP ID of a queued RoCEv2 datagram's frame, amending its ICRC to match (the kernel
/// writes the IP header, and the ICRC covers its ID), with `amend` made for the datagram's length
/// unless it is already.
fn set_ip_id(q: &mut Queued, id: u16, amend: &mut Option<Ipv4IdAmend>) {
    let ip = wire::ethernet::HEADER_LEN..q.payload.end;
    let Some(ip) = q.frame.as_mut_slice().get_mut(ip) else { return };
    if ip.get(4..6) == Some(&id.to_be_bytes()[..]) {
        return;
    }
    if amend.is_none_or(|a| a.packet_len() != ip.len()) {
        *amend = Ipv4IdAmend::new(ip.len()).ok();
    }
    if let Some(a) = amend {
        let _ = a.set_id(ip, id);
    }
}

/// The `sockaddr_in` of `a`.
fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// One received datagram.
#[derive(Debug)]
pub(super) struct Received {
    /// The frame holding it, from where [`RxBatch::take`] was told to put it.
    pub(super) frame: Frame,
    /// The sender (`None`: not an IPv4 address).
    pub(super) from: Option<SocketAddrV4>,
    /// Its bytes in the frame.
    pub(super) len: usize,
    /// Whether it was longer than the room in the frame (then `len` is that room).
    pub(super) truncated: bool,
    /// The TOS byte of its IPv4 header (`IP_RECVTOS`; 0 where the socket does not report it).
    pub(super) tos: u8,
}

/// What one [`RxBatch::take`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Took {
    /// Datagrams received.
    pub(super) datagrams: usize,
    /// Whether it was a `recvmmsg` (else a `recvfrom`).
    pub(super) batch: bool,
}

/// Datagrams received and not handed out yet, with the frames the next call receives into, and
/// how the socket is read now (see the module documentation).
#[derive(Debug)]
pub(super) struct RxBatch {
    ready: VecDeque<Received>,
    spare: Vec<Frame>,
    /// A backlog was seen: read with `recvmmsg` until a batch comes back short.
    batching: bool,
    /// Polls in a row that found a datagram.
    streak: u32,
    /// The last call took one datagram of a poll, or less than a full batch: the socket was
    /// (likely) empty then.
    drained: bool,
    /// With `UDP_GRO` on: the buffers a call receives into (a run of datagrams arrives as one
    /// buffer, cut into frames afterwards).
    gro: Vec<Box<[u8]>>,
    /// Datagrams that arrived as part of a coalesced run.
    pub(super) coalesced: u64,
}

impl RxBatch {
    /// An empty batch.
    pub(super) fn new() -> RxBatch {
        RxBatch {
            ready: VecDeque::with_capacity(RX_BATCH),
            spare: Vec::with_capacity(RX_BATCH),
            batching: false,
            streak: 0,
            drained: false,
            gro: Vec::new(),
            coalesced: 0,
        }
    }

    /// Receives for a socket with `UDP_GRO` on: every call reads into buffers large enough for a
    /// coalesced run (a frame would truncate it), which is then cut into its datagrams, each
    /// copied into a frame of its own.
    pub(super) fn with_gro(mut self) -> RxBatch {
        self.gro = (0..GRO_BATCH).map(|_| vec![0u8; GRO_BUF].into_boxed_slice()).collect();
        self
    }

    /// The next datagram received and not handed out.
    pub(super) fn pop(&mut self) -> Option<Received> {
        self.ready.pop_front()
    }

    /// When the batch has run out after a call that took one datagram of a poll, or less than a
    /// whole batch: says so once (true) and forgets it. A receive loop then ends without one more
    /// call, which would likely find the socket empty (an `EAGAIN` costs about as much as a
    /// datagram's call), and the next receive asks the kernel again.
    pub(super) fn take_drained(&mut self) -> bool {
        self.ready.is_empty() && std::mem::take(&mut self.drained)
    }

    /// Reads the socket once, non-blocking (a `recvfrom`, or a `recvmmsg` when a backlog was
    /// seen), into frames from `pool`, each datagram put at byte `at` of its frame.
    pub(super) fn take(&mut self, fd: BorrowedFd<'_>, pool: &mut FramePool, at: usize) -> Took {
        if !self.gro.is_empty() {
            let batch = self.batching;
            let (messages, datagrams) = self.fill_gro(fd, pool, at, if batch { GRO_BATCH } else { 1 });
            self.account(batch, messages, if batch { GRO_BATCH } else { 1 });
            return Took { datagrams, batch };
        }
        if self.batching {
            Took { datagrams: self.fill(fd, pool, at), batch: true }
        } else {
            Took { datagrams: self.poll_one(fd, pool, at), batch: false }
        }
    }

    /// One non-blocking `recvmsg` (a `recvfrom` with the TOS byte): 1 if a datagram came.
    fn poll_one(&mut self, fd: BorrowedFd<'_>, pool: &mut FramePool, at: usize) -> usize {
        let mut frame = self.spare.pop().unwrap_or_else(|| pool.get());
        let Some(room) = frame.buffer_mut().get_mut(at..) else {
            self.spare.push(frame);
            return 0;
        };
        let cap = room.len();
        let mut name = NO_ADDR;
        let mut iov = libc::iovec { iov_base: room.as_mut_ptr().cast(), iov_len: cap };
        let mut control: Control = [0; 6];
        let [mut hdr] = zeroed_headers::<1>();
        hdr.msg_hdr.msg_name = (&mut name as *mut libc::sockaddr_in).cast();
        hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        hdr.msg_hdr.msg_iov = &mut iov;
        hdr.msg_hdr.msg_iovlen = 1;
        hdr.msg_hdr.msg_control = control.as_mut_ptr().cast();
        hdr.msg_hdr.msg_controllen = size_of::<Control>() as _;
        // SAFETY: `hdr` points to `name` (room for a `sockaddr_in`, its length in `msg_namelen`),
        // `control` (48 writable bytes, aligned for `cmsghdr`, its length in `msg_controllen`) and
        // `iov`, which points to the writable bytes from `at` to the end of `frame` (a heap buffer
        // no one else refers to), all on this stack frame for the whole call; the kernel writes at
        // most those lengths there, and the lengths and flags of `hdr`. TRUNC: the length returned
        // is the datagram's, even when it did not fit.
        let r =
            unsafe { libc::recvmsg(fd.as_raw_fd(), &mut hdr.msg_hdr, libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
        match usize::try_from(r) {
            Ok(len) => {
                let from = sender(&hdr.msg_hdr, &name);
                let tos = control_messages(&hdr.msg_hdr).tos;
                self.ready.push_back(Received { frame, from, len: len.min(cap), truncated: len > cap, tos });
                self.account(false, 1, 1);
                1
            }
            Err(_) => {
                self.spare.push(frame);
                self.account(false, 0, 1);
                0
            }
        }
    }

    /// After a call that asked for `asked` messages (a batch, or a poll) and got `got`: whether
    /// the socket has a backlog, and whether it was (likely) left empty.
    fn account(&mut self, batch: bool, got: usize, asked: usize) {
        if !batch {
            if got == 0 {
                self.streak = 0;
                return;
            }
            self.streak += 1;
            self.batching = self.streak >= STREAK;
            // Unless it looks like a backlog, the next receive ends the loop without a call.
            self.drained = !self.batching;
            return;
        }
        self.drained = got > 0 && got < asked;
        if got < asked {
            (self.batching, self.streak) = (false, 0);
        }
    }

    /// One non-blocking `recvmmsg` of up to [`RX_BATCH`] datagrams: how many came (0: none
    /// waiting, or an error). A short batch ends the batching.
    fn fill(&mut self, fd: BorrowedFd<'_>, pool: &mut FramePool, at: usize) -> usize {
        while self.spare.len() < RX_BATCH {
            self.spare.push(pool.get());
        }
        let mut names = [NO_ADDR; RX_BATCH];
        let mut iovs = [NO_IOV; RX_BATCH];
        let mut controls: [Control; RX_BATCH] = [[0; 6]; RX_BATCH];
        let mut hdrs = zeroed_headers::<RX_BATCH>();
        let mut n = 0;
        for ((((frame, name), iov), control), hdr) in
            self.spare.iter_mut().zip(&mut names).zip(&mut iovs).zip(&mut controls).zip(&mut hdrs)
        {
            let Some(room) = frame.buffer_mut().get_mut(at..) else { break };
            *iov = libc::iovec { iov_base: room.as_mut_ptr().cast(), iov_len: room.len() };
            hdr.msg_hdr.msg_name = (name as *mut libc::sockaddr_in).cast();
            hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = control.as_mut_ptr().cast();
            hdr.msg_hdr.msg_controllen = size_of::<Control>() as _;
            n += 1;
        }
        // SAFETY: `hdrs[..n]` are initialised message headers; each points to its own `names[i]`
        // (room for a `sockaddr_in`, its length in `msg_namelen`), its own `controls[i]` (48
        // writable bytes, its length in `msg_controllen`, aligned for `cmsghdr`) and its own
        // `iovs[i]`, which points to the writable bytes from `at` to the end of the frame
        // `self.spare[i]` (a heap buffer no one else refers to: nothing touches `self.spare` until
        // the call returns). The kernel writes at most those lengths there.
        let got = unsafe { recv_batch(fd, &mut hdrs[..n]) };
        self.account(true, got, n);
        for ((frame, hdr), name) in self.spare.drain(..got).zip(&hdrs).zip(&names) {
            let from = sender(&hdr.msg_hdr, name);
            let truncated = hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let tos = control_messages(&hdr.msg_hdr).tos;
            self.ready.push_back(Received { frame, from, len: hdr.msg_len as usize, truncated, tos });
        }
        got
    }

    /// One non-blocking `recvmmsg` of up to `n` (at most [`GRO_BATCH`]) messages into the GRO
    /// buffers; each message is one datagram, or a run of datagrams of the size its `UDP_GRO`
    /// control message gives (the last may be shorter), and each datagram is copied to byte `at` of
    /// a frame from `pool`. Returns the messages and the datagrams received.
    fn fill_gro(&mut self, fd: BorrowedFd<'_>, pool: &mut FramePool, at: usize, n: usize) -> (usize, usize) {
        let n = n.min(self.gro.len());
        let mut names = [NO_ADDR; GRO_BATCH];
        let mut iovs = [NO_IOV; GRO_BATCH];
        let mut controls: [Control; GRO_BATCH] = [[0; 6]; GRO_BATCH];
        let mut hdrs = zeroed_headers::<GRO_BATCH>();
        for ((((buf, name), iov), control), hdr) in
            self.gro.iter_mut().zip(&mut names).zip(&mut iovs).zip(&mut controls).zip(&mut hdrs).take(n)
        {
            *iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
            hdr.msg_hdr.msg_name = (name as *mut libc::sockaddr_in).cast();
            hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = control.as_mut_ptr().cast();
            hdr.msg_hdr.msg_controllen = size_of::<Control>() as _;
        }
        // SAFETY: `hdrs[..n]` are initialised message headers; each points to its own `names[i]`
        // (room for a `sockaddr_in`, its length in `msg_namelen`), its own `controls[i]` (48
        // writable bytes, its length in `msg_controllen`, aligned for `cmsghdr`) and its own
        // `iovs[i]`, which points to the whole of the GRO buffer `self.gro[i]` (a heap buffer no one
        // else refers to; nothing touches `self.gro` until the call returns). The kernel writes at
        // most those lengths there.
        let got = unsafe { recv_batch(fd, &mut hdrs[..n]) };
        let mut datagrams = 0;
        for ((buf, hdr), name) in self.gro.iter().zip(&hdrs).zip(&names).take(got) {
            let from = sender(&hdr.msg_hdr, name);
            let len = (hdr.msg_len as usize).min(buf.len());
            // A run is of one TOS: the kernel's GRO joins no packets whose TOS differs.
            let got = control_messages(&hdr.msg_hdr);
            let size = got.gro_size.filter(|&s| s > 0 && s < len).unwrap_or(len.max(1));
            let run = buf[..len].chunks(size);
            if run.len() > 1 {
                self.coalesced += run.len() as u64;
            }
            for datagram in run {
                let mut frame = pool.get();
                let Some(room) = frame.buffer_mut().get_mut(at..) else {
                    pool.put(frame);
                    continue;
                };
                let fits = datagram.len().min(room.len());
                room[..fits].copy_from_slice(&datagram[..fits]);
                let truncated = fits < datagram.len();
                self.ready.push_back(Received { frame, from, len: fits, truncated, tos: got.tos });
                datagrams += 1;
            }
        }
        (got, datagrams)
    }
}

/// One non-blocking `recvmmsg` into `hdrs`: the messages received (0: none waiting, or an
/// error).
///
/// # Safety
///
/// Every pointer in `hdrs` (name, iovec, buffer, control) must point to memory that is writable
/// for the length beside it, that nothing else refers to until the call returns.
unsafe fn recv_batch(fd: BorrowedFd<'_>, hdrs: &mut [libc::mmsghdr]) -> usize {
    // SAFETY: the caller vouches for every pointer in `hdrs`; `hdrs` itself is `hdrs.len()`
    // initialised headers the kernel may write (their lengths and flags). No timeout:
    // `MSG_DONTWAIT` returns at once.
    let r = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            hdrs.len() as _,
            libc::MSG_DONTWAIT as _,
            std::ptr::null_mut(),
        )
    };
    usize::try_from(r).unwrap_or(0).min(hdrs.len())
}

/// The sender of a received message (`None`: not an IPv4 address).
fn sender(hdr: &libc::msghdr, name: &libc::sockaddr_in) -> Option<SocketAddrV4> {
    let v4 = hdr.msg_namelen as usize >= size_of::<libc::sockaddr_in>()
        && name.sin_family == libc::AF_INET as libc::sa_family_t;
    v4.then(|| {
        SocketAddrV4::new(Ipv4Addr::from(u32::from_be(name.sin_addr.s_addr)), u16::from_be(name.sin_port))
    })
}

/// What the control messages of a received message say.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct RxControl {
    /// The datagram size of a coalesced run (`UDP_GRO`), if it is one.
    gro_size: Option<usize>,
    /// The TOS byte of its IPv4 header (`IP_TOS`, with `IP_RECVTOS` on; else 0).
    tos: u8,
}

/// The control messages of a received message.
fn control_messages(msg: &libc::msghdr) -> RxControl {
    let mut out = RxControl::default();
    if msg.msg_control.is_null() {
        return out;
    }
    // SAFETY: `msg` is a message header `recvmsg`/`recvmmsg` filled in: `msg_control` points to a
    // live, aligned buffer (not null, checked) and `msg_controllen` says how much of it the kernel
    // wrote, so CMSG_FIRSTHDR and CMSG_NXTHDR return null or a header inside those bytes.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: `c` is a non-null control message header inside the written control bytes.
        let h = unsafe { &*c };
        let len = h.cmsg_len as usize;
        let head = size_of::<libc::cmsghdr>();
        match (h.cmsg_level, h.cmsg_type) {
            (libc::SOL_UDP, libc::UDP_GRO) if len >= head + size_of::<libc::c_int>() => {
                // SAFETY: the message holds a `c_int` after its header (checked from `cmsg_len`);
                // CMSG_DATA points to it, not necessarily aligned, so it is read unaligned.
                let v = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>()) };
                out.gro_size = usize::try_from(v).ok();
            }
            (libc::IPPROTO_IP, libc::IP_TOS) if len > head => {
                // SAFETY: the message holds at least one byte after its header (checked from
                // `cmsg_len`): the TOS byte, where CMSG_DATA points.
                out.tos = unsafe { *libc::CMSG_DATA(c) };
            }
            _ => {}
        }
        // SAFETY: as for CMSG_FIRSTHDR; `c` is a header of `msg`.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    out
}
