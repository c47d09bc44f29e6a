//! `rdma_getaddrinfo` and `rdma_freeaddrinfo`, answered as rdma-core 44's librdmacm
//! (`librdmacm/addrinfo.c`) answers them for IP addresses.
//!
//! The name goes through libc's `getaddrinfo` with hints converted from the `rdma_addrinfo` ones
//! (`RAI_PASSIVE` → `AI_PASSIVE`, `RAI_NUMERICHOST` → `AI_NUMERICHOST`, the family, the QP type as
//! a socket type, the port space as a protocol); the first address it returns becomes the single
//! `rdma_addrinfo` of the answer: the source address when `RAI_PASSIVE` is asked for (a `NULL`
//! node then being the wildcard), else the destination, with the hints' source address copied
//! next to it. The QP type and port space are the hints' or, when those are 0, follow from what
//! `getaddrinfo` chose (`SOCK_STREAM` → `IBV_QPT_RC`, `SOCK_DGRAM` → `IBV_QPT_UD`; TCP →
//! `RDMA_PS_TCP`, UDP → `RDMA_PS_UDP`). Without node and service the answer is the hints' own
//! fields and addresses.
//!
//! Errors as librdmacm 44 gives them: a failed `getaddrinfo` returns its `EAI_*` code unchanged
//! (programs print it with `gai_strerror`), anything else -1 with `errno` (`EINVAL`, `ENOMEM`).
//! Two differences: null `res` or a hint address of non-zero length at a null pointer is `EINVAL`
//! (librdmacm would crash), and `AF_IB` addresses (`RAI_FAMILY | RAI_NUMERICHOST` with family
//! `AF_IB`, which librdmacm turns into a `sockaddr_ib`) are `EAFNOSUPPORT`: the engine speaks
//! RoCEv2, over IP. There is no IB ACM service to ask for a route, so `ai_route` stays empty, as
//! with librdmacm when no `ibacm` runs.
//!
//! Every piece of an answer is `malloc`ed, so that `rdma_freeaddrinfo` frees it as librdmacm does,
//! following `ai_next`.

use crate::abi::{IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND};
use crate::cm_abi::{
    RAI_FAMILY, RAI_NUMERICHOST, RAI_PASSIVE, RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP,
    rdma_addrinfo,
};
use crate::errno;
use libc::{sockaddr, socklen_t};
use std::ffi::{c_char, c_int};
use std::ptr;

/// `-1` with `errno = e`.
fn fail(e: c_int) -> c_int {
    errno::set(e);
    -1
}

/// Whether `flags` has the `RAI_*` bit `flag`.
fn has(flags: c_int, flag: u32) -> bool {
    flags as u32 & flag != 0
}

/// libc hints for an `rdma_addrinfo`'s (librdmacm's `ucma_convert_to_ai`).
fn to_ai_hints(h: &rdma_addrinfo) -> libc::addrinfo {
    // SAFETY: all-zero is a valid `addrinfo` (no flags, null pointers).
    let mut ai: libc::addrinfo = unsafe { std::mem::zeroed() };
    if has(h.ai_flags, RAI_PASSIVE) {
        ai.ai_flags = libc::AI_PASSIVE;
    }
    if has(h.ai_flags, RAI_NUMERICHOST) {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    if h.ai_family != libc::AF_IB {
        ai.ai_family = h.ai_family;
    }
    match h.ai_qp_type as u32 {
        IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND | IBV_QPT_XRC_RECV => {
            ai.ai_socktype = libc::SOCK_STREAM;
        }
        IBV_QPT_UD => ai.ai_socktype = libc::SOCK_DGRAM,
        _ => {}
    }
    match h.ai_port_space as u32 {
        RDMA_PS_TCP => ai.ai_protocol = libc::IPPROTO_TCP,
        RDMA_PS_IPOIB | RDMA_PS_UDP => ai.ai_protocol = libc::IPPROTO_UDP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_STREAM => ai.ai_protocol = libc::IPPROTO_TCP,
        RDMA_PS_IB if ai.ai_socktype == libc::SOCK_DGRAM => ai.ai_protocol = libc::IPPROTO_UDP,
        _ => {}
    }
    ai
}

/// Copies `len` bytes of the address at `src` into fresh `malloc`ed memory at `*dst`
/// (librdmacm's `ucma_copy_addr`).
///
/// # Safety
/// `src` is null or readable for `len` bytes.
unsafe fn copy_addr(
    dst: &mut *mut sockaddr,
    dst_len: &mut socklen_t,
    src: *const sockaddr,
    len: socklen_t,
) -> c_int {
    if src.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: `malloc` has no precondition (`len > 0` here, from a successful answer or the hints'
    // non-zero length); the result is checked for null below.
    let p = unsafe { libc::malloc(len as usize) }.cast::<sockaddr>();
    if p.is_null() {
        return fail(libc::ENOMEM);
    }
    // SAFETY: `src` is readable for `len` bytes (caller), `p` was just allocated with `len`.
    unsafe { ptr::copy_nonoverlapping(src.cast::<u8>(), p.cast::<u8>(), len as usize) };
    *dst = p;
    *dst_len = len;
    0
}

/// `strdup` of a name libc answered, or null.
///
/// # Safety
/// `s` is null or a NUL-terminated string.
unsafe fn dup_name(s: *const c_char) -> *mut c_char {
    if s.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `s` is a NUL-terminated string (caller). A failed copy is no name, as in librdmacm.
    unsafe { libc::strdup(s) }
}

/// Fills `rai` from libc's first answer `ai` (librdmacm's `ucma_convert_to_rai`).
///
/// # Safety
/// `ai` is an entry of a list `getaddrinfo` returned.
unsafe fn from_ai(rai: &mut rdma_addrinfo, h: &rdma_addrinfo, given: bool, ai: &libc::addrinfo) -> c_int {
    if h.ai_qp_type != 0 {
        rai.ai_qp_type = h.ai_qp_type;
    } else if ai.ai_socktype == libc::SOCK_STREAM {
        rai.ai_qp_type = IBV_QPT_RC as c_int;
    } else if ai.ai_socktype == libc::SOCK_DGRAM {
        rai.ai_qp_type = IBV_QPT_UD as c_int;
    }
    if h.ai_port_space != 0 {
        rai.ai_port_space = h.ai_port_space;
    } else if ai.ai_protocol == libc::IPPROTO_TCP {
        rai.ai_port_space = RDMA_PS_TCP as c_int;
    } else if ai.ai_protocol == libc::IPPROTO_UDP {
        rai.ai_port_space = RDMA_PS_UDP as c_int;
    }
    rai.ai_family = ai.ai_family;
    // librdmacm reads AI_PASSIVE back from the answer, where glibc copies the hints' flags;
    // without hints it asked for none.
    if given && has(h.ai_flags, RAI_PASSIVE) {
        rai.ai_flags = RAI_PASSIVE as c_int;
        // SAFETY: libc's answer: a name or null, an address of `ai_addrlen` bytes.
        unsafe {
            rai.ai_src_canonname = dup_name(ai.ai_canonname);
            copy_addr(&mut rai.ai_src_addr, &mut rai.ai_src_len, ai.ai_addr, ai.ai_addrlen)
        }
    } else {
        // SAFETY: `ai` is an entry of a successful `getaddrinfo` answer: `ai_canonname` is null or
        // a NUL-terminated name, and `ai_addr` holds `ai_addrlen` bytes of address, as `dup_name`
        // and `copy_addr` require.
        unsafe {
            rai.ai_dst_canonname = dup_name(ai.ai_canonname);
            copy_addr(&mut rai.ai_dst_addr, &mut rai.ai_dst_len, ai.ai_addr, ai.ai_addrlen)
        }
    }
}

/// Resolves `node`/`service` into `rai` (librdmacm's `ucma_getaddrinfo`): 0, an `EAI_*` code,
/// or -1 with `errno`.
///
/// # Safety
/// `node` and `service` are null or NUL-terminated strings.
unsafe fn resolve(
    node: *const c_char,
    service: *const c_char,
    h: &rdma_addrinfo,
    given: bool,
    rai: &mut rdma_addrinfo,
) -> c_int {
    let ai_hints = to_ai_hints(h);
    let mut ai: *mut libc::addrinfo = ptr::null_mut();
    let hints_ptr: *const libc::addrinfo = if given { &ai_hints } else { ptr::null() };
    // SAFETY: strings as the caller promised, hints null or a valid `addrinfo`, `ai` writable.
    let ret = unsafe { libc::getaddrinfo(node, service, hints_ptr, &mut ai) };
    if ret != 0 {
        return ret;
    }
    if ai.is_null() {
        // glibc never answers success with no address; were it to, it is no address.
        return libc::EAI_NONAME;
    }
    // SAFETY: `ai` heads the list `getaddrinfo` returned, freed once here.
    unsafe {
        let r = from_ai(rai, h, given, &*ai);
        libc::freeaddrinfo(ai);
        r
    }
}

/// librdmacm's `rdma_getaddrinfo`: resolves `node` (a host name or numeric IPv4/IPv6 address) and
/// `service` (a port number) into one `malloc`ed `rdma_addrinfo` at `*res`. Returns 0, a
/// `getaddrinfo` `EAI_*` code, or -1 with `errno`.
///
/// # Safety
/// `node` and `service` are null or NUL-terminated strings; `hints` is null or a readable
/// `rdma_addrinfo` whose `ai_src_addr`/`ai_dst_addr` are readable for `ai_src_len`/`ai_dst_len`
/// bytes; `res` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    if res.is_null() || (node.is_null() && service.is_null() && hints.is_null()) {
        return fail(libc::EINVAL);
    }
    // SAFETY: all-zero is a valid `rdma_addrinfo` (librdmacm's `nohints`).
    let nohints: rdma_addrinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `hints` is null or the caller's readable `rdma_addrinfo` (this function's contract);
    // `as_ref` answers `None` for null.
    let (h, given) = match unsafe { hints.as_ref() } {
        Some(h) => (h, true),
        None => (&nohints, false),
    };
    if has(h.ai_flags, RAI_FAMILY) && has(h.ai_flags, RAI_NUMERICHOST) && h.ai_family == libc::AF_IB {
        return fail(libc::EAFNOSUPPORT);
    }
    // SAFETY: plain allocation, zeroed: a valid empty `rdma_addrinfo`.
    let rai = unsafe { libc::calloc(1, size_of::<rdma_addrinfo>()) }.cast::<rdma_addrinfo>();
    if rai.is_null() {
        return fail(libc::ENOMEM);
    }
    // SAFETY: `rai` was just allocated and is only this function's.
    let r = unsafe { &mut *rai };
    let mut ret = if !node.is_null() || !service.is_null() {
        // SAFETY: `node` and `service` are null or NUL-terminated strings (this function's
        // contract), as `resolve` requires; `r` is the fresh allocation, borrowed only here.
        unsafe { resolve(node, service, h, given, r) }
    } else {
        r.ai_flags = h.ai_flags;
        r.ai_family = h.ai_family;
        r.ai_qp_type = h.ai_qp_type;
        r.ai_port_space = h.ai_port_space;
        if h.ai_dst_len != 0 {
            // SAFETY: the hints' destination is readable for its length (caller).
            unsafe { copy_addr(&mut r.ai_dst_addr, &mut r.ai_dst_len, h.ai_dst_addr, h.ai_dst_len) }
        } else {
            0
        }
    };
    if ret == 0 && r.ai_src_len == 0 && h.ai_src_len != 0 {
        // SAFETY: the hints' source is readable for its length (caller).
        ret = unsafe { copy_addr(&mut r.ai_src_addr, &mut r.ai_src_len, h.ai_src_addr, h.ai_src_len) };
    }
    if ret != 0 {
        // SAFETY: `rai` is a chain of one this function allocated.
        unsafe { rdma_freeaddrinfo(rai) };
        return ret;
    }
    // SAFETY: `res` is writable (caller, checked non-null).
    unsafe { *res = rai };
    0
}

/// librdmacm's `rdma_freeaddrinfo`: frees a chain `rdma_getaddrinfo` returned, following
/// `ai_next`, with everything its entries point at. `NULL` is no chain.
///
/// # Safety
/// `res` is null or a chain whose entries and their pointers were `malloc`ed and are not used
/// again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_freeaddrinfo(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        let rai = res;
        // SAFETY: every entry and what it points at was `malloc`ed (caller); `free(NULL)` is
        // nothing.
        unsafe {
            res = (*rai).ai_next;
            libc::free((*rai).ai_connect);
            libc::free((*rai).ai_route);
            libc::free((*rai).ai_src_canonname.cast());
            libc::free((*rai).ai_dst_canonname.cast());
            libc::free((*rai).ai_src_addr.cast());
            libc::free((*rai).ai_dst_addr.cast());
            libc::free(rai.cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    fn zeroed_hints() -> rdma_addrinfo {
        // SAFETY: all-zero is a valid `rdma_addrinfo`.
        unsafe { std::mem::zeroed() }
    }

    fn hints(flags: u32, ps: u32, qpt: u32) -> rdma_addrinfo {
        let mut h = zeroed_hints();
        h.ai_flags = flags as c_int;
        h.ai_port_space = ps as c_int;
        h.ai_qp_type = qpt as c_int;
        h
    }

    /// Calls `rdma_getaddrinfo`: the return value and, on success, the answer.
    fn getai(
        node: Option<&str>,
        service: Option<&str>,
        hints: Option<&rdma_addrinfo>,
    ) -> (c_int, *mut rdma_addrinfo) {
        let node = node.map(|s| CString::new(s).unwrap());
        let service = service.map(|s| CString::new(s).unwrap());
        let mut res: *mut rdma_addrinfo = ptr::null_mut();
        // SAFETY: `node` and `service` are null or live `CString`s, `hints` null or a live
        // reference, and `res` a local out pointer.
        let ret = unsafe {
            rdma_getaddrinfo(
                node.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                service.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                hints.map_or(ptr::null(), |h| h as *const _),
                &mut res,
            )
        };
        (ret, res)
    }

    /// The socket address at `p` of `len` bytes.
    fn sockaddr_at(p: *const sockaddr, len: socklen_t) -> SocketAddr {
        assert!(!p.is_null());
        // SAFETY: `p` is an address libc produced, of its family's size.
        unsafe {
            match c_int::from((*p).sa_family) {
                libc::AF_INET => {
                    assert_eq!(len as usize, size_of::<libc::sockaddr_in>());
                    let s = &*p.cast::<libc::sockaddr_in>();
                    SocketAddr::new(
                        IpAddr::V4(Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))),
                        u16::from_be(s.sin_port),
                    )
                }
                libc::AF_INET6 => {
                    assert_eq!(len as usize, size_of::<libc::sockaddr_in6>());
                    let s = &*p.cast::<libc::sockaddr_in6>();
                    SocketAddr::new(
                        IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr)),
                        u16::from_be(s.sin6_port),
                    )
                }
                f => panic!("family {f}"),
            }
        }
    }

    fn errno_now() -> c_int {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }

    #[test]
    fn numeric_ipv4_active_is_the_destination() {
        let h = hints(0, RDMA_PS_TCP, 0);
        let (ret, res) = getai(Some("192.0.2.7"), Some("7174"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(r.ai_flags, 0);
        assert_eq!(r.ai_family, libc::AF_INET);
        assert_eq!(r.ai_qp_type, IBV_QPT_RC as c_int);
        assert_eq!(r.ai_port_space, RDMA_PS_TCP as c_int);
        assert_eq!(sockaddr_at(r.ai_dst_addr, r.ai_dst_len), "192.0.2.7:7174".parse().unwrap());
        assert!(r.ai_src_addr.is_null());
        assert_eq!(r.ai_src_len, 0);
        assert!(r.ai_next.is_null());
        assert!(r.ai_route.is_null() && r.ai_connect.is_null());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn numeric_ipv4_passive_is_the_source() {
        let h = hints(RAI_PASSIVE, RDMA_PS_TCP, 0);
        let (ret, res) = getai(Some("10.1.2.3"), Some("18515"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(r.ai_flags, RAI_PASSIVE as c_int);
        assert_eq!(r.ai_qp_type, IBV_QPT_RC as c_int);
        assert_eq!(sockaddr_at(r.ai_src_addr, r.ai_src_len), "10.1.2.3:18515".parse().unwrap());
        assert!(r.ai_dst_addr.is_null());
        assert_eq!(r.ai_dst_len, 0);
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn numeric_ipv6() {
        let h = hints(RAI_NUMERICHOST, 0, IBV_QPT_RC);
        let (ret, res) = getai(Some("2001:db8::5"), Some("7471"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(r.ai_family, libc::AF_INET6);
        assert_eq!(r.ai_qp_type, IBV_QPT_RC as c_int);
        assert_eq!(r.ai_port_space, RDMA_PS_TCP as c_int);
        assert_eq!(sockaddr_at(r.ai_dst_addr, r.ai_dst_len), "[2001:db8::5]:7471".parse().unwrap());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn host_name_through_libc() {
        // /etc/hosts names localhost on every system the tests run on.
        let (ret, res) = getai(Some("localhost"), Some("7174"), None);
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        let a = sockaddr_at(r.ai_dst_addr, r.ai_dst_len);
        assert!(a.ip().is_loopback(), "{a}");
        assert_eq!(a.port(), 7174);
        // No hints: libc's first answer, a stream socket over TCP.
        assert_eq!(r.ai_qp_type, IBV_QPT_RC as c_int);
        assert_eq!(r.ai_port_space, RDMA_PS_TCP as c_int);
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn passive_without_node_is_the_wildcard() {
        let h = hints(RAI_PASSIVE, RDMA_PS_TCP, 0);
        let (ret, res) = getai(None, Some("7471"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        let a = sockaddr_at(r.ai_src_addr, r.ai_src_len);
        assert!(a.ip().is_unspecified(), "{a}");
        assert_eq!(a.port(), 7471);
        assert!(r.ai_dst_addr.is_null());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };

        let mut h = hints(RAI_PASSIVE, RDMA_PS_TCP, 0);
        h.ai_family = libc::AF_INET;
        let (ret, res) = getai(None, Some("7471"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(sockaddr_at(r.ai_src_addr, r.ai_src_len), "0.0.0.0:7471".parse().unwrap());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn udp_port_space_gives_ud() {
        let h = hints(0, RDMA_PS_UDP, 0);
        let (ret, res) = getai(Some("127.0.0.1"), Some("7174"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(r.ai_qp_type, IBV_QPT_UD as c_int);
        assert_eq!(r.ai_port_space, RDMA_PS_UDP as c_int);
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };

        // A QP type alone picks the port space too.
        let h = hints(0, 0, IBV_QPT_UD);
        let (ret, res) = getai(Some("127.0.0.1"), Some("7174"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(r.ai_qp_type, IBV_QPT_UD as c_int);
        assert_eq!(r.ai_port_space, RDMA_PS_UDP as c_int);
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn hints_source_is_copied_next_to_the_destination() {
        let src: SocketAddr = "10.0.0.1:0".parse().unwrap();
        // SAFETY: all-zero is a valid `sockaddr_in`.
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from(Ipv4Addr::new(10, 0, 0, 1)).to_be();
        let mut h = hints(0, RDMA_PS_TCP, 0);
        h.ai_src_addr = (&raw mut sin).cast();
        h.ai_src_len = size_of::<libc::sockaddr_in>() as socklen_t;
        let (ret, res) = getai(Some("10.0.0.2"), Some("7174"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_ne!(r.ai_src_addr, h.ai_src_addr, "a copy, not the caller's memory");
        assert_eq!(sockaddr_at(r.ai_src_addr, r.ai_src_len), src);
        assert_eq!(sockaddr_at(r.ai_dst_addr, r.ai_dst_len), "10.0.0.2:7174".parse().unwrap());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };

        // Without node and service the answer is the hints' own.
        let mut h = hints(0, RDMA_PS_UDP, IBV_QPT_UD);
        h.ai_family = libc::AF_INET;
        h.ai_dst_addr = (&raw mut sin).cast();
        h.ai_dst_len = size_of::<libc::sockaddr_in>() as socklen_t;
        let (ret, res) = getai(None, None, Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: `rdma_getaddrinfo` answered 0, so `res` is the list it allocated, not yet freed.
        let r = unsafe { &*res };
        assert_eq!(
            (r.ai_family, r.ai_qp_type, r.ai_port_space),
            (libc::AF_INET, IBV_QPT_UD as c_int, RDMA_PS_UDP as c_int)
        );
        assert_ne!(r.ai_dst_addr, h.ai_dst_addr);
        assert_eq!(sockaddr_at(r.ai_dst_addr, r.ai_dst_len), src);
        assert!(r.ai_src_addr.is_null());
        // SAFETY: `res` is the list `rdma_getaddrinfo` allocated; nothing uses it after this.
        unsafe { rdma_freeaddrinfo(res) };
    }

    #[test]
    fn bad_host_returns_the_getaddrinfo_error() {
        let sentinel = 0x10 as *mut rdma_addrinfo;
        let h = hints(RAI_NUMERICHOST, RDMA_PS_TCP, 0);
        let node = CString::new("not-an-address").unwrap();
        let mut res = sentinel;
        // SAFETY: `node` and `service` are null or live `CString`s, `hints` null or a live
        // reference, and `res` a local out pointer.
        let ret = unsafe { rdma_getaddrinfo(node.as_ptr(), ptr::null(), &h, &mut res) };
        assert_eq!(ret, libc::EAI_NONAME);
        assert_eq!(res, sentinel, "nothing written on failure");

        // Inconsistent hints (a datagram QP over the TCP port space): libc refuses them.
        let h = hints(0, RDMA_PS_TCP, IBV_QPT_UD);
        let (ret, _) = getai(Some("127.0.0.1"), Some("7174"), Some(&h));
        assert!(ret != 0 && ret != -1, "an EAI_* code, got {ret}");
    }

    #[test]
    fn null_and_unsupported_arguments_are_einval() {
        let mut res: *mut rdma_addrinfo = ptr::null_mut();
        // SAFETY: null arguments are what is checked.
        let ret = unsafe { rdma_getaddrinfo(ptr::null(), ptr::null(), ptr::null(), &mut res) };
        assert_eq!((ret, errno_now()), (-1, libc::EINVAL));
        assert!(res.is_null());

        let node = CString::new("127.0.0.1").unwrap();
        // SAFETY: `node` is a NUL-terminated string; the null `res` is what is checked (refused
        // before any write).
        let ret = unsafe { rdma_getaddrinfo(node.as_ptr(), ptr::null(), ptr::null(), ptr::null_mut()) };
        assert_eq!((ret, errno_now()), (-1, libc::EINVAL));

        let mut h = hints(0, RDMA_PS_TCP, 0);
        h.ai_src_len = size_of::<libc::sockaddr_in>() as socklen_t;
        let (ret, res) = getai(Some("127.0.0.1"), None, Some(&h));
        assert_eq!((ret, errno_now()), (-1, libc::EINVAL));
        assert!(res.is_null());

        let mut h = hints(RAI_FAMILY | RAI_NUMERICHOST, RDMA_PS_IB, 0);
        h.ai_family = libc::AF_IB;
        let (ret, res) = getai(Some("fe80::1"), None, Some(&h));
        assert_eq!((ret, errno_now()), (-1, libc::EAFNOSUPPORT));
        assert!(res.is_null());
    }

    #[test]
    fn free_follows_the_chain_and_takes_null() {
        let h = hints(0, RDMA_PS_TCP, 0);
        let (ret, first) = getai(Some("127.0.0.1"), Some("1"), Some(&h));
        assert_eq!(ret, 0);
        let (ret, second) = getai(Some("::1"), Some("2"), Some(&h));
        assert_eq!(ret, 0);
        // SAFETY: both are answers; the chain owns the second from here. Everything in it is
        // malloced: a canonical name too.
        unsafe {
            (*first).ai_next = second;
            (*second).ai_dst_canonname = libc::strdup(c"peer".as_ptr());
            (*second).ai_route = libc::malloc(8);
            rdma_freeaddrinfo(first);
            rdma_freeaddrinfo(ptr::null_mut());
        }
    }
}
