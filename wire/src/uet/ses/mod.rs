//! Semantic Sublayer headers (uet-wire.md §3): the request formats (standard 44 B, small 20 B,
//! medium 32 B), their extension headers (atomic, compare-and-swap, rendezvous) and the response
//! formats (12 B, with data 20 B, with data small 12 B). The PDS next_hdr says which format follows;
//! the SES opcode (and for atomics the AMO opcode) says which extension follows a request.

pub mod atomic_ext;
pub mod cas_ext;
mod codes;
pub mod common;
pub mod medium;
pub mod rendezvous_ext;
pub mod response;
pub mod response_data;
pub mod response_data_small;
pub mod small;
pub mod standard;

pub use atomic_ext::AtomicExt;
pub use cas_ext::CasExt;
pub use codes::{AmoDatatype, AmoOpcode, ResponseOpcode, ReturnCode, SesOpcode};
pub use common::RequestCommon;
pub use medium::MediumRequest;
pub use rendezvous_ext::RendezvousExt;
pub use response::{Response, ResponseHead};
pub use response_data::ResponseData;
pub use response_data_small::ResponseDataSmall;
pub use small::SmallRequest;
pub use standard::{SomField, StandardRequest};

use crate::header::FixedHeader;
use crate::uet::pds::NextHeader;
use crate::{Error, Result};

/// The header format of a SES header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SesHeader {
    /// Standard request (next_hdr REQ_STD).
    Standard(StandardRequest),
    /// Small request (REQ_SMALL).
    Small(SmallRequest),
    /// Medium request (REQ_MEDIUM).
    Medium(MediumRequest),
    /// Response (RSP).
    Response(Response),
    /// Response with data (RSP_DATA).
    ResponseData(ResponseData),
    /// Response with data, small (RSP_DATA_SMALL).
    ResponseDataSmall(ResponseDataSmall),
}

/// An extension header after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SesExt {
    /// Atomic operation (4 B).
    Atomic(AtomicExt),
    /// Compare-and-swap (36 B; AMO opcodes 0x0D-0x12).
    CompareSwap(CasExt),
    /// Rendezvous (24 B).
    Rendezvous(RendezvousExt),
}

impl SesExt {
    /// Length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            SesExt::Atomic(_) => AtomicExt::LEN,
            SesExt::CompareSwap(_) => CasExt::LEN,
            SesExt::Rendezvous(_) => RendezvousExt::LEN,
        }
    }
}

/// Which extension a request opcode carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExtKind {
    None,
    Atomic,
    Rendezvous,
}

fn ext_kind(opcode: SesOpcode) -> ExtKind {
    match opcode {
        SesOpcode::Atomic
        | SesOpcode::FetchingAtomic
        | SesOpcode::TsendAtomic
        | SesOpcode::TsendFetchAtomic => ExtKind::Atomic,
        SesOpcode::RendezvousSend | SesOpcode::RendezvousTsend => ExtKind::Rendezvous,
        _ => ExtKind::None,
    }
}

/// A SES header with its extension, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SesRepr {
    /// The header.
    pub header: SesHeader,
    /// The extension header (requests only).
    pub ext: Option<SesExt>,
}

impl SesRepr {
    /// The request opcode, for requests.
    pub fn opcode(&self) -> Option<SesOpcode> {
        self.common().map(|c| c.opcode)
    }

    /// The 12-byte common part, for requests.
    pub fn common(&self) -> Option<&RequestCommon> {
        match &self.header {
            SesHeader::Standard(h) => Some(&h.common),
            SesHeader::Small(h) => Some(&h.common),
            SesHeader::Medium(h) => Some(&h.common),
            _ => None,
        }
    }

    /// The next_hdr value that announces this format.
    pub fn next_header(&self) -> NextHeader {
        match self.header {
            SesHeader::Standard(_) => NextHeader::ReqStd,
            SesHeader::Small(_) => NextHeader::ReqSmall,
            SesHeader::Medium(_) => NextHeader::ReqMedium,
            SesHeader::Response(_) => NextHeader::Rsp,
            SesHeader::ResponseData(_) => NextHeader::RspData,
            SesHeader::ResponseDataSmall(_) => NextHeader::RspDataSmall,
        }
    }

    /// The standard request at the start of `buf` when its opcode takes no extension (sends and
    /// writes: the packets that carry data), parsed inline; `None` for anything else, which
    /// [`SesRepr::parse`] takes. A receive path that tries this first keeps the header out of a
    /// `SesRepr` in memory, where it was read back at once in other widths than it was written in
    /// (a store-forwarding stall per packet).
    #[inline(always)]
    pub fn parse_plain_standard(buf: &[u8]) -> Option<StandardRequest> {
        let r = StandardRequest::parse(buf).ok()?;
        (ext_kind(r.common.opcode) == ExtKind::None).then_some(r)
    }

    /// Parses the header announced by `next_hdr` (and its extension) at the start of `buf`;
    /// `Ok(None)` for next_hdr NONE.
    pub fn parse(buf: &[u8], next_hdr: NextHeader) -> Result<Option<SesRepr>> {
        let header = match next_hdr {
            NextHeader::None => return Ok(None),
            NextHeader::ReqStd => SesHeader::Standard(StandardRequest::parse(buf)?),
            NextHeader::ReqSmall => SesHeader::Small(SmallRequest::parse(buf)?),
            NextHeader::ReqMedium => SesHeader::Medium(MediumRequest::parse(buf)?),
            NextHeader::Rsp => SesHeader::Response(Response::parse(buf)?),
            NextHeader::RspData => SesHeader::ResponseData(ResponseData::parse(buf)?),
            NextHeader::RspDataSmall => SesHeader::ResponseDataSmall(ResponseDataSmall::parse(buf)?),
            NextHeader::Unknown(_) => return Err(Error::Unsupported("reserved PDS next_hdr value")),
        };
        let mut r = SesRepr { header, ext: None };
        let at = r.header_len();
        let rest = buf.get(at..).unwrap_or(&[]);
        r.ext = match r.opcode().map(ext_kind).unwrap_or(ExtKind::None) {
            ExtKind::None => None,
            ExtKind::Rendezvous => Some(SesExt::Rendezvous(RendezvousExt::parse(rest)?)),
            ExtKind::Atomic => {
                let atomic = AtomicExt::parse(rest)?;
                if atomic.amo_opcode.is_compare_swap() {
                    Some(SesExt::CompareSwap(CasExt::parse(rest)?))
                } else {
                    Some(SesExt::Atomic(atomic))
                }
            }
        };
        Ok(Some(r))
    }

    fn header_len(&self) -> usize {
        match self.header {
            SesHeader::Standard(_) => StandardRequest::LEN,
            SesHeader::Small(_) => SmallRequest::LEN,
            SesHeader::Medium(_) => MediumRequest::LEN,
            SesHeader::Response(_) => Response::LEN,
            SesHeader::ResponseData(_) => ResponseData::LEN,
            SesHeader::ResponseDataSmall(_) => ResponseDataSmall::LEN,
        }
    }

    /// Header plus extension length.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.ext.map_or(0, |e| e.buffer_len())
    }

    /// Writes header and extension; the extension must be the one the opcode calls for.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let want = self.opcode().map(ext_kind).unwrap_or(ExtKind::None);
        let ok = match (want, &self.ext) {
            (ExtKind::None, None) => true,
            (ExtKind::Rendezvous, Some(SesExt::Rendezvous(_))) => true,
            (ExtKind::Atomic, Some(SesExt::Atomic(a))) => !a.amo_opcode.is_compare_swap(),
            (ExtKind::Atomic, Some(SesExt::CompareSwap(c))) => c.atomic.amo_opcode.is_compare_swap(),
            _ => false,
        };
        if !ok {
            return Err(Error::Inconsistent("SES extension header does not match the opcode"));
        }
        let n = match &self.header {
            SesHeader::Standard(h) => h.emit(buf)?,
            SesHeader::Small(h) => h.emit(buf)?,
            SesHeader::Medium(h) => h.emit(buf)?,
            SesHeader::Response(h) => h.emit(buf)?,
            SesHeader::ResponseData(h) => h.emit(buf)?,
            SesHeader::ResponseDataSmall(h) => h.emit(buf)?,
        };
        let rest = buf.get_mut(n..).unwrap_or(&mut []);
        let e = match &self.ext {
            None => 0,
            Some(SesExt::Atomic(x)) => x.emit(rest)?,
            Some(SesExt::CompareSwap(x)) => x.emit(rest)?,
            Some(SesExt::Rendezvous(x)) => x.emit(rest)?,
        };
        Ok(n + e)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    /// Every SES header of `xdp2_uet_ses.pcap` that follows the chosen layouts: (next_hdr, bytes after
    /// the PDS header).
    const SAMPLES: &[(u8, &str)] = &[
        (3, "022b123477abcdef067809abfedcba9876543210fedcba981122334455667788aabbddddeeff001199887766"),
        (3, "012a123477abcdef067809abfedcba9876543210fedcba981122334455667788000003457766554499887766"),
        (3, "082a123477abcdef067809ab8765432112345678fedcba981122334455667788fedcba987654321099887766"),
        (3, "0c2a123477abcdef067809ab8899aabbccddeefffedcba988765432112345678fedcba987654321099887766"),
        (
            3,
            "032a123477abcdef067809abfedcba9876543210fedcba9811223344556677880000034577665544998877660a0cc700",
        ),
        (
            3,
            "032a123477abcdef067809abfedcba9876543210fedcba981122334455667788000003457766554499887766110cc700987654329876543223456789234567890123456789abcdeffedcba0987654321",
        ),
        (2, "012b123477abcdef067809ab987654329876543287654321ccbbddeeff009988"),
        (2, "032b123477abcdef067809ab987654329876543287654321ccbbddeeff0099880a0cc700"),
        (1, "022b123477abcdef067809ab9876543298765432"),
        (1, "032b123477abcdef067809ab9876543298765432080ac500"),
        (
            1,
            "032b123477abcdef067809ab9876543298765432110cc700987654329876543223456789234567890123456789abcdeffedcba0987654321",
        ),
        (4, "c20912349965432109abcdef"),
        (5, "c209123400654321123403218765432109abcdef"),
        (6, "c20934560003687000001234"),
    ];

    #[test]
    fn samples_parse_and_reemit() {
        for (nh, h) in SAMPLES {
            let b = hex(h);
            let r = SesRepr::parse(&b, NextHeader::from(*nh)).unwrap().unwrap();
            assert_eq!(r.buffer_len(), b.len(), "{h}");
            let mut o = std::vec![0u8; b.len()];
            assert_eq!(r.emit(&mut o), Ok(b.len()));
            assert_eq!(o, b, "{h}");
            for n in 0..b.len() {
                assert!(matches!(SesRepr::parse(&b[..n], NextHeader::from(*nh)), Err(Error::Truncated(_))));
            }
        }
    }

    #[test]
    fn extension_follows_the_opcode() {
        let b = hex(SAMPLES[5].1);
        let r = SesRepr::parse(&b, NextHeader::ReqStd).unwrap().unwrap();
        let Some(SesExt::CompareSwap(c)) = r.ext else { panic!("CAS expected") };
        assert_eq!(c.atomic.amo_opcode, AmoOpcode::CswapGe);
        let b = hex(SAMPLES[4].1);
        let r = SesRepr::parse(&b, NextHeader::ReqStd).unwrap().unwrap();
        let Some(SesExt::Atomic(a)) = r.ext else { panic!("atomic expected") };
        assert_eq!((a.amo_opcode, a.datatype), (AmoOpcode::Bxor, AmoDatatype::FloatComplex));
        // The rendezvous sample (frame 16) omits its extension: rejected with a name.
        let b =
            hex("0a2b123477abcdef067809abfedcba9876543210fedcba981122334455667788aabbddddeeff001199887766");
        assert_eq!(SesRepr::parse(&b, NextHeader::ReqStd), Err(Error::Truncated("SES rendezvous extension")));
        assert_eq!(SesRepr::parse(&b, NextHeader::None), Ok(None));
        assert_eq!(
            SesRepr::parse(&b, NextHeader::Unknown(9)),
            Err(Error::Unsupported("reserved PDS next_hdr value"))
        );
    }

    #[test]
    fn plain_standard_requests_parse_as_the_general_parser_does() {
        let mut plain = 0;
        for (nh, h) in SAMPLES {
            let b = hex(h);
            let general = SesRepr::parse(&b, NextHeader::from(*nh)).unwrap().unwrap();
            let fast = SesRepr::parse_plain_standard(&b);
            match (general.header, general.ext) {
                (SesHeader::Standard(r), None) if *nh == 3 => {
                    assert_eq!(fast, Some(r), "{h}");
                    plain += 1;
                }
                // An extension (atomics, CAS) is left to the general parser.
                _ if *nh == 3 => assert_eq!(fast, None, "{h}"),
                _ => {}
            }
            // Short buffers are refused, never a panic.
            for n in 0..b.len().min(StandardRequest::LEN) {
                assert_eq!(SesRepr::parse_plain_standard(&b[..n]), None);
            }
        }
        assert_eq!(plain, 4, "the four standard samples without an extension");
    }

    #[test]
    fn emit_rejects_a_mismatched_extension() {
        let b = hex(SAMPLES[0].1);
        let mut r = SesRepr::parse(&b, NextHeader::ReqStd).unwrap().unwrap();
        r.ext = Some(SesExt::Atomic(AtomicExt::parse(&[0, 0, 0, 0]).unwrap()));
        assert!(matches!(r.emit(&mut [0u8; 64]), Err(Error::Inconsistent(_))));
    }

    pub(crate) fn arb_ses() -> impl Strategy<Value = SesRepr> {
        let ext = prop_oneof![
            atomic_ext::tests::arb().prop_map(SesExt::Atomic),
            cas_ext::tests::arb().prop_map(SesExt::CompareSwap),
            rendezvous_ext::tests::arb().prop_map(SesExt::Rendezvous),
        ];
        let header = prop_oneof![
            standard::tests::arb().prop_map(SesHeader::Standard),
            small::tests::arb().prop_map(SesHeader::Small),
            medium::tests::arb().prop_map(SesHeader::Medium),
            response::tests::arb().prop_map(SesHeader::Response),
            response_data::tests::arb().prop_map(SesHeader::ResponseData),
            response_data_small::tests::arb().prop_map(SesHeader::ResponseDataSmall),
        ];
        (header, ext).prop_map(|(mut header, ext)| {
            // Make the opcode agree with the extension drawn (or drop it for responses).
            let opcode = match ext {
                SesExt::Atomic(_) => SesOpcode::Atomic,
                SesExt::CompareSwap(_) => SesOpcode::FetchingAtomic,
                SesExt::Rendezvous(_) => SesOpcode::RendezvousSend,
            };
            let common = match &mut header {
                SesHeader::Standard(h) => Some(&mut h.common),
                SesHeader::Small(h) => Some(&mut h.common),
                SesHeader::Medium(h) => Some(&mut h.common),
                _ => None,
            };
            match common {
                Some(c) => {
                    c.opcode = opcode;
                    SesRepr { header, ext: Some(ext) }
                }
                None => SesRepr { header, ext: None },
            }
        })
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_ses()) {
            let mut b = [0u8; 128];
            let n = r.emit(&mut b).unwrap();
            prop_assert_eq!(n, r.buffer_len());
            prop_assert_eq!(SesRepr::parse(&b[..n], r.next_header()), Ok(Some(r)));
        }
    }
}
