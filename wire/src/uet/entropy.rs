//! The 4-byte entropy header in front of native-IP UET: `entropy:16 | reserved:16` (uet-wire.md §1).

use crate::Result;
use crate::bytes::{need, out, read_u16, write_u16};
use crate::header::FixedHeader;

/// A parsed entropy header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntropyRepr {
    /// Path entropy (what the UDP source port carries in UDP encapsulation).
    pub entropy: u16,
    /// Reserved, kept for byte-exact re-emit.
    pub reserved: u16,
}

impl FixedHeader for EntropyRepr {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 4, "UET entropy header")?;
        Ok(EntropyRepr { entropy: read_u16(buf, 0), reserved: read_u16(buf, 2) })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, 4)?;
        write_u16(b, 0, self.entropy);
        write_u16(b, 2, self.reserved);
        Ok(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        assert_eq!(EntropyRepr::parse(&[0xbe, 0xef, 0, 0]), Ok(EntropyRepr { entropy: 0xbeef, reserved: 0 }));
        assert_eq!(EntropyRepr::parse(&[0xbe, 0xef, 0]), Err(Error::Truncated("UET entropy header")));
    }

    proptest! {
        #[test]
        fn roundtrip(entropy in any::<u16>(), reserved in any::<u16>()) {
            let r = EntropyRepr { entropy, reserved };
            let mut b = [0u8; 4];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(EntropyRepr::parse(&b), Ok(r));
        }
    }
}
