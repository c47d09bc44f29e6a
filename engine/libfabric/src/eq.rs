//! `fi_eq_open`: an event queue. RDM and DGRAM endpoints have no connection events, so the events
//! a queue holds are the ones the program writes (`fi_eq_write`); reads of an empty queue answer
//! -FI_EAGAIN, and `fi_eq_sread` waits for a write up to its timeout.

use core::ffi::{c_char, c_int, c_void};
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::abi::{self, fi_eq_attr, fi_eq_err_entry, fi_ops, fi_ops_eq, fid, fid_eq, fid_fabric};
use crate::util::{EINVAL, ENOSYS};

/// An event queue: `fid_eq` first.
#[repr(C)]
struct Eq {
    fid: fid_eq,
    /// Events written: the event number and its bytes. A lock, not a `RefCell`: an EQ is the
    /// fabric's, outside FI_THREAD_DOMAIN's per-domain serialization, so one thread may write
    /// while another waits in `fi_eq_sread`.
    events: Mutex<VecDeque<(u32, Vec<u8>)>>,
}

impl Eq {
    fn events(&self) -> MutexGuard<'_, VecDeque<(u32, Vec<u8>)>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

static EQ_FI_OPS: fi_ops = crate::util::fid_ops(close, None, Some(control));

static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: size_of::<fi_ops_eq>(),
    read: Some(read),
    readerr: Some(readerr),
    write: Some(write),
    sread: Some(sread),
    strerror: Some(strerror),
};

/// The most events a queue holds (`fi_eq_write` beyond it: -FI_EAGAIN).
const MAX_EVENTS: usize = 1024;

pub(crate) unsafe extern "C" fn open(
    fabric: *mut fid_fabric,
    attr: *mut fi_eq_attr,
    eq: *mut *mut fid_eq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` is null or the caller's `fi_eq_attr` (fi_eq_open(3)); `as_ref` answers `None`
    // for null.
    let Some(attr) = (unsafe { attr.as_ref() }) else { return EINVAL };
    if fabric.is_null() || eq.is_null() {
        return EINVAL;
    }
    if !matches!(attr.wait_obj, abi::FI_WAIT_NONE | abi::FI_WAIT_UNSPEC) {
        return ENOSYS;
    }
    let e = Box::new(Eq {
        fid: fid_eq {
            fid: fid { fclass: abi::FI_CLASS_EQ as usize, context, ops: (&raw const EQ_FI_OPS).cast_mut() },
            ops: (&raw const EQ_OPS).cast_mut(),
        },
        events: Mutex::new(VecDeque::new()),
    });
    // SAFETY: `eq`, not null (checked), is the caller's writable `struct fid_eq **` out parameter.
    unsafe { *eq = &raw mut Box::leak(e).fid };
    0
}

unsafe extern "C" fn close(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: libfabric calls this close op only through the `fid` of an EQ `open` leaked from a
    // Box (`fid_eq` and its `fid` first in the `repr(C)` `Eq`), once: fi_close(3) ends the object.
    drop(unsafe { Box::from_raw(f.cast::<Eq>()) });
    0
}

unsafe extern "C" fn control(_: *mut fid, _: c_int, _: *mut c_void) -> c_int {
    // FI_GETWAIT: no wait object.
    ENOSYS
}

/// # Safety
/// `eq` is null or an event queue of this provider.
unsafe fn eq_of<'a>(eq: *mut fid_eq) -> Option<&'a Eq> {
    // SAFETY: this function's contract; `fid_eq` is the first field of the `repr(C)` `Eq`, so a
    // live EQ's `fid_eq` is its `Eq`; `as_ref` answers `None` for null.
    unsafe { eq.cast::<Eq>().as_ref() }
}

unsafe extern "C" fn read(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    // SAFETY: libfabric reaches this op only through the ops table of an EQ `open` made, and the
    // caller does not close the EQ while it reads from it (fi_eq(3)).
    let Some(e) = (unsafe { eq_of(eq) }) else { return EINVAL as isize };
    let mut q = e.events();
    let Some((ev, bytes)) = q.front() else { return -(abi::FI_EAGAIN as isize) };
    if bytes.len() > len || (buf.is_null() && !bytes.is_empty()) {
        return -(abi::FI_ETOOSMALL as isize);
    }
    // SAFETY: `event` is null or a writable `uint32_t`, and `buf` holds `len` writable bytes
    // (fi_eq_read(3)); `bytes.len() <= len`, and `buf` is not null when there are bytes (both
    // checked); the queue's own vector does not overlap the caller's buffer.
    unsafe {
        if !event.is_null() {
            *event = *ev;
        }
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
    }
    let n = bytes.len() as isize;
    if flags & u64::from(abi::FI_PEEK) == 0 {
        q.pop_front();
    }
    n
}

unsafe extern "C" fn readerr(_: *mut fid_eq, _: *mut fi_eq_err_entry, _: u64) -> isize {
    // Nothing here fails asynchronously.
    -(abi::FI_EAGAIN as isize)
}

unsafe extern "C" fn write(
    eq: *mut fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    // SAFETY: libfabric reaches this op only through the ops table of an EQ `open` made, and the
    // caller does not close the EQ while it writes to it (fi_eq(3)).
    let Some(e) = (unsafe { eq_of(eq) }) else { return EINVAL as isize };
    if buf.is_null() && len > 0 {
        return EINVAL as isize;
    }
    let mut q = e.events();
    if q.len() >= MAX_EVENTS {
        return -(abi::FI_EAGAIN as isize);
    }
    let bytes = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: fi_eq_write(3): `buf` holds `len` readable bytes; it is not null (checked), and
        // the bytes are copied before the call returns.
        unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
    };
    q.push_back((event, bytes));
    len as isize
}

unsafe extern "C" fn sread(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        // SAFETY: fi_eq_sread(3) takes the arguments of fi_eq_read(3) and a timeout: `eq`,
        // `event` and `buf` are what `read` requires, passed on unchanged.
        let n = unsafe { read(eq, event, buf, len, flags) };
        if n != -(abi::FI_EAGAIN as isize) || end.is_some_and(|e| Instant::now() >= e) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

unsafe extern "C" fn strerror(
    _: *mut fid_eq,
    _: c_int,
    _: *const c_void,
    buf: *mut c_char,
    _: usize,
) -> *const c_char {
    buf
}
