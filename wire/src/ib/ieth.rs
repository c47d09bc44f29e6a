//! Invalidate extended transport header: the R_Key to invalidate, 4 bytes (SEND_*_INV).

use crate::Result;
use crate::header::FixedHeader;
use crate::ib::word::{emit_word, parse_word};

/// A parsed IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IethRepr {
    /// The R_Key the responder invalidates.
    pub rkey: u32,
}

impl FixedHeader for IethRepr {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        parse_word(buf, "IETH").map(|rkey| IethRepr { rkey })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        emit_word(buf, self.rkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        assert_eq!(IethRepr::parse(&[0, 0, 0x12, 0x34]), Ok(IethRepr { rkey: 0x1234 }));
        assert_eq!(IethRepr::parse(&[0, 0]), Err(Error::Truncated("IETH")));
    }

    proptest! {
        #[test]
        fn roundtrip(rkey in any::<u32>()) {
            let mut b = [0u8; 4];
            IethRepr { rkey }.emit(&mut b).unwrap();
            prop_assert_eq!(IethRepr::parse(&b), Ok(IethRepr { rkey }));
        }
    }
}
