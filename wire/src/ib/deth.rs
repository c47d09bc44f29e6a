//! Datagram extended transport header, 8 bytes: Q_Key, reserved byte, 24-bit source QP
//! (roce-wire.md §1.2).

use crate::bytes::{out, read_u24, read_u32, write_u24, write_u32};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// Size of the DETH.
pub const HEADER_LEN: usize = 8;
/// The Q_Key of the general services interface (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;

fixed_header_view!(
    /// A view of a DETH.
    Packet,
    HEADER_LEN,
    "DETH"
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0)
    }

    /// The reserved byte between Q_Key and source QP.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Source QP (24 bits).
    pub fn src_qp(&self) -> u32 {
        read_u24(self.buffer.as_ref(), 5)
    }
}

/// A parsed DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Reserved byte, kept for byte-exact re-emit.
    pub reserved: u8,
    /// Source QP.
    pub src_qp: u32,
}

impl FixedHeader for DethRepr {
    const LEN: usize = HEADER_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let p = Packet::new_checked(buf)?;
        Ok(DethRepr { qkey: p.qkey(), reserved: p.reserved(), src_qp: p.src_qp() })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.src_qp > 0xFF_FFFF {
            return Err(Error::Inconsistent("DETH source QP is 24-bit"));
        }
        let b = out(buf, HEADER_LEN)?;
        write_u32(b, 0, self.qkey);
        b[4] = self.reserved;
        write_u24(b, 5, self.src_qp);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        // rdma_cm MAD on QP1 (captures/roce/linlinw5/rdma_cm.pcap): GSI Q_Key, source QP 1.
        let v = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
        let r = DethRepr::parse(&v).unwrap();
        assert_eq!(r, DethRepr { qkey: GSI_QKEY, reserved: 0, src_qp: 1 });
        let mut o = [0u8; 8];
        r.emit(&mut o).unwrap();
        assert_eq!(o, v);
        for n in 0..8 {
            assert_eq!(DethRepr::parse(&v[..n]), Err(Error::Truncated("DETH")));
        }
    }

    proptest! {
        #[test]
        fn roundtrip(qkey in any::<u32>(), reserved in any::<u8>(), src_qp in 0u32..0x100_0000) {
            let r = DethRepr { qkey, reserved, src_qp };
            let mut b = [0u8; 8];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(DethRepr::parse(&b), Ok(r));
        }
    }
}
