//! A whole UET packet after UDP (or after the entropy header): either a TSS header with opaque
//! ciphertext and ICV, or a clear PDS header, an optional SES header with its extension, the payload
//! and, when enabled, the CRC32C trailer (uet-wire.md §1).

use crate::bytes::{need, out, read_u32, write_u32};
use crate::uet::layout::{CRC_LEN, crc32c};
use crate::uet::tss::{ICV_LEN, TYPE_TSS};
use crate::uet::{PdsRepr, SesRepr, TssRepr};
use crate::{Error, Result};

/// What the codec must be told about UET traffic, because the wire does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UetConfig {
    /// Clear packets end with a CRC32C trailer (off by default).
    pub crc: bool,
    /// IP protocol number of native-IP UET, if native IP is to be recognised (usually
    /// [`crate::uet::DEFAULT_IP_PROTO`]).
    pub ip_proto: Option<u8>,
}

/// A parsed UET packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UetRepr<'a> {
    /// Without TSS.
    Clear {
        /// PDS header.
        pds: PdsRepr,
        /// SES header, as the PDS next_hdr announces (none for CP or NONE).
        ses: Option<SesRepr>,
        /// Payload.
        payload: &'a [u8],
        /// Whether a CRC32C trailer follows the payload.
        crc: bool,
    },
    /// With TSS: the PDS/SES headers and payload are ciphertext to this codec.
    Secure {
        /// TSS header.
        tss: TssRepr,
        /// Everything between the TSS header and the ICV.
        ciphertext: &'a [u8],
        /// The AES-GCM authentication tag.
        icv: [u8; ICV_LEN],
    },
}

impl<'a> UetRepr<'a> {
    /// Parses a UET packet; the first 5 bits tell TSS (type 1) from a PDS prologue.
    pub fn parse(buf: &'a [u8], config: &UetConfig) -> Result<UetRepr<'a>> {
        need(buf.len(), 1, "UET header")?;
        if buf[0] >> 3 == TYPE_TSS {
            let tss = TssRepr::parse(buf)?;
            let body = &buf[tss.buffer_len()..];
            if body.len() < ICV_LEN {
                return Err(Error::Truncated("TSS ICV"));
            }
            let (ciphertext, tag) = body.split_at(body.len() - ICV_LEN);
            let mut icv = [0u8; ICV_LEN];
            icv.copy_from_slice(tag);
            return Ok(UetRepr::Secure { tss, ciphertext, icv });
        }
        let body = if config.crc {
            if buf.len() < CRC_LEN {
                return Err(Error::Truncated("UET CRC trailer"));
            }
            &buf[..buf.len() - CRC_LEN]
        } else {
            buf
        };
        let pds = PdsRepr::parse(body)?;
        let mut at = pds.buffer_len();
        let ses = match pds.next_header() {
            Some(nh) => SesRepr::parse(&body[at..], nh)?,
            None => None,
        };
        at += ses.map_or(0, |s| s.buffer_len());
        Ok(UetRepr::Clear { pds, ses, payload: &body[at..], crc: config.crc })
    }

    /// Length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            UetRepr::Clear { pds, ses, payload, crc } => {
                pds.buffer_len()
                    + ses.map_or(0, |s| s.buffer_len())
                    + payload.len()
                    + if *crc { CRC_LEN } else { 0 }
            }
            UetRepr::Secure { tss, ciphertext, .. } => tss.buffer_len() + ciphertext.len() + ICV_LEN,
        }
    }

    /// Writes the packet, computing the CRC trailer if there is one.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = out(buf, len)?;
        match self {
            UetRepr::Clear { pds, ses, payload, crc } => {
                let want = pds.next_header().unwrap_or(crate::uet::pds::NextHeader::None);
                if ses.map(|s| s.next_header()).unwrap_or(crate::uet::pds::NextHeader::None) != want {
                    return Err(Error::Inconsistent("SES header does not match the PDS next_hdr"));
                }
                let mut at = pds.emit(b)?;
                if let Some(s) = ses {
                    at += s.emit(&mut b[at..])?;
                }
                b[at..at + payload.len()].copy_from_slice(payload);
                at += payload.len();
                if *crc {
                    let c = crc32c(&b[..at]);
                    write_u32(b, at, c);
                }
            }
            UetRepr::Secure { tss, ciphertext, icv } => {
                let at = tss.emit(b)?;
                b[at..at + ciphertext.len()].copy_from_slice(ciphertext);
                b[len - ICV_LEN..].copy_from_slice(icv);
            }
        }
        Ok(len)
    }

    /// Checks the CRC32C trailer of `buf`, the bytes this repr was parsed from (nothing to check
    /// without a trailer, and TSS packets are checked by their ICV in the TSS layer).
    pub fn verify_crc(&self, buf: &[u8]) -> Result<()> {
        let UetRepr::Clear { crc: true, .. } = self else { return Ok(()) };
        let end = self.buffer_len() - CRC_LEN;
        need(buf.len(), end + CRC_LEN, "UET CRC trailer")?;
        let (computed, found) = (crc32c(&buf[..end]), read_u32(buf, end));
        if computed == found { Ok(()) } else { Err(Error::BadCrc { computed, found }) }
    }

    /// The PDS header of a clear packet.
    pub fn pds(&self) -> Option<&PdsRepr> {
        match self {
            UetRepr::Clear { pds, .. } => Some(pds),
            UetRepr::Secure { .. } => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::uet::pds::tests::arb_pds;
    use crate::uet::ses::tests::arb_ses;
    use crate::uet::tss::tests::arb_tss;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// xdp2_uet_pds.pcap frame 1: RUD request with a standard SES request, no payload.
    const RUD_STD: &str = "119012349876543234569abc022b123477abcdef067809abfedcba9876543210fedcba981122334455667788aabbddddeeff001199887766";

    #[test]
    fn clear_packet_roundtrip_and_crc() {
        let b = hex(RUD_STD);
        let r = UetRepr::parse(&b, &UetConfig::default()).unwrap();
        let UetRepr::Clear { pds, ses, payload, crc } = r else { panic!("clear expected") };
        assert_eq!(pds.pds_type(), crate::uet::pds::PdsType::RudReq);
        assert!(ses.is_some() && payload.is_empty() && !crc);
        let mut o = vec![0u8; r.buffer_len()];
        r.emit(&mut o).unwrap();
        assert_eq!(o, b);

        let with_crc = UetRepr::Clear { pds, ses, payload: &[1, 2, 3], crc: true };
        let mut c = vec![0u8; with_crc.buffer_len()];
        with_crc.emit(&mut c).unwrap();
        let cfg = UetConfig { crc: true, ip_proto: None };
        let parsed = UetRepr::parse(&c, &cfg).unwrap();
        assert_eq!(parsed, with_crc);
        assert_eq!(parsed.verify_crc(&c), Ok(()));
        let n = c.len();
        c[n - 5] ^= 1;
        assert!(matches!(UetRepr::parse(&c, &cfg).unwrap().verify_crc(&c), Err(Error::BadCrc { .. })));
    }

    #[test]
    fn tss_body_is_opaque() {
        let mut b = vec![0x08, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 2];
        b.extend_from_slice(&[0xAA; 20]);
        b.extend_from_slice(&[0x55; 16]);
        let r = UetRepr::parse(&b, &UetConfig::default()).unwrap();
        let UetRepr::Secure { tss, ciphertext, icv } = r else { panic!("TSS expected") };
        assert_eq!((tss.sdi, tss.tsc), (7, (1 << 48) | 2));
        assert_eq!((ciphertext.len(), icv), (20, [0x55; 16]));
        let mut o = vec![0u8; r.buffer_len()];
        r.emit(&mut o).unwrap();
        assert_eq!(o, b);
        assert_eq!(UetRepr::parse(&b[..12 + 15], &UetConfig::default()), Err(Error::Truncated("TSS ICV")));
    }

    #[test]
    fn negative() {
        let b = hex(RUD_STD);
        assert_eq!(UetRepr::parse(&[], &UetConfig::default()), Err(Error::Truncated("UET header")));
        for n in 1..b.len() {
            assert!(
                matches!(UetRepr::parse(&b[..n], &UetConfig::default()), Err(Error::Truncated(_))),
                "{n}"
            );
        }
        let mut reserved_nh = b.clone();
        reserved_nh[..2].copy_from_slice(&[0x17, 0x90]); // RUD, next_hdr 15, RETX
        assert_eq!(
            UetRepr::parse(&reserved_nh, &UetConfig::default()),
            Err(Error::Unsupported("reserved PDS next_hdr value"))
        );
    }

    /// A UET packet description: payload, CRC flag, PDS and SES headers that agree, optional TSS.
    pub(crate) type Drawn = (Vec<u8>, bool, PdsRepr, Option<SesRepr>, Option<TssRepr>);

    pub(crate) fn arb_uet() -> impl Strategy<Value = Drawn> {
        (
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<bool>(),
            arb_pds(),
            proptest::option::of(arb_ses()),
            proptest::option::of(arb_tss()),
        )
            .prop_map(|(payload, crc, mut pds, ses, tss)| {
                // Point the PDS next_hdr at the SES format drawn (a CP carries none).
                let ses = if matches!(pds, PdsRepr::Cp(_)) { None } else { ses };
                let nh = ses.map_or(crate::uet::pds::NextHeader::None, |s| s.next_header());
                match &mut pds {
                    PdsRepr::Request(r) => r.next_hdr = nh,
                    PdsRepr::Rudi(r) => r.next_hdr = nh,
                    PdsRepr::Uud(r) => r.next_hdr = nh,
                    PdsRepr::Ack(r) => r.next_hdr = nh,
                    PdsRepr::Nack(r) => r.next_hdr = nh,
                    PdsRepr::Cp(_) => {}
                }
                (payload, crc, pds, ses, tss)
            })
    }

    /// Builds the repr of a drawn packet: with TSS the payload stands for the ciphertext.
    pub(crate) fn build<'a>(d: &'a Drawn) -> UetRepr<'a> {
        let (payload, crc, pds, ses, tss) = d;
        match tss {
            Some(tss) => UetRepr::Secure { tss: *tss, ciphertext: payload, icv: [0x5A; ICV_LEN] },
            None => UetRepr::Clear { pds: *pds, ses: *ses, payload, crc: *crc },
        }
    }

    proptest! {
        #[test]
        fn roundtrip(d in arb_uet()) {
            let r = build(&d);
            let cfg = UetConfig { crc: d.1, ip_proto: None };
            let mut b = vec![0u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut b), Ok(b.len()));
            prop_assert_eq!(UetRepr::parse(&b, &cfg), Ok(r));
            prop_assert_eq!(r.verify_crc(&b), Ok(()));
        }
    }
}
