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
use crate::cq::{Op, Ops, post_err};
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
}

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

/// The one buffer of an iovec array (`iov_limit` is 1).
///
/// # Safety
/// `iov` holds `count` iovecs.
pub(crate) unsafe fn one_iov(iov: *const iovec, count: usize) -> Option<(*mut c_void, usize)> {
    match count {
        0 => Some((core::ptr::null_mut(), 0)),
        // SAFETY: `count == 1` and `iov` not null (this arm's guard), and the caller's array holds
        // `count` iovecs (this function's contract).
        1 if !iov.is_null() => Some(unsafe { ((*iov).iov_base, (*iov).iov_len) }),
        _ => None,
    }
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
        let tx = self.tx.borrow();
        let Some(ops) = tx.as_ref() else { return -(abi::FI_ENOCQ as isize) };
        let id = match context {
            None => 0,
            Some(context) => {
                ops.borrow_mut().add(Op { context, buf: result.0, len: result.1, placed: false })
            }
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
