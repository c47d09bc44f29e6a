//! The Internet checksum (RFC 1071) and the UDP pseudo-headers (RFC 768, RFC 8200 §8.1).

use core::net::{Ipv4Addr, Ipv6Addr};

/// One's-complement sum of `data` as big-endian 16-bit words (odd tail padded with zero), folded to
/// at most 17 bits so that callers can add a few pseudo-header sums before [`finish`].
///
/// The bulk is summed as native little-endian 32-bit words into a 64-bit accumulator, which the
/// compiler vectorizes, and byte-swapped once at the end: the one's-complement sum is independent of
/// byte order up to that swap (RFC 1071 §2 (B)). A 64-bit accumulator of 32-bit words cannot overflow
/// for any buffer under 16 GiB.
#[inline]
pub fn sum(data: &[u8]) -> u32 {
    let mut wide: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        wide += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut acc = u32::from(fold16(wide).swap_bytes());
    let tail = words.remainder();
    let mut pairs = tail.chunks_exact(2);
    for p in &mut pairs {
        acc += u32::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// End-around-carry fold of a wide sum to 16 bits.
fn fold16(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Folds a sum to 16 bits and takes the one's complement: the checksum field value.
pub fn finish(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Sum of the IPv4 pseudo-header for an upper-layer packet of `len` bytes.
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u32 {
    sum(&src.octets()) + sum(&dst.octets()) + u32::from(protocol) + u32::from(len)
}

/// Sum of the IPv6 pseudo-header for an upper-layer packet of `len` bytes.
pub fn pseudo_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u32 {
    sum(&src.octets()) + sum(&dst.octets()) + (len >> 16) + (len & 0xffff) + u32::from(next_header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to 0xddf2 (folded), checksum 0x220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(finish(sum(&data)), 0x220d);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    /// RFC 1071's definition, 16 bits at a time, for comparison.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u64 = 0;
        for c in data.chunks(2) {
            acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        fold16(acc)
    }

    proptest::proptest! {
        #[test]
        fn same_checksum_as_the_word_by_word_sum(data in proptest::collection::vec(proptest::num::u8::ANY, 0..9000)) {
            proptest::prop_assert_eq!(finish(sum(&data)), !reference(&data));
        }
    }

    #[test]
    fn all_ones_jumbo_buffer() {
        let data = vec![0xff; 65535];
        assert_eq!(finish(sum(&data)), !reference(&data));
    }
}
