//! One connection's record and the MADs it sends.

use std::net::IpAddr;
use std::time::Duration;

use wire::ib::cm::{CmMessage, CmPath, Drep, Rep, Req, Rtu, SidrRep, SidrReq, private_len};

use super::types::{AcceptParams, CmConfig, CmError, ConnectParams, Mad, State, encode};

/// One connection record.
#[derive(Debug)]
pub(super) struct Conn {
    pub id: u32,
    pub remote_id: u32,
    pub peer: IpAddr,
    pub tid: u64,
    pub state: State,
    /// The last MAD sent, for retries and for answering duplicates.
    pub last: Option<Box<Mad>>,
    pub retries_left: u8,
    pub interval: Duration,
    pub deadline: Option<Duration>,
    pub remote_qpn: u32,
    pub local_qpn: u32,
    /// The traffic class of the connection's MADs: its primary path's (the REQ's), as Linux's
    /// CM sends them with the path's address vector.
    pub traffic_class: u8,
    pub service_id: u64,
    /// The listener whose backlog this REQ occupies while it waits for the consumer.
    pub listener: Option<u64>,
    /// What the peer's REQ said about its own response time and retries.
    pub peer_timeout: u8,
    pub peer_retries: u8,
    /// The consumer destroyed its ID: no more events, the record only finishes the protocol.
    pub orphan: bool,
    /// When the first MAD of the connection went out (active side).
    pub started: Duration,
}

impl Conn {
    pub(super) fn new(id: u32, peer: IpAddr, tid: u64, state: State) -> Conn {
        Conn {
            id,
            remote_id: 0,
            peer: peer.to_canonical(),
            tid,
            state,
            last: None,
            retries_left: 0,
            interval: Duration::ZERO,
            deadline: None,
            remote_qpn: 0,
            local_qpn: 0,
            traffic_class: 0,
            service_id: 0,
            listener: None,
            peer_timeout: 31,
            peer_retries: 15,
            orphan: false,
            started: Duration::ZERO,
        }
    }

    /// Keeps `mad` to send again every `interval`, `retries` times.
    pub(super) fn arm(&mut self, now: Duration, mad: Box<Mad>, interval: Duration, retries: u8) {
        if self.last.is_none() {
            self.started = now;
        }
        self.last = Some(mad);
        self.interval = interval;
        self.retries_left = retries;
        self.deadline = Some(now + interval);
    }

    /// The answer came: no more retries.
    pub(super) fn disarm(&mut self) {
        self.retries_left = 0;
        self.deadline = None;
    }
}

pub(super) fn req(cfg: &CmConfig, id: u32, tid: u64, p: &ConnectParams) -> Result<Box<Mad>, CmError> {
    if p.private_data.len() > private_len::REQ {
        return Err(CmError::Invalid);
    }
    let primary = CmPath {
        local_lid: 0xFFFF,
        remote_lid: 0xFFFF,
        local_gid: p.local_gid,
        remote_gid: p.remote_gid,
        flow_label: 0,
        packet_rate: 0,
        traffic_class: p.traffic_class,
        hop_limit: p.hop_limit,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: p.local_ack_timeout,
    };
    encode(
        &CmMessage::Req(Req {
            local_comm_id: id,
            service_id: p.service_id,
            local_ca_guid: cfg.ca_guid,
            local_qkey: 0,
            local_qpn: p.qpn,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: cfg.response_timeout,
            transport_service_type: p.transport,
            end_to_end_flow_control: false,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: cfg.response_timeout,
            retry_count: p.retry_count,
            pkey: 0xFFFF,
            path_mtu: p.path_mtu,
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry_count,
            max_cm_retries: cfg.max_retries.min(15),
            srq: p.srq,
            extended_transport_type: 0,
            primary,
            alternate: CmPath::default(),
            private_data: &p.private_data,
        }),
        tid,
    )
}

pub(super) fn rep(cfg: &CmConfig, c: &Conn, p: &AcceptParams) -> Result<Box<Mad>, CmError> {
    encode(
        &CmMessage::Rep(Rep {
            local_comm_id: c.id,
            remote_comm_id: c.remote_id,
            local_qkey: 0,
            local_qpn: p.qpn,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            // rxe's value (rping.pcap).
            target_ack_delay: 15,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: p.rnr_retry_count,
            srq: p.srq,
            local_ca_guid: cfg.ca_guid,
            private_data: &p.private_data,
        }),
        c.tid,
    )
}

pub(super) fn rtu(c: &Conn) -> Result<Box<Mad>, CmError> {
    encode(
        &CmMessage::Rtu(Rtu { local_comm_id: c.id, remote_comm_id: c.remote_id, private_data: &[] }),
        c.tid,
    )
}

pub(super) fn sidr_req(id: u32, tid: u64, service_id: u64, private: &[u8]) -> Result<Box<Mad>, CmError> {
    encode(
        &CmMessage::SidrReq(SidrReq { request_id: id, pkey: 0xFFFF, service_id, private_data: private }),
        tid,
    )
}

pub(super) fn sidr_rep(
    c: &Conn,
    status: u8,
    qpn: u32,
    qkey: u32,
    private: &[u8],
) -> Result<Box<Mad>, CmError> {
    encode(
        &CmMessage::SidrRep(SidrRep {
            request_id: c.remote_id,
            status,
            additional_info_len: 0,
            qpn,
            service_id: c.service_id,
            qkey,
            class_port_info: &[],
            private_data: private,
        }),
        c.tid,
    )
}

pub(super) fn drep(c: &Conn, private: &[u8]) -> Result<Box<Mad>, CmError> {
    encode(
        &CmMessage::Drep(Drep { local_comm_id: c.id, remote_comm_id: c.remote_id, private_data: private }),
        c.tid,
    )
}
