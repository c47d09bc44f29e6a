//! 32-bit PSN arithmetic (uet-wire.md §2: "PSN is 32-bit with modular compare").

/// `a - b` as a signed distance; positive when `a` is after `b` (valid within 2^31).
pub const fn diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a` comes before `b`.
pub const fn before(a: u32, b: u32) -> bool {
    diff(a, b) < 0
}

/// The signed 16-bit offset `to - from`, saturated (for clear_psn_offset, ack_psn_offset,
/// sack_psn_offset).
pub fn offset16(to: u32, from: u32) -> i16 {
    diff(to, from).clamp(i16::MIN.into(), i16::MAX.into()) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps() {
        assert_eq!(diff(2, u32::MAX), 3);
        assert!(before(u32::MAX, 0));
        assert!(!before(0, u32::MAX));
        assert_eq!(offset16(u32::MAX, 1), -2);
        assert_eq!(offset16(100_000, 0), i16::MAX);
    }

    proptest! {
        #[test]
        fn offset_round_trips(base: u32, off: i16) {
            let to = wire::uet::pds::psn_plus(base, off);
            prop_assert_eq!(offset16(to, base), off);
            prop_assert_eq!(before(to, base), off < 0);
        }
    }
}
