//! Requests in the compact forms, received: the optimized non-matching header (REQ_SMALL, 20 B)
//! and the small-message header (REQ_MEDIUM, 32 B) (uet-wire.md §3; `ses/README.md`, "SES header
//! forms"). Each is read as the standard request it stands for and handled as one; what the
//! compact forms leave out is filled in here:
//! - the message id, which they do not carry: the low 16 bits of the request's PSN (over RUDI,
//!   of its `pkt_id`), which the response carries back and the initiator matches;
//! - a READ or fetching atomic is answered by RSP_DATA_SMALL, whose `original_request_psn` names
//!   the request (a READ longer than one packet, which softrdma never sends in a compact form, by
//!   RSP_DATA packets with that message id);
//! - the optimized header has no memory key: its resource index carries the RKEY (0 to 4095) of a
//!   region registered OPTIMIZED, which is the memory key; no initiator either (0).
//!
//! Both forms are single-packet (SOM and EOM set, no message offset): one without either flag is
//! dropped.

use std::hash::Hash;
use std::time::Duration;

use pds::DeliveryKind;
use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{ReturnCode, SesExt, SesOpcode, SomField, StandardRequest};

use super::Endpoint;
use super::state::{Compact, Reply};
use super::types::{Refusal, Taken};
use crate::key;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_compact(
        &mut self,
        now: Duration,
        src: A,
        reply: Reply<A>,
        kind: DeliveryKind,
        req: Compact<'_>,
        ext: Option<SesExt>,
        payload: &[u8],
    ) -> Taken {
        // What names the request in its response.
        let psn = match kind {
            DeliveryKind::Pdc { psn, .. } => psn,
            DeliveryKind::RudiRequest { pkt_id } => pkt_id,
            _ => 0,
        };
        let id = psn as u16;
        let r = match req {
            Compact::Small(s) => {
                let c = s.common;
                let rkey = u64::from(c.resource_index());
                let common = c.flags & (FLAG_SOM | FLAG_EOM) == FLAG_SOM | FLAG_EOM;
                if !common {
                    return Err(Refusal::Dropped);
                }
                let rma = matches!(
                    c.opcode,
                    SesOpcode::Write | SesOpcode::Read | SesOpcode::Atomic | SesOpcode::FetchingAtomic
                );
                // The resource index names the region: only one registered OPTIMIZED may be
                // reached this way.
                let optimized = self.regions.get(rkey).is_some_and(|g| g.flags & key::OPTIMIZED != 0);
                let refused = if !rma {
                    Some(ReturnCode::UnsupportedOp)
                } else if !optimized {
                    Some(ReturnCode::BadMkey)
                } else {
                    None
                };
                if let Some(rc) = refused {
                    self.respond(reply, id, c.job_id, rc, 0);
                    return Err(Refusal::Rejected);
                }
                StandardRequest {
                    common: wire::uet::ses::RequestCommon {
                        word2: id,
                        flags: c.flags & !FLAG_HD,
                        ri_word: self.cfg.resource_index & 0x0FFF,
                        ..c
                    },
                    buffer_offset: s.buffer_offset,
                    initiator: 0,
                    memory_key: rkey | key::OPTIMIZED,
                    som_field: SomField::HeaderData(0),
                    request_length: u32::from(s.request_length()),
                }
            }
            Compact::Medium(m) => {
                let c = m.common;
                if c.flags & (FLAG_SOM | FLAG_EOM) != FLAG_SOM | FLAG_EOM {
                    return Err(Refusal::Dropped);
                }
                let (offset, hd) = match m.header_data() {
                    Some(h) => (0, h),
                    None => (m.data_or_offset, 0),
                };
                StandardRequest {
                    common: wire::uet::ses::RequestCommon { word2: id, ..c },
                    buffer_offset: offset,
                    initiator: m.initiator,
                    memory_key: m.match_bits,
                    som_field: SomField::HeaderData(hd),
                    request_length: u32::from(m.request_length()),
                }
            }
        };
        // One packet holds the whole message: one whose payload falls short is no compact request.
        let carries = matches!(
            r.common.opcode,
            SesOpcode::Send | SesOpcode::TaggedSend | SesOpcode::Write | SesOpcode::DatagramSend
        );
        if carries && payload.len() != r.request_length as usize {
            return Err(Refusal::Dropped);
        }
        self.on_request(now, src, reply, &r, ext, payload, Some(psn))
    }
}
