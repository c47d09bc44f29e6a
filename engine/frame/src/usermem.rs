//! Memory the application owns, registered in place (`ibv_reg_mr`, or `fi_mr_reg` of the UET
//! provider, on the caller's buffer): the one module of softrdma's engine that touches memory it
//! did not allocate. The RoCE core keeps these in its memory table; the UET provider wraps them
//! (`engine::provider::UserMem`) as `ses` memory.
//!
//! The verbs contract, which [`UserBuf::new`]'s caller promises: the bytes stay mapped, readable and
//! writable until the region is deregistered, and the application does not access bytes that an
//! operation in flight reads or writes (a posted send's buffer until its completion, a receive
//! buffer until its completion, a region peers WRITE to while they do). The engine turns the
//! region into a byte slice only for the duration of one copy or one atomic, under the device's
//! lock, and never keeps a reference across calls.

#![allow(unsafe_code)]

use std::ptr::NonNull;

/// `len` bytes at an address the application owns.
#[derive(Debug)]
pub struct UserBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `UserBuf` is a registration, not ownership: the bytes belong to the application, which
// may use them from any thread, and the engine reaches them only through `&self`/`&mut self`
// (under the device's lock), so moving the registration between threads races with nothing the
// verbs contract allows.
unsafe impl Send for UserBuf {}

impl UserBuf {
    /// Registers `len` bytes at `ptr`; `None` for a null pointer, a zero length, or a range that
    /// wraps the address space or exceeds `isize::MAX` bytes.
    ///
    /// # Safety
    /// `ptr..ptr + len` must stay valid for reads and writes until the `UserBuf` is dropped, and
    /// the caller must keep the verbs contract of the module documentation.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Option<UserBuf> {
        if len == 0 || len > isize::MAX as usize || (ptr as usize).checked_add(len).is_none() {
            return None;
        }
        Some(UserBuf { ptr: NonNull::new(ptr)?, len })
    }

    /// Registers memory that stays valid and exclusively the registration's for the rest of the
    /// process (a leaked allocation, a `static`): no contract left to promise, so safe. `None` for
    /// an empty slice.
    pub fn from_static(bytes: &'static mut [u8]) -> Option<UserBuf> {
        // SAFETY: a `&'static mut` slice is valid for reads and writes for the rest of the process
        // and nothing else can reach it, so the verbs contract holds by construction.
        unsafe { UserBuf::new(bytes.as_mut_ptr(), bytes.len()) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: [`new`](Self::new) refuses an empty range.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, for one copy out.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `new`'s contract: valid for reads for `len` bytes while registered, and not
        // written by the application during an operation that reads it.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, for one copy in or one atomic.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `new`'s contract: valid for writes for `len` bytes while registered, and not
        // accessed by the application during an operation that writes it; `&mut self` keeps the
        // engine from making a second slice at the same time.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_null_empty_and_wrapping_ranges() {
        let mut b = [0u8; 16];
        // SAFETY: the array outlives every UserBuf made here.
        unsafe {
            assert!(UserBuf::new(std::ptr::null_mut(), 16).is_none());
            assert!(UserBuf::new(b.as_mut_ptr(), 0).is_none());
            assert!(UserBuf::new(usize::MAX as *mut u8, 2).is_none());
            let mut u = UserBuf::new(b.as_mut_ptr().add(3), 5).unwrap();
            u.as_mut_slice().copy_from_slice(b"hello");
            assert_eq!(u.as_slice(), b"hello");
            assert_eq!(u.len(), 5);
        }
        assert_eq!(&b[3..8], b"hello");
    }
}
