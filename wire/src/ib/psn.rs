//! 24-bit packet sequence number arithmetic (roce-wire.md §1.8: `psn_compare(a, b) = (s32)((a - b) << 8)`).

use core::cmp::Ordering;

/// PSN values are 24 bits.
pub const MASK: u32 = 0x00FF_FFFF;

/// `a + n` modulo 2^24.
pub const fn add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & MASK
}

/// `a - b` as a signed distance in the ±2^23 window.
pub const fn diff(a: u32, b: u32) -> i32 {
    (a.wrapping_sub(b) << 8) as i32 >> 8
}

/// Orders two PSNs as rxe's `psn_compare` does.
pub fn compare(a: u32, b: u32) -> Ordering {
    diff(a, b).cmp(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert_eq!(add(MASK, 1), 0);
        assert_eq!(add(MASK - 1, 5), 3);
        assert_eq!(diff(2, MASK), 3);
        assert_eq!(diff(MASK, 2), -3);
        assert_eq!(compare(0, MASK), Ordering::Greater);
        assert_eq!(compare(5, 5), Ordering::Equal);
        assert_eq!(compare(0x400000, 0), Ordering::Greater);
        assert_eq!(diff(0x800000, 0), -0x800000);
    }
}
