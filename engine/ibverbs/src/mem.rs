//! Protection domains and memory regions on the application's own memory.

use crate::abi::*;
use crate::errno;
use crate::handles::{Ctx, SoftPd};
use engine::verbs::{Access, MemError, Mr, Sge, UserBuf, VerbsError};
use std::ffi::{c_int, c_uint, c_void};

/// A memory region: rdma-core's `struct ibv_mr` first, then the engine's region and the
/// `ibv_access_flags` it was registered with (what `ibv_rereg_mr` keeps when it changes other
/// things).
#[repr(C)]
struct SoftMr {
    ibv: ibv_mr,
    mr: Mr,
    access: c_uint,
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

/// Access flags of features the engine does not have (memory windows, zero-based regions):
/// refused. The optional flags (`IBV_ACCESS_RELAXED_ORDERING` and the rest of rdma-core's optional
/// range) are hints a provider may ignore, and are ignored. `IBV_ACCESS_ON_DEMAND` is accepted on
/// a range (explicit on-demand paging): the engine never pins pages, it reads and writes the
/// program's memory in place when an operation needs it, which is what on-demand paging asks of
/// a device; an implicit region (`NULL`, `SIZE_MAX`) is refused, see [`ibv_reg_mr_iova2`].
const UNSUPPORTED_ACCESS: c_uint = IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED;

/// Whether `access` lets the device write the region: what `mapped` checks for.
fn writable(access: c_uint) -> bool {
    access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
}

/// `ibv_reg_mr_iova2`: the caller's bytes `addr..addr + length`, which SGEs and peers name by
/// `iova..iova + length`. The memory stays the caller's, valid until `ibv_dereg_mr`.
///
/// An implicit on-demand region (`IBV_ACCESS_ON_DEMAND` with `addr` `NULL` and `length`
/// `SIZE_MAX`: the whole address space) answers `EOPNOTSUPP`, and the device does not report
/// `IBV_ODP_SUPPORT_IMPLICIT` (nor does rxe): the engine turns a region into a byte slice for each
/// copy, and a peer's READ or WRITE at an unmapped address of such a region would fault inside the
/// program instead of being NAKed.
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
    let implicit = access & IBV_ACCESS_ON_DEMAND != 0 && addr.is_null() && length == usize::MAX;
    if access & UNSUPPORTED_ACCESS != 0 || implicit {
        return errno::null(libc::EOPNOTSUPP);
    }
    if !addr.is_null() && length > 0 && !mapped(addr as usize, length, writable(access)) {
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
    Box::into_raw(Box::new(SoftMr { ibv, mr, access })).cast()
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

/// `ibv_rereg_mr`: moves a region to another PD (`IBV_REREG_MR_CHANGE_PD`), onto other bytes of
/// the program (`IBV_REREG_MR_CHANGE_TRANSLATION`: `addr..addr + length`, named by the same
/// addresses) and to other rights (`IBV_REREG_MR_CHANGE_ACCESS`), in any combination. The MR keeps
/// its handle. A new translation comes with new keys (read back from `mr->lkey` and `mr->rkey`,
/// as with any provider), so a peer that kept the old R_Key is refused even where the ranges
/// overlap; a change of PD or rights alone keeps the keys, as rxe (which supports only those two)
/// and mlx5 do. A peer's access with the old range, rights or PD gets the NAK remote access error.
///
/// Returns 0, or as libibverbs does: `IBV_REREG_MR_ERR_INPUT` with `errno = EINVAL` for what
/// libibverbs itself refuses (unknown flags, a translation to `NULL` or zero bytes, `access`
/// without `IBV_REREG_MR_CHANGE_ACCESS`), `IBV_REREG_MR_ERR_CMD` for what a kernel refuses
/// (no flag, a PD of another device, rights the device cannot give or REMOTE_WRITE without
/// LOCAL_WRITE, a new range that wraps: `EINVAL` or `EOPNOTSUPP`; a new range not mapped, or not writable for rights that
/// write: `EFAULT`). A refused reregistration changes nothing: the MR works as before. The fork
/// codes (`IBV_REREG_MR_ERR_DONT_FORK_NEW`, `IBV_REREG_MR_ERR_DO_FORK_OLD`,
/// `IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW`) never come: the engine pins no page, so no range is
/// kept from a forked child (`madvise(MADV_DONTFORK)` is not applied, as for `ibv_reg_mr`).
///
/// # Safety
/// As `ibv_rereg_mr`'s callers promise:
/// - `mr` is null or an MR of this library not yet deregistered, which no other thread
///   deregisters or reregisters meanwhile;
/// - `pd`, with `IBV_REREG_MR_CHANGE_PD`, is null or a PD of this library not yet deallocated;
/// - with `IBV_REREG_MR_CHANGE_TRANSLATION`, `addr..addr + length` is the caller's memory under
///   `ibv_reg_mr`'s contract (checked against the process's mappings here), and the old range
///   is no longer the region's once this returns 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let refuse = |code: c_int, e: c_int| {
        errno::set(e);
        code
    };
    let (input, cmd) = (IBV_REREG_MR_ERR_INPUT, IBV_REREG_MR_ERR_CMD);
    let (flags, access) = (flags as c_uint, access as c_uint);
    let translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0;
    let move_pd = flags & IBV_REREG_MR_CHANGE_PD != 0;
    let change_access = flags & IBV_REREG_MR_CHANGE_ACCESS != 0;
    // libibverbs' own checks (verbs.c): the old MR stays valid.
    if mr.is_null()
        || flags & !IBV_REREG_MR_FLAGS_SUPPORTED != 0
        || translate && (addr.is_null() || length == 0)
        || access != 0 && !change_access
    {
        return refuse(input, libc::EINVAL);
    }
    // SAFETY: `mr` is not null (checked), so by the verbs' contract an MR of this library not yet
    // deregistered, the first field of a live `repr(C)` `SoftMr`, which no other thread changes
    // meanwhile.
    let m = unsafe { &mut *mr.cast::<SoftMr>() };
    // SAFETY: `ibv_reg_mr_iova2` set `context` to the live context of the MR's PD.
    let Some(ctx) = (unsafe { Ctx::from(m.ibv.context) }) else { return refuse(cmd, libc::EINVAL) };
    // What the kernel's command refuses.
    if flags == 0 {
        return refuse(cmd, libc::EINVAL);
    }
    let new_pd = if move_pd {
        // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
        match unsafe { SoftPd::from(pd) } {
            Some((p, c)) if std::ptr::eq(c, ctx) => Some(p.pd),
            _ => return refuse(cmd, libc::EINVAL),
        }
    } else {
        None
    };
    if change_access && access & UNSUPPORTED_ACCESS != 0 {
        return refuse(cmd, libc::EOPNOTSUPP);
    }
    let rights = if change_access { access } else { m.access };
    if translate && (addr as usize).checked_add(length).is_none() {
        // The kernel's answer for a range that wraps (ib_umem_get).
        return refuse(cmd, libc::EINVAL);
    }
    let (at, len) = if translate { (addr, length) } else { (m.ibv.addr, m.ibv.length) };
    if (translate || change_access) && !mapped(at as usize, len, writable(rights)) {
        return refuse(cmd, libc::EFAULT);
    }
    let memory = if translate {
        // SAFETY: ibv_rereg_mr(3) with IBV_REREG_MR_CHANGE_TRANSLATION: the caller's `length`
        // bytes at `addr` are its memory under ibv_reg_mr(3)'s contract until `ibv_dereg_mr` or
        // the next translation, which drop the `UserBuf`; they are mapped now (checked above,
        // writable when the rights write). `UserBuf::new` refuses wrapping ranges.
        let Some(buf) = (unsafe { UserBuf::new(addr.cast(), length) }) else {
            return refuse(cmd, libc::EINVAL);
        };
        Some((buf, addr as u64))
    } else {
        None
    };
    let access_now = change_access.then_some(Access(rights & 0xf));
    if let Err(e) = ctx.dev.lock().rereg_mr(&mut m.mr, new_pd, memory, access_now) {
        return refuse(cmd, errno::of(&e));
    }
    (m.ibv.lkey, m.ibv.rkey, m.access) = (m.mr.lkey, m.mr.rkey, rights);
    if move_pd {
        m.ibv.pd = pd;
    }
    if translate {
        (m.ibv.addr, m.ibv.length) = (addr, length);
    }
    0
}

/// `IB_UVERBS_ADVISE_MR_FLAG_FLUSH` (`ib_user_ioctl_verbs.h`): prefetch before returning.
const ADVISE_MR_FLAG_FLUSH: u32 = 1;

/// `verbs_context.advise_mr` (the inline `ibv_advise_mr`): validates the advice, the flags and
/// every SGE as rxe does (a live L_Key of a region of `pd` with `IBV_ACCESS_LOCAL_WRITE`, else
/// `EINVAL`; the range inside the region, else `EFAULT`; an advice other than the three
/// `IBV_ADVISE_MR_ADVICE_PREFETCH*`, `EOPNOTSUPP`; flags other than `IBV_ADVISE_MR_FLAG_FLUSH`,
/// or no SGE, `EINVAL`), then returns 0: there is nothing to prefetch, the engine reaches the
/// program's pages in place when an operation needs them.
pub(crate) unsafe extern "C" fn advise_mr(
    pd: *mut ibv_pd,
    advice: ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sges: u32,
) -> c_int {
    // SAFETY: `pd` is null or a live PD of this library: the inline `ibv_advise_mr` reaches this
    // op through the PD's context, which this library filled.
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::fail(libc::EINVAL) };
    if flags & !ADVISE_MR_FLAG_FLUSH != 0 || sg_list.is_null() || num_sges == 0 {
        return errno::fail(libc::EINVAL);
    }
    if !matches!(
        advice,
        IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH
            | IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE
            | IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT
    ) {
        return errno::fail(libc::EOPNOTSUPP);
    }
    // SAFETY: ibv_advise_mr(3): `sg_list` (not null, checked) points at `num_sges` SGEs of the
    // caller, read here and not kept.
    let sges = unsafe { std::slice::from_raw_parts(sg_list, num_sges as usize) };
    let dev = ctx.dev.lock();
    for s in sges {
        let sge = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
        match dev.check_sge(p.pd, &sge, Access::LOCAL_WRITE) {
            Ok(()) => {}
            Err(VerbsError::Memory(MemError::OutOfRange)) => return errno::fail(libc::EFAULT),
            Err(_) => return errno::fail(libc::EINVAL),
        }
    }
    0
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
