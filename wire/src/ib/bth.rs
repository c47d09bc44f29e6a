//! Base transport header, 12 bytes (roce-wire.md §1.2).

use crate::bytes::{out, read_u16, read_u24, write_u16, write_u24};
use crate::ib::opcode::Opcode;
use crate::{Error, Result};

/// Size of the BTH.
pub const HEADER_LEN: usize = 12;
/// The P_Key rxe sends (`IB_DEFAULT_PKEY_FULL`).
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// Largest 24-bit value (QPN, PSN).
pub const MAX_24: u32 = 0x00FF_FFFF;

fixed_header_view!(
    /// A view of a base transport header.
    Packet,
    HEADER_LEN,
    "BTH"
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Opcode (byte 0).
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[0])
    }

    /// Solicited event (byte 1, 0x80).
    pub fn solicited(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }

    /// MigReq (byte 1, 0x40).
    pub fn migreq(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }

    /// Pad count (byte 1, bits 0x30).
    pub fn pad_count(&self) -> u8 {
        (self.b()[1] >> 4) & 0x3
    }

    /// Transport header version (byte 1, low nibble; 0 in every valid packet).
    pub fn tver(&self) -> u8 {
        self.b()[1] & 0x0F
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        read_u16(self.b(), 2)
    }

    /// Forward explicit congestion notification (byte 4, 0x80).
    pub fn fecn(&self) -> bool {
        self.b()[4] & 0x80 != 0
    }

    /// Backward explicit congestion notification (byte 4, 0x40).
    pub fn becn(&self) -> bool {
        self.b()[4] & 0x40 != 0
    }

    /// The six reserved bits of byte 4.
    pub fn resv6(&self) -> u8 {
        self.b()[4] & 0x3F
    }

    /// Destination QP (24 bits).
    pub fn dest_qp(&self) -> u32 {
        read_u24(self.b(), 5)
    }

    /// Acknowledge request (byte 8, 0x80).
    pub fn ack_req(&self) -> bool {
        self.b()[8] & 0x80 != 0
    }

    /// The seven reserved bits of byte 8.
    pub fn resv7(&self) -> u8 {
        self.b()[8] & 0x7F
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        read_u24(self.b(), 9)
    }
}

/// A parsed BTH. Reserved bits are kept so that frames from real NICs re-emit byte for byte
/// (roce-wire.md §3, "Byte-exact re-emit"); the engine always sends them as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    /// MigReq (rxe sends 0; ConnectX-3 and the Huawei NIC send 1).
    pub migreq: bool,
    /// Pad count, 0..=3: `(-payload_len) & 3` for well-formed packets.
    pub pad_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN (set in CNPs).
    pub becn: bool,
    /// Reserved bits of byte 4 (6 bits).
    pub resv6: u8,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// Reserved bits of byte 8 (7 bits).
    pub resv7: u8,
    /// PSN (24 bits).
    pub psn: u32,
}

impl BthRepr {
    /// A BTH as rxe writes it: P_Key 0xFFFF, every flag and reserved bit clear.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    /// Parses a BTH; rejects TVer != 0. Unknown opcodes are kept (the packet layer rejects them).
    pub fn parse(buf: &[u8]) -> Result<BthRepr> {
        let p = Packet::new_checked(buf)?;
        if p.tver() != 0 {
            return Err(Error::BadVersion("BTH TVer"));
        }
        Ok(BthRepr {
            opcode: p.opcode(),
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            resv6: p.resv6(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            resv7: p.resv7(),
            psn: p.psn(),
        })
    }

    /// Size of the BTH.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the BTH at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if self.dest_qp > MAX_24 || self.psn > MAX_24 {
            return Err(Error::Inconsistent("BTH DestQP and PSN are 24-bit"));
        }
        if self.pad_count > 3 || self.resv6 > 0x3F || self.resv7 > 0x7F {
            return Err(Error::Inconsistent("BTH bit field out of range"));
        }
        let b = out(buf, HEADER_LEN)?;
        b[0] = self.opcode.0;
        b[1] = (u8::from(self.solicited) << 7) | (u8::from(self.migreq) << 6) | (self.pad_count << 4);
        write_u16(b, 2, self.pkey);
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6) | self.resv6;
        write_u24(b, 5, self.dest_qp);
        b[8] = (u8::from(self.ack_req) << 7) | self.resv7;
        write_u24(b, 9, self.psn);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// BTH of the rxe READ request in `captures/roce/rxe_read_request_pcapplusplus.pcap`.
    const READ_REQ: [u8; 12] = [0x0c, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x54, 0xcb, 0x63];

    #[test]
    fn vector() {
        let r = BthRepr::parse(&READ_REQ).unwrap();
        assert_eq!(r.opcode, Opcode(0x0C));
        assert_eq!(r.pkey, 0xFFFF);
        assert_eq!(r.dest_qp, 0x11);
        assert!(r.ack_req);
        assert_eq!(r.psn, 0x54cb63);
        let mut o = [0u8; 12];
        r.emit(&mut o).unwrap();
        assert_eq!(o, READ_REQ);
    }

    #[test]
    fn negative() {
        for n in 0..12 {
            assert_eq!(BthRepr::parse(&READ_REQ[..n]), Err(Error::Truncated("BTH")));
        }
        let mut t = READ_REQ;
        t[1] = 0x01;
        assert_eq!(BthRepr::parse(&t), Err(Error::BadVersion("BTH TVer")));
        let mut r = BthRepr::parse(&READ_REQ).unwrap();
        r.psn = 1 << 24;
        assert!(matches!(r.emit(&mut [0u8; 12]), Err(Error::Inconsistent(_))));
    }

    pub(crate) fn arb_bth(opcode: u8) -> impl Strategy<Value = BthRepr> {
        (
            any::<(bool, bool, bool, bool, bool)>(),
            0u8..4,
            any::<u16>(),
            0u8..0x40,
            0u32..=MAX_24,
            0u8..0x80,
            0u32..=MAX_24,
        )
            .prop_map(
                move |(
                    (solicited, migreq, fecn, becn, ack_req),
                    pad_count,
                    pkey,
                    resv6,
                    dest_qp,
                    resv7,
                    psn,
                )| {
                    BthRepr {
                        opcode: Opcode(opcode),
                        solicited,
                        migreq,
                        pad_count,
                        pkey,
                        fecn,
                        becn,
                        resv6,
                        dest_qp,
                        ack_req,
                        resv7,
                        psn,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn roundtrip(r in any::<u8>().prop_flat_map(arb_bth)) {
            let mut b = [0u8; 12];
            r.emit(&mut b).unwrap();
            prop_assert_eq!(BthRepr::parse(&b), Ok(r));
        }
    }
}
