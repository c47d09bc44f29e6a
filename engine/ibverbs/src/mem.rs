//! Protection domains and memory regions on the application's own memory.

use crate::abi::*;
use crate::errno;
use crate::handles::{Ctx, SoftPd};
use engine::verbs::{Access, Mr, UserBuf};
use std::ffi::{c_int, c_uint, c_void};

/// A memory region: rdma-core's `struct ibv_mr` first.
#[repr(C)]
struct SoftMr {
    ibv: ibv_mr,
    mr: Mr,
}

/// `ibv_alloc_pd`.
///
/// # Safety
/// As `ibv_alloc_pd`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::null(libc::EINVAL) };
    let pd = ctx.dev.lock().alloc_pd();
    let ibv = ibv_pd { context, handle: 0 };
    Box::into_raw(Box::new(SoftPd { ibv, pd })).cast()
}

/// `ibv_dealloc_pd`: `EBUSY` while objects use it.
///
/// # Safety
/// As `ibv_dealloc_pd`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: `pd` is null or a PD of this library not yet deallocated (the verbs' contract).
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().dealloc_pd(p.pd) {
        return errno::fail(errno::of(&e));
    }
    // SAFETY: `pd` is a `SoftPd` boxed by `ibv_alloc_pd`; the engine freed the PD (no object uses
    // it), and the caller does not use it again (ibv_dealloc_pd(3)).
    drop(unsafe { Box::from_raw(pd.cast::<SoftPd>()) });
    0
}

/// `ibv_reg_mr`: the caller's `length` bytes at `addr`, named by the same addresses.
///
/// # Safety
/// As `ibv_reg_mr`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `addr..addr + length` is the caller's memory, which stays mapped until `ibv_dereg_mr` and
///   which the program does not touch while an operation uses it (ibv_reg_mr(3)); it is checked
///   against the process's mappings here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the same contract, forwarded: the region's address is its IOVA (ibv_reg_mr(3)).
    unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint) }
}

/// `ibv_reg_mr_iova`.
///
/// # Safety
/// As `ibv_reg_mr_iova`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `addr..addr + length` is the caller's memory, which stays mapped until `ibv_dereg_mr` and
///   which the program does not touch while an operation uses it (ibv_reg_mr(3)); it is checked
///   against the process's mappings here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: `ibv_reg_mr_iova` is `ibv_reg_mr_iova2` with an `int` access: the same pointers,
    // passed on under the same contract.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
}

/// Access flags of features the engine does not have (memory windows, zero-based and on-demand
/// paging): refused. The optional flags (`IBV_ACCESS_RELAXED_ORDERING` and the rest of
/// rdma-core's optional range) are hints a provider may ignore, and are ignored.
const UNSUPPORTED_ACCESS: c_uint = IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND;

/// `ibv_reg_mr_iova2`: the caller's bytes `addr..addr + length`, which SGEs and peers name by
/// `iova..iova + length`. The memory stays the caller's, valid until `ibv_dereg_mr`.
///
/// # Safety
/// As `ibv_reg_mr_iova2`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `addr..addr + length` is the caller's memory, which stays mapped until `ibv_dereg_mr` and
///   which the program does not touch while an operation uses it (ibv_reg_mr(3)); it is checked
///   against the process's mappings here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    if access & UNSUPPORTED_ACCESS != 0 {
        return errno::null(libc::EOPNOTSUPP);
    }
    let writable =
        access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0;
    if !addr.is_null() && length > 0 && !mapped(addr as usize, length, writable) {
        // The kernel's answer when it cannot pin the pages (ib_umem_get).
        return errno::null(libc::EFAULT);
    }
    // SAFETY: ibv_reg_mr(3): the caller's `length` bytes at `addr` stay its memory, mapped and
    // not freed, until `ibv_dereg_mr`, which drops the `UserBuf`; they are mapped now (checked
    // above: readable, and writable when write access is asked). `UserBuf::new` refuses null,
    // empty and wrapping ranges.
    let Some(buf) = (unsafe { UserBuf::new(addr.cast(), length) }) else { return errno::null(libc::EINVAL) };
    let mr = match ctx.dev.lock().reg_user_mr(p.pd, buf, iova, Access(access & 0xf)) {
        Ok(mr) => mr,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let ibv = ibv_mr { context: p.ibv.context, pd, addr, length, handle: 0, lkey: mr.lkey, rkey: mr.rkey };
    Box::into_raw(Box::new(SoftMr { ibv, mr })).cast()
}

/// Whether `addr..addr + len` is mapped readable (and writable with `write`) in this process, by
/// `/proc/self/maps`: what the kernel checks when it pins a region's pages. (The engine cannot pin
/// them: a program that unmaps a registered range breaks the verbs contract, as with rxe.)
fn mapped(addr: usize, len: usize, write: bool) -> bool {
    let Some(end) = addr.checked_add(len) else { return false };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return false };
    let mut at = addr;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let Some((lo, hi)) = range.split_once('-') else { continue };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) else {
            continue;
        };
        if hi <= at || lo > at {
            continue;
        }
        if !perms.starts_with('r') || write && perms.as_bytes().get(1) != Some(&b'w') {
            return false;
        }
        at = hi;
        if at >= end {
            return true;
        }
    }
    false
}

/// `ibv_dereg_mr`.
///
/// # Safety
/// As `ibv_dereg_mr`'s callers promise:
/// - `mr` is null or an MR of this library not yet deregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // SAFETY: `mr` is not null (checked), so by the verbs' contract an MR of this library not yet
    // deregistered: the first field of a live `repr(C)` `SoftMr`.
    let m = unsafe { &*mr.cast::<SoftMr>() };
    // SAFETY: `ibv_reg_mr_iova2` set `context` to the live context of the MR's PD.
    let Some(ctx) = (unsafe { Ctx::from(m.ibv.context) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().dereg_mr(&m.mr) {
        return errno::fail(errno::of(&e));
    }
    // SAFETY: `mr` is a `SoftMr` boxed by `ibv_reg_mr_iova2`, and the engine dropped the region;
    // the caller does not use it again (ibv_dereg_mr(3)).
    drop(unsafe { Box::from_raw(mr.cast::<SoftMr>()) });
    0
}
