//! SES response with data, small, 12 bytes ([`crate::uet::layout::RSP_DATA_SMALL_LEN`]):
//! head (2) | `rsvd:2 | payload_length:14` | `rsvd:8 | job_id:24` | original_request_psn:32
//! (uet-wire.md §3).

use super::ResponseHead;
use crate::Result;
use crate::bytes::{need, out, read_u16, read_u32, write_u16, write_u32};
use crate::header::FixedHeader;
use crate::uet::layout::RSP_DATA_SMALL_LEN;

/// A parsed small response with data (next_hdr RSP_DATA_SMALL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseDataSmall {
    /// List, opcode, version, return code.
    pub head: ResponseHead,
    /// `rsvd:2 | payload_length:14`, raw.
    pub length_word: u16,
    /// `rsvd:8 | job_id:24`, raw.
    pub job_word: u32,
    /// PSN of the request this answers.
    pub original_request_psn: u32,
}

impl ResponseDataSmall {
    /// Payload bytes (14 bits).
    pub const fn payload_length(&self) -> u16 {
        self.length_word & 0x3FFF
    }

    /// JobID (24 bits).
    pub const fn job_id(&self) -> u32 {
        self.job_word & 0xFF_FFFF
    }
}

impl FixedHeader for ResponseDataSmall {
    const LEN: usize = RSP_DATA_SMALL_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let head = ResponseHead::parse(buf)?;
        need(buf.len(), RSP_DATA_SMALL_LEN, "SES response with data, small")?;
        Ok(ResponseDataSmall {
            head,
            length_word: read_u16(buf, 2),
            job_word: read_u32(buf, 4),
            original_request_psn: read_u32(buf, 8),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, RSP_DATA_SMALL_LEN)?;
        self.head.emit(b)?;
        write_u16(b, 2, self.length_word);
        write_u32(b, 4, self.job_word);
        write_u32(b, 8, self.original_request_psn);
        Ok(RSP_DATA_SMALL_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 15.
        let b = hex("c20934560003687000001234");
        let r = ResponseDataSmall::parse(&b).unwrap();
        assert_eq!((r.payload_length(), r.job_id(), r.original_request_psn), (0x3456, 0x03_6870, 0x1234));
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    pub(crate) fn arb() -> impl Strategy<Value = ResponseDataSmall> {
        (super::super::response::tests::arb_head(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
            |(head, length_word, job_word, original_request_psn)| ResponseDataSmall {
                head,
                length_word,
                job_word,
                original_request_psn,
            },
        )
    }
}
