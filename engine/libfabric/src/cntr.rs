//! `fi_cntr_open` and the counter operations: the engine's completion counter
//! (FI_CNTR_EVENTS_COMP) of an endpoint's sends, receives, reads and writes (`fi_ep_bind` with
//! FI_SEND, FI_RECV, FI_READ, FI_WRITE). No wait object beyond `fi_cntr_wait` (FI_WAIT_NONE or
//! FI_WAIT_UNSPEC; a wait set or descriptor answers -FI_ENOSYS, as libfabric's own providers do
//! for one they lack).

use core::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use engine::provider::{self, Counter};

use crate::abi::{self, fi_cntr_attr, fi_ops, fi_ops_cntr, fid, fid_cntr, fid_domain};
use crate::util::{EINVAL, ENOSYS};

/// A counter: `fid_cntr` first.
#[repr(C)]
pub(crate) struct Cntr {
    fid: fid_cntr,
    pub(crate) cntr: Counter,
    /// The engine's fabric, whose progress `fi_cntr_wait` waits on.
    fabric: provider::Fabric,
}

static CNTR_FI_OPS: fi_ops = crate::util::fid_ops(close, None, None);

static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: size_of::<fi_ops_cntr>(),
    read: Some(read),
    readerr: Some(readerr),
    add: Some(add),
    set: Some(set),
    wait: Some(wait),
    adderr: Some(adderr),
    seterr: Some(seterr),
};

/// `fi_cntr_open`: FI_CNTR_EVENTS_COMP.
pub(crate) unsafe extern "C" fn open(
    domain: *mut fid_domain,
    attr: *mut fi_cntr_attr,
    cntr: *mut *mut fid_cntr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `domain` is null or a live domain of this provider: libfabric reaches this op only
    // through the ops table `fi_domain` filled.
    let (Some(d), false) = (unsafe { crate::domain::domain_of(domain) }, cntr.is_null()) else {
        return EINVAL;
    };
    // SAFETY: `attr` is null (the defaults) or the caller's `fi_cntr_attr` (fi_cntr_open(3));
    // `as_ref` answers `None` for null.
    if let Some(a) = unsafe { attr.as_ref() } {
        if a.events != abi::FI_CNTR_EVENTS_COMP || a.flags != 0 {
            return EINVAL;
        }
        if !matches!(a.wait_obj, abi::FI_WAIT_NONE | abi::FI_WAIT_UNSPEC) {
            return ENOSYS;
        }
    }
    let c = Box::new(Cntr {
        fid: fid_cntr {
            fid: fid {
                fclass: abi::FI_CLASS_CNTR as usize,
                context,
                ops: (&raw const CNTR_FI_OPS).cast_mut(),
            },
            ops: (&raw const CNTR_OPS).cast_mut(),
        },
        cntr: d.domain.cntr_open(),
        fabric: d.fabric.clone(),
    });
    // SAFETY: `cntr`, not null (checked), is the caller's writable `struct fid_cntr **` out
    // parameter (fi_cntr_open(3)).
    unsafe { *cntr = &raw mut Box::leak(c).fid };
    0
}

unsafe extern "C" fn close(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: the fid of a Cntr of `open`, closed once; endpoints bound to it hold their own
    // reference to the engine's counter.
    drop(unsafe { Box::from_raw(f.cast::<Cntr>()) });
    0
}

/// The [`Cntr`] of a fid of class FI_CLASS_CNTR of this provider.
///
/// # Safety
/// `f` is null or the fid of a [`Cntr`] of [`open`].
pub(crate) unsafe fn cntr_of<'a>(f: *mut fid) -> Option<&'a Cntr> {
    // SAFETY: this function's contract: `f` is null or the fid of a live `Cntr` of `open`, whose
    // `fid_cntr` (and its `fid`) is the first field of the `repr(C)` `Cntr`; `as_ref` answers
    // `None` for null. (The class check below is a second line of defence, not what makes the
    // cast sound.)
    let c = unsafe { f.cast::<Cntr>().as_ref() }?;
    (c.fid.fid.fclass == abi::FI_CLASS_CNTR as usize).then_some(c)
}

/// Runs `g` on the counter, or gives `bad` for a handle that is not one.
fn with<T>(c: *mut fid_cntr, bad: T, g: impl FnOnce(&Cntr) -> T) -> T {
    // SAFETY: `c` is null or a counter of this provider: the counter ops reach `with` only through
    // the ops table of a counter `open` made; `cntr_of` also checks the class.
    unsafe { cntr_of(c.cast()) }.map_or(bad, g)
}

unsafe extern "C" fn read(c: *mut fid_cntr) -> u64 {
    with(c, 0, |c| c.cntr.read())
}

unsafe extern "C" fn readerr(c: *mut fid_cntr) -> u64 {
    with(c, 0, |c| c.cntr.readerr())
}

unsafe extern "C" fn add(c: *mut fid_cntr, value: u64) -> c_int {
    with(c, EINVAL, |c| {
        c.cntr.add(value);
        0
    })
}

unsafe extern "C" fn set(c: *mut fid_cntr, value: u64) -> c_int {
    with(c, EINVAL, |c| {
        c.cntr.set(value);
        0
    })
}

unsafe extern "C" fn adderr(c: *mut fid_cntr, value: u64) -> c_int {
    with(c, EINVAL, |c| {
        c.cntr.adderr(value);
        0
    })
}

unsafe extern "C" fn seterr(c: *mut fid_cntr, value: u64) -> c_int {
    with(c, EINVAL, |c| {
        c.cntr.seterr(value);
        0
    })
}

/// `fi_cntr_wait`: 0 once the count reaches `threshold`, -FI_EAVAIL when an error is counted
/// meanwhile, -FI_ETIMEDOUT after `timeout` ms (a negative `timeout` waits for ever). It drives
/// the endpoints' progress, sleeping on the socket while nothing arrives.
unsafe extern "C" fn wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    with(c, EINVAL, |c| {
        let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        // Before any progress: an error counted by the wait's own progress ends it (readerr
        // makes progress, and would have counted a refusal already in the socket as old).
        let errors = c.cntr.errors_counted();
        loop {
            // `read` makes progress; the error count it may have moved is read without more.
            if c.cntr.read() >= threshold {
                return 0;
            }
            if c.cntr.errors_counted() != errors {
                return -(abi::FI_EAVAIL as c_int);
            }
            if end.is_some_and(|e| Instant::now() >= e) {
                return -(abi::FI_ETIMEDOUT as c_int);
            }
            c.fabric.step();
        }
    })
}
