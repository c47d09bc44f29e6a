//! RDMA extended transport header, 16 bytes: VA, R_Key, DMA length (roce-wire.md §1.2).

use crate::Result;
use crate::bytes::{out, read_u32, read_u64, write_u32, write_u64};
use crate::header::FixedHeader;

/// Size of the RETH.
pub const HEADER_LEN: usize = 16;

fixed_header_view!(
    /// A view of a RETH.
    Packet,
    HEADER_LEN,
    "RETH"
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Virtual address.
    pub fn va(&self) -> u64 {
        read_u64(self.buffer.as_ref(), 0)
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 8)
    }

    /// DMA length of the whole message.
    pub fn dma_len(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 12)
    }
}

/// A parsed RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RethRepr {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl FixedHeader for RethRepr {
    const LEN: usize = HEADER_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let p = Packet::new_checked(buf)?;
        Ok(RethRepr { va: p.va(), rkey: p.rkey(), dma_len: p.dma_len() })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, HEADER_LEN)?;
        write_u64(b, 0, self.va);
        write_u32(b, 8, self.rkey);
        write_u32(b, 12, self.dma_len);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    /// RETH of the rxe READ request in `captures/roce/rxe_read_request_pcapplusplus.pcap`.
    const V: [u8; 16] = [0, 0, 0x7f, 0xee, 0x26, 0x0f, 0xb0, 0, 0, 0, 0x02, 0xb8, 0, 1, 0, 0];

    #[test]
    fn vector() {
        let r = RethRepr::parse(&V).unwrap();
        assert_eq!(r, RethRepr { va: 0x7fee_260f_b000, rkey: 0x2b8, dma_len: 0x10000 });
        let mut o = [0u8; 16];
        assert_eq!(r.emit(&mut o), Ok(16));
        assert_eq!(o, V);
        for n in 0..16 {
            assert_eq!(RethRepr::parse(&V[..n]), Err(Error::Truncated("RETH")));
        }
    }

    proptest! {
        #[test]
        fn roundtrip(va in any::<u64>(), rkey in any::<u32>(), dma_len in any::<u32>()) {
            let r = RethRepr { va, rkey, dma_len };
            let mut b = [0u8; 16];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(RethRepr::parse(&b), Ok(r));
        }
    }
}
