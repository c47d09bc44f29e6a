//! RUDI request/response header, 8 bytes: `prologue | rsvd:16 | pkt_id:32` (uet-wire.md §2;
//! size per [`crate::uet::layout::RUDI_LEN`]). RUDI has no PDC: one response per request, by pkt_id.

use super::common::{NextHeader, PdsType, Prologue, prologue};
use crate::bytes::{out, read_u16, read_u32, write_u16, write_u32};
use crate::header::FixedHeader;
use crate::uet::layout::RUDI_LEN;
use crate::{Error, Result};

/// M (responses only): ECN marked.
pub const FLAG_M: u8 = 0x20;
/// RETX.
pub const FLAG_RETX: u8 = 0x10;

/// A parsed RUDI header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RudiRepr {
    /// RUDI_RESP rather than RUDI_REQ.
    pub response: bool,
    /// SES header format that follows.
    pub next_hdr: NextHeader,
    /// Flags (M, RETX).
    pub flags: u8,
    /// The reserved 16 bits, kept.
    pub reserved: u16,
    /// Packet identifier matching a response to its request.
    pub pkt_id: u32,
}

impl RudiRepr {
    /// RUDI_REQ or RUDI_RESP.
    pub fn pds_type(&self) -> PdsType {
        if self.response { PdsType::RudiResp } else { PdsType::RudiReq }
    }

    /// Parses a RUDI header.
    pub fn parse(buf: &[u8]) -> Result<RudiRepr> {
        let p = prologue(buf, RUDI_LEN, "PDS RUDI header")?;
        let response = match PdsType::from(p.pds_type) {
            PdsType::RudiReq => false,
            PdsType::RudiResp => true,
            _ => return Err(Error::Inconsistent("not a RUDI type")),
        };
        Ok(RudiRepr {
            response,
            next_hdr: NextHeader::from(p.next),
            flags: p.flags,
            reserved: read_u16(buf, 2),
            pkt_id: read_u32(buf, 4),
        })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, RUDI_LEN)?;
        Prologue { pds_type: self.pds_type().into(), next: self.next_hdr.into(), flags: self.flags }
            .emit(b)?;
        write_u16(b, 2, self.reserved);
        write_u32(b, 4, self.pkt_id);
        Ok(RUDI_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vectors() {
        // xdp2_uet_pds.pcap frames 18 (RUDI_REQ, REQ_STD) and 19 (RUDI_RESP, RSP, M).
        for (h, response, nh) in
            [("21a0000099887766", false, NextHeader::ReqStd), ("2a20000099887766", true, NextHeader::Rsp)]
        {
            let b = hex(h);
            let r = RudiRepr::parse(&b).unwrap();
            assert_eq!((r.response, r.next_hdr, r.pkt_id), (response, nh, 0x9988_7766));
            let mut o = [0u8; 8];
            r.emit(&mut o).unwrap();
            assert_eq!(o[..], b[..]);
            assert!(matches!(RudiRepr::parse(&b[..7]), Err(Error::Truncated(_))));
        }
    }

    pub(crate) fn arb() -> impl Strategy<Value = RudiRepr> {
        (any::<bool>(), 0u8..16, 0u8..0x80, any::<u16>(), any::<u32>()).prop_map(
            |(response, nh, flags, reserved, pkt_id)| RudiRepr {
                response,
                next_hdr: NextHeader::from(nh),
                flags,
                reserved,
                pkt_id,
            },
        )
    }
}
