//! Payload copies between frames and memory that stay off the glibc memcpy cliff.
//!
//! `../shared/notes/performance.md` ("The glibc memcpy cliff"): glibc copies blocks of a few KiB
//! and more with `rep movsb` on this machine kind, and that is an order of magnitude slower when
//! `(dst - src) mod 4096` is small but not zero. Measured here (Zen 4, glibc 2.36, 4000 bytes
//! into a 1.2 MiB region): about 1,180 ns at distances 1..=15 against 87-116 ns at every other
//! distance; the notes measured 1..=31 on Zen 3. The distance is the application's choice (a
//! region offset, a receive buffer's address) plus the headers in front of the payload in a
//! frame, so an ordinary RDMA WRITE can land there: `softrdma perf write --size 65552` lost a
//! quarter of its bandwidth to it.
//!
//! [`copy_payload`] copies like `copy_from_slice` everywhere else, and in 64-byte pieces (plain
//! vector moves, no `rep movsb`) inside the window, which costs the same as an unaffected copy.
//! `cargo bench -p benches --bench payload_copy` measures both by distance.

/// Distances `(dst - src) mod 4096` at which `rep movsb` is slow: 1..=31 (the notes' Zen 3
/// window, which holds the 1..=15 measured on Zen 4).
const CLIFF: core::ops::RangeInclusive<usize> = 1..=31;

/// The page size the cliff is measured against.
const PAGE: usize = 4096;

/// Copies `src` into `dst` (equal lengths, as `copy_from_slice` requires) without the memcpy
/// cliff.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice` does (callers slice both to one length).
#[inline]
pub fn copy_payload(dst: &mut [u8], src: &[u8]) {
    if in_cliff(dst.as_ptr() as usize, src.as_ptr() as usize) {
        copy_in_pieces(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// True if a copy from address `src` to `dst` lies in the cliff's window.
fn in_cliff(dst: usize, src: usize) -> bool {
    CLIFF.contains(&(dst.wrapping_sub(src) % PAGE))
}

/// Copies in 64-byte pieces (each a fixed-size copy the compiler makes vector moves of), then the
/// rest. Out of line, so that the pieces are not merged back into one `memcpy` call where the
/// caller's loop is inlined.
#[inline(never)]
fn copy_in_pieces(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_payload: source and destination lengths differ");
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    d.into_remainder().copy_from_slice(s.remainder());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn the_window_is_measured_against_the_page() {
        assert!(!in_cliff(4096, 0), "same offset in the page");
        assert!(in_cliff(4096 + 1, 0) && in_cliff(31, 0) && in_cliff(8192 + 10, 4096));
        assert!(!in_cliff(32, 0) && !in_cliff(4095, 0), "behind the source, not ahead");
        assert!(in_cliff(10, usize::MAX - 5), "wraps around the address space");
    }

    /// Copies `len` bytes from the start of a buffer to the first place after them whose distance
    /// from the source is `distance` modulo 4096 (so inside the window or out of it, as asked, at
    /// any length); returns the bytes that were there and what the copy left, and whether the
    /// copy's addresses were in the window.
    fn copied(len: usize, distance: usize, seed: u8) -> (Vec<u8>, Vec<u8>, bool) {
        let at = len.next_multiple_of(PAGE) + distance % PAGE;
        let mut buf: Vec<u8> = (0..at + len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let (src, rest) = buf.split_at_mut(at);
        let (src, dst) = (&src[..len], &mut rest[..len]);
        let window = in_cliff(dst.as_ptr() as usize, src.as_ptr() as usize);
        let want = src.to_vec();
        copy_payload(dst, src);
        (want, buf[at..].to_vec(), window)
    }

    #[test]
    fn copies_every_length_at_distances_in_and_out_of_the_window() {
        for len in [0, 1, 63, 64, 65, 127, 4000, 4096, 4104] {
            for distance in [0, 1, 10, 15, 31, 32, 64, 4095] {
                let (want, got, window) = copied(len, distance, 0x5A);
                assert_eq!(window, (1..=31).contains(&distance), "len {len}, distance {distance}");
                assert_eq!(want, got, "len {len}, distance {distance}");
            }
        }
    }

    proptest! {
        #[test]
        fn equals_copy_from_slice(len in 0usize..9000, distance in 0usize..4096, seed: u8) {
            let (want, got, _) = copied(len, distance, seed);
            prop_assert_eq!(want, got);
        }

        #[test]
        fn equals_copy_from_slice_inside_the_window(len in 0usize..9000, distance in 1usize..=31, seed: u8) {
            let (want, got, window) = copied(len, distance, seed);
            prop_assert!(window);
            prop_assert_eq!(want, got);
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn unequal_lengths_panic_in_pieces_as_copy_from_slice_does() {
        copy_in_pieces(&mut [0u8; 99], &[1u8; 100]);
    }
}
