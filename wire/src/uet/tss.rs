//! Transport Security Sublayer header, 12 bytes or 16 with an SSI (uet-wire.md §4):
//! `type:5 (=1) | SP | rsvd | AN | SDI:24`, `[SSI:32 if SP]`, `TSC:64 = epoch:16 | counter:48`.
//! Everything after it up to the 16-byte ICV is ciphertext to this codec.

use crate::bytes::{need, out, read_u32, read_u64, write_u32, write_u64};
use crate::{Error, Result};

/// The 5-bit type that marks a TSS header (shared numbering with the PDS types).
pub const TYPE_TSS: u8 = 1;
/// Length of the AES-GCM ICV trailer.
pub const ICV_LEN: usize = 16;

/// A parsed TSS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TssRepr {
    /// The reserved bit between SP and AN, kept for re-emit.
    pub reserved: bool,
    /// Association number: which of the domain's two keys.
    pub an: bool,
    /// Secure domain index (24 bits).
    pub sdi: u32,
    /// Secure source identifier, present when SP is set.
    pub ssi: Option<u32>,
    /// Transmit security counter: `epoch:16 | counter:48`.
    pub tsc: u64,
}

impl TssRepr {
    /// The epoch part of the TSC.
    pub const fn epoch(&self) -> u16 {
        (self.tsc >> 48) as u16
    }

    /// The counter part of the TSC (48 bits).
    pub const fn counter(&self) -> u64 {
        self.tsc & 0xFFFF_FFFF_FFFF
    }

    /// Parses a TSS header; the type field must be 1. Inlined: returned through memory, the repr
    /// was read back at once in other widths than it was written in (a store-forwarding stall per
    /// packet in the engine's receive path).
    #[inline(always)]
    pub fn parse(buf: &[u8]) -> Result<TssRepr> {
        need(buf.len(), 12, "TSS header")?;
        let w0 = read_u32(buf, 0);
        if (w0 >> 27) as u8 != TYPE_TSS {
            return Err(Error::Inconsistent("TSS header type is not 1"));
        }
        let sp = w0 & (1 << 26) != 0;
        let (ssi, tsc_at) = if sp {
            need(buf.len(), 16, "TSS header with SSI")?;
            (Some(read_u32(buf, 4)), 8)
        } else {
            (None, 4)
        };
        Ok(TssRepr {
            reserved: w0 & (1 << 25) != 0,
            an: w0 & (1 << 24) != 0,
            sdi: w0 & 0xFF_FFFF,
            ssi,
            tsc: read_u64(buf, tsc_at),
        })
    }

    /// 12, or 16 with an SSI.
    pub const fn buffer_len(&self) -> usize {
        if self.ssi.is_some() { 16 } else { 12 }
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.sdi > 0xFF_FFFF {
            return Err(Error::Inconsistent("TSS SDI is 24-bit"));
        }
        let len = self.buffer_len();
        let b = out(buf, len)?;
        let w0 = (u32::from(TYPE_TSS) << 27)
            | (u32::from(self.ssi.is_some()) << 26)
            | (u32::from(self.reserved) << 25)
            | (u32::from(self.an) << 24)
            | self.sdi;
        write_u32(b, 0, w0);
        if let Some(ssi) = self.ssi {
            write_u32(b, 4, ssi);
        }
        write_u64(b, len - 8, self.tsc);
        Ok(len)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vectors() {
        let plain = [0x09, 0x12, 0x34, 0x56, 0x00, 0x02, 0, 0, 0, 0, 0, 7];
        let r = TssRepr::parse(&plain).unwrap();
        assert_eq!(r, TssRepr { reserved: false, an: true, sdi: 0x123456, ssi: None, tsc: (2 << 48) | 7 });
        assert_eq!((r.epoch(), r.counter()), (2, 7));
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o, plain);
        let with_ssi = [0x0c, 0, 0, 1, 0x0a, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 9];
        let r = TssRepr::parse(&with_ssi).unwrap();
        assert_eq!(r.ssi, Some(0x0a00_0001));
        assert_eq!(r.buffer_len(), 16);
        for n in 0..16 {
            assert!(matches!(TssRepr::parse(&with_ssi[..n]), Err(Error::Truncated(_))), "{n}");
        }
        assert!(matches!(TssRepr::parse(&[0x11; 12]), Err(Error::Inconsistent(_))));
    }

    pub(crate) fn arb_tss() -> impl Strategy<Value = TssRepr> {
        (any::<bool>(), any::<bool>(), 0u32..0x100_0000, proptest::option::of(any::<u32>()), any::<u64>())
            .prop_map(|(reserved, an, sdi, ssi, tsc)| TssRepr { reserved, an, sdi, ssi, tsc })
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_tss()) {
            let mut b = [0u8; 16];
            let n = r.emit(&mut b).unwrap();
            prop_assert_eq!(TssRepr::parse(&b[..n]), Ok(r));
        }
    }
}
