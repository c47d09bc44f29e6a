//! RUD/ROD request header, 12 bytes, and the CC variants RUD_CC/ROD_CC, 16 bytes (uet-wire.md §2):
//! `prologue | clear_psn_offset:s16 | psn:32 | spdcid:16 | dpdcid:16` (+ `ccc_id:8 | credit_target:24`).
//! With SYN set, the last 16 bits are `use_rsv_pdc:1 | rsvd:3 | psn_offset:12`.

use super::common::{NextHeader, PdsType, Prologue, psn_plus};
use crate::bytes::{need, out, read_u16, read_u32, write_u16, write_u32};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// RETX: this is a retransmission.
pub const FLAG_RETX: u8 = 0x10;
/// AR: the sender asks for an ACK.
pub const FLAG_AR: u8 = 0x08;
/// SYN: the PDC is being established (the initiator has not learned the DPDCID yet).
pub const FLAG_SYN: u8 = 0x04;

/// Delivery mode of the PDC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reliable unordered delivery.
    Rud,
    /// Reliable ordered delivery.
    Rod,
}

/// The congestion-control word of RUD_CC/ROD_CC requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CcRequest {
    /// Congestion control context.
    pub ccc_id: u8,
    /// Requested credit (24 bits; units of 256 bytes, uet-wire.md "Choices").
    pub credit_target: u32,
}

/// A parsed RUD/ROD request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestRepr {
    /// RUD or ROD.
    pub mode: Mode,
    /// SES header format that follows.
    pub next_hdr: NextHeader,
    /// Flags (RETX, AR, SYN; 0x63 reserved and kept).
    pub flags: u8,
    /// CLEAR_PSN relative to `psn`.
    pub clear_psn_offset: i16,
    /// Packet sequence number.
    pub psn: u32,
    /// Source PDC identifier.
    pub spdcid: u16,
    /// Destination PDC identifier, or with SYN the `use_rsv_pdc | rsvd | psn_offset` word (raw).
    pub dpdcid: u16,
    /// Present for RUD_CC/ROD_CC.
    pub cc: Option<CcRequest>,
}

impl RequestRepr {
    /// The packet type this header is sent as.
    pub fn pds_type(&self) -> PdsType {
        match (self.mode, self.cc.is_some()) {
            (Mode::Rud, false) => PdsType::RudReq,
            (Mode::Rod, false) => PdsType::RodReq,
            (Mode::Rud, true) => PdsType::RudCcReq,
            (Mode::Rod, true) => PdsType::RodCcReq,
        }
    }

    /// True if SYN is set.
    pub const fn syn(&self) -> bool {
        self.flags & FLAG_SYN != 0
    }

    /// CLEAR_PSN = psn + sext(clear_psn_offset).
    pub const fn clear_psn(&self) -> u32 {
        psn_plus(self.psn, self.clear_psn_offset)
    }

    /// With SYN: the offset of this PSN from Start_PSN (12 bits).
    pub const fn psn_offset(&self) -> Option<u16> {
        if self.syn() { Some(self.dpdcid & 0x0FFF) } else { None }
    }

    /// With SYN: Start_PSN = psn - psn_offset.
    pub const fn start_psn(&self) -> Option<u32> {
        match self.psn_offset() {
            Some(off) => Some(self.psn.wrapping_sub(off as u32)),
            None => None,
        }
    }

    /// With SYN: the use-reserved-PDC bit.
    pub const fn use_rsv_pdc(&self) -> Option<bool> {
        if self.syn() { Some(self.dpdcid & 0x8000 != 0) } else { None }
    }

    /// The SYN-form word for `psn_offset` (12 bits) and `use_rsv_pdc`.
    pub const fn syn_word(use_rsv_pdc: bool, psn_offset: u16) -> u16 {
        ((use_rsv_pdc as u16) << 15) | (psn_offset & 0x0FFF)
    }

    /// 12, or 16 with CC.
    pub const fn buffer_len(&self) -> usize {
        if self.cc.is_some() { 16 } else { 12 }
    }

    /// Parses a request header (types 2, 3, 13, 14). Inlined into the PDS's receive path, where a
    /// repr returned through memory was read back while its stores drained.
    #[inline(always)]
    pub fn parse(buf: &[u8]) -> Result<RequestRepr> {
        let p = Prologue::parse(buf)?;
        let (mode, has_cc) = match PdsType::from(p.pds_type) {
            PdsType::RudReq => (Mode::Rud, false),
            PdsType::RodReq => (Mode::Rod, false),
            PdsType::RudCcReq => (Mode::Rud, true),
            PdsType::RodCcReq => (Mode::Rod, true),
            _ => return Err(Error::Inconsistent("not a RUD/ROD request type")),
        };
        let len = if has_cc { 16 } else { 12 };
        need(buf.len(), len, if has_cc { "PDS CC request header" } else { "PDS request header" })?;
        let cc = has_cc.then(|| {
            let w = read_u32(buf, 12);
            CcRequest { ccc_id: (w >> 24) as u8, credit_target: w & 0xFF_FFFF }
        });
        Ok(RequestRepr {
            mode,
            next_hdr: NextHeader::from(p.next),
            flags: p.flags,
            clear_psn_offset: read_u16(buf, 2) as i16,
            psn: read_u32(buf, 4),
            spdcid: read_u16(buf, 8),
            dpdcid: read_u16(buf, 10),
            cc,
        })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = out(buf, len)?;
        let p = Prologue { pds_type: self.pds_type().into(), next: self.next_hdr.into(), flags: self.flags };
        p.emit(b)?;
        write_u16(b, 2, self.clear_psn_offset as u16);
        write_u32(b, 4, self.psn);
        write_u16(b, 8, self.spdcid);
        write_u16(b, 10, self.dpdcid);
        if let Some(cc) = self.cc {
            if cc.credit_target > 0xFF_FFFF {
                return Err(Error::Inconsistent("credit_target is 24-bit"));
            }
            write_u32(b, 12, (u32::from(cc.ccc_id) << 24) | cc.credit_target);
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
        // xdp2_uet_pds.pcap frame 1: RUD, REQ_STD, RETX.
        let b = hex("119012349876543234569abc");
        let r = RequestRepr::parse(&b).unwrap();
        assert_eq!(r.pds_type(), PdsType::RudReq);
        assert_eq!((r.next_hdr, r.flags), (NextHeader::ReqStd, FLAG_RETX));
        assert_eq!((r.clear_psn_offset, r.psn, r.spdcid, r.dpdcid), (0x1234, 0x9876_5432, 0x3456, 0x9abc));
        assert_eq!(r.clear_psn(), 0x9876_5432 + 0x1234);
        assert_eq!(r.start_psn(), None);
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        // Frame 2: SYN form, use_rsv_pdc 1, psn_offset 0x876.
        let r = RequestRepr::parse(&hex("119412349876543234568876")).unwrap();
        assert_eq!((r.use_rsv_pdc(), r.psn_offset()), (Some(true), Some(0x876)));
        assert_eq!(r.start_psn(), Some(0x9876_5432 - 0x876));
        // Frames 5 (ROD) and 3 (RUD_CC).
        let r = RequestRepr::parse(&hex("199012349876543234569abc")).unwrap();
        assert_eq!((r.pds_type(), r.cc), (PdsType::RodReq, None));
        let r = RequestRepr::parse(&hex("699012349876543234569abc77887766")).unwrap();
        assert_eq!(r.pds_type(), PdsType::RudCcReq);
        // Frame 7: ROD_CC with ccc_id 0x77, credit_target 0x887766.
        let b = hex("719012349876543234569abc77887766");
        let r = RequestRepr::parse(&b).unwrap();
        assert_eq!(r.pds_type(), PdsType::RodCcReq);
        assert_eq!(r.cc, Some(CcRequest { ccc_id: 0x77, credit_target: 0x88_7766 }));
        let mut o = [0u8; 16];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    #[test]
    fn derived_psns_with_negative_offsets() {
        let mut r = RequestRepr::parse(&hex("119012349876543234569abc")).unwrap();
        r.clear_psn_offset = -5;
        r.psn = 2;
        assert_eq!(r.clear_psn(), u32::MAX - 2);
        r.flags |= FLAG_SYN;
        r.dpdcid = RequestRepr::syn_word(false, 7);
        assert_eq!(r.start_psn(), Some(u32::MAX - 4));
    }

    #[test]
    fn truncated() {
        let b = hex("719012349876543234569abc77887766");
        for n in 0..16 {
            assert!(matches!(RequestRepr::parse(&b[..n]), Err(Error::Truncated(_))), "{n}");
        }
    }

    pub(crate) fn arb() -> impl Strategy<Value = RequestRepr> {
        let cc = proptest::option::of((any::<u8>(), 0u32..0x100_0000))
            .prop_map(|o| o.map(|(ccc_id, credit_target)| CcRequest { ccc_id, credit_target }));
        (any::<bool>(), 0u8..16, 0u8..0x80, any::<i16>(), any::<u32>(), any::<u16>(), any::<u16>(), cc)
            .prop_map(|(rod, nh, flags, clear_psn_offset, psn, spdcid, dpdcid, cc)| RequestRepr {
                mode: if rod { Mode::Rod } else { Mode::Rud },
                next_hdr: NextHeader::from(nh),
                flags,
                clear_psn_offset,
                psn,
                spdcid,
                dpdcid,
                cc,
            })
    }
}
