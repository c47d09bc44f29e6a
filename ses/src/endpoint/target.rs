//! The target side of a SES endpoint: posted receives, and requests in. Each request is checked
//! (JobID, PIDonFEP, resource index, length); a send is matched against the posted receives or kept
//! as an unexpected message, a write is placed into its region, a read or an atomic is served; each
//! is answered with a response (see `response`).

use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::Duration;

use ahash::AHashMap as HashMap;
use pds::{NextHeader, PdcId, Urgency};
use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{RequestCommon, ReturnCode, SesExt, SesOpcode, SomField, StandardRequest};

use super::Endpoint;
use super::large::LIST_OVERFLOW;
use super::response::{data_response, data_response_small};
use super::state::{Dest, InMsg, Later, Pending, Reply, ServedRead, Unexpected};
use super::types::{Completion, CompletionKind, Refusal, Status, Taken};
use crate::amo;
use crate::config::EpType;
use crate::key::{Memory, Regions, Want};
use crate::matching::{MsgInfo, Posted, RecvSpec, Source};

impl<A: Copy + Eq + Hash + Ord + std::fmt::Debug> Endpoint<A> {
    /// Posts a receive buffer of `len` bytes for messages `spec` accepts. An unexpected message it
    /// matches is taken at once. Its completion carries the bytes.
    pub fn post_recv(&mut self, spec: RecvSpec<A>, len: usize, context: u64) {
        self.post_recv_into(spec, Box::new(vec![0; len]), context);
    }

    /// [`post_recv`](Self::post_recv) into `buf`, the caller's memory: the message is placed
    /// there as it arrives (no copy after), and the completion carries its length only.
    pub fn post_recv_into(&mut self, spec: RecvSpec<A>, buf: Box<dyn Memory>, context: u64) {
        let posted = Posted { spec, buf, context };
        let Some(id) = self.unexpected.iter().find(|(_, u)| spec.accepts(&u.info)).map(|(&id, _)| id) else {
            self.queues.post(posted);
            return;
        };
        let u = self.unexpected.remove(&id).expect("found");
        self.unexpected_bytes -= u.data.len();
        match u.later {
            Later::Nothing => {}
            Later::Rendezvous(req) => {
                return self.start_rdv_read(posted, u.info, u.header_data, &u.data, req);
            }
            Later::Deferred { init_token, job_id } => {
                return self.restart_deferred(posted, u.info.src.fep, init_token, job_id);
            }
        }
        if u.complete {
            let mut posted = posted;
            let n = posted.buf.bytes().len().min(u.data.len());
            wire::copy_payload(&mut posted.buf.bytes_mut()[..n], &u.data[..n]);
            self.finish_recv(posted, u.info, u.data.len(), u.header_data);
            return;
        }
        // Still arriving: the receive takes its place, with what has come so far.
        let Some(msg) = u.inbound.and_then(|key| self.inbound.get_mut(&key)) else {
            // Not reachable while `remove_inbound` keeps both in step; never a panic if it were.
            self.queues.post(posted);
            return;
        };
        let mut posted = posted;
        let n = posted.buf.bytes().len().min(u.data.len());
        wire::copy_payload(&mut posted.buf.bytes_mut()[..n], &u.data[..n]);
        msg.dest = Dest::Recv(posted);
    }

    /// Cancels a posted receive (a completion with [`Status::Cancelled`] follows, with the
    /// receive's tag for a tagged one); false if no receive with that context is waiting (one a
    /// message has matched is no longer waiting).
    pub fn cancel_recv(&mut self, context: u64) -> bool {
        let Some(p) = self.queues.cancel(context) else { return false };
        let mut c = Completion::local(p.context, CompletionKind::Recv, Status::Cancelled, 0, Vec::new());
        c.tag = p.spec.tag.map(|(tag, _)| tag);
        self.completions.push_back(c);
        true
    }

    /// A receive that could not get its message (a rendezvous whose read failed).
    pub(super) fn finish_recv_status(
        &mut self,
        p: Posted<A>,
        info: MsgInfo<A>,
        status: Status,
        header_data: Option<u64>,
    ) {
        self.completions.push_back(Completion {
            context: p.context,
            kind: CompletionKind::Recv,
            status,
            len: 0,
            data: Vec::new(),
            src: Some(info.src),
            tag: info.tag,
            header_data,
        });
    }

    /// A receive whose buffer holds the (first `buf.len()` bytes of the) message is done.
    pub(super) fn finish_recv(
        &mut self,
        p: Posted<A>,
        info: MsgInfo<A>,
        total: usize,
        header_data: Option<u64>,
    ) {
        let len = total.min(p.buf.bytes().len());
        let mut buf = p.buf.into_vec();
        buf.truncate(len);
        let status = if total > len { Status::Truncated } else { Status::Ok };
        self.completions.push_back(Completion {
            context: p.context,
            kind: CompletionKind::Recv,
            status,
            len,
            data: buf,
            src: Some(info.src),
            tag: info.tag,
            header_data,
        });
    }

    /// A request (a compact one as the standard request it stands for, `small_rsp` the PSN its
    /// data response names: see `compact`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_request(
        &mut self,
        now: Duration,
        src: A,
        reply: Reply<A>,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
        small_rsp: Option<u32>,
    ) -> Taken {
        let c = &r.common;
        let total = r.request_length as usize;
        let (offset, header_data) = match r.som_field {
            SomField::HeaderData(h) => (0, (c.has(FLAG_HD)).then_some(h)),
            SomField::Segment { payload_length, message_offset, .. } => {
                if usize::from(payload_length) != payload.len() {
                    return Err(Refusal::Dropped);
                }
                (message_offset as usize, None)
            }
        };
        if offset.checked_add(payload.len()).is_none_or(|end| end > total) {
            return Err(Refusal::Dropped);
        }
        if let Err(rc) = self.check_delivery(reply, r, offset, payload.len()) {
            self.respond(reply, r.message_id(), c.job_id, rc, 0);
            return Err(Refusal::WrongDelivery);
        }
        let info = MsgInfo {
            src: Source { fep: src, initiator: r.initiator },
            tag: is_tagged(c.opcode).then_some(r.memory_key),
            job_id: c.job_id,
        };
        if is_single(c.opcode) {
            self.stats.ops_rx.add(c.opcode.into());
        }
        match c.opcode {
            SesOpcode::Read => return self.serve_read(src, reply, r, small_rsp),
            SesOpcode::Atomic | SesOpcode::FetchingAtomic => {
                return self.serve_atomic(reply, r, ext, payload, small_rsp);
            }
            SesOpcode::RendezvousSend | SesOpcode::RendezvousTsend => {
                return self.on_rendezvous(src, reply, r, ext, payload, info);
            }
            SesOpcode::DeferrableRtr => return self.on_rtr(src, reply, r),
            _ => {}
        }
        let pdc = match reply {
            Reply::Pdc(p, _) => p,
            _ => 0,
        };
        let key = (src, pdc, r.message_id());
        // One lookup per packet of a message already under way.
        if let Some(m) = self.inbound.get_mut(&key) {
            if m.total != total {
                // Every packet of a message carries the same request_length; one that does not is
                // not part of it.
                return Err(Refusal::Dropped);
            }
            m.last = now;
            m.header_data = m.header_data.or(header_data);
            let placed = place(&mut m.dest, &mut self.unexpected, &mut self.regions, offset, payload);
            m.received += payload.len();
            if m.received < m.total {
                return placed;
            }
            let m = self.remove_inbound(key).expect("present");
            self.finish_msg(reply, r, m);
            return placed;
        }
        // The first packet of a message to arrive decides where its bytes go. A refused message
        // keeps no state: its first packet (SOM) is answered, its others are dropped.
        let (dest, refusal) = if self.inbound_full(src, pdc) {
            (Dest::Discard(ReturnCode::Dropped), Refusal::InboundFull)
        } else {
            (self.destination(c, r, &info, total, matches!(reply, Reply::Rudi(..))), Refusal::Rejected)
        };
        if let Dest::Discard(rc) = dest {
            if c.has(FLAG_SOM) {
                self.stats.ops_rx.add(c.opcode.into());
                self.respond(reply, r.message_id(), c.job_id, rc, 0);
            }
            return Err(refusal);
        }
        self.stats.ops_rx.add(c.opcode.into());
        let mut m =
            InMsg { dest, info, total, received: 0, header_data, job_id: c.job_id, last: now, armed: now };
        let placed = place(&mut m.dest, &mut self.unexpected, &mut self.regions, offset, payload);
        m.received = payload.len();
        if m.received >= m.total {
            self.finish_msg(reply, r, m);
        } else {
            self.insert_inbound(key, m, now);
        }
        placed
    }

    /// Whether a request fits how it was delivered: over RUDI only READ and WRITE (without
    /// completion data) of one packet, over UUD only DATAGRAM_SEND of one packet to a DGRAM
    /// endpoint, which a PDC never carries. Else the return code (UUD requests are never answered).
    fn check_delivery(
        &self,
        reply: Reply<A>,
        r: &StandardRequest,
        offset: usize,
        len: usize,
    ) -> Result<(), ReturnCode> {
        let c = &r.common;
        let total = r.request_length as usize;
        let single = c.has(FLAG_SOM) && c.has(FLAG_EOM) && offset == 0;
        let fits = match reply {
            Reply::Rudi(..) => match c.opcode {
                SesOpcode::Read => single && len == 0,
                SesOpcode::Write => single && len == total && !c.has(FLAG_HD),
                _ => false,
            },
            Reply::None => {
                self.cfg.ep_type == EpType::Dgram
                    && c.opcode == SesOpcode::DatagramSend
                    && single
                    && len == total
            }
            Reply::Pdc(..) => c.opcode != SesOpcode::DatagramSend,
        };
        if fits { Ok(()) } else { Err(ReturnCode::UnsupportedOp) }
    }

    /// Whether the PDC or the source of a new message already has as many partly received
    /// messages as allowed.
    fn inbound_full(&self, src: A, pdc: PdcId) -> bool {
        self.inbound_per_pdc.get(&pdc).is_some_and(|&n| n >= self.cfg.max_inbound_per_pdc)
            || self.inbound_per_src.get(&src).is_some_and(|&n| n >= self.cfg.max_inbound_per_source)
    }

    /// Files a partly received message, counted against its PDC and source and armed for the
    /// reassembly timeout.
    fn insert_inbound(&mut self, key: (A, PdcId, u16), mut m: InMsg<A>, now: Duration) {
        *self.inbound_per_pdc.entry(key.1).or_default() += 1;
        *self.inbound_per_src.entry(key.0).or_default() += 1;
        m.armed = now + self.cfg.reassembly_timeout;
        self.reassembly.insert((m.armed, key));
        if let Dest::Unexpected(id) = m.dest {
            if let Some(u) = self.unexpected.get_mut(&id) {
                u.inbound = Some(key);
            }
        }
        self.inbound.insert(key, m);
    }

    /// Takes a partly received message out of the books.
    pub(super) fn remove_inbound(&mut self, key: (A, PdcId, u16)) -> Option<InMsg<A>> {
        let m = self.inbound.remove(&key)?;
        self.reassembly.remove(&(m.armed, key));
        decrement(&mut self.inbound_per_pdc, key.1);
        decrement(&mut self.inbound_per_src, key.0);
        Some(m)
    }

    /// Drops the partly received messages idle for `reassembly_timeout` at `now`: a receive one had
    /// taken is posted again, an unexpected one is discarded, and the sender is answered DROPPED.
    pub(super) fn reap_inbound(&mut self, now: Duration) {
        while let Some(&(deadline, key)) = self.reassembly.first() {
            if deadline > now {
                break;
            }
            self.reassembly.pop_first();
            let idle_until = self.inbound.get(&key).map(|m| m.last + self.cfg.reassembly_timeout);
            match idle_until {
                Some(t) if t > now => {
                    // Packets came since it was armed: armed again for the last one.
                    self.inbound.get_mut(&key).expect("present").armed = t;
                    self.reassembly.insert((t, key));
                }
                Some(_) => {
                    // Put back so that `remove_inbound` finds what it removes.
                    self.reassembly.insert((deadline, key));
                    let m = self.remove_inbound(key).expect("present");
                    self.stats.reassembly_timeouts += 1;
                    let job_id = m.job_id;
                    self.drop_partial(m);
                    self.respond(Reply::Pdc(key.1, Urgency::Prompt), key.2, job_id, ReturnCode::Dropped, 0);
                }
                None => {}
            }
        }
    }

    /// A message is all there: complete what it was for and answer it (datagrams are not).
    fn finish_msg(&mut self, reply: Reply<A>, r: &StandardRequest, m: InMsg<A>) {
        let rc = match m.dest {
            Dest::Recv(p) => {
                let truncated = m.total > p.buf.bytes().len();
                self.finish_recv(p, m.info, m.total, m.header_data);
                if truncated { ReturnCode::TooLong } else { ReturnCode::Ok }
            }
            Dest::Unexpected(id) => {
                if let Some(u) = self.unexpected.get_mut(&id) {
                    u.complete = true;
                    u.inbound = None;
                    u.header_data = m.header_data;
                }
                ReturnCode::Ok
            }
            Dest::Rma { key, .. } => {
                if let Some(r) = self.regions.get_mut(key) {
                    r.accesses += 1;
                }
                if let Some(h) = m.header_data {
                    self.completions.push_back(Completion {
                        context: 0,
                        kind: CompletionKind::RemoteWrite,
                        status: Status::Ok,
                        len: m.total,
                        data: Vec::new(),
                        src: Some(m.info.src),
                        tag: None,
                        header_data: Some(h),
                    });
                }
                ReturnCode::Ok
            }
            Dest::Discard(rc) => rc,
            Dest::Deferred => {
                return self.respond_list(
                    reply,
                    r.message_id(),
                    m.job_id,
                    ReturnCode::NoMatch,
                    0,
                    LIST_OVERFLOW,
                );
            }
        };
        if r.common.opcode != SesOpcode::DatagramSend {
            self.respond(reply, r.message_id(), m.job_id, rc, m.total as u32);
        }
    }

    /// A partly received message is given up: an unexpected one is discarded with its bytes, a
    /// receive it had taken is posted again (at the back of its queue).
    pub(super) fn drop_partial(&mut self, m: InMsg<A>) {
        match m.dest {
            Dest::Unexpected(id) => {
                if let Some(u) = self.unexpected.remove(&id) {
                    self.unexpected_bytes -= u.data.len();
                }
            }
            Dest::Recv(p) => self.queues.post(p),
            _ => {}
        }
    }

    /// Decides, on the first packet of a message to arrive, where its bytes go.
    fn destination(
        &mut self,
        c: &RequestCommon,
        r: &StandardRequest,
        info: &MsgInfo<A>,
        total: usize,
        rudi: bool,
    ) -> Dest<A> {
        if let Err(rc) = self.check_target(c, total) {
            return Dest::Discard(rc);
        }
        match c.opcode {
            SesOpcode::Send | SesOpcode::TaggedSend | SesOpcode::DatagramSend => match self.queues.take(info)
            {
                Some(p) => Dest::Recv(p),
                None => self.unexpected_dest(info, total, c.opcode == SesOpcode::DatagramSend),
            },
            SesOpcode::DeferrableSend | SesOpcode::DeferrableTsend => self.deferrable_dest(r, info, total),
            SesOpcode::Write => {
                match self.regions.check(
                    r.memory_key,
                    c.job_id,
                    r.buffer_offset,
                    total as u64,
                    Want::Write,
                    rudi,
                ) {
                    Ok(offset) => Dest::Rma { key: r.memory_key, base: offset },
                    Err(rc) => Dest::Discard(rc),
                }
            }
            _ => Dest::Discard(ReturnCode::UnsupportedOp),
        }
    }

    /// The checks every request to this endpoint passes first: JobID, PIDonFEP, resource index,
    /// length.
    pub(super) fn check_target(&self, c: &RequestCommon, len: usize) -> Result<(), ReturnCode> {
        if !self.job_authorized(c.job_id) { Err(ReturnCode::BadJobId) } else { self.check_address(c, len) }
    }

    /// The checks of [`check_target`](Self::check_target) after the JobID: PIDonFEP, resource
    /// index, length.
    fn check_address(&self, c: &RequestCommon, len: usize) -> Result<(), ReturnCode> {
        if c.pid_on_fep() != self.cfg.pid_on_fep {
            Err(ReturnCode::BadPid)
        } else if c.resource_index() != self.cfg.resource_index {
            Err(ReturnCode::BadIndex)
        } else if len > self.cfg.max_message {
            Err(ReturnCode::TooLong)
        } else {
            Ok(())
        }
    }

    /// A message no receive takes: kept as unexpected while the budget allows (datagrams never
    /// are), else refused with NO_MATCH.
    pub(super) fn unexpected_dest(&mut self, info: &MsgInfo<A>, total: usize, datagram: bool) -> Dest<A> {
        if datagram || !self.unexpected_room(total) {
            return Dest::Discard(ReturnCode::NoMatch);
        }
        self.unexpected_bytes += total;
        self.stats.unexpected += 1;
        Dest::Unexpected(self.push_unexpected(*info, vec![0; total], false, None, Later::Nothing))
    }

    /// Whether one more unexpected message of `bytes` fits the list (`max_unexpected_msgs`
    /// entries, `unexpected_bytes` bytes); counts a refusal.
    pub(super) fn unexpected_room(&mut self, bytes: usize) -> bool {
        let room = self.unexpected.len() < self.cfg.max_unexpected_msgs
            && self.unexpected_bytes + bytes <= self.cfg.unexpected_bytes;
        if !room {
            self.stats.unexpected_refused += 1;
        }
        room
    }

    /// Files a message on the unexpected (overflow) list, after those already there; its id.
    pub(super) fn push_unexpected(
        &mut self,
        info: MsgInfo<A>,
        data: Vec<u8>,
        complete: bool,
        header_data: Option<u64>,
        later: Later<A>,
    ) -> u64 {
        self.next_unexpected += 1;
        let id = self.next_unexpected;
        self.unexpected.insert(id, Unexpected { inbound: None, info, data, complete, header_data, later });
        id
    }

    /// READ: checked, then answered by RSP_DATA packets built from the region as the PDC takes
    /// them (see `response`), or over RUDI by one packet.
    fn serve_read(&mut self, src: A, reply: Reply<A>, r: &StandardRequest, small_rsp: Option<u32>) -> Taken {
        let c = &r.common;
        let len = r.request_length as usize;
        // A rendezvous read of one of this endpoint's own send buffers is authorized by that
        // buffer's JobID (the send may have used an auth key's JobID the endpoint does not
        // otherwise serve) in place of the endpoint's; the other checks still apply, and only the
        // receiver the buffer was sent to may read it.
        let own_rendezvous = r.memory_key & crate::key::INTERNAL != 0;
        let first = if own_rendezvous {
            match self.rendezvous_keys.get(&crate::key::rkey(r.memory_key)) {
                Some(&to) if to == src => self.check_address(c, len),
                _ => Err(ReturnCode::BadMkey),
            }
        } else {
            self.check_target(c, len)
        };
        let check = first.and_then(|()| {
            let rudi = matches!(reply, Reply::Rudi(..));
            self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Read, rudi)
        });
        let base = match check {
            Ok(offset) => offset as usize,
            Err(rc) => {
                self.respond(reply, r.message_id(), c.job_id, rc, 0);
                return Err(Refusal::Rejected);
            }
        };
        if let Some(region) = self.regions.get_mut(r.memory_key) {
            region.accesses += 1;
        }
        match reply {
            // RUDI responses are not flow-controlled: one packet at most.
            Reply::Rudi(..) if len > self.cfg.max_payload => {
                self.respond(reply, r.message_id(), c.job_id, ReturnCode::TooLong, 0);
                return Err(Refusal::Rejected);
            }
            Reply::Rudi(..) => {
                let bytes = &self.regions.get(r.memory_key).expect("checked").data.bytes()[base..base + len];
                let (nh, rsp) = match small_rsp {
                    Some(psn) => (NextHeader::RspDataSmall, data_response_small(psn, c.job_id, bytes)),
                    None => (NextHeader::RspData, data_response(r.message_id(), c.job_id, len, 0, bytes)),
                };
                self.reply(reply, nh, rsp);
            }
            Reply::Pdc(pdc, _) => {
                let serving = self.served_reads.entry(src).or_default();
                if *serving >= self.cfg.max_served_reads {
                    self.stats.reads_refused += 1;
                    self.respond(reply, r.message_id(), c.job_id, ReturnCode::Dropped, 0);
                    return Err(Refusal::Rejected);
                }
                *serving += 1;
                let read = ServedRead {
                    peer: src,
                    key: r.memory_key,
                    base,
                    len,
                    next: 0,
                    msg_id: r.message_id(),
                    job_id: c.job_id,
                    // One RSP_DATA_SMALL answers a compact READ that fits a packet.
                    small_psn: small_rsp.filter(|_| len <= self.cfg.max_payload),
                };
                self.queue_on(pdc, Pending::Read(read));
            }
            Reply::None => {}
        }
        Ok(())
    }

    /// ATOMIC and FETCHING_ATOMIC: one packet, applied when it arrives (the PDS delivers each
    /// packet once), answered with RSP (non-fetching) or RSP_DATA holding the old value.
    fn serve_atomic(
        &mut self,
        reply: Reply<A>,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
        small_rsp: Option<u32>,
    ) -> Taken {
        let c = &r.common;
        match self.atomic_at_target(r, ext, payload) {
            Ok(old) if c.opcode == SesOpcode::FetchingAtomic => {
                let (nh, rsp) = match small_rsp {
                    Some(psn) => (NextHeader::RspDataSmall, data_response_small(psn, c.job_id, &old)),
                    None => {
                        (NextHeader::RspData, data_response(r.message_id(), c.job_id, old.len(), 0, &old))
                    }
                };
                self.reply(reply, nh, rsp);
            }
            Ok(_) => self.respond(reply, r.message_id(), c.job_id, ReturnCode::Ok, r.request_length),
            Err(rc) => {
                self.respond(reply, r.message_id(), c.job_id, rc, 0);
                return Err(Refusal::Rejected);
            }
        }
        Ok(())
    }

    fn atomic_at_target(
        &mut self,
        r: &StandardRequest,
        ext: Option<SesExt>,
        payload: &[u8],
    ) -> Result<Vec<u8>, ReturnCode> {
        let c = &r.common;
        let len = r.request_length as usize;
        self.check_target(c, len)?;
        let fetching = c.opcode == SesOpcode::FetchingAtomic;
        let (a, cas) = match ext {
            Some(SesExt::Atomic(a)) => (a, None),
            Some(SesExt::CompareSwap(x)) => (x.atomic, Some(x)),
            _ => return Err(ReturnCode::UnsupportedOp),
        };
        amo::check(a.amo_opcode, a.datatype, fetching)?;
        let size = amo::element_size(a.datatype).ok_or(ReturnCode::AmoUnsupportedDt)?;
        let single = c.has(FLAG_SOM) && c.has(FLAG_EOM);
        let operands_ok = if cas.is_some() { payload.is_empty() } else { payload.len() == len };
        if !single || !operands_ok || len == 0 || len % size != 0 || (fetching && len != size) {
            return Err(ReturnCode::AmoUnsupportedSize);
        }
        // Never over RUDI (see check_delivery).
        let offset =
            self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Write, false)?;
        if fetching {
            self.regions.check(r.memory_key, c.job_id, r.buffer_offset, len as u64, Want::Read, false)?;
        }
        // Aligned in the program's memory (with virtual addresses, the address itself).
        if r.buffer_offset % size as u64 != 0 {
            return Err(ReturnCode::AmoUnaligned);
        }
        let at = offset as usize;
        let region = self.regions.get_mut(r.memory_key).expect("checked");
        region.accesses += 1;
        let target = &mut region.data.bytes_mut()[at..at + len];
        match cas {
            Some(x) => amo::compare_swap(
                a.amo_opcode,
                a.datatype,
                target,
                &amo::from_cas_field(&x.compare, size),
                &amo::from_cas_field(&x.swap, size),
            ),
            None => {
                let mut old = Vec::new();
                amo::apply(a.amo_opcode, a.datatype, target, payload, Some(&mut old))?;
                Ok(old)
            }
        }
    }
}

/// The request opcodes whose `memory_key` slot carries match bits.
/// Whether requests of `op` are one packet each, served on it (not messages placed packet by
/// packet).
fn is_single(op: SesOpcode) -> bool {
    matches!(
        op,
        SesOpcode::Read
            | SesOpcode::Atomic
            | SesOpcode::FetchingAtomic
            | SesOpcode::RendezvousSend
            | SesOpcode::RendezvousTsend
            | SesOpcode::DeferrableRtr
    )
}

fn is_tagged(op: SesOpcode) -> bool {
    matches!(op, SesOpcode::TaggedSend | SesOpcode::RendezvousTsend | SesOpcode::DeferrableTsend)
}

/// Places a packet's `payload` at `offset` of a message going to `dest`; refused when its place is
/// gone (an unexpected message discarded, a region deregistered or shrunk since the first packet).
fn place<A>(
    dest: &mut Dest<A>,
    unexpected: &mut BTreeMap<u64, Unexpected<A>>,
    regions: &mut Regions,
    offset: usize,
    payload: &[u8],
) -> Taken {
    match dest {
        Dest::Recv(p) => {
            let buf = p.buf.bytes_mut();
            let end = (offset + payload.len()).min(buf.len());
            if offset < end {
                wire::copy_payload(&mut buf[offset..end], &payload[..end - offset]);
            }
        }
        Dest::Unexpected(id) => {
            let id = *id;
            let slot = unexpected.get_mut(&id);
            match slot.and_then(|u| u.data.get_mut(offset..offset + payload.len())) {
                Some(dst) => wire::copy_payload(dst, payload),
                None => return Err(Refusal::Dropped),
            }
        }
        Dest::Rma { key, base } => {
            // Checked on the first packet; the region may have been deregistered (or replaced by a
            // smaller one) since: then the rest of the write is refused, never a panic.
            let at = *base as usize + offset;
            match regions.get_mut(*key).and_then(|r| r.data.bytes_mut().get_mut(at..at + payload.len())) {
                Some(dst) => wire::copy_payload(dst, payload),
                None => {
                    *dest = Dest::Discard(ReturnCode::BadMkey);
                    return Err(Refusal::Rejected);
                }
            }
        }
        Dest::Discard(_) => return Err(Refusal::Rejected),
        Dest::Deferred => {}
    }
    Ok(())
}

/// One fewer in a count by key; the key goes at zero.
fn decrement<K: Eq + Hash>(map: &mut HashMap<K, usize>, k: K) {
    if let Some(n) = map.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            map.remove(&k);
        }
    }
}
