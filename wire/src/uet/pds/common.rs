//! What every PDS header shares: the prologue, the spec's value tables (packet types, next_hdr,
//! control types, NACK codes) and 32-bit PSN arithmetic.

use crate::bytes::{need, out, read_u16, write_u16};
use crate::header::FixedHeader;
use crate::{Error, Result};

wire_enum! {
    /// PDS packet types (the prologue's top 5 bits; SUET cites spec Table 3-32).
    pub enum PdsType {
        Tss = 1 => "TSS",
        RudReq = 2 => "RUD_REQ",
        RodReq = 3 => "ROD_REQ",
        RudiReq = 4 => "RUDI_REQ",
        RudiResp = 5 => "RUDI_RESP",
        UudReq = 6 => "UUD_REQ",
        Ack = 7 => "ACK",
        AckCc = 8 => "ACK_CC",
        AckCcx = 9 => "ACK_CCX",
        Nack = 10 => "NACK",
        Cp = 11 => "CP",
        NackCcx = 12 => "NACK_CCX",
        RudCcReq = 13 => "RUD_CC_REQ",
        RodCcReq = 14 => "ROD_CC_REQ",
    }
}

wire_enum! {
    /// The SES header format that follows (the prologue's next_hdr; spec Table 3-16).
    pub enum NextHeader {
        None = 0 => "NONE",
        ReqSmall = 1 => "REQ_SMALL",
        ReqMedium = 2 => "REQ_MEDIUM",
        ReqStd = 3 => "REQ_STD",
        Rsp = 4 => "RSP",
        RspData = 5 => "RSP_DATA",
        RspDataSmall = 6 => "RSP_DATA_SMALL",
    }
}

wire_enum! {
    /// Control packet types (in the next_hdr bits of a CP).
    pub enum CtlType {
        Noop = 0 => "NOOP",
        AckReq = 1 => "ACK_REQ",
        ClearCmd = 2 => "CLEAR_CMD",
        ClearReq = 3 => "CLEAR_REQ",
        CloseCmd = 4 => "CLOSE_CMD",
        CloseReq = 5 => "CLOSE_REQ",
        Probe = 6 => "PROBE",
        Credit = 7 => "CREDIT",
        CreditReq = 8 => "CREDIT_REQ",
        Negotiation = 9 => "NEGOTIATION",
    }
}

wire_enum! {
    /// NACK codes (SUET cites spec Table 3-58).
    pub enum NackCode {
        Trimmed = 0x01 => "TRIMMED",
        TrimmedLastHop = 0x02 => "TRIMMED_LASTHOP",
        TrimmedAck = 0x03 => "TRIMMED_ACK",
        NoPdcAvail = 0x04 => "NO_PDC_AVAIL",
        NoCccAvail = 0x05 => "NO_CCC_AVAIL",
        NoBitmap = 0x06 => "NO_BITMAP",
        NoPktBuffer = 0x07 => "NO_PKT_BUFFER",
        NoGtdDelAvail = 0x08 => "NO_GTD_DEL_AVAIL",
        NoSesMsgAvail = 0x09 => "NO_SES_MSG_AVAIL",
        NoResource = 0x0A => "NO_RESOURCE",
        PsnOorWindow = 0x0B => "PSN_OOR_WINDOW",
        RodOoo = 0x0D => "ROD_OOO",
        InvDpdcid = 0x0E => "INV_DPDCID",
        PdcHdrMismatch = 0x0F => "PDC_HDR_MISMATCH",
        Closing = 0x10 => "CLOSING",
        ClosingInErr = 0x11 => "CLOSING_IN_ERR",
        PktNotRcvd = 0x12 => "PKT_NOT_RCVD",
        GtdRespUnavail = 0x13 => "GTD_RESP_UNAVAIL",
        AckWithData = 0x14 => "ACK_WITH_DATA",
        InvalidSyn = 0x15 => "INVALID_SYN",
        PdcModeMismatch = 0x16 => "PDC_MODE_MISMATCH",
        NewStartPsn = 0x17 => "NEW_START_PSN",
        RcvdSesProcg = 0x18 => "RCVD_SES_PROCG",
        UnexpEvent = 0x19 => "UNEXP_EVENT",
        RcvrInferLoss = 0x1A => "RCVR_INFER_LOSS",
        ExpNormal = 0xFD => "EXP_NORMAL",
        ExpError = 0xFE => "EXP_ERROR",
        ExpFatal = 0xFF => "EXP_FATAL",
    }
}

/// The 16-bit prologue: `type:5 | next_hdr or ctl_type:4 | flags:7`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prologue {
    /// Packet type (5 bits).
    pub pds_type: u8,
    /// next_hdr, or ctl_type for a CP (4 bits).
    pub next: u8,
    /// Flags (7 bits), meaning per type.
    pub flags: u8,
}

impl FixedHeader for Prologue {
    const LEN: usize = 2;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 2, "PDS prologue")?;
        let w = read_u16(buf, 0);
        Ok(Prologue { pds_type: (w >> 11) as u8, next: ((w >> 7) & 0xF) as u8, flags: (w & 0x7F) as u8 })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.pds_type > 0x1F || self.next > 0xF || self.flags > 0x7F {
            return Err(Error::Inconsistent("PDS prologue field out of range"));
        }
        let w = (u16::from(self.pds_type) << 11) | (u16::from(self.next) << 7) | u16::from(self.flags);
        write_u16(out(buf, 2)?, 0, w);
        Ok(2)
    }
}

/// Reads the prologue of `buf`, then checks the buffer holds `len` bytes of the named header.
pub(super) fn prologue(buf: &[u8], len: usize, what: &'static str) -> Result<Prologue> {
    let p = Prologue::parse(buf)?;
    need(buf.len(), len, what)?;
    Ok(p)
}

/// `base + sign_extend(offset)` in 32-bit PSN arithmetic (CLEAR_PSN, ACK_PSN, SACK base).
pub const fn psn_plus(base: u32, offset: i16) -> u32 {
    base.wrapping_add(offset as i32 as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prologue_fields() {
        // xdp2_uet_pds.pcap frame 9: ACK, next_hdr RSP, flags M|RETX|REQ=1.
        let p = Prologue::parse(&[0x3a, 0x32]).unwrap();
        assert_eq!(p, Prologue { pds_type: 7, next: 4, flags: 0x32 });
        let mut b = [0u8; 2];
        p.emit(&mut b).unwrap();
        assert_eq!(b, [0x3a, 0x32]);
        assert_eq!(Prologue::parse(&[0x3a]), Err(Error::Truncated("PDS prologue")));
    }

    #[test]
    fn enums_keep_unknown_values() {
        assert_eq!(NackCode::from(0x0C), NackCode::Unknown(0x0C));
        assert_eq!(u8::from(NackCode::from(0x0C)), 0x0C);
        assert_eq!(NackCode::from(0x0B).name(), "PSN_OOR_WINDOW");
        assert_eq!(CtlType::from(9), CtlType::Negotiation);
        assert_eq!(NextHeader::from(7), NextHeader::Unknown(7));
        assert_eq!(PdsType::from(13).name(), "RUD_CC_REQ");
    }

    #[test]
    fn psn_plus_negative() {
        assert_eq!(psn_plus(10, -3), 7);
        assert_eq!(psn_plus(1, -2), u32::MAX);
        assert_eq!(psn_plus(u32::MAX, 2), 1);
    }
}
