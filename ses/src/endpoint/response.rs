//! The responses a SES endpoint sends as a target: RSP with a return code, RSP_DATA with the bytes a
//! read or a fetching atomic returns. Over a PDC they go in order per PDC and wait while its send
//! queue is full; a RUDI request is answered with a RUDI response.

use std::collections::VecDeque;
use std::hash::Hash;

use bytes::Bytes;
use pds::{NextHeader, PdcId, SendError};
use wire::FixedHeader;
use wire::uet::ses::{Response, ResponseData, ResponseHead, ResponseOpcode, ReturnCode};

use super::Endpoint;
use super::state::Reply;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    pub(super) fn respond(
        &mut self,
        reply: Reply<A>,
        msg_id: u16,
        job_id: u32,
        rc: ReturnCode,
        modified: u32,
    ) {
        self.respond_list(reply, msg_id, job_id, rc, modified, 0);
    }

    pub(super) fn respond_list(
        &mut self,
        reply: Reply<A>,
        msg_id: u16,
        job_id: u32,
        rc: ReturnCode,
        modified: u32,
        list: u8,
    ) {
        if rc != ReturnCode::Ok {
            self.stats.errors_sent += 1;
        }
        let head = ResponseHead { list, opcode: ResponseOpcode::Response, version: 0, return_code: rc };
        let rsp = Response { head, message_id: msg_id, ri_generation: 0, job_id, modified_length: modified };
        let mut v = vec![0; Response::LEN];
        rsp.emit(&mut v).expect("sized");
        self.reply(reply, NextHeader::Rsp, Bytes::from(v));
    }

    pub(super) fn reply(&mut self, reply: Reply<A>, nh: NextHeader, bytes: Bytes) {
        match reply {
            Reply::Pdc(pdc) => {
                let queue = self.backlog.entry(pdc).or_default();
                queue.push_back((nh, bytes));
                if !flush_pdc(&mut self.pds, pdc, queue) {
                    self.backlog.remove(&pdc);
                }
            }
            Reply::Rudi(peer, pkt_id) => self.pds.rudi_respond(peer, pkt_id, nh, bytes),
            Reply::None => {}
        }
    }

    /// Queues waiting responses on their PDCs while the PDCs have room (a large READ answered at
    /// once can be more packets than a PDC's send queue holds: the rest wait here, never dropped).
    pub(super) fn flush_backlog(&mut self) {
        let pds = &mut self.pds;
        self.backlog.retain(|&pdc, queue| flush_pdc(pds, pdc, queue));
    }
}

/// Queues `queue`'s responses on `pdc` in order while it has room; whether some still wait. A
/// response whose PDC failed or closed has nobody to go to and is dropped.
fn flush_pdc<A: Copy + Eq + Hash + Ord + std::fmt::Debug>(
    pds: &mut pds::Endpoint<A>,
    pdc: PdcId,
    queue: &mut VecDeque<(NextHeader, Bytes)>,
) -> bool {
    while let Some((nh, bytes)) = queue.pop_front() {
        match pds.send_on(pdc, nh, bytes.clone(), 0) {
            Ok(_) | Err(SendError::UnknownPdc | SendError::Closing | SendError::NoPdcAvailable) => {}
            Err(SendError::QueueFull) => {
                queue.push_front((nh, bytes));
                return true;
            }
        }
    }
    false
}

/// One RSP_DATA packet: `bytes` at `offset` of a `total`-byte answer to request `msg_id`.
pub(super) fn data_response(msg_id: u16, job_id: u32, total: usize, offset: usize, bytes: &[u8]) -> Bytes {
    let head = ResponseHead {
        list: 0,
        opcode: ResponseOpcode::ResponseWData,
        version: 0,
        return_code: ReturnCode::Ok,
    };
    let rsp = ResponseData {
        head,
        message_id: msg_id,
        reserved: 0,
        job_id,
        read_req_message_id: msg_id,
        length_word: bytes.len() as u16,
        modified_length: total as u32,
        message_offset: offset as u32,
    };
    let mut v = vec![0; ResponseData::LEN + bytes.len()];
    rsp.emit(&mut v).expect("sized");
    v[ResponseData::LEN..].copy_from_slice(bytes);
    Bytes::from(v)
}
