//! Medium (small-message) SES request, 32 bytes ([`crate::uet::layout::MEDIUM_REQUEST_LEN`]):
//! common (12, `rsvd:2 | request_length:14` in bytes 2-3) | header_data or buffer_offset:64 (by HD) |
//! initiator:32 | match_bits or memory key:64 (uet-wire.md §3 and "Decisions").

use super::RequestCommon;
use super::common::FLAG_HD;
use crate::Result;
use crate::bytes::{need, out, read_u32, read_u64, write_u32, write_u64};
use crate::header::FixedHeader;
use crate::uet::layout::MEDIUM_REQUEST_LEN;

/// A parsed medium request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MediumRequest {
    /// The common 12 bytes (`word2` is `rsvd:2 | request_length:14`).
    pub common: RequestCommon,
    /// header_data when HD is set, else buffer_offset.
    pub data_or_offset: u64,
    /// Initiator identifier.
    pub initiator: u32,
    /// Match bits or memory key.
    pub match_bits: u64,
}

impl MediumRequest {
    /// Request length (14 bits).
    pub const fn request_length(&self) -> u16 {
        self.common.word2 & 0x3FFF
    }

    /// The header data, when HD is set.
    pub const fn header_data(&self) -> Option<u64> {
        if self.common.has(FLAG_HD) { Some(self.data_or_offset) } else { None }
    }
}

impl FixedHeader for MediumRequest {
    const LEN: usize = MEDIUM_REQUEST_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let common = RequestCommon::parse(buf)?;
        need(buf.len(), MEDIUM_REQUEST_LEN, "SES medium request")?;
        Ok(MediumRequest {
            common,
            data_or_offset: read_u64(buf, 12),
            initiator: read_u32(buf, 20),
            match_bits: read_u64(buf, 24),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, MEDIUM_REQUEST_LEN)?;
        self.common.emit(b)?;
        write_u64(b, 12, self.data_or_offset);
        write_u32(b, 20, self.initiator);
        write_u64(b, 24, self.match_bits);
        Ok(MEDIUM_REQUEST_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 7 (XDP2 writes a message_id in bytes 2-3; read as request_length).
        let b = hex("012b123477abcdef067809ab987654329876543287654321ccbbddeeff009988");
        let r = MediumRequest::parse(&b).unwrap();
        assert_eq!((r.request_length(), r.header_data()), (0x1234, None));
        assert_eq!((r.initiator, r.match_bits), (0x8765_4321, 0xccbb_ddee_ff00_9988));
        let mut o = [0u8; 32];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    pub(crate) fn arb() -> impl Strategy<Value = MediumRequest> {
        (super::super::common::tests::arb(), any::<u64>(), any::<u32>(), any::<u64>()).prop_map(
            |(common, data_or_offset, initiator, match_bits)| MediumRequest {
                common,
                data_or_offset,
                initiator,
                match_bits,
            },
        )
    }
}
