//! A whole RoCEv2 transport packet: BTH, the extension headers its opcode prescribes, payload, pad
//! and the ICRC slot (roce-wire.md §1.1). This is the UDP payload of a RoCEv2 datagram.

use crate::bytes::out;
use crate::header::FixedHeader;
use crate::ib::icrc::ICRC_LEN;
use crate::ib::opcode::{Headers, PayloadRule};
use crate::ib::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, FethRepr, IethRepr, ImmDt, RdethRepr,
    RethRepr, bth,
};
use crate::{Error, Result};

/// A parsed RoCEv2 transport packet. Exactly the headers the opcode table lists are `Some`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceRepr<'a> {
    /// Base transport header (pad count included).
    pub bth: BthRepr,
    /// RDETH (RD only).
    pub rdeth: Option<RdethRepr>,
    /// DETH (UD and RD requests).
    pub deth: Option<DethRepr>,
    /// FETH (FLUSH).
    pub feth: Option<FethRepr>,
    /// RETH (WRITE FIRST/ONLY, READ request, FLUSH, ATOMIC_WRITE).
    pub reth: Option<RethRepr>,
    /// AtomicETH (COMPARE_SWAP, FETCH_ADD).
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH (READ responses except MIDDLE, ACK, ATOMIC_ACK).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (ATOMIC_ACK).
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data (*_IMM).
    pub immdt: Option<ImmDt>,
    /// IETH (SEND_*_INV).
    pub ieth: Option<IethRepr>,
    /// Payload, without pad.
    pub payload: &'a [u8],
}

/// The pad count for a payload of `len` bytes: `(-len) & 3`.
pub const fn pad_for(len: usize) -> u8 {
    (len.wrapping_neg() & 3) as u8
}

/// Parses the header at `*off` if `present`, advancing `*off`.
fn take<H: FixedHeader>(body: &[u8], off: &mut usize, present: bool) -> Result<Option<H>> {
    if !present {
        return Ok(None);
    }
    let h = H::parse(body.get(*off..).unwrap_or(&[]))?;
    *off += H::LEN;
    Ok(Some(h))
}

/// Writes `h` at `*off` if present, advancing `*off`.
fn put<H: FixedHeader>(b: &mut [u8], off: &mut usize, h: Option<H>) -> Result<()> {
    if let Some(h) = h {
        *off += h.emit(b.get_mut(*off..).unwrap_or(&mut []))?;
    }
    Ok(())
}

impl<'a> RoceRepr<'a> {
    /// A packet with no extension headers; set the ones the opcode needs before emitting.
    pub const fn new(bth: BthRepr, payload: &'a [u8]) -> RoceRepr<'a> {
        RoceRepr {
            bth,
            rdeth: None,
            deth: None,
            feth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            payload,
        }
    }

    /// Parses a transport packet (BTH through ICRC; the ICRC itself is not checked here, see
    /// [`crate::ib::icrc`]).
    pub fn parse(buf: &'a [u8]) -> Result<RoceRepr<'a>> {
        let bth = BthRepr::parse(buf)?;
        let info = bth.opcode.info().ok_or(Error::UnknownOpcode(bth.opcode.0))?;
        if buf.len() < bth::HEADER_LEN + ICRC_LEN {
            return Err(Error::Truncated("ICRC"));
        }
        let body = &buf[..buf.len() - ICRC_LEN];
        let h = info.headers;
        let mut off = bth::HEADER_LEN;
        let mut r = RoceRepr::new(bth, &[]);
        r.rdeth = take(body, &mut off, h.contains(Headers::RDETH))?;
        r.deth = take(body, &mut off, h.contains(Headers::DETH))?;
        r.feth = take(body, &mut off, h.contains(Headers::FETH))?;
        r.reth = take(body, &mut off, h.contains(Headers::RETH))?;
        r.atomic_eth = take(body, &mut off, h.contains(Headers::ATOMIC_ETH))?;
        r.aeth = take(body, &mut off, h.contains(Headers::AETH))?;
        r.atomic_ack_eth = take(body, &mut off, h.contains(Headers::ATOMIC_ACK_ETH))?;
        r.immdt = take(body, &mut off, h.contains(Headers::IMMDT))?;
        r.ieth = take(body, &mut off, h.contains(Headers::IETH))?;

        let rest = &body[off..];
        let pad = usize::from(bth.pad_count);
        if rest.len() < pad {
            return Err(Error::BadLength("BTH pad count exceeds the payload"));
        }
        let (payload, pad_bytes) = rest.split_at(rest.len() - pad);
        if pad_bytes.iter().any(|&b| b != 0) {
            return Err(Error::Reserved("BTH pad bytes"));
        }
        r.payload = payload;
        r.check_payload()?;
        Ok(r)
    }

    fn check_payload(&self) -> Result<()> {
        let rule = self.bth.opcode.info().map(|i| i.payload);
        let ok = match rule {
            Some(PayloadRule::Empty) => self.payload.is_empty() && self.bth.pad_count == 0,
            Some(PayloadRule::Exact(n)) => self.payload.len() == n,
            Some(PayloadRule::Any) | None => true,
        };
        if ok { Ok(()) } else { Err(Error::BadLength("payload length not allowed for this opcode")) }
    }

    /// The set of extension headers present.
    pub fn headers(&self) -> Headers {
        let bit = |present: bool, h: Headers| if present { h } else { Headers::NONE };
        bit(self.rdeth.is_some(), Headers::RDETH)
            .with(bit(self.deth.is_some(), Headers::DETH))
            .with(bit(self.feth.is_some(), Headers::FETH))
            .with(bit(self.reth.is_some(), Headers::RETH))
            .with(bit(self.atomic_eth.is_some(), Headers::ATOMIC_ETH))
            .with(bit(self.aeth.is_some(), Headers::AETH))
            .with(bit(self.atomic_ack_eth.is_some(), Headers::ATOMIC_ACK_ETH))
            .with(bit(self.immdt.is_some(), Headers::IMMDT))
            .with(bit(self.ieth.is_some(), Headers::IETH))
    }

    /// Length of BTH and extension headers.
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN + self.headers().wire_len()
    }

    /// Length on the wire: headers, payload, pad and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len() + usize::from(self.bth.pad_count) + ICRC_LEN
    }

    /// Writes the BTH and the extension headers (not the payload, pad or ICRC) at the start of `buf`
    /// and returns their length. A transport that gathers the payload straight from memory into the
    /// frame uses this; the caller makes the payload fit the opcode and the BTH pad count.
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<usize> {
        let info = self.bth.opcode.info().ok_or(Error::UnknownOpcode(self.bth.opcode.0))?;
        if self.headers() != info.headers {
            return Err(Error::Inconsistent("extension headers do not match the opcode"));
        }
        let b = out(buf, self.header_len())?;
        let mut off = self.bth.emit(b)?;
        put(b, &mut off, self.rdeth)?;
        put(b, &mut off, self.deth)?;
        put(b, &mut off, self.feth)?;
        put(b, &mut off, self.reth)?;
        put(b, &mut off, self.atomic_eth)?;
        put(b, &mut off, self.aeth)?;
        put(b, &mut off, self.atomic_ack_eth)?;
        put(b, &mut off, self.immdt)?;
        put(b, &mut off, self.ieth)?;
        Ok(off)
    }

    /// Writes the packet at the start of `buf`, with zero pad bytes and a zero ICRC slot (the ICRC
    /// covers the IP and UDP headers, so the frame layer fills it with [`crate::ib::icrc::fill`]).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.check_payload().is_err() {
            return Err(Error::Inconsistent("payload length not allowed for this opcode"));
        }
        let len = self.buffer_len();
        let b = out(buf, len)?;
        let off = self.emit_header(b)?;
        b[off..off + self.payload.len()].copy_from_slice(self.payload);
        b[off + self.payload.len()..].fill(0);
        Ok(len)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ib::bth::tests::arb_bth;
    use crate::ib::opcode::Opcode;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// Every opcode the table knows.
    pub(crate) fn known_opcodes() -> Vec<u8> {
        (0..=255u8).filter(|&o| Opcode(o).info().is_some()).collect()
    }

    /// A well-formed packet of `opcode` with random header fields and payload.
    pub(crate) fn arb_roce(opcode: u8) -> impl Strategy<Value = (BthRepr, Vec<u8>, [u64; 6])> {
        let info = Opcode(opcode).info().unwrap();
        let payload = match info.payload {
            PayloadRule::Empty => Just(0usize).boxed(),
            PayloadRule::Exact(n) => Just(n).boxed(),
            PayloadRule::Any => (0usize..300).boxed(),
        }
        .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n));
        (arb_bth(opcode), payload, any::<[u64; 6]>()).prop_map(move |(mut bth, payload, r)| {
            bth.pad_count = if info.payload == PayloadRule::Empty { 0 } else { bth.pad_count };
            (bth, payload, r)
        })
    }

    /// Builds the repr for `arb_roce` output, filling each header the opcode needs from `r`.
    pub(crate) fn build<'a>(bth: BthRepr, payload: &'a [u8], r: [u64; 6]) -> RoceRepr<'a> {
        let h = bth.opcode.info().unwrap().headers;
        let on = |x: Headers| h.contains(x);
        let mut p = RoceRepr::new(bth, payload);
        let lo = |v: u64| v as u32;
        p.rdeth = on(Headers::RDETH).then_some(RdethRepr { reserved: r[0] as u8, ee_context: lo(r[0]) >> 8 });
        p.deth = on(Headers::DETH).then_some(DethRepr {
            qkey: lo(r[1]),
            reserved: 0,
            src_qp: lo(r[1] >> 32) >> 8,
        });
        p.feth = on(Headers::FETH).then_some(FethRepr { raw: lo(r[2]) });
        p.reth = on(Headers::RETH).then_some(RethRepr { va: r[3], rkey: lo(r[4]), dma_len: lo(r[4] >> 32) });
        p.atomic_eth = on(Headers::ATOMIC_ETH).then_some(AtomicEthRepr {
            va: r[3],
            rkey: lo(r[2]),
            swap_add: r[4],
            compare: r[5],
        });
        p.aeth = on(Headers::AETH).then_some(AethRepr { syndrome: r[5] as u8, msn: lo(r[5]) >> 8 });
        p.atomic_ack_eth = on(Headers::ATOMIC_ACK_ETH).then_some(AtomicAckEthRepr { orig: r[1] });
        p.immdt = on(Headers::IMMDT).then_some(ImmDt(lo(r[0] >> 32)));
        p.ieth = on(Headers::IETH).then_some(IethRepr { rkey: lo(r[2] >> 32) });
        p
    }

    #[test]
    fn read_request_vector() {
        let f = crate::ib::icrc::tests::READ_REQ_FRAME;
        let bytes = crate::testutil::hex(f);
        let roce = &bytes[14 + 20 + 8..];
        let r = RoceRepr::parse(roce).unwrap();
        assert_eq!(r.bth.opcode, Opcode(0x0C));
        assert_eq!(r.reth.unwrap().dma_len, 0x10000);
        assert_eq!(r.headers(), Headers::RETH);
        assert!(r.payload.is_empty());
        let mut o = vec![0u8; r.buffer_len()];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..o.len() - 4], roce[..roce.len() - 4]);
    }

    #[test]
    fn negative() {
        let ack = [0x11, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 7, 0x1f, 0, 0, 1, 9, 9, 9, 9];
        assert!(RoceRepr::parse(&ack).is_ok());
        for n in 0..ack.len() {
            assert!(matches!(RoceRepr::parse(&ack[..n]), Err(Error::Truncated(_))), "{n}");
        }
        let mut unknown = ack;
        unknown[0] = 0x15;
        assert_eq!(RoceRepr::parse(&unknown), Err(Error::UnknownOpcode(0x15)));
        let mut tver = ack;
        tver[1] = 0x02;
        assert_eq!(RoceRepr::parse(&tver), Err(Error::BadVersion("BTH TVer")));
        // An ACK carrying payload bytes.
        let mut long = [0u8; 24];
        long[..16].copy_from_slice(&ack[..16]);
        assert!(matches!(RoceRepr::parse(&long), Err(Error::BadLength(_))));
        // SEND_ONLY with pad count 3 but only 2 bytes after the BTH.
        let mut send = [0u8; 18];
        send[..12].copy_from_slice(&[0x04, 0x30, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 1]);
        assert!(matches!(RoceRepr::parse(&send), Err(Error::BadLength(_))));
        // Non-zero pad byte.
        let mut send = [0u8; 20];
        send[..12].copy_from_slice(&[0x04, 0x10, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 1]);
        send[15] = 1;
        assert_eq!(RoceRepr::parse(&send), Err(Error::Reserved("BTH pad bytes")));
        send[15] = 0;
        assert_eq!(RoceRepr::parse(&send).unwrap().payload, &[0, 0, 0]);
        // ATOMIC_WRITE must carry exactly 8 bytes.
        let mut aw = [0u8; 12 + 16 + 4 + 4];
        aw[..12].copy_from_slice(&[0x1d, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 1]);
        assert!(matches!(RoceRepr::parse(&aw), Err(Error::BadLength(_))));
    }

    #[test]
    fn emit_rejects_inconsistent_headers() {
        let bth = BthRepr::new(Opcode(0x0A), 1, 1);
        let p = RoceRepr::new(bth, &[1, 2, 3, 4]);
        let mut b = [0u8; 64];
        assert!(matches!(p.emit(&mut b), Err(Error::Inconsistent(_))));
        let mut p = p;
        p.reth = Some(RethRepr { va: 0, rkey: 0, dma_len: 4 });
        assert_eq!(p.emit(&mut b), Ok(12 + 16 + 4 + 4));
        assert_eq!(p.emit(&mut b[..30]), Err(Error::BufferTooSmall));
        assert_eq!(pad_for(5), 3);
        assert_eq!(pad_for(8), 0);
    }

    proptest! {
        #[test]
        fn roundtrip_every_opcode(
            (bth, payload, r) in proptest::sample::select(known_opcodes()).prop_flat_map(arb_roce)
        ) {
            let p = build(bth, &payload, r);
            let mut b = vec![0u8; p.buffer_len()];
            prop_assert_eq!(p.emit(&mut b), Ok(b.len()));
            prop_assert_eq!(RoceRepr::parse(&b), Ok(p));
        }
    }
}
