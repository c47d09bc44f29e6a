//! Small (optimized non-matching) SES request, 20 bytes: common (12, with `rsvd:2 |
//! request_length:14` in bytes 2-3) | buffer_offset:64 (uet-wire.md §3). Single-packet messages.

use super::RequestCommon;
use crate::Result;
use crate::bytes::{need, out, read_u64, write_u64};
use crate::header::FixedHeader;

/// A parsed small request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmallRequest {
    /// The common 12 bytes (`word2` is `rsvd:2 | request_length:14`).
    pub common: RequestCommon,
    /// Target buffer offset.
    pub buffer_offset: u64,
}

impl SmallRequest {
    /// Request length (14 bits).
    pub const fn request_length(&self) -> u16 {
        self.common.word2 & 0x3FFF
    }
}

impl FixedHeader for SmallRequest {
    const LEN: usize = 20;

    fn parse(buf: &[u8]) -> Result<Self> {
        let common = RequestCommon::parse(buf)?;
        need(buf.len(), 20, "SES small request")?;
        Ok(SmallRequest { common, buffer_offset: read_u64(buf, 12) })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, 20)?;
        self.common.emit(b)?;
        write_u64(b, 12, self.buffer_offset);
        Ok(20)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    #[test]
    fn sample_vector() {
        // xdp2_uet_ses.pcap frame 10.
        let b = hex("022b123477abcdef067809ab9876543298765432");
        let r = SmallRequest::parse(&b).unwrap();
        assert_eq!((r.request_length(), r.buffer_offset), (0x1234, 0x9876_5432_9876_5432));
        let mut o = [0u8; 20];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
    }

    pub(crate) fn arb() -> impl Strategy<Value = SmallRequest> {
        (super::super::common::tests::arb(), any::<u64>())
            .prop_map(|(common, buffer_offset)| SmallRequest { common, buffer_offset })
    }
}
