//! Atomic extension header, 4 bytes: `amo_opcode:8 | datatype:8 | sem_ctl:8 | rsvd:8`
//! (uet-wire.md §3; `sem_ctl` flags per [`crate::uet::layout::SEM_CTL_CACHEABLE`]).

use super::codes::{AmoDatatype, AmoOpcode};
use crate::Result;
use crate::bytes::{need, out};
use crate::header::FixedHeader;
use crate::uet::layout::{SEM_CTL_CACHEABLE, SEM_CTL_CPU_COHERENT};

/// A parsed atomic extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicExt {
    /// Operation.
    pub amo_opcode: AmoOpcode,
    /// Operand datatype.
    pub datatype: AmoDatatype,
    /// Semantic control byte, kept whole (other bits than the two flags are reserved).
    pub sem_ctl: u8,
    /// Reserved byte, kept.
    pub reserved: u8,
}

impl AtomicExt {
    /// The cacheable flag.
    pub const fn cacheable(&self) -> bool {
        self.sem_ctl & SEM_CTL_CACHEABLE != 0
    }

    /// The CPU-coherent flag.
    pub const fn cpu_coherent(&self) -> bool {
        self.sem_ctl & SEM_CTL_CPU_COHERENT != 0
    }
}

impl FixedHeader for AtomicExt {
    const LEN: usize = 4;

    fn parse(buf: &[u8]) -> Result<Self> {
        need(buf.len(), 4, "SES atomic extension")?;
        Ok(AtomicExt {
            amo_opcode: AmoOpcode::from(buf[0]),
            datatype: AmoDatatype::from(buf[1]),
            sem_ctl: buf[2],
            reserved: buf[3],
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, 4)?;
        b.copy_from_slice(&[self.amo_opcode.into(), self.datatype.into(), self.sem_ctl, self.reserved]);
        Ok(4)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 11: BAND on FLOAT, sem_ctl 0xc5 (XDP2 puts its
        // flags in the top bits; read with REF's low-bit flags and kept whole).
        let r = AtomicExt::parse(&[0x08, 0x0a, 0xc5, 0x00]).unwrap();
        assert_eq!((r.amo_opcode, r.datatype), (AmoOpcode::Band, AmoDatatype::Float));
        assert!(r.cacheable() && !r.cpu_coherent());
        let mut o = [0u8; 4];
        r.emit(&mut o).unwrap();
        assert_eq!(o, [0x08, 0x0a, 0xc5, 0x00]);
        assert_eq!(AtomicExt::parse(&[8, 10, 0]), Err(Error::Truncated("SES atomic extension")));
    }

    /// Atomic extensions whose AMO opcode is not of the compare-and-swap family.
    pub(crate) fn arb() -> impl Strategy<Value = AtomicExt> {
        (
            any::<u8>().prop_filter("not CAS", |o| !(0x0D..=0x12).contains(o)),
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|(op, dt, sem_ctl, reserved)| AtomicExt {
                amo_opcode: AmoOpcode::from(op),
                datatype: AmoDatatype::from(dt),
                sem_ctl,
                reserved,
            })
    }
}
