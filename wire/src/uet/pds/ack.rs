//! ACK (12 B), ACK_CC (32 B) and ACK_CCX (40 B) headers (uet-wire.md §2):
//! `prologue | ack_psn_offset:s16 | cack_psn:32 | spdcid:16 | dpdcid:16`, then for CC
//! `cc_type:4 | cc_flags:4 | mpr:8 | sack_psn_offset:s16 | sack_bitmap:64 | cc state (8 B, or 16 B for CCX)`.

use super::common::{NextHeader, PdsType, Prologue, psn_plus};
use crate::bytes::{need, out, read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};
use crate::header::FixedHeader;
use crate::uet::layout::CCX_STATE_LEN;
use crate::{Error, Result};

/// M: the acknowledged packet was ECN-marked.
pub const FLAG_M: u8 = 0x20;
/// RETX.
pub const FLAG_RETX: u8 = 0x10;
/// P: probe response (`ack_psn_offset` then carries `probe_opaque`).
pub const FLAG_P: u8 = 0x08;
/// REQ field mask (2 bits): 0 none, 1 clear request, 2 close request (uet-wire.md "Choices").
pub const FLAG_REQ_MASK: u8 = 0x06;
/// REQ = clear request: the sender is asked to advance CLEAR_PSN.
pub const REQ_CLEAR: u8 = 0x02;
/// REQ = close request: the receiver asks to close the PDC.
pub const REQ_CLOSE: u8 = 0x04;

/// Length of a plain ACK.
pub const ACK_LEN: usize = 12;
/// Length of an ACK_CC.
pub const ACK_CC_LEN: usize = 32;
/// Length of an ACK_CCX.
pub const ACK_CCX_LEN: usize = 24 + CCX_STATE_LEN;

/// The congestion fields shared by ACK_CC and ACK_CCX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckCcInfo {
    /// CC type (4 bits): 0 = NSCC, 1 = credit (RCCC).
    pub cc_type: u8,
    /// CC flags (4 bits).
    pub cc_flags: u8,
    /// Max PSN range: the receiver's window in packets, saturating at 255.
    pub mpr: u8,
    /// SACK base relative to `cack_psn`.
    pub sack_psn_offset: i16,
    /// Bit i (LSB = 0) set: PSN base + i was received.
    pub sack_bitmap: u64,
}

/// What follows the 12 ACK bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckCc {
    /// Plain ACK.
    None,
    /// ACK_CC with its 8-byte state.
    Cc(AckCcInfo, [u8; 8]),
    /// ACK_CCX with its extended state.
    Ccx(AckCcInfo, [u8; CCX_STATE_LEN]),
}

/// NSCC state of an ACK_CC with cc_type 0 (REF layout; units per uet-wire.md "Choices").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NsccState {
    /// Receiver service time, microseconds.
    pub service_time: u16,
    /// Restore-cwnd bit.
    pub restore_cwnd: bool,
    /// Pending receive cwnd (7 bits).
    pub rcv_cwnd_pend: u8,
    /// Bytes received, in 256-byte units (24 bits).
    pub rcvd_bytes: u32,
    /// Out-of-order packet count.
    pub ooo_count: u16,
}

impl NsccState {
    /// Decodes the 8-byte state.
    pub fn from_bytes(s: &[u8; 8]) -> NsccState {
        let v = u64::from_be_bytes(*s);
        NsccState {
            service_time: (v >> 48) as u16,
            restore_cwnd: (v >> 47) & 1 != 0,
            rcv_cwnd_pend: ((v >> 40) & 0x7F) as u8,
            rcvd_bytes: ((v >> 16) & 0xFF_FFFF) as u32,
            ooo_count: v as u16,
        }
    }

    /// Encodes the 8-byte state (fields wider than their bit widths are masked).
    pub fn to_bytes(&self) -> [u8; 8] {
        let v = (u64::from(self.service_time) << 48)
            | (u64::from(self.restore_cwnd) << 47)
            | (u64::from(self.rcv_cwnd_pend & 0x7F) << 40)
            | (u64::from(self.rcvd_bytes & 0xFF_FFFF) << 16)
            | u64::from(self.ooo_count);
        v.to_be_bytes()
    }
}

/// Credit (RCCC) state of an ACK_CC with cc_type 1: `credit:24 | reserved:24 | ooo_count:16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditState {
    /// Granted credit in 256-byte units (24 bits).
    pub credit: u32,
    /// Out-of-order packet count.
    pub ooo_count: u16,
}

impl CreditState {
    /// Decodes the 8-byte state (the reserved 24 bits are ignored).
    pub fn from_bytes(s: &[u8; 8]) -> CreditState {
        let v = u64::from_be_bytes(*s);
        CreditState { credit: (v >> 40) as u32, ooo_count: v as u16 }
    }

    /// Encodes the 8-byte state with zero reserved bits.
    pub fn to_bytes(&self) -> [u8; 8] {
        ((u64::from(self.credit & 0xFF_FFFF) << 40) | u64::from(self.ooo_count)).to_be_bytes()
    }
}

/// A parsed ACK, ACK_CC or ACK_CCX header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    /// SES header format that follows (a response, when the ACK carries one).
    pub next_hdr: NextHeader,
    /// Flags (M, RETX, P, REQ; 0x40 and 0x01 reserved and kept).
    pub flags: u8,
    /// ACK_PSN relative to `cack_psn` (or `probe_opaque` when P is set).
    pub ack_psn_offset: i16,
    /// Cumulative ACK PSN: every PSN up to it was received.
    pub cack_psn: u32,
    /// Source PDC identifier (the ACK sender's).
    pub spdcid: u16,
    /// Destination PDC identifier.
    pub dpdcid: u16,
    /// Congestion-control part.
    pub cc: AckCc,
}

impl AckRepr {
    /// ACK, ACK_CC or ACK_CCX.
    pub fn pds_type(&self) -> PdsType {
        match self.cc {
            AckCc::None => PdsType::Ack,
            AckCc::Cc(..) => PdsType::AckCc,
            AckCc::Ccx(..) => PdsType::AckCcx,
        }
    }

    /// Header length.
    pub const fn buffer_len(&self) -> usize {
        match self.cc {
            AckCc::None => ACK_LEN,
            AckCc::Cc(..) => ACK_CC_LEN,
            AckCc::Ccx(..) => ACK_CCX_LEN,
        }
    }

    /// ACK_PSN = cack_psn + sext(ack_psn_offset).
    pub const fn ack_psn(&self) -> u32 {
        psn_plus(self.cack_psn, self.ack_psn_offset)
    }

    /// The REQ field (0 none, 1 clear, 2 close, 3 reserved).
    pub const fn req(&self) -> u8 {
        (self.flags & FLAG_REQ_MASK) >> 1
    }

    /// The CC fields, for ACK_CC and ACK_CCX.
    pub fn cc_info(&self) -> Option<&AckCcInfo> {
        match &self.cc {
            AckCc::None => None,
            AckCc::Cc(i, _) | AckCc::Ccx(i, _) => Some(i),
        }
    }

    /// SACK base PSN = cack_psn + sext(sack_psn_offset).
    pub fn sack_base_psn(&self) -> Option<u32> {
        self.cc_info().map(|i| psn_plus(self.cack_psn, i.sack_psn_offset))
    }

    /// Whether the SACK bitmap says `psn` was received (`None` outside the bitmap or without one).
    pub fn sack_received(&self, psn: u32) -> Option<bool> {
        let info = self.cc_info()?;
        let i = psn.wrapping_sub(psn_plus(self.cack_psn, info.sack_psn_offset));
        (i < 64).then(|| info.sack_bitmap & (1 << i) != 0)
    }

    /// Parses an ACK, ACK_CC or ACK_CCX header.
    pub fn parse(buf: &[u8]) -> Result<AckRepr> {
        let p = Prologue::parse(buf)?;
        let (len, what) = match PdsType::from(p.pds_type) {
            PdsType::Ack => (ACK_LEN, "PDS ACK header"),
            PdsType::AckCc => (ACK_CC_LEN, "PDS ACK_CC header"),
            PdsType::AckCcx => (ACK_CCX_LEN, "PDS ACK_CCX header"),
            _ => return Err(Error::Inconsistent("not an ACK type")),
        };
        need(buf.len(), len, what)?;
        let info = || AckCcInfo {
            cc_type: buf[12] >> 4,
            cc_flags: buf[12] & 0x0F,
            mpr: buf[13],
            sack_psn_offset: read_u16(buf, 14) as i16,
            sack_bitmap: read_u64(buf, 16),
        };
        let cc = match len {
            ACK_CC_LEN => {
                let mut s = [0u8; 8];
                s.copy_from_slice(&buf[24..32]);
                AckCc::Cc(info(), s)
            }
            ACK_CCX_LEN => {
                let mut s = [0u8; CCX_STATE_LEN];
                s.copy_from_slice(&buf[24..ACK_CCX_LEN]);
                AckCc::Ccx(info(), s)
            }
            _ => AckCc::None,
        };
        Ok(AckRepr {
            next_hdr: NextHeader::from(p.next),
            flags: p.flags,
            ack_psn_offset: read_u16(buf, 2) as i16,
            cack_psn: read_u32(buf, 4),
            spdcid: read_u16(buf, 8),
            dpdcid: read_u16(buf, 10),
            cc,
        })
    }

    /// Writes the header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = out(buf, len)?;
        Prologue { pds_type: self.pds_type().into(), next: self.next_hdr.into(), flags: self.flags }
            .emit(b)?;
        write_u16(b, 2, self.ack_psn_offset as u16);
        write_u32(b, 4, self.cack_psn);
        write_u16(b, 8, self.spdcid);
        write_u16(b, 10, self.dpdcid);
        let state: &[u8] = match &self.cc {
            AckCc::None => return Ok(len),
            AckCc::Cc(_, s) => s,
            AckCc::Ccx(_, s) => s,
        };
        if let Some(i) = self.cc_info() {
            if i.cc_type > 0xF || i.cc_flags > 0xF {
                return Err(Error::Inconsistent("ACK cc_type and cc_flags are 4-bit"));
            }
            b[12] = (i.cc_type << 4) | i.cc_flags;
            b[13] = i.mpr;
            write_u16(b, 14, i.sack_psn_offset as u16);
            write_u64(b, 16, i.sack_bitmap);
        }
        b[24..len].copy_from_slice(state);
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
        // xdp2_uet_pds.pcap frame 9: ACK, RSP follows, flags M|RETX|REQ=clear.
        let b = hex("3a3286422468ace03456789a");
        let r = AckRepr::parse(&b).unwrap();
        assert_eq!(r.pds_type(), PdsType::Ack);
        assert_eq!((r.next_hdr, r.req()), (NextHeader::Rsp, 1));
        assert_eq!(r.ack_psn(), psn_plus(0x2468_ace0, 0x8642u16 as i16));
        assert_eq!(r.ack_psn(), 0x2468_ace0 - (0x10000 - 0x8642));
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        // Frame 10: ACK_CC, NSCC state.
        let b = hex("423221212468ace03456789a0f876789123456789abcdef099aaff8877668765");
        let r = AckRepr::parse(&b).unwrap();
        let info = *r.cc_info().unwrap();
        assert_eq!((info.cc_type, info.cc_flags, info.mpr, info.sack_psn_offset), (0, 0xf, 0x87, 0x6789));
        let AckCc::Cc(_, state) = r.cc else { panic!("ACK_CC expected") };
        let nscc = NsccState::from_bytes(&state);
        assert_eq!(nscc.service_time, 0x99aa);
        assert!(nscc.restore_cwnd);
        assert_eq!((nscc.rcv_cwnd_pend, nscc.rcvd_bytes, nscc.ooo_count), (0x7f, 0x88_7766, 0x8765));
        assert_eq!(nscc.to_bytes(), state);
        let mut o = [0u8; 32];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        // Frame 11: credit state.
        let r =
            AckRepr::parse(&hex("423298762468ace03456789a1f879988123456789abcdef01234560000008765")).unwrap();
        let AckCc::Cc(_, state) = r.cc else { panic!("ACK_CC expected") };
        assert_eq!(CreditState::from_bytes(&state), CreditState { credit: 0x12_3456, ooo_count: 0x8765 });
    }

    #[test]
    fn ackccx_sample_with_8_byte_state_is_too_short() {
        // xdp2_uet_pds.pcap frame 12 writes an 8-byte CCX state; the chosen layout has 16.
        let b = hex("4a3298762468ace03456789ae0879988123456789abcdef01122334455667788");
        assert_eq!(AckRepr::parse(&b), Err(Error::Truncated("PDS ACK_CCX header")));
    }

    #[test]
    fn ackccx_vector_with_16_byte_state() {
        // Frame 12's header with the chosen 16-byte CCX state.
        let b = hex("4a3298762468ace03456789ae0879988123456789abcdef0112233445566778899aabbccddeeff00");
        let r = AckRepr::parse(&b).unwrap();
        assert_eq!(r.pds_type(), PdsType::AckCcx);
        let AckCc::Ccx(info, state) = r.cc else { panic!("ACK_CCX expected") };
        assert_eq!((info.cc_type, info.mpr, info.sack_psn_offset), (0xe, 0x87, -0x6678));
        assert_eq!((state[0], state[15]), (0x11, 0x00));
        assert_eq!(r.sack_base_psn(), Some(0x2468_ace0 - 0x6678));
        let mut o = [0u8; ACK_CCX_LEN];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    #[test]
    fn sack_bitmap() {
        let info = AckCcInfo { cc_type: 0, cc_flags: 0, mpr: 0, sack_psn_offset: -2, sack_bitmap: 0b101 };
        let r = AckRepr {
            next_hdr: NextHeader::None,
            flags: 0,
            ack_psn_offset: 0,
            cack_psn: 1,
            spdcid: 0,
            dpdcid: 0,
            cc: AckCc::Cc(info, [0; 8]),
        };
        assert_eq!(r.sack_base_psn(), Some(u32::MAX));
        assert_eq!(r.sack_received(u32::MAX), Some(true));
        assert_eq!(r.sack_received(0), Some(false));
        assert_eq!(r.sack_received(1), Some(true));
        assert_eq!(r.sack_received(62), Some(false));
        assert_eq!(r.sack_received(63), None);
        assert_eq!(r.sack_received(100), None);
    }

    pub(crate) fn arb() -> impl Strategy<Value = AckRepr> {
        let info = (0u8..16, 0u8..16, any::<u8>(), any::<i16>(), any::<u64>()).prop_map(
            |(cc_type, cc_flags, mpr, sack_psn_offset, sack_bitmap)| AckCcInfo {
                cc_type,
                cc_flags,
                mpr,
                sack_psn_offset,
                sack_bitmap,
            },
        );
        let cc = prop_oneof![
            Just(AckCc::None),
            (info.clone(), any::<[u8; 8]>()).prop_map(|(i, s)| AckCc::Cc(i, s)),
            (info, any::<[u8; CCX_STATE_LEN]>()).prop_map(|(i, s)| AckCc::Ccx(i, s)),
        ];
        (0u8..16, 0u8..0x80, any::<i16>(), any::<u32>(), any::<u16>(), any::<u16>(), cc).prop_map(
            |(nh, flags, ack_psn_offset, cack_psn, spdcid, dpdcid, cc)| AckRepr {
                next_hdr: NextHeader::from(nh),
                flags,
                ack_psn_offset,
                cack_psn,
                spdcid,
                dpdcid,
                cc,
            },
        )
    }
}
