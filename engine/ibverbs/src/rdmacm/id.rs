//! rdma_cm IDs: create/destroy, bind, resolve, listen, migrate, addresses, options, devices.

use super::channel;
use super::objects::{SoftCmChannel, SoftId, err, fail, port_space};
use super::sockaddr;
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;

use std::ffi::{c_int, c_void};
use std::net::SocketAddr;

/// The program's channel, or (null) a private one for a synchronous ID: `(channel, private)`.
fn channel_or_private(channel: *mut rdma_event_channel) -> Result<(&'static SoftCmChannel, bool), c_int> {
    match SoftCmChannel::from(channel) {
        Some(c) => Ok((c, false)),
        None if channel.is_null() => channel::create().map(|c| (c, true)),
        None => Err(libc::EINVAL),
    }
}

/// `rdma_create_id`: an ID reporting to `channel`, or, with no channel, a synchronous ID whose
/// calls wait for their own events (librdmacm's rule).
///
/// # Safety
/// As `rdma_create_id`'s callers promise:
/// - `channel` is null or any pointer: channels are looked up among the live ones.
/// - `id` is null or a writable `struct rdma_cm_id *` out parameter.
/// - `context` is any value: it is stored in the ID and handed back, never read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: rdma_port_space,
) -> c_int {
    if id.is_null() {
        return err(libc::EINVAL);
    }
    let Some(space) = port_space(ps) else { return err(libc::EINVAL) };
    let (ch, sync) = match channel_or_private(channel) {
        Ok(x) => x,
        Err(e) => return err(e),
    };
    let cm = match ch.ctx.dev.lock().cm_create_id(ch.cm, space) {
        Ok(cm) => cm,
        Err(e) => return fail(&e),
    };
    let mut c = SoftId::blank(std::ptr::from_ref(&ch.ch).cast_mut(), ps);
    c.context = context;
    c.verbs = ch.ctx.ibv();
    c.port_num = 1;
    let p = SoftId::register(ch.ctx, cm, c, sync);
    // SAFETY: `id` is the caller's writable out parameter (checked non-null).
    unsafe { *id = p };
    0
}

/// `rdma_destroy_id`: closes the connection (DREQ) or rejects a request not answered; the
/// ID's events not yet taken are dropped, the one a synchronous call kept is acknowledged, and,
/// as librdmacm, it returns once the program has acknowledged every other event it took for the
/// ID. Calls on the ID from then on (or racing this one) answer `EINVAL`; its memory goes when the
/// last of them and of its events is done with it.
///
/// # Safety
/// As `rdma_destroy_id`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut g) = s.lock() else { return err(libc::EINVAL) };
    g.destroy();
    let kept = std::mem::replace(&mut g.id().event, std::ptr::null_mut());
    let _ = s.ctx.dev.lock().cm_destroy_id(s.cm);
    if g.sync {
        channel::destroy(g.id().channel);
    }
    drop(g);
    channel::ack(kept);
    s.wait_acked();
    0
}

/// `rdma_bind_addr`.
///
/// # Safety
/// As `rdma_bind_addr`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `addr` is null or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    // SAFETY: the caller passes a socket address (or null), as librdmacm's callers do.
    let Some(a) = (unsafe { sockaddr::read(addr) }) else { return err(libc::EAFNOSUPPORT) };
    if let Err(e) = s.s.ctx.dev.lock().cm_bind(s.s.cm, a) {
        return fail(&e);
    }
    s.sync_addrs();
    0
}

/// `rdma_resolve_addr`: the device is this process's; the peer's MAC comes from the kernel's
/// neighbour table. `RDMA_CM_EVENT_ADDR_RESOLVED` (or `ADDR_ERROR`) follows.
///
/// # Safety
/// As `rdma_resolve_addr`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `src_addr` is null or a socket address as long as its family says.
/// - `dst_addr` is null or a socket address as long as its family says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut libc::sockaddr,
    dst_addr: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    let timeout = std::time::Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0).max(100));
    // SAFETY: the caller passes socket addresses (the source may be null), as librdmacm's do.
    let Some(dst) = (unsafe { sockaddr::read(dst_addr) }) else { return err(libc::EAFNOSUPPORT) };
    // SAFETY: `src_addr` is null or the caller's socket address, as long as its family says
    // (rdma_resolve_addr(3)), as `sockaddr::read` requires.
    let src = unsafe { sockaddr::read(src_addr) };
    if let Err(e) = s.s.ctx.dev.lock().cm_resolve_addr_within(s.s.cm, src, dst, timeout) {
        return fail(&e);
    }
    s.sync_addrs();
    if s.sync { channel::complete(s) } else { 0 }
}

/// `rdma_resolve_route`: over RoCEv2 the route is the resolved address;
/// `RDMA_CM_EVENT_ROUTE_RESOLVED` follows at once.
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if let Err(e) = s.s.ctx.dev.lock().cm_resolve_route(s.s.cm) {
        return fail(&e);
    }
    s.id().route.num_paths = 1;
    if s.sync { channel::complete(s) } else { 0 }
}

/// `rdma_listen` (an unbound ID is bound to the wildcard and a free port first).
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if let Err(e) = s.s.ctx.dev.lock().cm_listen(s.s.cm, backlog.max(0) as usize) {
        return fail(&e);
    }
    s.sync_addrs();
    0
}

/// `rdma_migrate_id`: the ID's events go to `channel` from now on (a null channel: a private one,
/// the ID becomes synchronous).
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    let (ch, sync) = match channel_or_private(channel) {
        Ok(x) => x,
        Err(e) => return err(e),
    };
    if let Err(e) = s.s.ctx.dev.lock().cm_migrate_id(s.s.cm, ch.cm) {
        return fail(&e);
    }
    if s.sync {
        channel::destroy(s.id().channel);
    }
    s.id().channel = std::ptr::from_ref(&ch.ch).cast_mut();
    s.sync = sync;
    0
}

/// `rdma_get_local_addr`.
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_local_addr(id: *mut rdma_cm_id) -> *mut libc::sockaddr {
    match SoftId::get(id).as_ref().and_then(|s| s.lock()) {
        Some(mut s) => std::ptr::addr_of_mut!(s.id().route.addr.__bindgen_anon_1).cast(),
        None => std::ptr::null_mut(),
    }
}

/// `rdma_get_peer_addr`.
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_peer_addr(id: *mut rdma_cm_id) -> *mut libc::sockaddr {
    match SoftId::get(id).as_ref().and_then(|s| s.lock()) {
        Some(mut s) => std::ptr::addr_of_mut!(s.id().route.addr.__bindgen_anon_2).cast(),
        None => std::ptr::null_mut(),
    }
}

/// The port of the address at `p`, in network byte order (0 for null or another family).
///
/// # Safety
/// `p` is null or a socket address as long as its family says.
unsafe fn port_of(p: *mut libc::sockaddr) -> u16 {
    // SAFETY: this function's contract, as `sockaddr::read` requires.
    unsafe { sockaddr::read(p) }.map_or(0, |a: SocketAddr| a.port().to_be())
}

/// `rdma_get_src_port` (network byte order).
///
/// # Safety
/// As `rdma_get_src_port`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: `rdma_get_local_addr` takes any pointer (it looks `id` up among the live IDs) and
    // answers null or the address in a live ID's route, a `sockaddr_storage` written by
    // `sockaddr::write`, as `port_of` requires.
    unsafe { port_of(rdma_get_local_addr(id)) }
}

/// `rdma_get_dst_port` (network byte order).
///
/// # Safety
/// As `rdma_get_dst_port`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: as in `rdma_get_src_port`, with the peer's address.
    unsafe { port_of(rdma_get_peer_addr(id)) }
}

/// `rdma_set_option`: the type of service (one byte, as the kernel's `ucma` wants it) becomes the
/// traffic class of the connection's QP and REQ path ([`engine::verbs::Context::cm_set_tos`]); the
/// other ID options librdmacm knows are taken (address reuse, IPv6-only, ACK timeout) and change
/// nothing here; anything else is `EINVAL`, an IB path record `ENOSYS`.
///
/// # Safety
/// As `rdma_set_option`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `optval` is null or points to `optlen` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    let Some(s) = SoftId::get(id).filter(|_| !optval.is_null()) else { return err(libc::EINVAL) };
    let Some(s) = s.lock() else { return err(libc::EINVAL) };
    match (level as u32, optname as u32) {
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if optlen != 1 => err(libc::EINVAL),
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) => {
            // SAFETY: `optval` is not null (checked) and points to `optlen` (1) readable bytes, as
            // the caller promises.
            let tos = unsafe { *optval.cast::<u8>() };
            match s.s.ctx.dev.lock().cm_set_tos(s.s.cm, tos) {
                Ok(()) => 0,
                Err(e) => fail(&e),
            }
        }
        (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR | RDMA_OPTION_ID_AFONLY) => 0,
        (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => 0,
        (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => err(libc::ENOSYS),
        _ => err(libc::EINVAL),
    }
}

/// `rdma_get_devices`: the device IDs use, as a NULL-terminated list.
///
/// # Safety
/// As `rdma_get_devices`'s callers promise:
/// - `num_devices` is null or a valid `c_int` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let ctx = crate::device::open_first().ok();
    let n = usize::from(ctx.is_some());
    // SAFETY: `calloc` has no precondition; the `n + 1` zeroed pointer slots end with the null
    // terminator, and the result is checked for null below.
    let list = unsafe { libc::calloc(n + 1, size_of::<*mut ibv_context>()) }.cast::<*mut ibv_context>();
    if list.is_null() {
        return errno::null(libc::ENOMEM);
    }
    if let Some(c) = ctx {
        // SAFETY: `n == 1` here, so the array just allocated has two aligned pointer slots.
        unsafe { *list = c.ibv() };
    }
    if !num_devices.is_null() {
        // SAFETY: `num_devices` (not null, checked) is the caller's writable `int`
        // (rdma_get_devices(3)).
        unsafe { *num_devices = n as c_int };
    }
    list
}

/// `rdma_free_devices`.
///
/// # Safety
/// As `rdma_free_devices`'s callers promise:
/// - `list` is null or a list `rdma_get_devices` returned, not freed before and not used after.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: `list` is null or the `calloc`ed array of `rdma_get_devices`, freed once (its
    // contract); `free(NULL)` does nothing.
    unsafe { libc::free(list.cast()) };
}
