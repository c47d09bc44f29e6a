//! Protection domains and memory regions on the application's own memory.

use crate::abi::*;
use crate::device::Ctx;
use crate::errno;
use engine::verbs::{Access, Mr, Pd, UserBuf};
use std::ffi::{c_int, c_uint, c_void};

/// A protection domain: rdma-core's `struct ibv_pd` first.
#[repr(C)]
pub(crate) struct SoftPd {
    ibv: ibv_pd,
    pub(crate) pd: Pd,
}

impl SoftPd {
    /// # Safety
    /// `p` is null or a PD of this library not yet deallocated.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_pd) -> Option<(&'a SoftPd, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every PD handed out is the first field of a live `SoftPd`.
        let pd = unsafe { &*p.cast::<SoftPd>() };
        Some((pd, unsafe { Ctx::from(pd.ibv.context) }?))
    }
}

/// A memory region: rdma-core's `struct ibv_mr` first.
#[repr(C)]
struct SoftMr {
    ibv: ibv_mr,
    mr: Mr,
}

/// `ibv_alloc_pd`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::null(libc::EINVAL) };
    let pd = ctx.dev.lock().alloc_pd();
    let ibv = ibv_pd { context, handle: 0 };
    Box::into_raw(Box::new(SoftPd { ibv, pd })).cast()
}

/// `ibv_dealloc_pd`: `EBUSY` while objects use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return libc::EINVAL };
    if let Err(e) = ctx.dev.lock().dealloc_pd(p.pd) {
        return errno::of(&e);
    }
    // SAFETY: allocated by `ibv_alloc_pd` as a Box; the engine no longer knows it.
    drop(unsafe { Box::from_raw(pd.cast::<SoftPd>()) });
    0
}

/// `ibv_reg_mr`: the caller's `length` bytes at `addr`, named by the same addresses.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint) }
}

/// `ibv_reg_mr_iova`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
}

/// Access flags of features the engine does not have (memory windows, zero-based and on-demand
/// paging): refused. The optional flags (`IBV_ACCESS_RELAXED_ORDERING` and the rest of
/// rdma-core's optional range) are hints a provider may ignore, and are ignored.
const UNSUPPORTED_ACCESS: c_uint = IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND;

/// `ibv_reg_mr_iova2`: the caller's bytes `addr..addr + length`, which SGEs and peers name by
/// `iova..iova + length`. The memory stays the caller's, valid until `ibv_dereg_mr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    if access & UNSUPPORTED_ACCESS != 0 {
        return errno::null(libc::EOPNOTSUPP);
    }
    // SAFETY: the verbs contract: the caller's range stays valid until deregistration.
    let Some(buf) = (unsafe { UserBuf::new(addr.cast(), length) }) else { return errno::null(libc::EINVAL) };
    let mr = match ctx.dev.lock().reg_user_mr(p.pd, buf, iova, Access(access & 0xf)) {
        Ok(mr) => mr,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let ibv = ibv_mr { context: p_ctx(pd), pd, addr, length, handle: 0, lkey: mr.lkey, rkey: mr.rkey };
    Box::into_raw(Box::new(SoftMr { ibv, mr })).cast()
}

fn p_ctx(pd: *mut ibv_pd) -> *mut ibv_context {
    // SAFETY: checked to be a live PD by the caller.
    unsafe { (*pd).context }
}

/// `ibv_dereg_mr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: every MR handed out is the first field of a live `SoftMr`.
    let m = unsafe { &*mr.cast::<SoftMr>() };
    let Some(ctx) = (unsafe { Ctx::from(m.ibv.context) }) else { return libc::EINVAL };
    if let Err(e) = ctx.dev.lock().dereg_mr(&m.mr) {
        return errno::of(&e);
    }
    // SAFETY: allocated as a Box by `ibv_reg_mr_iova2`; the engine no longer knows it.
    drop(unsafe { Box::from_raw(mr.cast::<SoftMr>()) });
    0
}
