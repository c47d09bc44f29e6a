//! The endpoint object (`fid_ep` first) and what posting an operation on it takes: the queue of
//! operations waiting for completions, sending a posted operation at once (a program may wait
//! elsewhere, on its own socket or after an inject, before it reads a queue again), and the
//! checks of the program's buffers. The endpoint's calls live in `ep` (binding, messages), `rma`
//! and `atomic`.

use core::ffi::c_void;
use std::cell::RefCell;
use std::rc::Rc;

use engine::provider;

use crate::abi::{self, fid_ep, iovec};
use crate::cq::{Op, Ops, Pieces, post_err};
use crate::util::EINVAL;

/// The flags of the `*msg` transmit calls (`fi_sendmsg`, `fi_tsendmsg`, `fi_writemsg`,
/// `fi_readmsg`) this provider acts on; others are refused with -FI_EBADFLAGS.
pub(crate) const TX_MSG_FLAGS: u64 = (abi::FI_INJECT
    | abi::FI_COMPLETION
    | abi::FI_REMOTE_CQ_DATA
    | abi::FI_TRANSMIT_COMPLETE
    | abi::FI_DELIVERY_COMPLETE) as u64;

/// An endpoint: `fid_ep` first.
#[repr(C)]
pub(crate) struct Ep {
    pub(crate) fid: fid_ep,
    pub(crate) ep: provider::Endpoint,
    /// The domain's offer (its atomic pairs and limits).
    pub(crate) info: provider::Info,
    /// The operations of the queues bound for transmit and receive completions.
    pub(crate) tx: RefCell<Option<Rc<RefCell<Ops>>>>,
    pub(crate) rx: RefCell<Option<Rc<RefCell<Ops>>>>,
    pub(crate) av: RefCell<bool>,
    /// Receives are matched by source (FI_DIRECTED_RECV asked for).
    pub(crate) directed: bool,
    /// FI_OPT_MIN_MULTI_RECV: a multi-receive buffer is released once less remains.
    pub(crate) min_multi_recv: std::cell::Cell<usize>,
}

/// FI_OPT_MIN_MULTI_RECV's default, as libfabric's sockets, cxi and lpp providers have it.
pub(crate) const MIN_MULTI_RECV: usize = 64;

/// The [`Ep`] of a `fid_ep` (or its `fid`) of this provider.
///
/// # Safety
/// `e` is null or the fid of an [`Ep`].
pub(crate) unsafe fn ep_of<'a>(e: *mut c_void) -> Option<&'a Ep> {
    // SAFETY: `fid_ep` (and so its `fid`) is the first member of `Ep`.
    unsafe { e.cast::<Ep>().as_ref() }
}

/// The bytes at `buf` (none for a null buffer of length 0).
///
/// # Safety
/// `buf` holds `len` bytes.
pub(crate) unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> Option<&'a [u8]> {
    match (buf.is_null(), len) {
        (true, 0) => Some(&[]),
        (true, _) => None,
        // SAFETY: this function's contract: `buf`, not null in this arm, holds `len` readable
        // bytes, which the slice borrows only for the call that posts them (the engine copies a
        // send's bytes before it returns).
        (false, _) => Some(unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), len) }),
    }
}

/// How many iovecs a message, RMA or atomic call takes (`iov_limit` of the offers' transmit and
/// receive attributes); more answer -FI_EINVAL.
pub(crate) const IOV_LIMIT: usize = 4;

/// The iovecs of an array of `count` (none for 0; `None` above [`IOV_LIMIT`] or for a null array).
///
/// # Safety
/// `iov` holds `count` iovecs, which live as long as the caller's call.
pub(crate) unsafe fn iovs<'a>(iov: *const iovec, count: usize) -> Option<&'a [iovec]> {
    match count {
        0 => Some(&[]),
        n if n > IOV_LIMIT || iov.is_null() => None,
        // SAFETY: this function's contract: `iov` (not null, checked) holds `n` iovecs.
        n => Some(unsafe { core::slice::from_raw_parts(iov, n) }),
    }
}

/// The one buffer of an iovec array: its address and length (null and 0 for none); `None` for
/// several.
pub(crate) fn one_iov(iov: &[iovec]) -> Option<(*mut c_void, usize)> {
    match iov {
        [] => Some((core::ptr::null_mut(), 0)),
        [v] => Some((v.iov_base, v.iov_len)),
        _ => None,
    }
}

/// The bytes an iovec array names, in order: borrowed when it has one buffer, gathered into one
/// when several (the engine copies a send's bytes as it is posted anyway); `None` for a null
/// buffer with bytes or a total beyond the address space.
///
/// # Safety
/// Each iovec's buffer holds its `iov_len` readable bytes during the call.
pub(crate) unsafe fn gather<'a>(iov: &[iovec]) -> Option<std::borrow::Cow<'a, [u8]>> {
    if let Some((b, l)) = one_iov(iov) {
        // SAFETY: this function's contract: the one buffer holds `l` readable bytes.
        return unsafe { bytes(b, l) }.map(std::borrow::Cow::Borrowed);
    }
    let total = iov.iter().try_fold(0usize, |t, v| t.checked_add(v.iov_len))?;
    let mut all = Vec::with_capacity(total);
    for v in iov {
        // SAFETY: this function's contract: each buffer holds its `iov_len` readable bytes.
        all.extend_from_slice(unsafe { bytes(v.iov_base, v.iov_len) }?);
    }
    Some(std::borrow::Cow::Owned(all))
}

/// The buffers of an iovec array as an operation's destination (a receive's or a read's): the
/// first buffer, the total length and, for several, the list to scatter over; `None` for a null
/// buffer with bytes or a total beyond the address space.
pub(crate) fn scatter(iov: &[iovec]) -> Option<(*mut u8, usize, Pieces)> {
    if iov.iter().any(|v| v.iov_base.is_null() && v.iov_len > 0) {
        return None;
    }
    let total = iov.iter().try_fold(0usize, |t, v| t.checked_add(v.iov_len))?;
    let first = iov.first().map_or(core::ptr::null_mut(), |v| v.iov_base.cast());
    let pieces = if iov.len() > 1 {
        iov.iter().map(|v| (v.iov_base.cast(), v.iov_len)).collect()
    } else {
        Box::default()
    };
    Some((first, total, pieces))
}

impl Ep {
    /// Posts a transmit operation: `f` gives it to the engine under an id whose completion
    /// brings back `context` (and fills `result`, `len` bytes, with what a read or a fetching
    /// atomic returns). An inject (`context` `None`) completes only if it fails, and then with no
    /// context (id 0): nothing is kept for it.
    pub(crate) fn post(
        &self,
        context: Option<*mut c_void>,
        result: (*mut u8, usize),
        f: impl FnOnce(&provider::Endpoint, u64) -> Result<(), provider::FiError>,
    ) -> isize {
        self.post_op(context.map(|c| Op::new(c, result.0, result.1, false)), f)
    }

    /// [`post`](Self::post) of an operation described in full (a read scattered over several
    /// buffers); `None` for an inject.
    pub(crate) fn post_op(
        &self,
        op: Option<Op>,
        f: impl FnOnce(&provider::Endpoint, u64) -> Result<(), provider::FiError>,
    ) -> isize {
        let tx = self.tx.borrow();
        let Some(ops) = tx.as_ref() else { return -(abi::FI_ENOCQ as isize) };
        let id = match op {
            None => 0,
            Some(op) => ops.borrow_mut().add(op),
        };
        match f(&self.ep, id) {
            Ok(()) => {
                self.ep.transmit();
                0
            }
            Err(e) => {
                ops.borrow_mut().cancel(id);
                post_err(e.errno)
            }
        }
    }
}

/// Runs `f` on the endpoint of `ep`, or answers -FI_EINVAL for a null one.
///
/// # Safety
/// `ep` is null or an endpoint of this provider.
pub(crate) unsafe fn with(ep: *mut fid_ep, f: impl FnOnce(&Ep) -> isize) -> isize {
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider; `ep_of`
    // answers `None` for null.
    match unsafe { ep_of(ep.cast()) } {
        Some(e) => f(e),
        None => EINVAL as isize,
    }
}
