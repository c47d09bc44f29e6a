//! The four AF_XDP rings, mmapped from the socket: single producer, single consumer, with the
//! producer and consumer indices shared with the kernel.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// One mmapped ring of `size` entries of `T` (u64 addresses for FILL/COMPLETION, `xdp_desc` for
/// RX/TX).
pub(crate) struct Ring<T> {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<T>,
    mask: u32,
    size: u32,
}

// SAFETY: the ring's mapping belongs to this value alone (it unmaps it on drop) and every access
// goes through `&mut self` or atomics shared with the kernel, never with another thread of this
// process; moving it to another thread moves that sole ownership with it.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring at page offset `pgoff` of `fd`, laid out as `off` says.
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
    ) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring region: the kernel sized it for `size`
        // entries when the ring size was set, and `off` comes from XDP_MMAP_OFFSETS for this socket.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p.cast::<u8>();
        // SAFETY: the offsets lie inside the mapping just created (the kernel's layout), are aligned
        // for their types, and `base` is non-null because mmap succeeded.
        unsafe {
            Ok(Ring {
                map: NonNull::new_unchecked(base),
                map_len,
                producer: NonNull::new_unchecked(base.add(off.producer as usize).cast()),
                consumer: NonNull::new_unchecked(base.add(off.consumer as usize).cast()),
                flags: NonNull::new_unchecked(base.add(off.flags as usize).cast()),
                desc: NonNull::new_unchecked(base.add(off.desc as usize).cast()),
                mask: size - 1,
                size,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping; the kernel and this side access it atomically.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// The ring's flags word (`XDP_RING_NEED_WAKEUP`).
    fn flags(&self) -> u32 {
        // SAFETY: points into the live mapping; the kernel writes it atomically.
        unsafe { self.flags.as_ref() }.load(Ordering::Acquire)
    }

    /// Whether the kernel asks for a system call before it goes on with this ring (sockets bound
    /// with `XDP_USE_NEED_WAKEUP`: TX always in copy mode; FILL when a zero-copy driver ran dry).
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.flags() & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: entries written and not yet taken by the kernel.
    pub(crate) fn pending(&self) -> u32 {
        self.size - self.free()
    }

    /// Producer side: entries that can be written now.
    pub(crate) fn free(&self) -> u32 {
        let prod = self.producer().load(Ordering::Relaxed);
        let cons = self.consumer().load(Ordering::Acquire);
        self.size - prod.wrapping_sub(cons)
    }

    /// Producer side: writes one entry and publishes it. The caller checked `free() > 0`.
    pub(crate) fn push(&mut self, v: T) {
        let prod = self.producer().load(Ordering::Relaxed);
        // SAFETY: the index is masked into the ring, and the entry is owned by the producer until
        // the index is published below.
        unsafe { self.desc.as_ptr().add((prod & self.mask) as usize).write(v) };
        self.producer().store(prod.wrapping_add(1), Ordering::Release);
    }

    /// Producer side: writes `vals` and publishes them together, so the kernel never sees part of
    /// them (a multi-buffer packet's descriptors). Writes nothing and returns false when the ring
    /// has no room for all of them.
    pub(crate) fn push_all(&mut self, vals: &[T]) -> bool {
        let Ok(n) = u32::try_from(vals.len()) else { return false };
        if n > self.free() {
            return false;
        }
        let prod = self.producer().load(Ordering::Relaxed);
        for (i, v) in (0u32..).zip(vals) {
            // SAFETY: the index is masked into the ring; the `n` entries from `prod` are free (checked
            // above) and owned by the producer until the index is published below.
            unsafe { self.desc.as_ptr().add((prod.wrapping_add(i) & self.mask) as usize).write(*v) };
        }
        self.producer().store(prod.wrapping_add(n), Ordering::Release);
        true
    }

    /// Consumer side: takes one entry if the kernel produced any.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let cons = self.consumer().load(Ordering::Relaxed);
        let prod = self.producer().load(Ordering::Acquire);
        if prod == cons {
            return None;
        }
        // SAFETY: the entry at `cons` was published by the kernel (prod != cons) and stays valid
        // until the consumer index moves past it below.
        let v = unsafe { self.desc.as_ptr().add((cons & self.mask) as usize).read() };
        self.consumer().store(cons.wrapping_add(1), Ordering::Release);
        Some(v)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `map` with this length and nothing refers to it after
        // the ring is dropped.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// When to wake the kernel for the FILL ring (`recv`), on a socket bound with
/// `XDP_USE_NEED_WAKEUP`: a native zero-copy driver whose FILL ring ran dry sets the ring's
/// NEED_WAKEUP flag and receives nothing more until woken.
#[derive(Debug, Default)]
pub(crate) struct FillWakeup {
    /// Woken since the flag was last seen set: not again until the RX ring is empty.
    kicked: bool,
}

impl FillWakeup {
    /// Entries were just put back on the FILL ring, whose flag reads `need_wakeup`: whether to
    /// wake the kernel now.
    pub(crate) fn after_refill(&mut self, need_wakeup: bool) -> bool {
        let kick = need_wakeup && !self.kicked;
        self.kicked = need_wakeup;
        kick
    }

    /// The RX ring is empty and the FILL ring's flag reads `need_wakeup`: whether to wake the
    /// kernel now.
    pub(crate) fn on_rx_empty(&mut self, need_wakeup: bool) -> bool {
        self.kicked = need_wakeup;
        need_wakeup
    }
}

#[cfg(test)]
mod tests {
    use super::FillWakeup;

    #[test]
    fn the_fill_ring_is_woken_after_a_refill_when_it_asks() {
        let mut w = FillWakeup::default();
        // The driver does not ask: never.
        assert!(!w.after_refill(false));
        assert!(!w.on_rx_empty(false));
        // It ran dry and asks while frames still wait in the RX ring: woken at the first refill,
        // not again at every one after it (a system call per frame) while the flag stays set.
        assert!(w.after_refill(true), "woken once entries are back");
        assert!(!w.after_refill(true));
        assert!(!w.after_refill(true));
        // The RX ring ran empty and the flag is still set: woken again (nothing else will).
        assert!(w.on_rx_empty(true));
        // It cleared the flag, then ran dry again: woken at the next refill.
        assert!(!w.after_refill(false));
        assert!(w.after_refill(true));
    }
}
