//! The responses a SES endpoint sends as a target: RSP with a return code, RSP_DATA with the bytes a
//! read or a fetching atomic returns. Over a PDC they go in order per PDC and wait while its send
//! queue is full; a READ's RSP_DATA packets are built from the region only as its PDC takes them
//! (`Config::read_window`), never the whole range at once. A RUDI request is answered with one
//! RUDI response.

use std::collections::VecDeque;
use std::hash::Hash;

use bytes::Bytes;
use pds::{NextHeader, PdcId, SendError, Urgency};
use wire::FixedHeader;
use wire::uet::ses::{Response, ResponseData, ResponseDataSmall, ResponseHead, ResponseOpcode, ReturnCode};

use ahash::AHashMap as HashMap;

use super::Endpoint;
use super::state::{Pending, Reply};
use crate::config::Config;
use crate::key::Regions;

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
        let reply = match reply {
            // An error is news the initiator acts on (it may still be sending the message): it
            // goes at once, whatever the request asked.
            Reply::Pdc(pdc, _) if rc != ReturnCode::Ok => Reply::Pdc(pdc, Urgency::Prompt),
            r => r,
        };
        if rc != ReturnCode::Ok {
            self.stats.errors_sent += 1;
            self.stats.errors_sent_codes.add(rc.into());
        }
        self.reply(reply, NextHeader::Rsp, response(msg_id, job_id, rc, modified, list));
    }

    pub(super) fn reply(&mut self, reply: Reply<A>, nh: NextHeader, bytes: Bytes) {
        match reply {
            Reply::Pdc(pdc, urgency) => self.queue_on(pdc, Pending::Packet(nh, bytes, urgency)),
            Reply::Rudi(peer, pkt_id) => self.pds.rudi_respond(peer, pkt_id, nh, bytes),
            Reply::None => {}
        }
    }

    /// Queues a response (or a READ to serve) on `pdc` after those waiting there, and sends what
    /// the PDC takes now.
    pub(super) fn queue_on(&mut self, pdc: PdcId, p: Pending<A>) {
        let queue = self.backlog.entry(pdc).or_default();
        queue.push_back(p);
        let mut out = Out { pds: &mut self.pds, regions: &self.regions, served: &mut self.served_reads };
        if !out.flush(pdc, queue, &self.cfg) {
            self.backlog.remove(&pdc);
        }
    }

    /// Queues waiting responses on their PDCs while the PDCs have room, and the packets of the
    /// READs being served while their PDCs hold fewer than `read_window` packets.
    pub(super) fn flush_backlog(&mut self) {
        let mut out = Out { pds: &mut self.pds, regions: &self.regions, served: &mut self.served_reads };
        let cfg = &self.cfg;
        self.backlog.retain(|&pdc, queue| out.flush(pdc, queue, cfg));
    }
}

/// What flushing a PDC's backlog touches.
struct Out<'a, A> {
    pds: &'a mut pds::Endpoint<A>,
    regions: &'a Regions,
    served: &'a mut HashMap<A, usize>,
}

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Out<'_, A> {
    /// Queues `queue`'s responses on `pdc` in order while it has room; whether some still wait.
    /// A response whose PDC failed or closed has nobody to go to and is dropped.
    fn flush(&mut self, pdc: PdcId, queue: &mut VecDeque<Pending<A>>, cfg: &Config) -> bool {
        while let Some(front) = queue.front_mut() {
            let done = match front {
                Pending::Packet(nh, bytes, urgency) => {
                    match self.pds.send_on_with(pdc, *nh, bytes.clone(), 0, *urgency) {
                        Err(SendError::QueueFull) => return true,
                        _ => true,
                    }
                }
                Pending::Read(r) => {
                    let Some(info) = self.pds.pdc_info(pdc) else {
                        self.end_read(r.peer);
                        queue.pop_front();
                        continue;
                    };
                    if info.unacked >= cfg.read_window {
                        return true;
                    }
                    let n = cfg.max_payload.max(1).min(r.len - r.next);
                    let at = r.base + r.next;
                    let bytes = self.regions.get(r.key).and_then(|g| g.data.bytes().get(at..at + n));
                    // A region deregistered (or replaced by a smaller one) while it was read: the
                    // rest of the read is refused.
                    let (nh, pkt) = match bytes {
                        Some(b) if r.small_psn.is_some() => (
                            NextHeader::RspDataSmall,
                            data_response_small(r.small_psn.unwrap_or(0), r.job_id, b),
                        ),
                        Some(b) => (NextHeader::RspData, data_response(r.msg_id, r.job_id, r.len, r.next, b)),
                        None => (NextHeader::Rsp, response(r.msg_id, r.job_id, ReturnCode::BadMkey, 0, 0)),
                    };
                    match self.pds.send_on(pdc, nh, pkt, 0) {
                        Err(SendError::QueueFull) => return true,
                        Ok(_) if bytes.is_some() => {
                            r.next += n;
                            r.next >= r.len
                        }
                        _ => true,
                    }
                }
            };
            if done {
                if let Some(Pending::Read(r)) = queue.pop_front() {
                    self.end_read(r.peer);
                }
            }
        }
        false
    }

    fn end_read(&mut self, peer: A) {
        if let Some(n) = self.served.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                self.served.remove(&peer);
            }
        }
    }
}

/// One RSP packet with return code `rc`.
fn response(msg_id: u16, job_id: u32, rc: ReturnCode, modified: u32, list: u8) -> Bytes {
    let head = ResponseHead { list, opcode: ResponseOpcode::Response, version: 0, return_code: rc };
    let rsp = Response { head, message_id: msg_id, ri_generation: 0, job_id, modified_length: modified };
    let mut v = vec![0; Response::LEN];
    rsp.emit(&mut v).expect("sized");
    Bytes::from(v)
}

/// One RSP_DATA_SMALL packet: all the `bytes` answering the compact request of PSN `psn`.
pub(super) fn data_response_small(psn: u32, job_id: u32, bytes: &[u8]) -> Bytes {
    let head = ResponseHead {
        list: 0,
        opcode: ResponseOpcode::ResponseWData,
        version: 0,
        return_code: ReturnCode::Ok,
    };
    let rsp = ResponseDataSmall {
        head,
        length_word: bytes.len() as u16 & 0x3FFF,
        job_word: job_id & 0xFF_FFFF,
        original_request_psn: psn,
    };
    let mut v = vec![0; ResponseDataSmall::LEN + bytes.len()];
    rsp.emit(&mut v).expect("sized");
    v[ResponseDataSmall::LEN..].copy_from_slice(bytes);
    Bytes::from(v)
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
