//! Reliable datagram extended transport header, 4 bytes: reserved byte and 24-bit EE context.
//! RD is decoded for completeness; rxe does not create RD QPs (roce-wire.md §1.1).

use crate::Result;
use crate::header::FixedHeader;
use crate::ib::word::{emit_word, parse_word};

/// A parsed RDETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RdethRepr {
    /// The reserved first byte, kept for byte-exact re-emit.
    pub reserved: u8,
    /// End-to-end context (24 bits).
    pub ee_context: u32,
}

impl FixedHeader for RdethRepr {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        parse_word(buf, "RDETH").map(|w| RdethRepr { reserved: (w >> 24) as u8, ee_context: w & 0xFF_FFFF })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.ee_context > 0xFF_FFFF {
            return Err(crate::Error::Inconsistent("RDETH EE context is 24-bit"));
        }
        emit_word(buf, (u32::from(self.reserved) << 24) | self.ee_context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        assert_eq!(RdethRepr::parse(&[0, 1, 2, 3]), Ok(RdethRepr { reserved: 0, ee_context: 0x010203 }));
        assert_eq!(RdethRepr::parse(&[]), Err(Error::Truncated("RDETH")));
    }

    proptest! {
        #[test]
        fn roundtrip(reserved in any::<u8>(), ee_context in 0u32..0x100_0000) {
            let r = RdethRepr { reserved, ee_context };
            let mut b = [0u8; 4];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(RdethRepr::parse(&b), Ok(r));
        }
    }
}
