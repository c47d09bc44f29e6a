//! ACK extended transport header, 4 bytes: syndrome and 24-bit MSN (roce-wire.md §1.5, §3).

use crate::bytes::{out, read_u24, write_u24};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// Size of the AETH.
pub const HEADER_LEN: usize = 4;
/// Credit code meaning "no credit information" (what rxe always sends).
pub const CREDITS_INVALID: u8 = 0x1F;

fixed_header_view!(
    /// A view of an AETH.
    Packet,
    HEADER_LEN,
    "AETH"
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// The syndrome byte.
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), 1)
    }
}

/// NAK codes (syndrome 0x60 | code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error (0x60).
    PsnSequenceError,
    /// Invalid request (0x61).
    InvalidRequest,
    /// Remote access error (0x62).
    RemoteAccessError,
    /// Remote operational error (0x63).
    RemoteOperationalError,
    /// Invalid RD request (0x64).
    InvalidRdRequest,
    /// A reserved code, kept.
    Unknown(u8),
}

impl From<u8> for NakCode {
    fn from(v: u8) -> Self {
        match v {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            v => NakCode::Unknown(v),
        }
    }
}

impl From<NakCode> for u8 {
    fn from(c: NakCode) -> u8 {
        match c {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Unknown(v) => v & 0x1F,
        }
    }
}

/// What a syndrome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethKind {
    /// ACK with a credit code (0..=30, or 31 for none).
    Ack {
        /// Credit code (see [`credit_count`]).
        credits: u8,
    },
    /// RNR NAK with a min_rnr_timer code (see [`rnr_timer_us`]).
    RnrNak {
        /// Timer code.
        timer: u8,
    },
    /// NAK.
    Nak(NakCode),
    /// Reserved syndrome types (010, 1xx).
    Reserved(u8),
}

/// A parsed AETH. The syndrome byte is kept raw; [`AethRepr::kind`] interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// The syndrome byte.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// An ACK with a credit code.
    pub const fn ack(credits: u8, msn: u32) -> AethRepr {
        AethRepr { syndrome: credits & 0x1F, msn }
    }

    /// An RNR NAK with a min_rnr_timer code.
    pub const fn rnr_nak(timer: u8, msn: u32) -> AethRepr {
        AethRepr { syndrome: 0x20 | (timer & 0x1F), msn }
    }

    /// A NAK.
    pub fn nak(code: NakCode, msn: u32) -> AethRepr {
        AethRepr { syndrome: 0x60 | u8::from(code), msn }
    }

    /// Interprets the syndrome.
    pub fn kind(&self) -> AethKind {
        let low = self.syndrome & 0x1F;
        match self.syndrome >> 5 {
            0 => AethKind::Ack { credits: low },
            1 => AethKind::RnrNak { timer: low },
            3 => AethKind::Nak(NakCode::from(low)),
            _ => AethKind::Reserved(self.syndrome),
        }
    }
}

impl FixedHeader for AethRepr {
    const LEN: usize = HEADER_LEN;

    fn parse(buf: &[u8]) -> Result<Self> {
        let p = Packet::new_checked(buf)?;
        Ok(AethRepr { syndrome: p.syndrome(), msn: p.msn() })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.msn > 0xFF_FFFF {
            return Err(Error::Inconsistent("AETH MSN is 24-bit"));
        }
        let b = out(buf, HEADER_LEN)?;
        b[0] = self.syndrome;
        write_u24(b, 1, self.msn);
        Ok(HEADER_LEN)
    }
}

/// Number of receive WQEs an ACK credit code stands for (roce-wire.md §3 table); `None` for 31
/// ("no credit information") and codes above it.
pub const fn credit_count(code: u8) -> Option<u32> {
    const TABLE: [u32; 31] = [
        0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
        3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    ];
    if (code as usize) < TABLE.len() { Some(TABLE[code as usize]) } else { None }
}

/// The largest credit code whose count does not exceed `n` (what a responder advertises for `n`
/// free receive WQEs).
pub fn credit_code_for(n: u32) -> u8 {
    let mut code = 0;
    while code < 30 && credit_count(code + 1).is_some_and(|c| c <= n) {
        code += 1;
    }
    code
}

/// The RNR NAK delay of a min_rnr_timer code in microseconds (roce-wire.md §3; code 0 = 655.36 ms).
pub const fn rnr_timer_us(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840, 5120,
        7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760, 327_680,
        491_520,
    ];
    TABLE[(code & 0x1F) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vectors() {
        // rxe ACK: credits 0x1F, MSN 5. Huawei ACK: credit code 6.
        let rxe = AethRepr::parse(&[0x1f, 0, 0, 5]).unwrap();
        assert_eq!(rxe.kind(), AethKind::Ack { credits: CREDITS_INVALID });
        assert_eq!(rxe.msn, 5);
        let hw = AethRepr::parse(&[0x06, 0, 1, 0]).unwrap();
        assert_eq!(hw.kind(), AethKind::Ack { credits: 6 });
        assert_eq!(credit_count(6), Some(8));
        assert_eq!(
            AethRepr::parse(&[0x60, 0, 0, 1]).unwrap().kind(),
            AethKind::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AethRepr::parse(&[0x62, 0, 0, 1]).unwrap().kind(),
            AethKind::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(AethRepr::parse(&[0x2e, 0, 0, 1]).unwrap().kind(), AethKind::RnrNak { timer: 14 });
        assert_eq!(AethRepr::parse(&[0x40, 0, 0, 1]).unwrap().kind(), AethKind::Reserved(0x40));
        assert_eq!(AethRepr::parse(&[0x6f, 0, 0, 1]).unwrap().kind(), AethKind::Nak(NakCode::Unknown(0xf)));
        assert_eq!(AethRepr::parse(&[0x1f, 0, 0]), Err(Error::Truncated("AETH")));
        let mut o = [0u8; 4];
        AethRepr::nak(NakCode::InvalidRequest, 0x123456).emit(&mut o).unwrap();
        assert_eq!(o, [0x61, 0x12, 0x34, 0x56]);
    }

    #[test]
    fn tables() {
        assert_eq!(rnr_timer_us(14), 1280);
        assert_eq!(rnr_timer_us(25), 61_440);
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(credit_count(31), None);
        assert_eq!(credit_count(30), Some(32768));
        assert_eq!(credit_code_for(0), 0);
        assert_eq!(credit_code_for(8), 6);
        assert_eq!(credit_code_for(11), 6);
        assert_eq!(credit_code_for(1_000_000), 30);
    }

    proptest! {
        #[test]
        fn roundtrip(syndrome in any::<u8>(), msn in 0u32..0x100_0000) {
            let r = AethRepr { syndrome, msn };
            let mut b = [0u8; 4];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(AethRepr::parse(&b), Ok(r));
        }

        #[test]
        fn constructors_roundtrip_through_kind(code in 0u8..32, msn in 0u32..0x100_0000) {
            prop_assert_eq!(AethRepr::ack(code, msn).kind(), AethKind::Ack { credits: code });
            prop_assert_eq!(AethRepr::rnr_nak(code, msn).kind(), AethKind::RnrNak { timer: code });
            prop_assert_eq!(AethRepr::nak(NakCode::from(code), msn).kind(), AethKind::Nak(NakCode::from(code)));
        }
    }
}
