//! NACK (16 B) and NACK_CCX (32 B) headers (uet-wire.md §2):
//! `prologue | nack_code:8 | vendor_code:8 | nack_psn:32 (pkt_id if NT) | spdcid:16 | dpdcid:16 | payload:32`,
//! NACK_CCX adding `nccx_type:4` and 124 bits of state ([`crate::uet::layout::CCX_STATE_LEN`] bytes).

use super::common::{NackCode, NextHeader, PdsType, Prologue};
use crate::bytes::{need, out, read_u16, read_u32, write_u16, write_u32};
use crate::header::FixedHeader;
use crate::uet::layout::CCX_STATE_LEN;
use crate::{Error, Result};

/// M: ECN marked.
pub const FLAG_M: u8 = 0x20;
/// RETX.
pub const FLAG_RETX: u8 = 0x10;
/// NT: 0 = the NACK is for RUD/ROD (nack_psn is a PSN), 1 = for RUDI (it is a pkt_id).
pub const FLAG_NT: u8 = 0x08;

/// Length of a NACK.
pub const NACK_LEN: usize = 16;
/// Length of a NACK_CCX.
pub const NACK_CCX_LEN: usize = NACK_LEN + CCX_STATE_LEN;

/// A parsed NACK or NACK_CCX header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NackRepr {
    /// SES header format that follows.
    pub next_hdr: NextHeader,
    /// Flags (M, RETX, NT; 0x47 reserved and kept).
    pub flags: u8,
    /// Why.
    pub nack_code: NackCode,
    /// Vendor-specific code.
    pub vendor_code: u8,
    /// The NACKed PSN (or RUDI pkt_id when NT is set).
    pub nack_psn: u32,
    /// Source PDC identifier (0 for RUDI).
    pub spdcid: u16,
    /// Destination PDC identifier (0 for RUDI).
    pub dpdcid: u16,
    /// Code-specific payload (WS: "Max Recvd PSN + 1").
    pub payload: u32,
    /// NACK_CCX state (`nccx_type` in the top nibble of the first byte).
    pub ccx: Option<[u8; CCX_STATE_LEN]>,
}

impl NackRepr {
    /// NACK or NACK_CCX.
    pub fn pds_type(&self) -> PdsType {
        if self.ccx.is_some() { PdsType::NackCcx } else { PdsType::Nack }
    }

    /// Header length.
    pub const fn buffer_len(&self) -> usize {
        if self.ccx.is_some() { NACK_CCX_LEN } else { NACK_LEN }
    }

    /// True if NT is set (a RUDI NACK).
    pub const fn for_rudi(&self) -> bool {
        self.flags & FLAG_NT != 0
    }

    /// Parses a NACK or NACK_CCX header.
    pub fn parse(buf: &[u8]) -> Result<NackRepr> {
        let p = Prologue::parse(buf)?;
        let ccx = match PdsType::from(p.pds_type) {
            PdsType::Nack => false,
            PdsType::NackCcx => true,
            _ => return Err(Error::Inconsistent("not a NACK type")),
        };
        if ccx {
            need(buf.len(), NACK_CCX_LEN, "PDS NACK_CCX header")?;
        } else {
            need(buf.len(), NACK_LEN, "PDS NACK header")?;
        }
        Ok(NackRepr {
            next_hdr: NextHeader::from(p.next),
            flags: p.flags,
            nack_code: NackCode::from(buf[2]),
            vendor_code: buf[3],
            nack_psn: read_u32(buf, 4),
            spdcid: read_u16(buf, 8),
            dpdcid: read_u16(buf, 10),
            payload: read_u32(buf, 12),
            ccx: ccx.then(|| {
                let mut s = [0u8; CCX_STATE_LEN];
                s.copy_from_slice(&buf[NACK_LEN..NACK_CCX_LEN]);
                s
            }),
        })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = out(buf, len)?;
        Prologue { pds_type: self.pds_type().into(), next: self.next_hdr.into(), flags: self.flags }
            .emit(b)?;
        b[2] = self.nack_code.into();
        b[3] = self.vendor_code;
        write_u32(b, 4, self.nack_psn);
        write_u16(b, 8, self.spdcid);
        write_u16(b, 10, self.dpdcid);
        write_u32(b, 12, self.payload);
        if let Some(s) = &self.ccx {
            b[NACK_LEN..].copy_from_slice(s);
        }
        Ok(len)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vectors() {
        // xdp2_uet_pds.pcap frame 13: NACK, RSP follows, M|RETX|NT, code 0x16 PDC_MODE_MISMATCH.
        let b = hex("52381687998877663456789a56789abc");
        let r = NackRepr::parse(&b).unwrap();
        assert_eq!(r.nack_code, NackCode::PdcModeMismatch);
        assert!(r.for_rudi());
        assert_eq!((r.vendor_code, r.nack_psn, r.payload), (0x87, 0x9988_7766, 0x5678_9abc));
        let mut o = [0u8; 16];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        // Frame 14 writes an 8-byte CCX state; the chosen layout has 16.
        let short = hex("62101587998877663456789a56789abc3fdcba9876543210");
        assert_eq!(NackRepr::parse(&short), Err(Error::Truncated("PDS NACK_CCX header")));
        let mut long = short.clone();
        long.extend_from_slice(&[0; 8]);
        let r = NackRepr::parse(&long).unwrap();
        assert_eq!(r.ccx.unwrap()[0] >> 4, 3);
        assert_eq!(r.nack_code, NackCode::InvalidSyn);
    }

    pub(crate) fn arb() -> impl Strategy<Value = NackRepr> {
        (
            0u8..16,
            0u8..0x80,
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<(u16, u16)>(),
            any::<u32>(),
            proptest::option::of(any::<[u8; CCX_STATE_LEN]>()),
        )
            .prop_map(|(nh, flags, code, vendor_code, nack_psn, (spdcid, dpdcid), payload, ccx)| {
                NackRepr {
                    next_hdr: NextHeader::from(nh),
                    flags,
                    nack_code: NackCode::from(code),
                    vendor_code,
                    nack_psn,
                    spdcid,
                    dpdcid,
                    payload,
                    ccx,
                }
            })
    }
}
