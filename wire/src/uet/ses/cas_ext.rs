//! Compare-and-swap extension header, 36 bytes: the atomic extension, `compare[16]`, `swap[16]`
//! (uet-wire.md §3). Used with AMO opcodes 0x0D-0x12.

use super::AtomicExt;
use crate::Result;
use crate::bytes::{need, out};
use crate::header::FixedHeader;

/// A parsed compare-and-swap extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CasExt {
    /// The atomic part (operation, datatype, sem_ctl).
    pub atomic: AtomicExt,
    /// Compare operand (up to 128 bits, big-endian as on the wire).
    pub compare: [u8; 16],
    /// Swap operand.
    pub swap: [u8; 16],
}

impl FixedHeader for CasExt {
    const LEN: usize = 36;

    fn parse(buf: &[u8]) -> Result<Self> {
        let atomic = AtomicExt::parse(buf)?;
        need(buf.len(), 36, "SES compare-and-swap extension")?;
        let mut compare = [0u8; 16];
        let mut swap = [0u8; 16];
        compare.copy_from_slice(&buf[4..20]);
        swap.copy_from_slice(&buf[20..36]);
        Ok(CasExt { atomic, compare, swap })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, 36)?;
        self.atomic.emit(b)?;
        b[4..20].copy_from_slice(&self.compare);
        b[20..36].copy_from_slice(&self.swap);
        Ok(36)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::uet::ses::AmoOpcode;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 6: CSWAP_GE.
        let b = hex("110cc700987654329876543223456789234567890123456789abcdeffedcba0987654321");
        let r = CasExt::parse(&b).unwrap();
        assert_eq!(r.atomic.amo_opcode, AmoOpcode::CswapGe);
        assert_eq!(r.compare[..4], [0x98, 0x76, 0x54, 0x32]);
        assert_eq!(r.swap[15], 0x21);
        let mut o = [0u8; 36];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        assert!(CasExt::parse(&b[..35]).is_err());
    }

    /// CAS extensions (AMO opcodes 0x0D-0x12).
    pub(crate) fn arb() -> impl Strategy<Value = CasExt> {
        (super::super::atomic_ext::tests::arb(), 0x0Du8..=0x12, any::<[u8; 16]>(), any::<[u8; 16]>())
            .prop_map(|(mut atomic, op, compare, swap)| {
                atomic.amo_opcode = AmoOpcode::from(op);
                CasExt { atomic, compare, swap }
            })
    }
}
