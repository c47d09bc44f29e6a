//! Semantic Sublayer headers (uet-wire.md §3): the request formats (standard 44 B, small 20 B,
//! medium 32 B), their extension headers (atomic, compare-and-swap, rendezvous) and the response
//! formats (12 B, with data 20 B, with data small 12 B). The PDS next_hdr says which format follows;
//! the SES opcode (and for atomics the AMO opcode) says which extension follows a request.

pub mod atomic_ext;
pub mod cas_ext;
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

wire_enum! {
    /// SES request opcodes, 6 bits (SUET cites spec Table 3-17).
    pub enum SesOpcode {
        NoOp = 0x00 => "NO_OP",
        Write = 0x01 => "WRITE",
        Read = 0x02 => "READ",
        Atomic = 0x03 => "ATOMIC",
        FetchingAtomic = 0x04 => "FETCHING_ATOMIC",
        Send = 0x05 => "SEND",
        RendezvousSend = 0x06 => "RENDEZVOUS_SEND",
        DatagramSend = 0x07 => "DATAGRAM_SEND",
        DeferrableSend = 0x08 => "DEFERRABLE_SEND",
        TaggedSend = 0x09 => "TAGGED_SEND",
        RendezvousTsend = 0x0A => "RENDEZVOUS_TSEND",
        DeferrableTsend = 0x0B => "DEFERRABLE_TSEND",
        DeferrableRtr = 0x0C => "DEFERRABLE_RTR",
        TsendAtomic = 0x0D => "TSEND_ATOMIC",
        TsendFetchAtomic = 0x0E => "TSEND_FETCH_ATOMIC",
        MsgError = 0x0F => "MSG_ERROR",
    }
}

wire_enum! {
    /// SES return codes, 6 bits.
    pub enum ReturnCode {
        Null = 0x00 => "NULL",
        Ok = 0x01 => "OK",
        BadGeneration = 0x02 => "BAD_GENERATION",
        Disabled = 0x03 => "DISABLED",
        DisabledGen = 0x04 => "DISABLED_GEN",
        NoMatch = 0x05 => "NO_MATCH",
        UnsupportedOp = 0x06 => "UNSUPPORTED_OP",
        UnsupportedSize = 0x07 => "UNSUPPORTED_SIZE",
        AtInvalid = 0x08 => "AT_INVALID",
        AtPerm = 0x09 => "AT_PERM",
        AtAtsError = 0x0A => "AT_ATS_ERROR",
        AtNoTrans = 0x0B => "AT_NO_TRANS",
        AtOutOfRange = 0x0C => "AT_OUT_OF_RANGE",
        HostPoisoned = 0x0D => "HOST_POISONED",
        HostUnsuccessCmpl = 0x0E => "HOST_UNSUCCESS_CMPL",
        AmoUnsupportedOp = 0x0F => "AMO_UNSUPPORTED_OP",
        AmoUnsupportedDt = 0x10 => "AMO_UNSUPPORTED_DT",
        AmoUnsupportedSize = 0x11 => "AMO_UNSUPPORTED_SIZE",
        AmoUnaligned = 0x12 => "AMO_UNALIGNED",
        AmoFpNan = 0x13 => "AMO_FP_NAN",
        AmoFpUnderflow = 0x14 => "AMO_FP_UNDERFLOW",
        AmoFpOverflow = 0x15 => "AMO_FP_OVERFLOW",
        AmoFpInexact = 0x16 => "AMO_FP_INEXACT",
        PermViolation = 0x17 => "PERM_VIOLATION",
        OpViolation = 0x18 => "OP_VIOLATION",
        BadIndex = 0x19 => "BAD_INDEX",
        BadPid = 0x1A => "BAD_PID",
        BadJobId = 0x1B => "BAD_JOB_ID",
        BadMkey = 0x1C => "BAD_MKEY",
        BadAddr = 0x1D => "BAD_ADDR",
        Cancelled = 0x1E => "CANCELLED",
        Undeliverable = 0x1F => "UNDELIVERABLE",
        Uncor = 0x20 => "UNCOR",
        UncorTrnsnt = 0x21 => "UNCOR_TRNSNT",
        TooLong = 0x22 => "TOO_LONG",
        InitiatorError = 0x23 => "INITIATOR_ERROR",
        Dropped = 0x24 => "DROPPED",
    }
}

wire_enum! {
    /// Atomic operation (AMO) opcodes.
    pub enum AmoOpcode {
        Min = 0x00 => "MIN",
        Max = 0x01 => "MAX",
        Sum = 0x02 => "SUM",
        Diff = 0x03 => "DIFF",
        Prod = 0x04 => "PROD",
        Lor = 0x05 => "LOR",
        Land = 0x06 => "LAND",
        Bor = 0x07 => "BOR",
        Band = 0x08 => "BAND",
        Lxor = 0x09 => "LXOR",
        Bxor = 0x0A => "BXOR",
        Read = 0x0B => "READ",
        Write = 0x0C => "WRITE",
        Cswap = 0x0D => "CSWAP",
        CswapNe = 0x0E => "CSWAP_NE",
        CswapLe = 0x0F => "CSWAP_LE",
        CswapLt = 0x10 => "CSWAP_LT",
        CswapGe = 0x11 => "CSWAP_GE",
        CswapGt = 0x12 => "CSWAP_GT",
        Mswap = 0x13 => "MSWAP",
        Inval = 0x14 => "INVAL",
    }
}

impl AmoOpcode {
    /// True for the compare-and-swap family (0x0D-0x12), which carries the CAS extension header.
    pub fn is_compare_swap(self) -> bool {
        (0x0D..=0x12).contains(&u8::from(self))
    }
}

wire_enum! {
    /// Atomic operand datatypes.
    pub enum AmoDatatype {
        Int8 = 0x00 => "INT8",
        Uint8 = 0x01 => "UINT8",
        Int16 = 0x02 => "INT16",
        Uint16 = 0x03 => "UINT16",
        Int32 = 0x04 => "INT32",
        Uint32 = 0x05 => "UINT32",
        Int64 = 0x06 => "INT64",
        Uint64 = 0x07 => "UINT64",
        Int128 = 0x08 => "INT128",
        Uint128 = 0x09 => "UINT128",
        Float = 0x0A => "FLOAT",
        Double = 0x0B => "DOUBLE",
        FloatComplex = 0x0C => "FLOAT_COMPLEX",
        DoubleComplex = 0x0D => "DOUBLE_COMPLEX",
        LongDouble = 0x0E => "LONG_DOUBLE",
        LongDoubleComplex = 0x0F => "LONG_DOUBLE_COMPLEX",
        Bf16 = 0x10 => "BF16",
        Fp16 = 0x11 => "FP16",
    }
}

wire_enum! {
    /// Response opcodes.
    pub enum ResponseOpcode {
        DefaultResponse = 0 => "DEFAULT_RESPONSE",
        Response = 1 => "RESPONSE",
        ResponseWData = 2 => "RESPONSE_W_DATA",
        NoResponse = 3 => "NO_RESPONSE",
    }
}

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
    use crate::uet::testutil::hex;
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
