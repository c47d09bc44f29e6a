//! Control packet header, 16 bytes ([`crate::uet::layout::CP_LEN`]; uet-wire.md §2):
//! `prologue (ctl_type in the next_hdr bits) | probe_opaque:16 | psn:32 | spdcid:16 | dpdcid:16 | payload:32`.
//! A CP carries no SES header.

use super::common::{CtlType, PdsType, Prologue};
use crate::bytes::{need, out, read_u16, read_u32, write_u16, write_u32};
use crate::header::FixedHeader;
use crate::uet::layout::CP_LEN;
use crate::{Error, Result};

/// ISROD ([`crate::uet::layout::CP_FLAG_ISROD`]): the PDC is ROD (NOOP and negotiation CPs).
pub const FLAG_ISROD: u8 = crate::uet::layout::CP_FLAG_ISROD;
/// RETX.
pub const FLAG_RETX: u8 = 0x10;
/// AR: ACK requested.
pub const FLAG_AR: u8 = 0x08;
/// SYN: PDC establishment (dpdcid then holds the SYN word, as in requests).
pub const FLAG_SYN: u8 = 0x04;

/// A parsed control packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpRepr {
    /// Control type.
    pub ctl_type: CtlType,
    /// Flags (ISROD, RETX, AR, SYN).
    pub flags: u8,
    /// Probe opaque value (or reserved).
    pub probe_opaque: u16,
    /// PSN.
    pub psn: u32,
    /// Source PDC identifier.
    pub spdcid: u16,
    /// Destination PDC identifier (or the SYN word).
    pub dpdcid: u16,
    /// Control payload, meaning per ctl_type (clear PSN, credit, SACK base, ...).
    pub payload: u32,
}

impl CpRepr {
    /// Parses a CP header.
    pub fn parse(buf: &[u8]) -> Result<CpRepr> {
        let p = Prologue::parse(buf)?;
        if PdsType::from(p.pds_type) != PdsType::Cp {
            return Err(Error::Inconsistent("not a CP type"));
        }
        need(buf.len(), CP_LEN, "PDS CP header")?;
        Ok(CpRepr {
            ctl_type: CtlType::from(p.next),
            flags: p.flags,
            probe_opaque: read_u16(buf, 2),
            psn: read_u32(buf, 4),
            spdcid: read_u16(buf, 8),
            dpdcid: read_u16(buf, 10),
            payload: read_u32(buf, 12),
        })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, CP_LEN)?;
        Prologue { pds_type: PdsType::Cp.into(), next: self.ctl_type.into(), flags: self.flags }.emit(b)?;
        write_u16(b, 2, self.probe_opaque);
        write_u32(b, 4, self.psn);
        write_u16(b, 8, self.spdcid);
        write_u16(b, 10, self.dpdcid);
        write_u32(b, 12, self.payload);
        Ok(CP_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vector_read_with_the_16_byte_layout() {
        // xdp2_uet_pds.pcap frame 15 writes a 12-byte CP (CREDIT_REQ, ISROD|RETX); the next four
        // bytes become the payload word of the chosen 16-byte layout.
        let b = hex("5c309876cdef0123cdeffedcc1091234");
        let r = CpRepr::parse(&b).unwrap();
        assert_eq!((r.ctl_type, r.flags), (CtlType::CreditReq, FLAG_ISROD | FLAG_RETX));
        assert_eq!((r.probe_opaque, r.psn, r.payload), (0x9876, 0xcdef_0123, 0xc109_1234));
        let mut o = [0u8; 16];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        assert_eq!(CpRepr::parse(&b[..12]), Err(Error::Truncated("PDS CP header")));
        // Frame 16: NEGOTIATION (type 9, which WS lacks) with SYN.
        let r = CpRepr::parse(&hex("5c941234cdef0123cdef8876c1091234")).unwrap();
        assert_eq!(r.ctl_type, CtlType::Negotiation);
        assert_eq!(u8::from(r.ctl_type), crate::uet::layout::CP_NEGOTIATION);
    }

    pub(crate) fn arb() -> impl Strategy<Value = CpRepr> {
        (0u8..16, 0u8..0x80, any::<u16>(), any::<u32>(), any::<(u16, u16)>(), any::<u32>()).prop_map(
            |(ctl, flags, probe_opaque, psn, (spdcid, dpdcid), payload)| CpRepr {
                ctl_type: CtlType::from(ctl),
                flags,
                probe_opaque,
                psn,
                spdcid,
                dpdcid,
                payload,
            },
        )
    }
}
