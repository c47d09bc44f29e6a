//! Packet Delivery Sublayer headers (uet-wire.md §2). Every PDS header starts with the 16-bit
//! prologue `type:5 | next_hdr (or ctl_type):4 | flags:7`; the type says which layout follows.

pub mod ack;
mod common;
pub mod cp;
pub mod nack;
pub mod request;
pub mod rudi;
pub mod uud;

pub use ack::{AckCc, AckCcInfo, AckRepr, CreditState, NsccState};
pub use common::{CtlType, NackCode, NextHeader, PdsType, Prologue, psn_plus};
pub use cp::CpRepr;
pub use nack::NackRepr;
pub use request::{CcRequest, Mode, RequestRepr};
pub use rudi::RudiRepr;
pub use uud::UudRepr;

use crate::header::FixedHeader;
use crate::{Error, Result};

/// A parsed PDS header of any type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdsRepr {
    /// RUD/ROD request, with or without CC (types 2, 3, 13, 14).
    Request(RequestRepr),
    /// RUDI request or response (types 4, 5).
    Rudi(RudiRepr),
    /// UUD request (type 6).
    Uud(UudRepr),
    /// ACK, ACK_CC, ACK_CCX (types 7, 8, 9).
    Ack(AckRepr),
    /// NACK, NACK_CCX (types 10, 12).
    Nack(NackRepr),
    /// Control packet (type 11).
    Cp(CpRepr),
}

impl PdsRepr {
    /// Parses the PDS header at the start of `buf` (the TSS type 1 and reserved types are errors).
    pub fn parse(buf: &[u8]) -> Result<PdsRepr> {
        let p = Prologue::parse(buf)?;
        Ok(match PdsType::from(p.pds_type) {
            PdsType::RudReq | PdsType::RodReq | PdsType::RudCcReq | PdsType::RodCcReq => {
                PdsRepr::Request(RequestRepr::parse(buf)?)
            }
            PdsType::RudiReq | PdsType::RudiResp => PdsRepr::Rudi(RudiRepr::parse(buf)?),
            PdsType::UudReq => PdsRepr::Uud(UudRepr::parse(buf)?),
            PdsType::Ack | PdsType::AckCc | PdsType::AckCcx => PdsRepr::Ack(AckRepr::parse(buf)?),
            PdsType::Nack | PdsType::NackCcx => PdsRepr::Nack(NackRepr::parse(buf)?),
            PdsType::Cp => PdsRepr::Cp(CpRepr::parse(buf)?),
            PdsType::Tss => return Err(Error::Unsupported("TSS header where a PDS header belongs")),
            PdsType::Unknown(_) => return Err(Error::Unsupported("reserved PDS type")),
        })
    }

    /// The packet type.
    pub fn pds_type(&self) -> PdsType {
        match self {
            PdsRepr::Request(r) => r.pds_type(),
            PdsRepr::Rudi(r) => r.pds_type(),
            PdsRepr::Uud(_) => PdsType::UudReq,
            PdsRepr::Ack(r) => r.pds_type(),
            PdsRepr::Nack(r) => r.pds_type(),
            PdsRepr::Cp(_) => PdsType::Cp,
        }
    }

    /// The SES header format that follows; `None` for a CP (its next_hdr bits are the ctl_type).
    pub fn next_header(&self) -> Option<NextHeader> {
        match self {
            PdsRepr::Request(r) => Some(r.next_hdr),
            PdsRepr::Rudi(r) => Some(r.next_hdr),
            PdsRepr::Uud(r) => Some(r.next_hdr),
            PdsRepr::Ack(r) => Some(r.next_hdr),
            PdsRepr::Nack(r) => Some(r.next_hdr),
            PdsRepr::Cp(_) => None,
        }
    }

    /// The 7 flag bits of the prologue.
    pub fn flags(&self) -> u8 {
        match self {
            PdsRepr::Request(r) => r.flags,
            PdsRepr::Rudi(r) => r.flags,
            PdsRepr::Uud(r) => r.flags,
            PdsRepr::Ack(r) => r.flags,
            PdsRepr::Nack(r) => r.flags,
            PdsRepr::Cp(r) => r.flags,
        }
    }

    /// Header length.
    pub fn buffer_len(&self) -> usize {
        match self {
            PdsRepr::Request(r) => r.buffer_len(),
            PdsRepr::Rudi(_) => crate::uet::layout::RUDI_LEN,
            PdsRepr::Uud(_) => uud::LEN,
            PdsRepr::Ack(r) => r.buffer_len(),
            PdsRepr::Nack(r) => r.buffer_len(),
            PdsRepr::Cp(_) => crate::uet::layout::CP_LEN,
        }
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            PdsRepr::Request(r) => r.emit(buf),
            PdsRepr::Rudi(r) => r.emit(buf),
            PdsRepr::Uud(r) => r.emit(buf),
            PdsRepr::Ack(r) => r.emit(buf),
            PdsRepr::Nack(r) => r.emit(buf),
            PdsRepr::Cp(r) => r.emit(buf),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reserved_types_are_rejected() {
        for t in [0u8, 1, 15, 31] {
            let mut b = [0u8; 40];
            b[0] = t << 3;
            assert!(matches!(PdsRepr::parse(&b), Err(Error::Unsupported(_))), "{t}");
        }
    }

    pub(crate) fn arb_pds() -> impl Strategy<Value = PdsRepr> {
        prop_oneof![
            request::tests::arb().prop_map(PdsRepr::Request),
            rudi::tests::arb().prop_map(PdsRepr::Rudi),
            uud::tests::arb().prop_map(PdsRepr::Uud),
            ack::tests::arb().prop_map(PdsRepr::Ack),
            nack::tests::arb().prop_map(PdsRepr::Nack),
            cp::tests::arb().prop_map(PdsRepr::Cp),
        ]
    }

    proptest! {
        #[test]
        fn roundtrip_any_type(r in arb_pds()) {
            let mut b = [0u8; 64];
            let n = r.emit(&mut b).unwrap();
            prop_assert_eq!(n, r.buffer_len());
            prop_assert_eq!(PdsRepr::parse(&b[..n]), Ok(r));
            for short in 0..n {
                prop_assert!(matches!(PdsRepr::parse(&b[..short]), Err(Error::Truncated(_))));
            }
        }
    }
}
