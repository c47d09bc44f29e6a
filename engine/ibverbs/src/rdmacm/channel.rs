//! Event channels and events: `rdma_create_event_channel`, `rdma_get_cm_event`,
//! `rdma_ack_cm_event`, `rdma_event_str`, and the wait of synchronous IDs.

use super::objects::{Kind, Locked, SoftCmChannel, SoftId, born, died, err, fail};
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;
use crate::handles::Ctx;
use engine::verbs::{CmEventKind, CmIdEvent};
use rustix::fd::BorrowedFd;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

/// A channel on the process's rdma_cm device.
pub(crate) fn create() -> Result<&'static SoftCmChannel, c_int> {
    let ctx = crate::device::open_first()?;
    let mut dev = ctx.dev.lock();
    let cm = dev.cm_create_channel().map_err(|e| errno::of(&e))?;
    let fd = dev.cm_channel_fd(cm).map(|f| rustix::fd::AsRawFd::as_raw_fd(&f)).map_err(|e| errno::of(&e))?;
    // Never freed: a thread may still wait in `rdma_get_cm_event` on a destroyed channel (rping
    // does), and must find the object there; it stays asleep, as with librdmacm.
    let ch = Box::leak(Box::new(SoftCmChannel { ch: rdma_event_channel { fd }, cm, ctx }));
    born(Kind::Channel, std::ptr::from_ref(&ch.ch) as usize);
    Ok(ch)
}

/// Destroys the engine side of a channel (its descriptor closes; the object stays).
pub(crate) fn destroy(p: *mut rdma_event_channel) -> c_int {
    let Some(ch) = SoftCmChannel::from(p) else { return errno::fail(libc::EINVAL) };
    match ch.ctx.dev.lock().cm_destroy_channel(ch.cm) {
        Ok(()) => 0,
        Err(e) => errno::fail(errno::of(&e)),
    }
}

/// `rdma_create_event_channel`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    match create() {
        Ok(c) => std::ptr::from_ref(&c.ch).cast_mut(),
        Err(e) => errno::null(e),
    }
}

/// `rdma_destroy_event_channel` (IDs must be gone; librdmacm does not check, this does not
/// either beyond refusing while an ID still reports to it).
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    let _ = destroy(channel);
}

/// An event as programs see it: rdma-core's `struct rdma_cm_event` first, with the private data
/// its parameters point at, and the IDs it names (`id`, `listen_id`), kept allocated until it is
/// acknowledged; `owner` is the one it counts against (a connect request's listener, else its ID).
#[repr(C)]
struct SoftEvent {
    ev: rdma_cm_event,
    private: Vec<u8>,
    owner: Arc<SoftId>,
    _child: Option<Arc<SoftId>>,
}

fn event_type(k: CmEventKind) -> rdma_cm_event_type {
    match k {
        CmEventKind::AddrResolved => RDMA_CM_EVENT_ADDR_RESOLVED,
        CmEventKind::AddrError => RDMA_CM_EVENT_ADDR_ERROR,
        CmEventKind::RouteResolved => RDMA_CM_EVENT_ROUTE_RESOLVED,
        CmEventKind::ConnectRequest => RDMA_CM_EVENT_CONNECT_REQUEST,
        CmEventKind::ConnectResponse => RDMA_CM_EVENT_CONNECT_RESPONSE,
        CmEventKind::ConnectError => RDMA_CM_EVENT_CONNECT_ERROR,
        CmEventKind::Unreachable => RDMA_CM_EVENT_UNREACHABLE,
        CmEventKind::Rejected => RDMA_CM_EVENT_REJECTED,
        CmEventKind::Established => RDMA_CM_EVENT_ESTABLISHED,
        CmEventKind::Disconnected => RDMA_CM_EVENT_DISCONNECTED,
    }
}

/// The IDs an event names, `(id, listen_id)`, the event counted against the second if there is
/// one, else the first: the registered one, or for a connect request a new ID that inherits the
/// listener's channel, context and port space. `None` if the ID is gone or being destroyed.
fn ids_for(ctx: &'static Ctx, e: &CmIdEvent) -> Option<(Arc<SoftId>, Option<Arc<SoftId>>)> {
    let Some(listen) = e.listen_id else {
        let s = SoftId::of_cm(ctx, e.id)?;
        s.lock()?.count_event();
        return Some((s, None));
    };
    let l = SoftId::of_cm(ctx, listen)?;
    let mut g = l.lock()?;
    let lid = g.id();
    let mut c = SoftId::blank(lid.channel, lid.ps);
    c.context = lid.context;
    c.verbs = ctx.ibv();
    c.port_num = 1;
    c.qp_type = if e.ud.is_some() { IBV_QPT_UD } else { lid.qp_type };
    c.route.num_paths = 1;
    let child = SoftId::register(ctx, e.id, c, false);
    g.count_event();
    drop(g);
    let child = SoftId::get(child)?;
    child.lock()?.sync_addrs();
    Some((child, Some(l)))
}

/// Turns an engine event into a program's event (null if its ID is gone).
fn convert(ctx: &'static Ctx, e: CmIdEvent) -> *mut rdma_cm_event {
    let Some((id, listen)) = ids_for(ctx, &e) else { return std::ptr::null_mut() };
    // SAFETY: all-zero is a valid `rdma_cm_event`.
    let mut ev: rdma_cm_event = unsafe { std::mem::zeroed() };
    ev.id = id.as_ptr();
    ev.listen_id = listen.as_ref().map_or(std::ptr::null_mut(), |l| l.as_ptr());
    ev.event = event_type(e.kind);
    ev.status = e.status;
    let (owner, child) = match listen {
        Some(l) => (l, Some(id)),
        None => (id, None),
    };
    let mut out = Box::new(SoftEvent { ev, private: e.param.private_data, owner, _child: child });
    let (pd, len) = (out.private.as_ptr().cast(), out.private.len().min(255) as u8);
    match e.ud {
        Some(ud) => {
            // SAFETY: every member of the `param` union is plain integers and pointers, so the
            // zeroed event's `ud` is a valid value; this arm fills the one a UD event carries.
            let p = unsafe { &mut out.ev.param.ud };
            p.private_data = pd;
            p.private_data_len = len;
            p.ah_attr = crate::qp::ah_attr(&ud.ah);
            p.qp_num = ud.qp_num;
            p.qkey = ud.qkey;
        }
        None => {
            // SAFETY: `out.ev` was zeroed, and every member of the `param` union is plain integers
            // and pointers, so any bytes are a valid `conn`; this arm fills the one a connected
            // ID's event carries.
            let p = unsafe { &mut out.ev.param.conn };
            p.private_data = if len == 0 { std::ptr::null() } else { pd };
            p.private_data_len = len;
            p.responder_resources = e.param.responder_resources;
            p.initiator_depth = e.param.initiator_depth;
            p.retry_count = e.param.retry_count;
            p.rnr_retry_count = e.param.rnr_retry_count;
            p.srq = u8::from(e.param.srq);
            p.qp_num = e.param.qp_num;
        }
    }
    let p = Box::into_raw(out);
    born(Kind::Event, p as usize);
    p.cast()
}

/// The next event on `ch`, waiting for it unless the descriptor was made non-blocking.
fn next(ch: &SoftCmChannel) -> Result<*mut rdma_cm_event, c_int> {
    loop {
        let got = ch.ctx.dev.lock().cm_get_event(ch.cm);
        match got {
            Ok(Some(e)) => {
                let ev = convert(ch.ctx, e);
                if !ev.is_null() {
                    return Ok(ev);
                }
                continue;
            }
            Ok(None) => {}
            // The channel is destroyed (its object stays: see `create`). rping's CM thread calls
            // here again right after acknowledging its last event, while the main thread destroys
            // the IDs and the channel and returns; librdmacm's `rdma_destroy_id` waits for that
            // acknowledgement, so there the thread is already blocked in read() and stays so
            // while the process exits 0. Here the destroy may come first: the call sleeps on
            // instead of failing (which made rping exit 255 from that thread).
            Err(_) => loop {
                std::thread::park();
            },
        }
        // SAFETY: F_GETFL takes no third argument and reads no memory; a closed descriptor
        // answers -1 (EBADF), handled below.
        let flags = unsafe { libc::fcntl(ch.ch.fd, libc::F_GETFL) };
        if flags < 0 {
            // The channel was destroyed under a waiter: it sleeps on, as with librdmacm.
            loop {
                std::thread::park();
            }
        }
        if flags & libc::O_NONBLOCK != 0 {
            return Err(libc::EAGAIN);
        }
        ch.ctx.dev.release();
        // SAFETY: the descriptor is the channel's eventfd, open while the channel lives.
        let fd = unsafe { BorrowedFd::borrow_raw(ch.ch.fd) };
        if engine::progress::wait_readable(fd, None).is_err() {
            return Err(libc::EIO);
        }
    }
}

/// `rdma_get_cm_event`: the next event, waiting for it (the device's progress thread keeps the
/// CM running meanwhile).
///
/// # Safety
/// As `rdma_get_cm_event`'s callers promise:
/// - `channel` is null or any pointer: channels are looked up among the live ones.
/// - `event` is null or a writable `struct rdma_cm_event *` out parameter.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    let Some(ch) = SoftCmChannel::from(channel) else { return err(libc::EINVAL) };
    if event.is_null() {
        return err(libc::EINVAL);
    }
    match next(ch) {
        Ok(ev) => {
            // SAFETY: checked non-null; the caller passes a writable pointer.
            unsafe { *event = ev };
            0
        }
        Err(e) => err(e),
    }
}

/// `rdma_ack_cm_event`: frees the event (its private data goes with it).
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    if ack(event) { 0 } else { err(libc::EINVAL) }
}

/// Frees `event` if it is a live event of this library, and counts it acknowledged for the ID it
/// counts against; whether it was live. Takes no ID's lock (a caller may hold one).
pub(crate) fn ack(event: *mut rdma_cm_event) -> bool {
    if !died(Kind::Event, event as usize) {
        return false;
    }
    // SAFETY: a live event is a leaked `SoftEvent`, now acknowledged (no longer live): freed once.
    let e = unsafe { Box::from_raw(event.cast::<SoftEvent>()) };
    e.owner.event_acked();
    true
}

/// What a synchronous call waits for: the ID's next event, kept in `id->event` (acknowledged by
/// the next call or `rdma_destroy_id`); 0, or -1 with `errno` from its status (`ECONNREFUSED`
/// for a rejection), as librdmacm's `ucma_complete`. The ID's lock is let go during the wait (the
/// event of a connect request reads the listener under it) and taken again after: an ID destroyed
/// meanwhile answers `EINVAL`.
pub(crate) fn complete(s: &mut Locked<'_>) -> c_int {
    let kept = std::mem::replace(&mut s.id().event, std::ptr::null_mut());
    ack(kept);
    let Some(ch) = SoftCmChannel::from(s.id().channel) else { return err(libc::EINVAL) };
    let ev = match s.unlocked(|| next(ch)) {
        Ok(ev) => ev,
        Err(e) => return err(e),
    };
    if s.is_destroyed() {
        ack(ev);
        return err(libc::EINVAL);
    }
    s.id().event = ev;
    // SAFETY: `ev` is the event the wait just returned and kept in `s.id.event`: a live leaked
    // `SoftEvent` until it is acknowledged, which has not happened.
    let (kind, status) = unsafe { ((*ev).event, (*ev).status) };
    if kind == RDMA_CM_EVENT_REJECTED {
        return err(libc::ECONNREFUSED);
    }
    match status {
        0 => 0,
        s if s < 0 => err(-s),
        s => err(s),
    }
}

/// The engine error of a synchronous ID's call, or its wait.
pub(crate) fn finish(s: &mut Locked<'_>, r: Result<(), engine::verbs::VerbsError>) -> c_int {
    match r {
        Err(e) => fail(&e),
        Ok(()) if s.sync => complete(s),
        Ok(()) => 0,
    }
}

/// `rdma_event_str`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_event_str(event: rdma_cm_event_type) -> *const c_char {
    let s: &'static [u8] = match event {
        RDMA_CM_EVENT_ADDR_RESOLVED => b"RDMA_CM_EVENT_ADDR_RESOLVED\0",
        RDMA_CM_EVENT_ADDR_ERROR => b"RDMA_CM_EVENT_ADDR_ERROR\0",
        RDMA_CM_EVENT_ROUTE_RESOLVED => b"RDMA_CM_EVENT_ROUTE_RESOLVED\0",
        RDMA_CM_EVENT_ROUTE_ERROR => b"RDMA_CM_EVENT_ROUTE_ERROR\0",
        RDMA_CM_EVENT_CONNECT_REQUEST => b"RDMA_CM_EVENT_CONNECT_REQUEST\0",
        RDMA_CM_EVENT_CONNECT_RESPONSE => b"RDMA_CM_EVENT_CONNECT_RESPONSE\0",
        RDMA_CM_EVENT_CONNECT_ERROR => b"RDMA_CM_EVENT_CONNECT_ERROR\0",
        RDMA_CM_EVENT_UNREACHABLE => b"RDMA_CM_EVENT_UNREACHABLE\0",
        RDMA_CM_EVENT_REJECTED => b"RDMA_CM_EVENT_REJECTED\0",
        RDMA_CM_EVENT_ESTABLISHED => b"RDMA_CM_EVENT_ESTABLISHED\0",
        RDMA_CM_EVENT_DISCONNECTED => b"RDMA_CM_EVENT_DISCONNECTED\0",
        RDMA_CM_EVENT_DEVICE_REMOVAL => b"RDMA_CM_EVENT_DEVICE_REMOVAL\0",
        RDMA_CM_EVENT_MULTICAST_JOIN => b"RDMA_CM_EVENT_MULTICAST_JOIN\0",
        RDMA_CM_EVENT_MULTICAST_ERROR => b"RDMA_CM_EVENT_MULTICAST_ERROR\0",
        RDMA_CM_EVENT_ADDR_CHANGE => b"RDMA_CM_EVENT_ADDR_CHANGE\0",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => b"RDMA_CM_EVENT_TIMEWAIT_EXIT\0",
        _ => b"UNKNOWN EVENT\0",
    };
    s.as_ptr().cast()
}
