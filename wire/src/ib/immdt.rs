//! Immediate data, 4 opaque bytes copied raw as `__be32` (roce-wire.md §1.2).

use crate::Result;
use crate::header::FixedHeader;
use crate::ib::word::{emit_word, parse_word};

/// Immediate data as the 32-bit big-endian value on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImmDt(pub u32);

impl FixedHeader for ImmDt {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        parse_word(buf, "ImmDt").map(ImmDt)
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        emit_word(buf, self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        assert_eq!(ImmDt::parse(&[0xde, 0xad, 0xbe, 0xef]), Ok(ImmDt(0xdead_beef)));
        assert_eq!(ImmDt::parse(&[1, 2, 3]), Err(Error::Truncated("ImmDt")));
        assert_eq!(ImmDt(1).emit(&mut [0u8; 3]), Err(Error::BufferTooSmall));
    }

    proptest! {
        #[test]
        fn roundtrip(v in any::<u32>()) {
            let mut b = [0u8; 4];
            ImmDt(v).emit(&mut b).unwrap();
            prop_assert_eq!(ImmDt::parse(&b), Ok(ImmDt(v)));
        }
    }
}
