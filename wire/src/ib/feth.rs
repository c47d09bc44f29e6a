//! Flush extended transport header, 4 bytes (FLUSH, kernel 6.2+). Layout as rxe's `rxe_hdr.h`:
//! placement type in bits 3..0, selectivity level in bits 5..4, the rest reserved.

use crate::Result;
use crate::header::FixedHeader;
use crate::ib::word::{emit_word, parse_word};

/// A parsed FETH. The whole word is kept so that reserved bits re-emit unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FethRepr {
    /// The raw 32-bit header.
    pub raw: u32,
}

impl FethRepr {
    /// A FETH with the given placement type (4 bits) and selectivity level (2 bits).
    pub const fn new(placement_type: u8, selectivity: u8) -> FethRepr {
        FethRepr { raw: (placement_type as u32 & 0xF) | ((selectivity as u32 & 0x3) << 4) }
    }

    /// Placement type (`FETH_PLT_MASK`, bits 3..0): 1 = global visibility, 2 = persistence.
    pub const fn placement_type(&self) -> u8 {
        (self.raw & 0xF) as u8
    }

    /// Selectivity level (`FETH_SEL_MASK`, bits 5..4): 0 = memory region range, 1 = whole region.
    pub const fn selectivity(&self) -> u8 {
        ((self.raw >> 4) & 0x3) as u8
    }
}

impl FixedHeader for FethRepr {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        parse_word(buf, "FETH").map(|raw| FethRepr { raw })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        emit_word(buf, self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        let r = FethRepr::parse(&[0, 0, 0, 0x12]).unwrap();
        assert_eq!(r, FethRepr::new(2, 1));
        assert_eq!((r.placement_type(), r.selectivity()), (2, 1));
        assert_eq!(FethRepr::parse(&[0]), Err(Error::Truncated("FETH")));
    }

    proptest! {
        #[test]
        fn roundtrip(raw in any::<u32>()) {
            let mut b = [0u8; 4];
            FethRepr { raw }.emit(&mut b).unwrap();
            prop_assert_eq!(FethRepr::parse(&b), Ok(FethRepr { raw }));
        }
    }
}
