//! `struct sockaddr` to and from Rust socket addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The address behind a `struct sockaddr *` (AF_INET or AF_INET6), if it is one.
///
/// # Safety
/// `p` is null or points at a socket address as long as its family says.
pub(crate) unsafe fn read(p: *const libc::sockaddr) -> Option<SocketAddr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller promises a valid sockaddr; the family says which layout follows.
    unsafe {
        match i32::from((*p).sa_family) {
            libc::AF_INET => {
                let s = &*p.cast::<libc::sockaddr_in>();
                let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
                Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(s.sin_port)))
            }
            libc::AF_INET6 => {
                let s = &*p.cast::<libc::sockaddr_in6>();
                let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
                let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
                Some(SocketAddr::new(ip, u16::from_be(s.sin6_port)))
            }
            _ => None,
        }
    }
}

/// Writes `a` as a `sockaddr_in` or `sockaddr_in6` into the `sockaddr_storage` at `p`.
///
/// # Safety
/// `p` points at writable memory of `sizeof(struct sockaddr_storage)` bytes.
pub(crate) unsafe fn write(p: *mut libc::sockaddr_storage, a: SocketAddr) {
    // SAFETY: all-zero is a valid sockaddr_storage; the caller promises room for one.
    unsafe {
        p.write(std::mem::zeroed());
        match a {
            SocketAddr::V4(v4) => {
                let s = &mut *p.cast::<libc::sockaddr_in>();
                s.sin_family = libc::AF_INET as libc::sa_family_t;
                s.sin_port = v4.port().to_be();
                s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            }
            SocketAddr::V6(v6) => {
                let s = &mut *p.cast::<libc::sockaddr_in6>();
                s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                s.sin6_port = v6.port().to_be();
                s.sin6_addr.s6_addr = v6.ip().octets();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for a in ["10.1.2.3:7174", "[fe80::1]:4791", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            // SAFETY: a zeroed storage on the stack.
            let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            // SAFETY: `st` is a local `sockaddr_storage`, writable for its whole size.
            unsafe { write(&mut st, a) };
            // SAFETY: `st` was just written as an AF_INET or AF_INET6 address, which its family
            // names, and lives across the call.
            assert_eq!(unsafe { read(std::ptr::from_ref(&st).cast()) }, Some(a));
        }
        // SAFETY: null is the one input `read` takes without a family.
        assert_eq!(unsafe { read(std::ptr::null()) }, None);
    }
}
