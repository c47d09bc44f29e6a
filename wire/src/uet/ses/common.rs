//! The 12 bytes the standard, small and medium requests share (uet-wire.md §3):
//! `rsvd:2 | opcode:6`, `ver:2 | DC | IE | REL | HD | EOM | SOM`, a 16-bit word (message_id in the
//! standard request; `rsvd:2 | request_length:14` in small and medium), `ri_generation:8`,
//! `job_id:24`, `rsvd:4 | pid_on_fep:12`, `rsvd:4 | resource_index:12`.

use super::codes::SesOpcode;
use crate::bytes::{need, out, read_u16, read_u24, write_u16, write_u24};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// DC: delivery complete requested.
pub const FLAG_DC: u8 = 0x20;
/// IE: initiator error.
pub const FLAG_IE: u8 = 0x10;
/// REL: relative addressing.
pub const FLAG_REL: u8 = 0x08;
/// HD: header data present.
pub const FLAG_HD: u8 = 0x04;
/// EOM: end of message.
pub const FLAG_EOM: u8 = 0x02;
/// SOM: start of message.
pub const FLAG_SOM: u8 = 0x01;

/// The shared part of a SES request header. The 16-bit fields with reserved high bits are kept raw
/// so that frames re-emit byte for byte; the accessors mask them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestCommon {
    /// The two reserved bits above the opcode.
    pub rsvd: u8,
    /// Request opcode (6 bits).
    pub opcode: SesOpcode,
    /// Version (2 bits).
    pub version: u8,
    /// DC, IE, REL, HD, EOM, SOM (6 bits).
    pub flags: u8,
    /// message_id (standard) or `rsvd:2 | request_length:14` (small, medium).
    pub word2: u16,
    /// Resource index generation.
    pub ri_generation: u8,
    /// JobID (24 bits).
    pub job_id: u32,
    /// `rsvd:4 | pid_on_fep:12`, raw.
    pub pid_word: u16,
    /// `rsvd:4 | resource_index:12`, raw.
    pub ri_word: u16,
}

impl RequestCommon {
    /// True if the flag (one of `FLAG_*`) is set.
    pub const fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// PIDonFEP (12 bits).
    pub const fn pid_on_fep(&self) -> u16 {
        self.pid_word & 0x0FFF
    }

    /// Resource index (12 bits).
    pub const fn resource_index(&self) -> u16 {
        self.ri_word & 0x0FFF
    }
}

impl FixedHeader for RequestCommon {
    const LEN: usize = 12;

    #[inline]
    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 12, "SES request header")?;
        Ok(RequestCommon {
            rsvd: buf[0] >> 6,
            opcode: SesOpcode::from(buf[0] & 0x3F),
            version: buf[1] >> 6,
            flags: buf[1] & 0x3F,
            word2: read_u16(buf, 2),
            ri_generation: buf[4],
            job_id: read_u24(buf, 5),
            pid_word: read_u16(buf, 8),
            ri_word: read_u16(buf, 10),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let op = u8::from(self.opcode);
        if op > 0x3F || self.rsvd > 3 || self.version > 3 || self.flags > 0x3F || self.job_id > 0xFF_FFFF {
            return Err(Error::Inconsistent("SES request field out of range"));
        }
        let b = out(buf, 12)?;
        b[0] = (self.rsvd << 6) | op;
        b[1] = (self.version << 6) | self.flags;
        write_u16(b, 2, self.word2);
        b[4] = self.ri_generation;
        write_u24(b, 5, self.job_id);
        write_u16(b, 8, self.pid_word);
        write_u16(b, 10, self.ri_word);
        Ok(12)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 1: READ, DC|REL|EOM|SOM, message_id 0x1234, job 0xabcdef.
        let b = [0x02, 0x2b, 0x12, 0x34, 0x77, 0xab, 0xcd, 0xef, 0x06, 0x78, 0x09, 0xab];
        let c = RequestCommon::parse(&b).unwrap();
        assert_eq!(c.opcode, SesOpcode::Read);
        assert!(c.has(FLAG_DC) && c.has(FLAG_REL) && c.has(FLAG_EOM) && c.has(FLAG_SOM) && !c.has(FLAG_HD));
        assert_eq!((c.word2, c.ri_generation, c.job_id), (0x1234, 0x77, 0xab_cdef));
        assert_eq!((c.pid_on_fep(), c.resource_index()), (0x678, 0x9ab));
        let mut o = [0u8; 12];
        c.emit(&mut o).unwrap();
        assert_eq!(o, b);
    }

    pub(crate) fn arb() -> impl Strategy<Value = RequestCommon> {
        (
            0u8..4,
            0u8..0x40,
            0u8..4,
            0u8..0x40,
            any::<u16>(),
            any::<u8>(),
            0u32..0x100_0000,
            any::<(u16, u16)>(),
        )
            .prop_map(
                |(rsvd, op, version, flags, word2, ri_generation, job_id, (pid_word, ri_word))| {
                    RequestCommon {
                        rsvd,
                        opcode: SesOpcode::from(op),
                        version,
                        flags,
                        word2,
                        ri_generation,
                        job_id,
                        pid_word,
                        ri_word,
                    }
                },
            )
    }
}
