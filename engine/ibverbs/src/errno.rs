//! libibverbs' error conventions: returned error numbers, or `NULL`/-1 with `errno`.

use engine::verbs::VerbsError;

/// Sets `errno`.
pub(crate) fn set(e: i32) {
    // SAFETY: glibc's thread-local errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's `errno`.
pub(crate) fn get() -> i32 {
    // SAFETY: `__errno_location` returns glibc's thread-local errno of the calling thread, valid
    // and aligned for the thread's life.
    unsafe { *libc::__errno_location() }
}

/// `NULL` with `errno = e`.
pub(crate) fn null<T>(e: i32) -> *mut T {
    set(e);
    std::ptr::null_mut()
}

/// The error number libibverbs gives for an engine error.
pub(crate) fn of(e: &VerbsError) -> i32 {
    match e {
        VerbsError::Busy(_) => libc::EBUSY,
        VerbsError::QueueFull | VerbsError::OutOfResources => libc::ENOMEM,
        VerbsError::Unreachable => libc::EHOSTUNREACH,
        VerbsError::Datapath(_) => libc::EIO,
        VerbsError::AddrInUse => libc::EADDRINUSE,
        VerbsError::AddrNotAvailable => libc::EADDRNOTAVAIL,
        _ => libc::EINVAL,
    }
}

/// `e` returned, with `errno = e` as well: libibverbs' providers return the error number and
/// leave it in `errno` too (the kernel command that failed set it), and programs print `%m`.
pub(crate) fn fail(e: i32) -> i32 {
    set(e);
    e
}
