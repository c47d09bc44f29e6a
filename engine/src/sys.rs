//! The few system calls no safe wrapper covers. Every `unsafe` block says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Whether the kernel can segment UDP sends (`UDP_SEGMENT`, Linux 4.18+): the option reads back.
pub(crate) fn udp_gso_supported(socket: &impl AsFd) -> bool {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the descriptor is open for the duration of the call (borrowed from `socket`); the
    // value and length point at live locals of the sizes passed, which getsockopt writes at most.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    rc == 0
}

/// Sets `SO_NO_CHECK` on an IPv4 UDP socket: the kernel sends a UDP checksum of 0, as rdma_rxe does
/// (roce-wire.md §1.4); the ICRC protects the datagram.
pub(crate) fn set_udp_no_check(socket: &impl AsFd, on: bool) -> io::Result<()> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_NO_CHECK, i32::from(on))
}

/// Turns on `UDP_GRO` (Linux 5.0+): the kernel may then hand the socket a run of same-size
/// datagrams from one sender as one buffer, their size in a `UDP_GRO` control message. Whether it
/// is on.
pub(crate) fn set_udp_gro(socket: &impl AsFd) -> bool {
    set_int_option(socket, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// `setsockopt` of an `int` option.
fn set_int_option(
    socket: &impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the call (borrowed from `socket`), and the
    // option value points at a live c_int whose size is passed alongside; setsockopt reads exactly
    // that many bytes and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Datagrams the kernel dropped on their way into `socket` (its receive buffer was full, or a
/// filter refused them): `SK_MEMINFO_DROPS` of `SO_MEMINFO`, counted since the socket opened.
pub(crate) fn socket_drops(socket: &impl AsFd) -> io::Result<u32> {
    /// `SK_MEMINFO_VARS` in linux/sock_diag.h (9 since Linux 4.6; the drops are the last).
    const VARS: usize = 9;
    const DROPS: usize = 8;
    let mut info = [0u32; VARS];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: the descriptor is open for the duration of the call (borrowed from `socket`); the
    // kernel writes at most `len` bytes into `info`, which lives across the call, and updates `len`
    // to what it wrote. It keeps no pointer.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < (DROPS + 1) * 4 {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "SO_MEMINFO without the drop count"));
    }
    Ok(info[DROPS])
}

/// Restores the default action of SIGPIPE, which the Rust runtime sets to ignore: the CLI writing
/// into a pipe whose reader has gone (`softrdma perf ... | head`) then ends quietly, as Unix tools
/// do, instead of panicking in `println!` on EPIPE.
pub fn restore_default_sigpipe() {
    // SAFETY: SIG_DFL is a valid disposition for SIGPIPE and `signal` keeps no pointer. The binary
    // calls this first thing in `main`, before it starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
