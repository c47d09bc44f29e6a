//! What every object of the library needs: libfabric's negative error returns, memory libfabric
//! frees with `free(3)` (the `fi_info` lists), and reporting a refusal where a user sees it.

use core::ffi::{c_char, c_int, c_void};
use engine::provider::{FiErrno, FiError};

use crate::abi;

/// `-FI_E*` of an error.
pub(crate) fn neg(e: FiErrno) -> c_int {
    -e.code()
}

/// `-FI_ENOSYS`: what libfabric's `fi_no_*` defaults answer for an operation a provider lacks.
pub(crate) const ENOSYS: c_int = -(abi::FI_ENOSYS as c_int);

/// `-FI_EINVAL`.
pub(crate) const EINVAL: c_int = -(abi::FI_EINVAL as c_int);

/// An object's `fi_ops`: `close`, and `bind` and `control` where it has them (`fi_open_ops`,
/// `fi_tostr` and `fi_set_ops` are libfabric's optional entries, left out).
pub(crate) const fn fid_ops(
    close: unsafe extern "C" fn(*mut abi::fid) -> c_int,
    bind: Option<unsafe extern "C" fn(*mut abi::fid, *mut abi::fid, u64) -> c_int>,
    control: Option<unsafe extern "C" fn(*mut abi::fid, c_int, *mut c_void) -> c_int>,
) -> abi::fi_ops {
    abi::fi_ops {
        size: size_of::<abi::fi_ops>(),
        close: Some(close),
        bind,
        control,
        ops_open: None,
        tostr: None,
        ops_set: None,
    }
}

/// The negative return of `e`, after saying why on standard error when `SOFTRDMA_FI_DEBUG` is set
/// or the error is one a user must act on (`loud`).
pub(crate) fn fail(e: &FiError, loud: bool) -> c_int {
    if loud || std::env::var_os("SOFTRDMA_FI_DEBUG").is_some() {
        eprintln!("softrdma (libfabric provider): {e}");
    }
    neg(e.errno)
}

/// A zeroed `T` from `calloc`, for structures libfabric frees (`fi_freeinfo`); null when out of
/// memory.
pub(crate) fn calloc<T>() -> *mut T {
    // SAFETY: calloc with a non-zero size; the result is checked by the callers.
    unsafe { libc::calloc(1, core::mem::size_of::<T>()).cast() }
}

/// A `strdup` copy of `s` (which has no NUL) for libfabric to free; null when out of memory.
pub(crate) fn strdup(s: &str) -> *mut c_char {
    let Ok(c) = std::ffi::CString::new(s) else { return core::ptr::null_mut() };
    // SAFETY: `c` is a NUL-terminated `CString` that lives across the call; `strdup` only reads it
    // and returns a fresh `malloc`ed copy (or null, for the caller to check).
    unsafe { libc::strdup(c.as_ptr()) }
}

/// `malloc`'d copy of `bytes`; null when out of memory or empty.
pub(crate) fn memdup(bytes: &[u8]) -> *mut core::ffi::c_void {
    if bytes.is_empty() {
        return core::ptr::null_mut();
    }
    // SAFETY: malloc of a non-zero size; the copy stays within both buffers.
    unsafe {
        let p = libc::malloc(bytes.len());
        if !p.is_null() {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast(), bytes.len());
        }
        p
    }
}

/// The string at `p`, if it is non-null and UTF-8.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: this function's contract: `p` (not null, checked) points at a NUL-terminated string
    // that outlives the borrow.
    unsafe { core::ffi::CStr::from_ptr(p) }.to_str().ok()
}

/// Copies `bytes` to `addr` if `*addrlen` has room (0), else `-FI_ETOOSMALL`; `*addrlen` becomes
/// their length either way (libfabric's `fi_getname` / `fi_av_lookup` convention).
///
/// # Safety
/// `addrlen` valid; `addr` null or holding `*addrlen` bytes.
pub(crate) unsafe fn give_bytes(bytes: &[u8], addr: *mut core::ffi::c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: this function's contract: `addrlen` is a valid `size_t` to read and write, and `addr`
    // (when not null) holds `*addrlen` writable bytes, of which at most `bytes.len() <= room`
    // (checked) are written; `bytes` is this library's, not the caller's buffer.
    unsafe {
        let room = *addrlen;
        *addrlen = bytes.len();
        if addr.is_null() || room < bytes.len() {
            return -(abi::FI_ETOOSMALL as c_int);
        }
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), bytes.len());
    }
    0
}

/// The provider's name: `fi_info -p softrdma`, `FI_PROVIDER=softrdma`.
pub const PROVIDER_NAME: &core::ffi::CStr = c"softrdma";

/// `FI_VERSION(major, minor)` of `<rdma/fabric.h>`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The provider's version (`prov_version`): the crate's major and minor.
pub(crate) const PROVIDER_VERSION: u32 = fi_version(0, 1);

/// The libfabric API version implemented: 1.17's.
pub const API_VERSION: u32 = fi_version(abi::FI_MAJOR_VERSION, abi::FI_MINOR_VERSION);
