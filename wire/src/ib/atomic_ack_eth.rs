//! Atomic acknowledge extended transport header: the original remote value, 8 bytes (ATOMIC_ACK).

use crate::Result;
use crate::bytes::{need, out, read_u64, write_u64};
use crate::header::FixedHeader;

/// A parsed AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicAckEthRepr {
    /// The value at the target address before the atomic operation.
    pub orig: u64,
}

impl FixedHeader for AtomicAckEthRepr {
    const LEN: usize = 8;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 8, "AtomicAckETH")?;
        Ok(AtomicAckEthRepr { orig: read_u64(buf, 0) })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        write_u64(out(buf, 8)?, 0, self.orig);
        Ok(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        assert_eq!(AtomicAckEthRepr::parse(&[0, 0, 0, 0, 0, 0, 1, 2]), Ok(AtomicAckEthRepr { orig: 0x102 }));
        assert_eq!(AtomicAckEthRepr::parse(&[0; 7]), Err(Error::Truncated("AtomicAckETH")));
    }

    proptest! {
        #[test]
        fn roundtrip(orig in any::<u64>()) {
            let mut b = [0u8; 8];
            AtomicAckEthRepr { orig }.emit(&mut b).unwrap();
            prop_assert_eq!(AtomicAckEthRepr::parse(&b), Ok(AtomicAckEthRepr { orig }));
        }
    }
}
