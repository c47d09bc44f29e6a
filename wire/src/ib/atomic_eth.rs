//! Atomic extended transport header, 28 bytes packed: VA, R_Key, Swap/Add, Compare (roce-wire.md §1.2).

use crate::Result;
use crate::bytes::{out, read_u32, read_u64, write_u32, write_u64};
use crate::header::FixedHeader;

/// Size of the AtomicETH.
pub const HEADER_LEN: usize = 28;

fixed_header_view!(
    /// A view of an AtomicETH.
    Packet,
    HEADER_LEN,
    "AtomicETH"
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address (8-byte aligned for a valid request).
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 0)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// Swap value (CMP_AND_SWP) or add value (FETCH_AND_ADD).
    pub fn swap_add(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 12)
    }

    /// Compare value (CMP_AND_SWP only).
    pub fn compare(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 20)
    }
}

/// A parsed AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicEthRepr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap or add value.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl FixedHeader for AtomicEthRepr {
    const LEN: usize = HEADER_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let p = Packet::new_checked(buf)?;
        Ok(AtomicEthRepr { va: p.va(), rkey: p.rkey(), swap_add: p.swap_add(), compare: p.compare() })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, HEADER_LEN)?;
        write_u64(b, 0, self.va);
        write_u32(b, 8, self.rkey);
        write_u64(b, 12, self.swap_add);
        write_u64(b, 20, self.compare);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        let mut v = [0u8; 28];
        v[..8].copy_from_slice(&0x0000_5555_dead_be08u64.to_be_bytes());
        v[8..12].copy_from_slice(&0x1234u32.to_be_bytes());
        v[12..20].copy_from_slice(&1u64.to_be_bytes());
        v[20..28].copy_from_slice(&u64::MAX.to_be_bytes());
        let r = AtomicEthRepr::parse(&v).unwrap();
        assert_eq!(r, AtomicEthRepr { va: 0x5555_dead_be08, rkey: 0x1234, swap_add: 1, compare: u64::MAX });
        let mut o = [0u8; 28];
        r.emit(&mut o).unwrap();
        assert_eq!(o, v);
        for n in 0..28 {
            assert_eq!(AtomicEthRepr::parse(&v[..n]), Err(Error::Truncated("AtomicETH")));
        }
    }

    proptest! {
        #[test]
        fn roundtrip(va in any::<u64>(), rkey in any::<u32>(), swap_add in any::<u64>(), compare in any::<u64>()) {
            let r = AtomicEthRepr { va, rkey, swap_add, compare };
            let mut b = [0u8; 28];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(AtomicEthRepr::parse(&b), Ok(r));
        }
    }
}
