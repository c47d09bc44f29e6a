//! Large messages (`../shared/spec/uet-libfabric.md` "Profiles"; `../shared/spec/uet-wire.md` §3):
//! rendezvous sends in the HPC profile and deferrable sends in AI Full.
//!
//! **Rendezvous** (RENDEZVOUS_SEND / RENDEZVOUS_TSEND, messages of at least
//! `Config::msg_rendezvous_size` / `tag_rendezvous_size` bytes): the initiator exposes the message
//! read-only under a random internal key (RKEY bit 47, never a user key; readable only by the
//! receiver, from its fabric address) and sends one packet with the
//! first `eager` bytes (`min(max_eager, max_payload)`) and the rendezvous extension (eager length,
//! its own PIDonFEP and resource index, `read_offset` = eager length, the internal key). The target
//! places the eager bytes into the matching receive (now, or when one is posted: the request then
//! waits as an unexpected message holding only the eager part), READs the rest (at most what fits
//! the buffer) with the request's JobID, and answers the rendezvous request only when that read is
//! done; the initiator then drops the internal key and completes.
//!
//! **Deferrable** (DEFERRABLE_SEND / DEFERRABLE_TSEND, same thresholds, AI Full): the whole message
//! goes with `buffer_offset` = restart token `initiator_token:32 | target_token:32`, target token 0.
//! A target with a matching receive takes it as a plain send. An AI Full target without one drops
//! the data, remembers the message (source, tag, JobID, initiator token) on its overflow list and
//! answers NO_MATCH with the response's list field = OVERFLOW (1): "deferred". When a matching
//! receive is posted, the target reserves it under a fresh target token and sends DEFERRABLE_RTR
//! (the restart token in the `memory_key` slot) to the initiator's fabric address; the initiator
//! answers it and sends the message again, now with both tokens; the target puts it into the
//! reserved receive. An RTR is matched by its token, not by PIDonFEP/resource index (the initiator's
//! are not on the wire of the original request): softrdma's choice, with the list-field signal
//! above, where the spec text was not available. Targets in other profiles treat deferrable sends
//! as plain sends (as the mapping says of HPC); a NO_MATCH with list EXPECTED is a refusal.

use std::hash::Hash;

use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{RendezvousExt, ReturnCode, SesExt, SesOpcode, SomField, StandardRequest};

use super::Endpoint;
use super::state::{Dest, Internal, Later, RdvReq, RdvWait, Reply, Req, Restart, Src};
use super::types::{Addr, Completion, CompletionKind, Error, Opts, Refusal, Status, Taken};
use crate::config::{EpType, Profile};
use crate::key::{Access, INTERNAL, JobScope};
use crate::matching::{MsgInfo, Posted};
use crate::mode::{DeliveryMode, OpKind, delivery_mode};

/// Response list value meaning "kept on the overflow list": a deferred deferrable send.
pub(super) const LIST_OVERFLOW: u8 = 1;

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// Sends `data` by rendezvous or as a deferrable send when the profile and size call for it;
    /// `None` for a plain send.
    pub(super) fn large_send(
        &mut self,
        dst: Addr<A>,
        data: Src<'_>,
        tag: Option<u64>,
        opts: Opts,
        job_id: u32,
    ) -> Option<Result<u16, Error>> {
        let threshold =
            if tag.is_some() { self.cfg.tag_rendezvous_size } else { self.cfg.msg_rendezvous_size };
        if data.len() < threshold || self.cfg.ep_type != EpType::Rdm {
            return None;
        }
        if data.len() > self.cfg.max_message {
            return Some(Err(Error::TooLong));
        }
        match self.cfg.profile {
            Profile::Hpc => Some(self.rendezvous_send(dst, data.as_slice(), tag, opts, job_id)),
            Profile::AiFull => Some(self.deferrable_send(dst, data, tag, opts, job_id)),
            Profile::AiBase => None,
        }
    }

    fn rendezvous_send(
        &mut self,
        dst: Addr<A>,
        data: &[u8],
        tag: Option<u64>,
        opts: Opts,
        job_id: u32,
    ) -> Result<u16, Error> {
        let eager = self.cfg.max_eager.min(self.cfg.max_payload).min(data.len());
        // A random key (47 bits), readable only by the receiver (see serve_read).
        let mut key = INTERNAL | (self.random() & (INTERNAL - 1));
        while self.regions.get(key).is_some() {
            key = INTERNAL | (self.random() & (INTERNAL - 1));
        }
        let read_only = Access { remote_read: true, remote_write: false };
        self.regions.register_internal(key, data.to_vec(), read_only, JobScope::Job(job_id));
        self.rendezvous_keys.insert(key, dst.fep);
        let ext = RendezvousExt {
            eager_length: eager as u32,
            rd_word: (u32::from(self.cfg.pid_on_fep & 0xFFF) << 12)
                | u32::from(self.cfg.resource_index & 0xFFF),
            read_offset: eager as u64,
            read_match_bits: key,
        };
        let opcode = if tag.is_some() { SesOpcode::RendezvousTsend } else { SesOpcode::RendezvousSend };
        let mode = delivery_mode(self.cfg.ep_type, self.cfg.profile, OpKind::Message, opts.ordered, 0);
        let req = |msg_id| Req {
            opcode,
            msg_id,
            dst: (dst.pid_on_fep, dst.resource_index),
            buffer_offset: 0,
            key: tag.unwrap_or(0),
            header_data: opts.header_data,
            total: data.len(),
            ext: Some(SesExt::Rendezvous(ext)),
            job_id,
        };
        let r = self.start_single(
            dst.fep,
            mode,
            CompletionKind::Send,
            req,
            &data[..eager],
            data.len(),
            opts.context,
            false,
        );
        match r {
            Ok(id) => {
                self.stats.rendezvous_sent += 1;
                self.ops.get_mut(&id).expect("just inserted").cleanup_key = Some(key);
                Ok(id)
            }
            Err(e) => {
                self.regions.deregister(key);
                self.rendezvous_keys.remove(&key);
                Err(e)
            }
        }
    }

    fn deferrable_send(
        &mut self,
        dst: Addr<A>,
        data: Src<'_>,
        tag: Option<u64>,
        opts: Opts,
        job_id: u32,
    ) -> Result<u16, Error> {
        self.next_token = self.next_token.wrapping_add(1).max(1);
        let mode = delivery_mode(self.cfg.ep_type, self.cfg.profile, OpKind::Message, opts.ordered, 0);
        let restart = Restart {
            data: data.to_bytes(),
            dst,
            tag,
            header_data: opts.header_data,
            token: self.next_token,
            mode,
            job_id,
        };
        let id = self.send_deferrable(&restart, 0, opts.context)?;
        self.ops.get_mut(&id).expect("just inserted").restart = Some(Box::new(restart));
        Ok(id)
    }

    /// Sends (or restarts) a deferrable send with the restart token `token:32 | target_token:32`.
    fn send_deferrable(&mut self, s: &Restart<A>, target_token: u32, context: u64) -> Result<u16, Error> {
        let opcode = if s.tag.is_some() { SesOpcode::DeferrableTsend } else { SesOpcode::DeferrableSend };
        let req = |msg_id| Req {
            opcode,
            msg_id,
            dst: (s.dst.pid_on_fep, s.dst.resource_index),
            buffer_offset: (u64::from(s.token) << 32) | u64::from(target_token),
            key: s.tag.unwrap_or(0),
            header_data: s.header_data,
            total: s.data.len(),
            ext: None,
            job_id: s.job_id,
        };
        self.start_pdc_op(s.dst.fep, s.mode, CompletionKind::Send, req, Src::Shared(&s.data), context, false)
    }

    /// A NO_MATCH with list OVERFLOW for a deferrable send: it waits for the RTR (true).
    pub(super) fn deferred(&mut self, msg_id: u16, rc: ReturnCode, list: u8) -> bool {
        rc == ReturnCode::NoMatch
            && list == LIST_OVERFLOW
            && self.ops.get(&msg_id).is_some_and(|op| op.restart.is_some())
    }

    /// The first packet of a deferrable send at the target: where its bytes go.
    pub(super) fn deferrable_dest(
        &mut self,
        r: &StandardRequest,
        info: &MsgInfo<A>,
        total: usize,
    ) -> Dest<A> {
        let target_token = r.buffer_offset as u32;
        let init_token = (r.buffer_offset >> 32) as u32;
        if target_token != 0 {
            return match self.reserved.remove(&target_token) {
                Some((src, p)) if src == info.src.fep => Dest::Recv(p),
                Some(other) => {
                    self.reserved.insert(target_token, other);
                    Dest::Discard(ReturnCode::NoMatch)
                }
                None => Dest::Discard(ReturnCode::NoMatch),
            };
        }
        if let Some(p) = self.queues.take(info) {
            return Dest::Recv(p);
        }
        if self.cfg.profile != Profile::AiFull {
            return self.unexpected_dest(info, total, false);
        }
        if !self.unexpected_room(0) {
            return Dest::Discard(ReturnCode::NoMatch);
        }
        self.stats.deferred += 1;
        let later = Later::Deferred { init_token, job_id: r.common.job_id };
        self.push_unexpected(*info, Vec::new(), true, None, later);
        Dest::Deferred
    }

    /// A receive takes a deferred message: reserve it and ask the initiator to restart.
    pub(super) fn restart_deferred(&mut self, p: Posted<A>, src: A, init_token: u32, job_id: u32) {
        self.next_token = self.next_token.wrapping_add(1).max(1);
        let target_token = self.next_token;
        let req = |msg_id| Req {
            opcode: SesOpcode::DeferrableRtr,
            msg_id,
            dst: (0, 0),
            buffer_offset: 0,
            key: (u64::from(init_token) << 32) | u64::from(target_token),
            header_data: None,
            total: 0,
            ext: None,
            job_id,
        };
        match self.start_single(src, DeliveryMode::Rud, CompletionKind::Send, req, &[], 0, 0, false) {
            Ok(id) => {
                self.ops.get_mut(&id).expect("just inserted").internal = Some(Internal::Rtr(target_token));
                self.reserved.insert(target_token, (src, p));
            }
            // No PDC or no room now: the receive goes back; the message stays deferred on the
            // initiator, which a later receive can restart.
            Err(_) => self.queues.post(p),
        }
    }

    /// DEFERRABLE_RTR at the initiator: restart the send it names.
    pub(super) fn on_rtr(&mut self, src: A, reply: Reply<A>, r: &StandardRequest) -> Taken {
        let c = &r.common;
        if !self.job_authorized(c.job_id) {
            self.respond(reply, r.message_id(), c.job_id, ReturnCode::BadJobId, 0);
            return Err(Refusal::Rejected);
        }
        let init_token = (r.memory_key >> 32) as u32;
        let target_token = r.memory_key as u32;
        let found = self.ops.iter().find_map(|(&id, op)| {
            op.restart.as_ref().filter(|s| s.token == init_token && s.dst.fep == src).map(|_| id)
        });
        let Some(old_id) = found else {
            self.respond(reply, r.message_id(), c.job_id, ReturnCode::NoMatch, 0);
            return Err(Refusal::Rejected);
        };
        self.respond(reply, r.message_id(), c.job_id, ReturnCode::Ok, 0);
        let mut op = self.ops.remove(&old_id).expect("found");
        let restart = op.restart.take().expect("found by it");
        match self.send_deferrable(&restart, target_token, op.context) {
            Ok(new_id) => {
                self.stats.restarts += 1;
                let fresh = self.ops.remove(&new_id).expect("just inserted");
                op.pdc = fresh.pdc;
                self.ops.insert(new_id, op);
            }
            Err(e) => {
                let status = match e {
                    Error::NoPdc => Status::Remote(ReturnCode::Undeliverable),
                    _ => Status::Remote(ReturnCode::Dropped),
                };
                self.completions.push_back(Completion::local(op.context, op.kind, status, 0, Vec::new()));
            }
        }
        Ok(())
    }

    /// RENDEZVOUS_SEND / RENDEZVOUS_TSEND at the target (one packet: the eager part).
    pub(super) fn on_rendezvous(
        &mut self,
        src: A,
        reply: Reply<A>,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
        info: MsgInfo<A>,
    ) -> Taken {
        let c = &r.common;
        let total = r.request_length as usize;
        let Some(SesExt::Rendezvous(ext)) = ext else {
            return Err(Refusal::Dropped);
        };
        let single = c.has(FLAG_SOM) && c.has(FLAG_EOM);
        if !single || ext.eager_length as usize != payload.len() || payload.len() > total {
            return Err(Refusal::Dropped);
        }
        if let Err(rc) = self.check_target(c, total) {
            self.respond(reply, r.message_id(), c.job_id, rc, 0);
            return Err(Refusal::Rejected);
        }
        let header_data = match r.som_field {
            SomField::HeaderData(h) if c.has(FLAG_HD) => Some(h),
            _ => None,
        };
        let req = RdvReq { src, reply, msg_id: r.message_id(), job_id: c.job_id, ext, total };
        if let Some(p) = self.queues.take(&info) {
            self.start_rdv_read(p, info, header_data, payload, req);
            return Ok(());
        }
        if !self.unexpected_room(payload.len()) {
            self.respond(reply, r.message_id(), c.job_id, ReturnCode::NoMatch, 0);
            return Err(Refusal::Rejected);
        }
        self.unexpected_bytes += payload.len();
        self.stats.unexpected += 1;
        self.push_unexpected(info, payload.to_vec(), true, header_data, Later::Rendezvous(req));
        Ok(())
    }

    /// A receive takes a rendezvous: place the eager bytes, read the rest.
    pub(super) fn start_rdv_read(
        &mut self,
        mut p: Posted<A>,
        info: MsgInfo<A>,
        header_data: Option<u64>,
        eager: &[u8],
        req: RdvReq<A>,
    ) {
        let n = p.buf.bytes().len().min(eager.len());
        wire::copy_payload(&mut p.buf.bytes_mut()[..n], &eager[..n]);
        let want = req.total.min(p.buf.bytes().len());
        if want <= eager.len() {
            return self.finish_rendezvous(p, info, header_data, req);
        }
        let from = Addr {
            fep: req.src,
            pid_on_fep: req.ext.rd_pid_on_fep(),
            resource_index: req.ext.rd_res_index(),
        };
        let opts = Opts { job_id: Some(req.job_id), ..Opts::default() };
        let len = want - eager.len();
        match self.read(from, req.ext.read_match_bits, req.ext.read_offset, len, opts) {
            Ok(id) => {
                self.stats.rendezvous_reads += 1;
                self.ops.get_mut(&id).expect("just inserted").internal = Some(Internal::RdvRead(id));
                self.rdv_waits.insert(id, RdvWait { posted: p, info, header_data, req });
            }
            Err(_) => {
                self.finish_recv_status(p, info, Status::Remote(ReturnCode::Dropped), header_data);
                self.respond(req.reply, req.msg_id, req.job_id, ReturnCode::Dropped, 0);
            }
        }
    }

    /// A rendezvous receive holds all of the message that fits: complete it and answer the sender
    /// (TOO_LONG when the buffer was shorter than the message).
    fn finish_rendezvous(
        &mut self,
        p: Posted<A>,
        info: MsgInfo<A>,
        header_data: Option<u64>,
        req: RdvReq<A>,
    ) {
        let rc = if req.total > p.buf.bytes().len() { ReturnCode::TooLong } else { ReturnCode::Ok };
        self.finish_recv(p, info, req.total, header_data);
        self.respond(req.reply, req.msg_id, req.job_id, rc, req.total as u32);
    }

    /// An internal operation ended: `data` on success (a rendezvous read's bytes), else why not.
    pub(super) fn finish_internal(&mut self, internal: Internal, result: Result<Vec<u8>, Status>) {
        match internal {
            Internal::RdvRead(wait) => {
                let Some(RdvWait { posted, info, header_data, req }) = self.rdv_waits.remove(&wait) else {
                    return;
                };
                match result {
                    // The read placed its bytes in the receive's buffer as they came
                    // (`on_response`).
                    Ok(_) => self.finish_rendezvous(posted, info, header_data, req),
                    Err(status) => {
                        let rc = match status {
                            Status::Remote(rc) => rc,
                            _ => ReturnCode::Undeliverable,
                        };
                        self.finish_recv_status(posted, info, status, header_data);
                        self.respond(req.reply, req.msg_id, req.job_id, rc, 0);
                    }
                }
            }
            Internal::Rtr(target_token) => {
                if result.is_err() {
                    // The initiator cannot restart (gone, or no such send): the receive returns.
                    if let Some((_, p)) = self.reserved.remove(&target_token) {
                        self.queues.post(p);
                    }
                }
            }
        }
    }
}
