//! Standard SES request, 44 bytes in both its SOM=1 and SOM=0 forms (uet-wire.md §3):
//! common (12) | buffer_offset:64 | initiator:32 | memory_key or match_bits:64 |
//! SOM=1: header_data:64, SOM=0: `rsvd:18 | payload_length:14 | message_offset:32` | request_length:32.
//! Deferrable sends put the restart token in `buffer_offset`; ready-to-restart puts it in `memory_key`.

use super::RequestCommon;
use super::common::FLAG_SOM;
use crate::bytes::{need, out, read_u32, read_u64, write_u32, write_u64};
use crate::header::FixedHeader;
use crate::{Error, Result};

/// The word at offset 32, chosen by SOM (uet-wire.md, "Decisions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SomField {
    /// SOM=1: completion data (valid when HD is set).
    HeaderData(u64),
    /// SOM=0: where this packet's payload sits in the message.
    Segment {
        /// The 18 reserved bits, kept.
        reserved: u32,
        /// Payload bytes in this packet (14 bits).
        payload_length: u16,
        /// Offset of this payload in the message.
        message_offset: u32,
    },
}

/// A parsed standard request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StandardRequest {
    /// The common 12 bytes (`word2` is the message_id).
    pub common: RequestCommon,
    /// Target buffer offset (or the restart token of a deferrable send).
    pub buffer_offset: u64,
    /// Initiator identifier.
    pub initiator: u32,
    /// Memory key (RMA) or match bits (tagged), or the RTR restart token.
    pub memory_key: u64,
    /// Header data (SOM=1) or segment position (SOM=0).
    pub som_field: SomField,
    /// Length of the whole request.
    pub request_length: u32,
}

impl StandardRequest {
    /// The message identifier.
    pub const fn message_id(&self) -> u16 {
        self.common.word2
    }

    /// The restart token `initiator_token:32 | target_token:32` in its slot for deferrable sends.
    pub const fn restart_token(&self) -> u64 {
        self.buffer_offset
    }
}

impl FixedHeader for StandardRequest {
    const LEN: usize = 44;

    #[inline(always)]
    fn parse(buf: &[u8]) -> Result<Self> {
        let common = RequestCommon::parse(buf)?;
        need(buf.len(), 44, "SES standard request")?;
        let som_field = if common.has(FLAG_SOM) {
            SomField::HeaderData(read_u64(buf, 32))
        } else {
            let w = read_u32(buf, 32);
            SomField::Segment {
                reserved: w >> 14,
                payload_length: (w & 0x3FFF) as u16,
                message_offset: read_u32(buf, 36),
            }
        };
        Ok(StandardRequest {
            common,
            buffer_offset: read_u64(buf, 12),
            initiator: read_u32(buf, 20),
            memory_key: read_u64(buf, 24),
            som_field,
            request_length: read_u32(buf, 40),
        })
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b = out(buf, 44)?;
        self.common.emit(b)?;
        write_u64(b, 12, self.buffer_offset);
        write_u32(b, 20, self.initiator);
        write_u64(b, 24, self.memory_key);
        match (self.som_field, self.common.has(FLAG_SOM)) {
            (SomField::HeaderData(d), true) => write_u64(b, 32, d),
            (SomField::Segment { reserved, payload_length, message_offset }, false) => {
                if reserved >= 1 << 18 || payload_length > 0x3FFF {
                    return Err(Error::Inconsistent("SOM=0 segment field out of range"));
                }
                write_u32(b, 32, (reserved << 14) | u32::from(payload_length));
                write_u32(b, 36, message_offset);
            }
            _ => return Err(Error::Inconsistent("header_data goes with SOM=1, a segment with SOM=0")),
        }
        write_u32(b, 40, self.request_length);
        Ok(44)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::uet::ses::SesOpcode;
    use proptest::prelude::*;

    #[test]
    fn som_and_non_som_forms() {
        // xdp2_uet_ses.pcap frame 1 (SOM=1) and frame 2 (SOM=0, WRITE).
        let b =
            hex("022b123477abcdef067809abfedcba9876543210fedcba981122334455667788aabbddddeeff001199887766");
        let r = StandardRequest::parse(&b).unwrap();
        assert_eq!(r.som_field, SomField::HeaderData(0xaabb_dddd_eeff_0011));
        assert_eq!((r.message_id(), r.initiator, r.request_length), (0x1234, 0xfedc_ba98, 0x9988_7766));
        let b =
            hex("012a123477abcdef067809abfedcba9876543210fedcba981122334455667788000003457766554499887766");
        let r = StandardRequest::parse(&b).unwrap();
        assert_eq!(r.common.opcode, SesOpcode::Write);
        assert_eq!(
            r.som_field,
            SomField::Segment { reserved: 0, payload_length: 0x345, message_offset: 0x7766_5544 }
        );
        let mut o = [0u8; 44];
        r.emit(&mut o).unwrap();
        assert_eq!(o[..], b[..]);
        // Deferrable send: restart token in buffer_offset (frame 3).
        let b =
            hex("082a123477abcdef067809ab8765432112345678fedcba981122334455667788fedcba987654321099887766");
        let r = StandardRequest::parse(&b).unwrap();
        assert_eq!((r.common.opcode, r.restart_token()), (SesOpcode::DeferrableSend, 0x8765_4321_1234_5678));
        let mut bad = r;
        bad.som_field = SomField::HeaderData(1);
        assert!(matches!(bad.emit(&mut o), Err(Error::Inconsistent(_))));
    }

    pub(crate) fn arb() -> impl Strategy<Value = StandardRequest> {
        (
            super::super::common::tests::arb(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            (any::<u64>(), 0u32..(1 << 18), 0u16..0x4000, any::<u32>()),
            any::<u32>(),
        )
            .prop_map(
                |(
                    common,
                    buffer_offset,
                    initiator,
                    memory_key,
                    (d, reserved, payload_length, message_offset),
                    request_length,
                )| {
                    let som_field = if common.has(FLAG_SOM) {
                        SomField::HeaderData(d)
                    } else {
                        SomField::Segment { reserved, payload_length, message_offset }
                    };
                    StandardRequest {
                        common,
                        buffer_offset,
                        initiator,
                        memory_key,
                        som_field,
                        request_length,
                    }
                },
            )
    }
}
