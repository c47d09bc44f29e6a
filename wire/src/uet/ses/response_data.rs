//! SES response with data, 20 bytes: head (2) | message_id:16 | rsvd:8 | job_id:24 |
//! read_req_message_id:16 | `rsvd:2 | payload_length:14` | modified_length:32 | message_offset:32
//! (uet-wire.md §3).

use super::ResponseHead;
use crate::bytes::{need, out, read_u16, read_u24, read_u32, write_u16, write_u24, write_u32};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// A parsed response with data (next_hdr RSP_DATA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseData {
    /// List, opcode, version, return code.
    pub head: ResponseHead,
    /// Message identifier of this response.
    pub message_id: u16,
    /// Reserved byte, kept.
    pub reserved: u8,
    /// JobID (24 bits).
    pub job_id: u32,
    /// The READ request this data answers.
    pub read_req_message_id: u16,
    /// `rsvd:2 | payload_length:14`, raw.
    pub length_word: u16,
    /// Bytes modified.
    pub modified_length: u32,
    /// Offset of this payload in the read.
    pub message_offset: u32,
}

impl ResponseData {
    /// Payload bytes in this packet (14 bits).
    pub const fn payload_length(&self) -> u16 {
        self.length_word & 0x3FFF
    }
}

impl FixedHeader for ResponseData {
    const LEN: usize = 20;

    fn parse(buf: &[u8]) -> Result<Self> {
        let head = ResponseHead::parse(buf)?;
        need(buf.len(), 20, "SES response with data")?;
        Ok(ResponseData {
            head,
            message_id: read_u16(buf, 2),
            reserved: buf[4],
            job_id: read_u24(buf, 5),
            read_req_message_id: read_u16(buf, 8),
            length_word: read_u16(buf, 10),
            modified_length: read_u32(buf, 12),
            message_offset: read_u32(buf, 16),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.job_id > 0xFF_FFFF {
            return Err(Error::Inconsistent("JobID is 24-bit"));
        }
        let b = out(buf, 20)?;
        self.head.emit(b)?;
        write_u16(b, 2, self.message_id);
        b[4] = self.reserved;
        write_u24(b, 5, self.job_id);
        write_u16(b, 8, self.read_req_message_id);
        write_u16(b, 10, self.length_word);
        write_u32(b, 12, self.modified_length);
        write_u32(b, 16, self.message_offset);
        Ok(20)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::uet::ses::ResponseOpcode;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 14.
        let b = hex("c209123400654321123403218765432109abcdef");
        let r = ResponseData::parse(&b).unwrap();
        assert_eq!(r.head.opcode, ResponseOpcode::ResponseWData);
        assert_eq!((r.read_req_message_id, r.payload_length()), (0x1234, 0x321));
        assert_eq!((r.modified_length, r.message_offset), (0x8765_4321, 0x09ab_cdef));
        let mut o = [0u8; 20];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    pub(crate) fn arb() -> impl Strategy<Value = ResponseData> {
        (
            super::super::response::tests::arb_head(),
            any::<(u16, u8)>(),
            0u32..0x100_0000,
            any::<(u16, u16)>(),
            any::<(u32, u32)>(),
        )
            .prop_map(
                |(head, (message_id, reserved), job_id, (read_req_message_id, length_word), (ml, mo))| {
                    ResponseData {
                        head,
                        message_id,
                        reserved,
                        job_id,
                        read_req_message_id,
                        length_word,
                        modified_length: ml,
                        message_offset: mo,
                    }
                },
            )
    }
}
