//! UUD request header, 4 bytes: `prologue | rsvd:16` (uet-wire.md §2). Single-packet, no PDC, no ACK.

use super::common::{NextHeader, PdsType, Prologue, prologue};
use crate::bytes::{out, read_u16, write_u16};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// Length of the UUD header.
pub const LEN: usize = 4;

/// A parsed UUD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UudRepr {
    /// SES header format that follows.
    pub next_hdr: NextHeader,
    /// Flags (all zero in 1.0; kept).
    pub flags: u8,
    /// The reserved 16 bits, kept.
    pub reserved: u16,
}

impl UudRepr {
    /// Parses a UUD header.
    pub fn parse(buf: &[u8]) -> Result<UudRepr> {
        let p = prologue(buf, LEN, "PDS UUD header")?;
        if PdsType::from(p.pds_type) != PdsType::UudReq {
            return Err(Error::Inconsistent("not a UUD type"));
        }
        Ok(UudRepr { next_hdr: NextHeader::from(p.next), flags: p.flags, reserved: read_u16(buf, 2) })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, LEN)?;
        Prologue { pds_type: PdsType::UudReq.into(), next: self.next_hdr.into(), flags: self.flags }
            .emit(b)?;
        write_u16(b, 2, self.reserved);
        Ok(LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_pds.pcap frame 17: UUD, REQ_STD.
        let r = UudRepr::parse(&[0x31, 0x80, 0, 0]).unwrap();
        assert_eq!(r, UudRepr { next_hdr: NextHeader::ReqStd, flags: 0, reserved: 0 });
        let mut o = [0u8; 4];
        r.emit(&mut o).unwrap();
        assert_eq!(o, [0x31, 0x80, 0, 0]);
        assert!(matches!(UudRepr::parse(&[0x31, 0x80, 0]), Err(Error::Truncated(_))));
    }

    pub(crate) fn arb() -> impl Strategy<Value = UudRepr> {
        (0u8..16, 0u8..0x80, any::<u16>()).prop_map(|(nh, flags, reserved)| UudRepr {
            next_hdr: NextHeader::from(nh),
            flags,
            reserved,
        })
    }
}
