//! The 24-byte common header of InfiniBand management datagrams (MADs, IBTA vol1 §13.4.3), as
//! carried in the UD SEND payload to and from QP1 (the general services interface).
//!
//! Layout: base version, management class, class version, method (one byte each), status (16
//! bits), class specific (16 bits), transaction ID (64 bits), attribute ID (16 bits), 16 reserved
//! bits, attribute modifier (32 bits).

use crate::Result;
use crate::bytes::{need, out, read_u16, read_u32, read_u64, write_u16, write_u32, write_u64};

/// Size of every MAD on QP1: header and data together.
pub const MAD_LEN: usize = 256;
/// Size of the common MAD header.
pub const MAD_HEADER_LEN: usize = 24;
/// The base version of InfiniBand MADs (OPA uses another one).
pub const BASE_VERSION: u8 = 1;
/// Management class of the Communication Manager.
pub const MGMT_CLASS_CM: u8 = 0x07;
/// The CM class version this codec speaks (the one Linux `ib_cm` sends).
pub const CM_CLASS_VERSION: u8 = 2;
/// Method `Send()`, the only method the CM uses.
pub const METHOD_SEND: u8 = 0x03;

/// A parsed common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadHeader {
    /// Base version ([`BASE_VERSION`] for InfiniBand).
    pub base_version: u8,
    /// Management class ([`MGMT_CLASS_CM`] for the CM).
    pub mgmt_class: u8,
    /// Version of the management class.
    pub class_version: u8,
    /// Method (R bit included).
    pub method: u8,
    /// Status.
    pub status: u16,
    /// Class-specific field.
    pub class_specific: u16,
    /// Transaction ID.
    pub tid: u64,
    /// Attribute ID.
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl MadHeader {
    /// Parses the first [`MAD_HEADER_LEN`] bytes of `buf`. The 16 reserved bits are ignored; no
    /// field value is checked here.
    pub fn parse(buf: &[u8]) -> Result<MadHeader> {
        need(buf.len(), MAD_HEADER_LEN, "MAD header")?;
        Ok(MadHeader {
            base_version: buf[0],
            mgmt_class: buf[1],
            class_version: buf[2],
            method: buf[3],
            status: read_u16(buf, 4),
            class_specific: read_u16(buf, 6),
            tid: read_u64(buf, 8),
            attr_id: read_u16(buf, 16),
            attr_mod: read_u32(buf, 20),
        })
    }

    /// Writes the header into `buf[..MAD_HEADER_LEN]` (reserved bits zero) and returns
    /// [`MAD_HEADER_LEN`]; `BufferTooSmall` if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, MAD_HEADER_LEN)?;
        b[0] = self.base_version;
        b[1] = self.mgmt_class;
        b[2] = self.class_version;
        b[3] = self.method;
        write_u16(b, 4, self.status);
        write_u16(b, 6, self.class_specific);
        write_u64(b, 8, self.tid);
        write_u16(b, 16, self.attr_id);
        write_u16(b, 18, 0);
        write_u32(b, 20, self.attr_mod);
        Ok(MAD_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        // The MAD header of the CM REQ in captures/roce/linlinw5/rping.pcap, frame 1.
        let v = [
            0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x6d, 0xc5, 0xc0, 0x6e,
            0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        let h = MadHeader::parse(&v).unwrap();
        assert_eq!(
            h,
            MadHeader {
                base_version: 1,
                mgmt_class: MGMT_CLASS_CM,
                class_version: CM_CLASS_VERSION,
                method: METHOD_SEND,
                status: 0,
                class_specific: 0,
                tid: 0x0000_0002_6dc5_c06e,
                attr_id: 0x0010,
                attr_mod: 0,
            }
        );
        let mut o = [0xAAu8; MAD_HEADER_LEN];
        assert_eq!(h.emit(&mut o), Ok(MAD_HEADER_LEN));
        assert_eq!(o, v);
        for n in 0..MAD_HEADER_LEN {
            assert_eq!(MadHeader::parse(&v[..n]), Err(Error::Truncated("MAD header")));
            assert_eq!(h.emit(&mut o[..n]), Err(Error::BufferTooSmall));
        }
    }

    #[test]
    fn reserved_ignored_and_zeroed() {
        let mut v = [0u8; MAD_HEADER_LEN];
        v[18] = 0x12;
        v[19] = 0x34;
        let h = MadHeader::parse(&v).unwrap();
        let mut o = [0xFFu8; MAD_HEADER_LEN];
        h.emit(&mut o).unwrap();
        assert_eq!(o, [0u8; MAD_HEADER_LEN]);
    }

    proptest! {
        #[test]
        fn roundtrip(
            bytes in any::<[u8; 4]>(),
            status in any::<u16>(),
            class_specific in any::<u16>(),
            tid in any::<u64>(),
            attr_id in any::<u16>(),
            attr_mod in any::<u32>(),
        ) {
            let h = MadHeader {
                base_version: bytes[0],
                mgmt_class: bytes[1],
                class_version: bytes[2],
                method: bytes[3],
                status,
                class_specific,
                tid,
                attr_id,
                attr_mod,
            };
            let mut b = [0u8; MAD_HEADER_LEN + 3];
            prop_assert_eq!(h.emit(&mut b), Ok(MAD_HEADER_LEN));
            prop_assert_eq!(MadHeader::parse(&b), Ok(h));
            prop_assert_eq!(&b[MAD_HEADER_LEN..], &[0u8; 3][..]);
        }
    }
}
