//! SES response, 12 bytes: `list:2 | opcode:6`, `ver:2 | return_code:6`, message_id:16,
//! ri_gen:8, job_id:24, modified_length:32 (uet-wire.md §3). The first two bytes, [`ResponseHead`],
//! open all three response formats.

use super::codes::{ResponseOpcode, ReturnCode};
use crate::bytes::{need, out, read_u16, read_u24, read_u32, write_u16, write_u24, write_u32};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// The two bytes every response format starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseHead {
    /// List (2 bits): 0 EXPECTED, 1 OVERFLOW.
    pub list: u8,
    /// Response opcode (6 bits).
    pub opcode: ResponseOpcode,
    /// Version (2 bits).
    pub version: u8,
    /// Return code (6 bits).
    pub return_code: ReturnCode,
}

impl FixedHeader for ResponseHead {
    const LEN: usize = 2;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 2, "SES response header")?;
        Ok(ResponseHead {
            list: buf[0] >> 6,
            opcode: ResponseOpcode::from(buf[0] & 0x3F),
            version: buf[1] >> 6,
            return_code: ReturnCode::from(buf[1] & 0x3F),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let (op, rc) = (u8::from(self.opcode), u8::from(self.return_code));
        if self.list > 3 || self.version > 3 || op > 0x3F || rc > 0x3F {
            return Err(Error::Inconsistent("SES response field out of range"));
        }
        let b = out(buf, 2)?;
        b[0] = (self.list << 6) | op;
        b[1] = (self.version << 6) | rc;
        Ok(2)
    }
}

/// A parsed response (next_hdr RSP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Response {
    /// List, opcode, version, return code.
    pub head: ResponseHead,
    /// The request's message identifier.
    pub message_id: u16,
    /// Resource index generation.
    pub ri_generation: u8,
    /// JobID (24 bits).
    pub job_id: u32,
    /// Bytes the target actually modified or delivered.
    pub modified_length: u32,
}

impl FixedHeader for Response {
    const LEN: usize = 12;

    fn parse(buf: &[u8]) -> Result<Self> {
        let head = ResponseHead::parse(buf)?;
        need(buf.len(), 12, "SES response")?;
        Ok(Response {
            head,
            message_id: read_u16(buf, 2),
            ri_generation: buf[4],
            job_id: read_u24(buf, 5),
            modified_length: read_u32(buf, 8),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.job_id > 0xFF_FFFF {
            return Err(Error::Inconsistent("JobID is 24-bit"));
        }
        let b = out(buf, 12)?;
        self.head.emit(b)?;
        write_u16(b, 2, self.message_id);
        b[4] = self.ri_generation;
        write_u24(b, 5, self.job_id);
        write_u32(b, 8, self.modified_length);
        Ok(12)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_pds.pcap frame 9's response: list 3, RESPONSE, AT_PERM.
        let b = hex("c10912349965432109abcdef");
        let r = Response::parse(&b).unwrap();
        assert_eq!(
            r.head,
            ResponseHead {
                list: 3,
                opcode: ResponseOpcode::Response,
                version: 0,
                return_code: ReturnCode::AtPerm
            }
        );
        assert_eq!(
            (r.message_id, r.ri_generation, r.job_id, r.modified_length),
            (0x1234, 0x99, 0x65_4321, 0x09ab_cdef)
        );
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        assert_eq!(ReturnCode::from(0x1b), ReturnCode::BadJobId);
        assert_eq!(ReturnCode::from(0x30), ReturnCode::Unknown(0x30));
    }

    pub(crate) fn arb_head() -> impl Strategy<Value = ResponseHead> {
        (0u8..4, 0u8..0x40, 0u8..4, 0u8..0x40).prop_map(|(list, op, version, rc)| ResponseHead {
            list,
            opcode: ResponseOpcode::from(op),
            version,
            return_code: ReturnCode::from(rc),
        })
    }

    pub(crate) fn arb() -> impl Strategy<Value = Response> {
        (arb_head(), any::<u16>(), any::<u8>(), 0u32..0x100_0000, any::<u32>()).prop_map(
            |(head, message_id, ri_generation, job_id, modified_length)| Response {
                head,
                message_id,
                ri_generation,
                job_id,
                modified_length,
            },
        )
    }
}
