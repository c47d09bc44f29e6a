//! Completion channels and completion queues.

use crate::abi::*;
use crate::errno;
use crate::handles::{Ctx, SoftCq};
use crate::wr;
use engine::verbs::CompChannel;
use rustix::fd::{AsRawFd, OwnedFd};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

/// A completion channel: rdma-core's `struct ibv_comp_channel` first. Its `fd` (a duplicate of
/// the engine's eventfd) is readable while a CQ event waits, for programs that poll it.
#[repr(C)]
struct SoftChannel {
    ibv: ibv_comp_channel,
    ch: CompChannel,
    fd: OwnedFd,
}

impl SoftChannel {
    /// # Safety
    /// `p` is null or a channel of this library not yet destroyed.
    unsafe fn from<'a>(p: *mut ibv_comp_channel) -> Option<(&'a SoftChannel, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every channel handed out is the first field of a live `SoftChannel`.
        let c = unsafe { &*p.cast::<SoftChannel>() };
        // SAFETY: `ibv_create_comp_channel` set `context` to the live context the channel was made
        // on.
        Some((c, unsafe { Ctx::from(c.ibv.context) }?))
    }
}

/// `ibv_create_comp_channel`.
///
/// # Safety
/// As `ibv_create_comp_channel`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(context: *mut ibv_context) -> *mut ibv_comp_channel {
    // SAFETY: `context` is null or a context this library opened and has not closed (the verbs'
    // contract); `Ctx::from` answers `None` for null.
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::null(libc::EINVAL) };
    let mut c = ctx.dev.lock();
    let ch = match c.create_comp_channel() {
        Ok(ch) => ch,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let fd = match c.comp_channel_fd(ch).map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, 0)) {
        Ok(Ok(fd)) => fd,
        _ => {
            let _ = c.destroy_comp_channel(ch);
            return errno::null(libc::EMFILE);
        }
    };
    let ibv = ibv_comp_channel { context, fd: fd.as_raw_fd(), refcnt: 0 };
    Box::into_raw(Box::new(SoftChannel { ibv, ch, fd })).cast()
}

/// `ibv_destroy_comp_channel`: `EBUSY` while a CQ uses it.
///
/// # Safety
/// As `ibv_destroy_comp_channel`'s callers promise:
/// - `channel` is null or a completion channel of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    // SAFETY: `channel` is null or a channel of this library not yet destroyed (the verbs'
    // contract).
    let Some((c, ctx)) = (unsafe { SoftChannel::from(channel) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().destroy_comp_channel(c.ch) {
        return errno::fail(errno::of(&e));
    }
    // SAFETY: `channel` is a `SoftChannel` boxed by `ibv_create_comp_channel`, and the engine let
    // it go (no CQ uses it); the caller does not use the pointer again (ibv_destroy_comp_channel(3)).
    drop(unsafe { Box::from_raw(channel.cast::<SoftChannel>()) });
    0
}

/// The most entries a CQ has (`max_cqe` of `ibv_query_device`).
pub(crate) const MAX_CQE: c_int = (1 << 20) - 1;

/// `ibv_create_cq`.
///
/// # Safety
/// As `ibv_create_cq`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `cq_context` is any value: it is stored and handed back, never read.
/// - `channel` is null or a completion channel of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: this function's contract is `create`'s.
    unsafe { create(context, i64::from(cqe), cq_context, channel, i64::from(comp_vector), |_| {}) }.cast()
}

/// Creates a CQ of `cqe` entries for `ibv_create_cq` and `ibv_create_cq_ex`; `fill` sets the
/// extended CQ's callbacks (none for a plain CQ). `NULL` with `errno` on failure.
///
/// # Safety
/// - `context` is null or a context this library opened and has not closed.
/// - `channel` is null or a completion channel of this library not yet destroyed.
pub(crate) unsafe fn create(
    context: *mut ibv_context,
    cqe: i64,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: i64,
    fill: impl FnOnce(&mut ibv_cq_ex),
) -> *mut ibv_cq_ex {
    // SAFETY: `context` is null or a live context of this library (this function's contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::null(libc::EINVAL) };
    if !(1..=i64::from(MAX_CQE)).contains(&cqe) || comp_vector != 0 {
        return errno::null(libc::EINVAL);
    }
    let ch = if channel.is_null() {
        None
    } else {
        // SAFETY: `channel` is not null (checked), so by this function's contract a live channel
        // of this library.
        match unsafe { SoftChannel::from(channel) } {
            Some((c, _)) => Some(c.ch),
            None => return errno::null(libc::EINVAL),
        }
    };
    let cq = match ctx.dev.lock().create_cq_with_channel(cqe as usize, ch) {
        Ok(cq) => cq,
        Err(e) => return errno::null(errno::of(&e)),
    };
    // SAFETY: all-zero is a valid `ibv_cq_ex` (a zeroed pthread mutex and condition are the
    // static initialisers on glibc, null callbacks are `None`) and a valid `ibv_wc` (integers
    // and a union of integers).
    let (mut ex, current): (ibv_cq_ex, ibv_wc) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    ex.context = context;
    ex.channel = channel;
    ex.cq_context = cq_context;
    ex.cqe = cqe as c_int;
    fill(&mut ex);
    let soft =
        SoftCq { ex: UnsafeCell::new(ex), cq, current: Mutex::new(current), polling: AtomicBool::new(false) };
    let p: *mut SoftCq = Box::into_raw(Box::new(soft));
    ctx.objects().cqs.insert(cq, p as usize);
    p.cast()
}

/// `ibv_resize_cq`, as rxe answers it: `EINVAL` below 1, above `max_cqe` or below the number of
/// completions the CQ holds after a progress round (none is lost); else `cq->cqe` is the new size.
///
/// # Safety
/// As `ibv_resize_cq`'s callers promise:
/// - `cq` is null or a CQ of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: `cq` is null or a CQ of this library not yet destroyed (the verbs' contract).
    let Some((c, ctx)) = (unsafe { SoftCq::from(cq) }) else { return errno::fail(libc::EINVAL) };
    if !(1..=MAX_CQE).contains(&cqe) {
        return errno::fail(libc::EINVAL);
    }
    let mut e = ctx.dev.lock();
    // A progress round first, as `ibv_poll_cq` takes: the completions of work the device has
    // done by now count as outstanding (rxe's completer runs as requests are posted).
    let _ = e.progress();
    if let Err(err) = e.resize_cq(c.cq, cqe as usize) {
        return errno::fail(errno::of(&err));
    }
    // SAFETY: `ex` is live while `c` is; `cqe` is written only here, under the device lock, so
    // two resizes do not race; programs only read it.
    unsafe { (*c.ex.get()).cqe = cqe };
    0
}

/// `ibv_destroy_cq`: `EBUSY` while a QP uses it or events are unacknowledged.
///
/// # Safety
/// As `ibv_destroy_cq`'s callers promise:
/// - `cq` is null or a CQ of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: `cq` is null or a CQ of this library not yet destroyed (the verbs' contract).
    let Some((c, ctx)) = (unsafe { SoftCq::from(cq) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().destroy_cq(c.cq) {
        return errno::fail(errno::of(&e));
    }
    ctx.objects().cqs.remove(&c.cq);
    // SAFETY: `cq` is a `SoftCq` boxed by `create`; the engine destroyed the CQ (no QP uses
    // it, no event is unacknowledged) and it left the context's table, so no reference remains.
    drop(unsafe { Box::from_raw(cq.cast::<SoftCq>()) });
    0
}

/// `ibv_context_ops.poll_cq` (behind the inline `ibv_poll_cq`): a progress round, then up to
/// `num_entries` completions; -1 on an overrun CQ.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: `cq` is null or a live CQ of this library: the inline `ibv_poll_cq` reaches this op
    // only through `cq->context->ops`, which this library filled.
    let Some((c, ctx)) = (unsafe { SoftCq::from(cq) }) else {
        errno::set(libc::EINVAL);
        return -1;
    };
    if num_entries <= 0 {
        return 0;
    }
    if wc.is_null() {
        errno::set(libc::EINVAL);
        return -1;
    }
    // The engine's completions pass through a buffer of the polling thread's, kept between
    // calls: a busy poll allocates nothing.
    thread_local! {
        static OUT: std::cell::RefCell<Vec<engine::verbs::WorkCompletion>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    OUT.with_borrow_mut(|out| {
        out.clear();
        {
            let mut e = ctx.dev.lock();
            // A datapath error shows in the completions it causes; polling goes on.
            let _ = e.progress();
            // An overrun CQ (or a bad handle) answers -1, as libibverbs' providers do.
            if let Err(err) = e.poll_cq(c.cq, out, num_entries as usize) {
                errno::set(errno::of(&err));
                return -1;
            }
        }
        for (i, w) in out.iter().enumerate() {
            // SAFETY: `wc` (not null, checked) has `num_entries` writable entries (ibv_poll_cq(3)),
            // and the engine returned at most `num_entries` completions, so `i < num_entries`;
            // `write` does not read the entry, which may be uninitialised.
            unsafe { wc.add(i).write(wr::wc(w)) };
        }
        out.len() as c_int
    })
}

/// `ibv_context_ops.req_notify_cq`.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: `cq` is null or a live CQ of this library (reached through its context's ops).
    let Some((c, ctx)) = (unsafe { SoftCq::from(cq) }) else { return errno::fail(libc::EINVAL) };
    match ctx.dev.lock().req_notify_cq(c.cq, solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno::fail(errno::of(&e)),
    }
}

/// `ibv_get_cq_event`: blocks until a CQ of the channel has an event, while the progress thread
/// drives the engine; if the program made the channel's descriptor non-blocking, fails at once
/// with `EAGAIN` when no event waits, as libibverbs' read of it does.
///
/// # Safety
/// As `ibv_get_cq_event`'s callers promise:
/// - `channel` is null or a completion channel of this library not yet destroyed.
/// - `cq` is null or a writable `struct ibv_cq *` out parameter.
/// - `cq_context` is null or a writable `void *` out parameter.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: `channel` is null or a channel of this library not yet destroyed (the verbs'
    // contract).
    let Some((ch, ctx)) = (unsafe { SoftChannel::from(channel) }) else {
        errno::set(libc::EINVAL);
        return -1;
    };
    loop {
        let got = ctx.dev.lock().get_cq_event(ch.ch);
        match got {
            Ok(Some(q)) => {
                let p = ctx.objects().cqs.get(&q).copied().unwrap_or(0) as *mut ibv_cq;
                // SAFETY: `cq` and `cq_context` are null or writable (ibv_get_cq_event(3)). `p` is
                // null or the `SoftCq` the table names, and it is live: the event just taken is
                // unacknowledged, and `ibv_destroy_cq` answers EBUSY until it is acknowledged.
                unsafe {
                    if !cq.is_null() {
                        *cq = p;
                    }
                    if !cq_context.is_null() {
                        *cq_context = if p.is_null() { std::ptr::null_mut() } else { (*p).cq_context };
                    }
                }
                return 0;
            }
            Ok(None) => {}
            Err(e) => {
                errno::set(errno::of(&e));
                return -1;
            }
        }
        // SAFETY: F_GETFL takes no third argument and reads no memory; the descriptor is the
        // channel's own `OwnedFd`, open while `ch` is borrowed.
        let flags = unsafe { libc::fcntl(ch.fd.as_raw_fd(), libc::F_GETFL) };
        if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
            // The program made the descriptor non-blocking: libibverbs' read would fail now.
            errno::set(libc::EAGAIN);
            return -1;
        }
        ctx.dev.release();
        if engine::progress::wait_readable(&ch.fd, None).is_err() {
            errno::set(libc::EIO);
            return -1;
        }
    }
}

/// `ibv_ack_cq_events`.
///
/// # Safety
/// As `ibv_ack_cq_events`'s callers promise:
/// - `cq` is null or a CQ of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: std::ffi::c_uint) {
    // SAFETY: `cq` is null or a CQ of this library not yet destroyed (the verbs' contract).
    if let Some((c, ctx)) = unsafe { SoftCq::from(cq) } {
        let _ = ctx.dev.lock().ack_cq_events(c.cq, nevents);
    }
}
