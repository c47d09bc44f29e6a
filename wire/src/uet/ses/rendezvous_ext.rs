//! Rendezvous extension header, 24 bytes ([`crate::uet::layout::RENDEZVOUS_EXT_LEN`]):
//! `eager_length:32 | rd_ri_gen:8 | rd_pid_on_fep:12 | rd_res_index:12 | read_offset:64 |
//! read_match_bits:64` (uet-wire.md §3).

use crate::Result;
use crate::bytes::{need, out, read_u32, read_u64, write_u32, write_u64};
use crate::header::FixedHeader;
use crate::uet::layout::RENDEZVOUS_EXT_LEN;

/// A parsed rendezvous extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RendezvousExt {
    /// Bytes sent eagerly with the request.
    pub eager_length: u32,
    /// `rd_ri_gen:8 | rd_pid_on_fep:12 | rd_res_index:12`, raw.
    pub rd_word: u32,
    /// Where the target reads the rest from.
    pub read_offset: u64,
    /// Match bits or key for that read.
    pub read_match_bits: u64,
}

impl RendezvousExt {
    /// Resource index generation for the read-back.
    pub const fn rd_ri_gen(&self) -> u8 {
        (self.rd_word >> 24) as u8
    }

    /// PIDonFEP for the read-back (12 bits).
    pub const fn rd_pid_on_fep(&self) -> u16 {
        ((self.rd_word >> 12) & 0xFFF) as u16
    }

    /// Resource index for the read-back (12 bits).
    pub const fn rd_res_index(&self) -> u16 {
        (self.rd_word & 0xFFF) as u16
    }
}

impl FixedHeader for RendezvousExt {
    const LEN: usize = RENDEZVOUS_EXT_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), RENDEZVOUS_EXT_LEN, "SES rendezvous extension")?;
        Ok(RendezvousExt {
            eager_length: read_u32(buf, 0),
            rd_word: read_u32(buf, 4),
            read_offset: read_u64(buf, 8),
            read_match_bits: read_u64(buf, 16),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, RENDEZVOUS_EXT_LEN)?;
        write_u32(b, 0, self.eager_length);
        write_u32(b, 4, self.rd_word);
        write_u64(b, 8, self.read_offset);
        write_u64(b, 16, self.read_match_bits);
        Ok(RENDEZVOUS_EXT_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&[0, 0, 0x10, 0, 0x05, 0x12, 0x30, 0x45]);
        b[15] = 1;
        b[23] = 2;
        let r = RendezvousExt::parse(&b).unwrap();
        assert_eq!(r.eager_length, 4096);
        assert_eq!((r.rd_ri_gen(), r.rd_pid_on_fep(), r.rd_res_index()), (5, 0x123, 0x045));
        assert_eq!((r.read_offset, r.read_match_bits), (1, 2));
        let mut o = [0u8; 24];
        r.emit(&mut o).unwrap();
        assert_eq!(o, b);
        assert_eq!(RendezvousExt::parse(&b[..8]), Err(Error::Truncated("SES rendezvous extension")));
    }

    pub(crate) fn arb() -> impl Strategy<Value = RendezvousExt> {
        any::<(u32, u32, u64, u64)>().prop_map(|(eager_length, rd_word, read_offset, read_match_bits)| {
            RendezvousExt { eager_length, rd_word, read_offset, read_match_bits }
        })
    }
}
