//! What each received MAD does to the connection it names (IBTA vol. 1 §12.9's state diagrams,
//! for the states rdma_cm uses), and what a deadline does.

use std::net::IpAddr;
use std::time::Duration;

use wire::ib::cm::{CmMessage, Drep, Dreq, Mra, Rej, Rep, Req, SidrRep, SidrReq, rej_reason};

use super::conn::{Conn, drep};
use super::endpoint::Cm;
use super::types::{CmEvent, ConnId, RepInfo, ReqInfo, SidrRepInfo, State, encode};

impl Cm {
    /// What a received MAD does.
    pub(super) fn dispatch(&mut self, now: Duration, peer: IpAddr, tid: u64, msg: &CmMessage<'_>) {
        dispatch(self, now, peer, tid, msg);
    }

    /// A deadline passed: retry, give up, or end the time wait.
    pub(super) fn expire(&mut self, now: Duration, id: u32) {
        expire(self, now, id);
    }
}

/// What a received MAD does.
fn dispatch(cm: &mut Cm, now: Duration, peer: IpAddr, tid: u64, msg: &CmMessage<'_>) {
    let peer = peer.to_canonical();
    match msg {
        CmMessage::Req(r) => on_req(cm, now, peer, tid, r),
        CmMessage::SidrReq(r) => on_sidr_req(cm, now, peer, tid, r),
        CmMessage::Dreq(d) => on_dreq(cm, now, peer, tid, d),
        other => {
            let (ours, theirs) = match other {
                CmMessage::Mra(m) => (m.remote_comm_id, m.local_comm_id),
                CmMessage::Rej(r) => (r.remote_comm_id, r.local_comm_id),
                CmMessage::Rep(r) => (r.remote_comm_id, r.local_comm_id),
                CmMessage::Rtu(r) => (r.remote_comm_id, r.local_comm_id),
                CmMessage::Drep(d) => (d.remote_comm_id, d.local_comm_id),
                CmMessage::SidrRep(s) => (s.request_id, 0),
                _ => return,
            };
            // Only the peer the connection is with, and (once known) its comm ID, may move it.
            let ok = cm.conns.get(&ours).is_some_and(|c| {
                c.peer == peer && (c.remote_id == 0 || c.remote_id == theirs || theirs == 0)
            });
            if !ok {
                cm.stats.rx_stray += 1;
                return;
            }
            match other {
                CmMessage::Mra(m) => on_mra(cm, now, ours, m),
                CmMessage::Rej(r) => on_rej(cm, now, ours, r),
                CmMessage::Rep(r) => on_rep(cm, ours, r),
                CmMessage::Rtu(_) => on_rtu(cm, ours),
                CmMessage::Drep(_) => on_drep(cm, now, ours),
                CmMessage::SidrRep(s) => on_sidr_rep(cm, now, ours, s),
                _ => {}
            }
        }
    }
}

fn resend_last(cm: &mut Cm, id: u32) {
    if let Some(c) = cm.conns.get(&id) {
        if let Some(mad) = c.last.clone() {
            let to = (c.peer, c.traffic_class);
            cm.send(to, mad);
        }
    }
}

fn on_req(cm: &mut Cm, now: Duration, peer: IpAddr, tid: u64, r: &Req<'_>) {
    if let Some(&id) = cm.by_remote.get(&(peer, r.local_comm_id)) {
        let state = cm.conns.get(&id).map(|c| c.state);
        match state {
            // The consumer has not answered yet: ask the peer to wait longer.
            Some(State::ReqRcvd) => {
                let c = &cm.conns[&id];
                let mra = CmMessage::Mra(Mra {
                    local_comm_id: c.id,
                    remote_comm_id: c.remote_id,
                    message_mraed: 0,
                    service_timeout: (cm.cfg.response_timeout + 3).min(31),
                    private_data: &[],
                });
                if let Ok(mad) = encode(&mra, c.tid) {
                    let to = (c.peer, c.traffic_class);
                    cm.send(to, mad);
                }
            }
            // Our REP (or REJ) was lost.
            Some(State::RepSent | State::TimeWait) => resend_last(cm, id),
            _ => cm.stats.rx_stray += 1,
        }
        return;
    }
    let reject = |cm: &mut Cm, reason: u16| {
        let rej = CmMessage::Rej(Rej {
            local_comm_id: 0,
            remote_comm_id: r.local_comm_id,
            message_rejected: 0,
            reject_info_len: 0,
            reason,
            ari: &[],
            private_data: &[],
        });
        // With the REQ's traffic class, as Linux answers from the received request.
        if let Ok(mad) = encode(&rej, tid) {
            cm.send((peer, r.primary.traffic_class), mad);
        }
    };
    let Some(l) = cm.listeners.get(&r.service_id).copied() else {
        if cm.park(now, peer, tid, r.service_id, r.local_comm_id, &CmMessage::Req(*r)) {
            return;
        }
        cm.stats.rx_stray += 1;
        reject(cm, rej_reason::INVALID_SERVICE_ID);
        return;
    };
    if l.waiting >= l.backlog {
        cm.stats.rejected_busy += 1;
        reject(cm, rej_reason::NO_RESOURCES);
        return;
    }
    let Ok(id) = cm.alloc_id() else {
        cm.stats.rejected_busy += 1;
        reject(cm, rej_reason::NO_RESOURCES);
        return;
    };
    let mut c = Conn::new(id, peer, tid, State::ReqRcvd);
    c.remote_id = r.local_comm_id;
    c.remote_qpn = r.local_qpn;
    c.service_id = r.service_id;
    c.listener = Some(r.service_id);
    c.peer_timeout = r.local_cm_response_timeout;
    c.peer_retries = r.max_cm_retries;
    c.traffic_class = r.primary.traffic_class;
    cm.conns.insert(id, c);
    cm.by_remote.insert((peer, r.local_comm_id), id);
    if let Some(l) = cm.listeners.get_mut(&r.service_id) {
        l.waiting += 1;
    }
    let info = ReqInfo {
        peer,
        service_id: r.service_id,
        remote_qpn: r.local_qpn,
        transport: r.transport_service_type,
        starting_psn: r.starting_psn,
        responder_resources: r.responder_resources,
        initiator_depth: r.initiator_depth,
        path_mtu: r.path_mtu,
        retry_count: r.retry_count,
        rnr_retry_count: r.rnr_retry_count,
        srq: r.srq,
        local_ack_timeout: r.primary.local_ack_timeout,
        remote_gid: r.primary.local_gid,
        local_gid: r.primary.remote_gid,
        hop_limit: r.primary.hop_limit,
        traffic_class: r.primary.traffic_class,
        private_data: r.private_data.to_vec(),
    };
    cm.event(CmEvent::Request(ConnId(id), Box::new(info)));
}

fn on_mra(cm: &mut Cm, now: Duration, id: u32, m: &Mra<'_>) {
    let Some(c) = cm.conns.get_mut(&id) else { return };
    let waiting_for = match c.state {
        State::ReqSent => 0,
        State::RepSent => 1,
        _ => {
            cm.stats.rx_stray += 1;
            return;
        }
    };
    if m.message_mraed != waiting_for {
        cm.stats.rx_stray += 1;
        return;
    }
    // The peer needs longer: wait its service timeout before the next retry.
    c.deadline = Some(now + Cm::wait_for(m.service_timeout).max(c.interval));
}

/// How soon a REQ or SIDR_REQ refused for want of a listener is sent again, within the grace.
const NO_LISTENER_RETRY: Duration = Duration::from_millis(100);

/// A REQ or SIDR_REQ the peer refused because nobody listens on the service: within
/// [`CmConfig::unclaimed_grace`](super::CmConfig::unclaimed_grace) of the first send it goes out
/// again shortly (a server that is starting, as a client started right after it meets; a CM that
/// rejects at once, as the kernel's does, leaves that race to its consumers). True if so.
fn retry_no_listener(cm: &mut Cm, now: Duration, id: u32) -> bool {
    let grace = cm.cfg.unclaimed_grace;
    let Some(c) = cm.conns.get_mut(&id) else { return false };
    if now >= c.started + grace || c.retries_left == 0 {
        return false;
    }
    c.deadline = Some(now + NO_LISTENER_RETRY);
    true
}

fn on_rej(cm: &mut Cm, now: Duration, id: u32, r: &Rej<'_>) {
    let req_sent = cm.conns.get(&id).is_some_and(|c| c.state == State::ReqSent);
    if req_sent && r.reason == rej_reason::INVALID_SERVICE_ID && retry_no_listener(cm, now, id) {
        return;
    }
    let Some(c) = cm.conns.get(&id) else { return };
    let ev = match c.state {
        State::ReqSent | State::RepRcvd | State::RepSent => {
            CmEvent::Rejected(ConnId(id), r.reason, r.private_data.to_vec())
        }
        // The peer gave up waiting for our RTU: the connection never was, for it.
        State::Established => CmEvent::Disconnected(ConnId(id)),
        _ => {
            cm.stats.rx_stray += 1;
            return;
        }
    };
    cm.unwait(id);
    cm.enter_timewait(now, id, None);
    cm.event(ev);
}

fn on_rep(cm: &mut Cm, id: u32, r: &Rep<'_>) {
    let Some(c) = cm.conns.get_mut(&id) else { return };
    match c.state {
        State::ReqSent => {
            c.remote_id = r.local_comm_id;
            c.remote_qpn = r.local_qpn;
            c.state = State::RepRcvd;
            c.disarm();
            let key = (c.peer, c.remote_id);
            cm.by_remote.insert(key, id);
            let info = RepInfo {
                remote_qpn: r.local_qpn,
                starting_psn: r.starting_psn,
                responder_resources: r.responder_resources,
                initiator_depth: r.initiator_depth,
                rnr_retry_count: r.rnr_retry_count,
                srq: r.srq,
                private_data: r.private_data.to_vec(),
            };
            cm.event(CmEvent::Reply(ConnId(id), Box::new(info)));
        }
        // Our RTU was lost: send it again.
        State::Established => resend_last(cm, id),
        State::RepRcvd => {}
        _ => cm.stats.rx_stray += 1,
    }
}

fn on_rtu(cm: &mut Cm, id: u32) {
    let Some(c) = cm.conns.get_mut(&id) else { return };
    if c.state != State::RepSent {
        cm.stats.rx_stray += 1;
        return;
    }
    c.state = State::Established;
    c.disarm();
    c.last = None;
    cm.event(CmEvent::Established(ConnId(id)));
}

fn on_dreq(cm: &mut Cm, now: Duration, peer: IpAddr, tid: u64, d: &Dreq<'_>) {
    let known =
        cm.conns.get(&d.remote_comm_id).is_some_and(|c| c.peer == peer && c.remote_id == d.local_comm_id);
    if !known {
        // Not ours (any more): answer so the peer stops asking (IBTA: DREP for an unknown DREQ).
        cm.stats.rx_stray += 1;
        let drep = CmMessage::Drep(Drep {
            local_comm_id: d.remote_comm_id,
            remote_comm_id: d.local_comm_id,
            private_data: &[],
        });
        if let Ok(mad) = encode(&drep, tid) {
            cm.send((peer, 0), mad);
        }
        return;
    }
    let id = d.remote_comm_id;
    let (state, orphan) = cm.conns.get(&id).map(|c| (c.state, c.orphan)).unwrap_or((State::TimeWait, true));
    match state {
        State::Established | State::RepSent => {
            if state == State::RepSent {
                // The RTU was lost but the peer is done with the connection: it was established.
                cm.event(CmEvent::Established(ConnId(id)));
            }
            if let Some(c) = cm.conns.get_mut(&id) {
                c.state = State::DreqRcvd;
                c.disarm();
            }
            if orphan {
                let _ = cm.disconnect(now, ConnId(id), &[]);
            } else {
                cm.event(CmEvent::DisconnectRequest(ConnId(id), d.private_data.to_vec()));
            }
        }
        // Both sides closed at once: answer and finish.
        State::DreqSent => {
            let Some(c) = cm.conns.get(&id) else { return };
            if let Ok(mad) = drep(c, &[]) {
                let to = (c.peer, c.traffic_class);
                cm.send(to, mad);
            }
            cm.enter_timewait(now, id, None);
            cm.event(CmEvent::Disconnected(ConnId(id)));
        }
        State::TimeWait => {
            match cm.conns.get(&id).and_then(|c| Some((drep(c, &[]).ok()?, c.traffic_class))) {
                Some((mad, tc)) => cm.send((peer, tc), mad),
                None => cm.stats.rx_stray += 1,
            }
        }
        _ => cm.stats.rx_stray += 1,
    }
}

fn on_drep(cm: &mut Cm, now: Duration, id: u32) {
    let Some(c) = cm.conns.get(&id) else { return };
    if c.state != State::DreqSent {
        cm.stats.rx_stray += 1;
        return;
    }
    cm.enter_timewait(now, id, None);
    cm.event(CmEvent::Disconnected(ConnId(id)));
}

fn on_sidr_req(cm: &mut Cm, now: Duration, peer: IpAddr, tid: u64, r: &SidrReq<'_>) {
    if let Some(&id) = cm.by_remote.get(&(peer, r.request_id)) {
        if cm.conns.get(&id).is_some_and(|c| c.state == State::TimeWait) {
            resend_last(cm, id);
        }
        return;
    }
    let reply = |cm: &mut Cm, status: u8| {
        let rep = CmMessage::SidrRep(SidrRep {
            request_id: r.request_id,
            status,
            additional_info_len: 0,
            qpn: 0,
            service_id: r.service_id,
            qkey: 0,
            class_port_info: &[],
            private_data: &[],
        });
        if let Ok(mad) = encode(&rep, tid) {
            cm.send((peer, 0), mad);
        }
    };
    let Some(l) = cm.listeners.get(&r.service_id).copied() else {
        if cm.park(now, peer, tid, r.service_id, r.request_id, &CmMessage::SidrReq(*r)) {
            return;
        }
        cm.stats.rx_stray += 1;
        // IBTA SIDR status 1: the service ID is not supported.
        reply(cm, 1);
        return;
    };
    let id = if l.waiting < l.backlog { cm.alloc_id().ok() } else { None };
    let Some(id) = id else {
        cm.stats.rejected_busy += 1;
        // Status 2: rejected.
        reply(cm, 2);
        return;
    };
    let mut c = Conn::new(id, peer, tid, State::SidrReqRcvd);
    c.remote_id = r.request_id;
    c.service_id = r.service_id;
    c.listener = Some(r.service_id);
    cm.conns.insert(id, c);
    cm.by_remote.insert((peer, r.request_id), id);
    if let Some(l) = cm.listeners.get_mut(&r.service_id) {
        l.waiting += 1;
    }
    cm.event(CmEvent::SidrRequest(ConnId(id), peer, r.service_id, r.private_data.to_vec()));
}

fn on_sidr_rep(cm: &mut Cm, now: Duration, id: u32, s: &SidrRep<'_>) {
    if cm.conns.get(&id).map(|c| c.state) != Some(State::SidrReqSent) {
        cm.stats.rx_stray += 1;
        return;
    }
    // Status 1: the service is not (yet) there.
    if s.status == 1 && retry_no_listener(cm, now, id) {
        return;
    }
    let info =
        SidrRepInfo { status: s.status, qpn: s.qpn, qkey: s.qkey, private_data: s.private_data.to_vec() };
    cm.event(CmEvent::SidrReply(ConnId(id), Box::new(info)));
    cm.remove(id);
}

/// A deadline passed: retry, give up, or end the time wait.
fn expire(cm: &mut Cm, now: Duration, id: u32) {
    let Some(c) = cm.conns.get_mut(&id) else { return };
    if c.state == State::TimeWait {
        cm.remove(id);
        return;
    }
    if c.retries_left > 0 {
        c.retries_left -= 1;
        c.deadline = Some(now + c.interval);
        cm.stats.retries += 1;
        resend_last(cm, id);
        return;
    }
    c.deadline = None;
    let state = c.state;
    let orphan = c.orphan;
    match state {
        State::ReqSent | State::RepSent => {
            // IBTA: give up with a REJ (timeout) so the peer does not wait either.
            let c = &cm.conns[&id];
            let rej = CmMessage::Rej(Rej {
                local_comm_id: c.id,
                remote_comm_id: c.remote_id,
                message_rejected: if state == State::ReqSent { 0 } else { 1 },
                reject_info_len: 0,
                reason: rej_reason::TIMEOUT,
                ari: &[],
                private_data: &[],
            });
            if let Ok(mad) = encode(&rej, c.tid) {
                let to = (c.peer, c.traffic_class);
                cm.send(to, mad);
            }
            cm.event(CmEvent::Unreachable(ConnId(id)));
            cm.enter_timewait(now, id, None);
        }
        State::DreqSent => {
            cm.event(CmEvent::Disconnected(ConnId(id)));
            cm.enter_timewait(now, id, None);
        }
        State::SidrReqSent => {
            cm.event(CmEvent::Unreachable(ConnId(id)));
            cm.remove(id);
        }
        _ => {
            if orphan {
                cm.remove(id);
            }
        }
    }
}
