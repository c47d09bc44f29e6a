//! The CM's vocabulary: configuration, identifiers, what consumers pass and get, errors.

use std::net::IpAddr;
use std::time::Duration;

use wire::ib::cm::CmMessage;
use wire::ib::mad::MAD_LEN;

/// One MAD as the runtime sends it: the peer's address and the 256 bytes.
pub type Mad = [u8; MAD_LEN];

/// How a port's CM behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    /// The local CA GUID put in REQ and REP (rxe: the EUI-64 of the MAC).
    pub ca_guid: u64,
    /// The CM response timeout advertised and waited for, as the IBTA exponent: 4.096 µs << it.
    pub response_timeout: u8,
    /// How often a MAD that wants an answer is sent again before giving up (REQ's Max CM Retries).
    pub max_retries: u8,
    /// Connection records kept at most (any state); a REQ beyond is rejected (no resources).
    pub max_conns: usize,
    /// How long a closed connection's record stays to answer late duplicates (time wait).
    pub timewait: Duration,
    /// Seeds the local communication IDs and transaction IDs.
    pub seed: u32,
    /// How long a REQ or SIDR_REQ for a service nobody listens on is held before it is rejected
    /// (a server may be about to listen); zero rejects at once, as the kernel's CM does.
    pub unclaimed_grace: Duration,
}

impl Default for CmConfig {
    fn default() -> CmConfig {
        CmConfig {
            ca_guid: 0,
            response_timeout: 17,
            max_retries: 15,
            max_conns: 4096,
            timewait: Duration::from_secs(1),
            seed: 0x5eed_c0de,
            unclaimed_grace: Duration::from_secs(1),
        }
    }
}

/// A connection (or SIDR lookup) at this CM: its local communication ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// What the active side asks for in a REQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectParams {
    /// Service ID (rdma_cm: [`wire::ib::cma::service_id`]).
    pub service_id: u64,
    /// The local QP.
    pub qpn: u32,
    /// 0 RC, 1 UC (REQ transport service type).
    pub transport: u8,
    /// The PSN the local QP expects first: the peer's QP sends from it (as rxe reads a REQ's or
    /// REP's starting PSN).
    pub starting_psn: u32,
    /// RDMA READ / atomic requests we accept at once.
    pub responder_resources: u8,
    /// RDMA READ / atomic requests we send at once.
    pub initiator_depth: u8,
    /// Path MTU as the IBTA enum (1 = 256 ... 5 = 4096).
    pub path_mtu: u8,
    /// Transport retry count (3 bits).
    pub retry_count: u8,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Whether the local QP takes receives from an SRQ.
    pub srq: bool,
    /// Local ACK timeout exponent (5 bits).
    pub local_ack_timeout: u8,
    /// Our GID and the peer's (IPv4-mapped for RoCEv2 over IPv4).
    pub local_gid: [u8; 16],
    /// The peer's GID.
    pub remote_gid: [u8; 16],
    /// IP hop limit of the path.
    pub hop_limit: u8,
    /// IP traffic class of the path.
    pub traffic_class: u8,
    /// Private data (at most 92 bytes).
    pub private_data: Vec<u8>,
}

/// What the passive side answers in a REP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptParams {
    /// The local QP.
    pub qpn: u32,
    /// The PSN the local QP expects first: the peer's QP sends from it (as rxe reads a REQ's or
    /// REP's starting PSN).
    pub starting_psn: u32,
    /// RDMA READ / atomic requests we accept at once.
    pub responder_resources: u8,
    /// RDMA READ / atomic requests we send at once.
    pub initiator_depth: u8,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Whether the local QP takes receives from an SRQ.
    pub srq: bool,
    /// Private data (at most 196 bytes).
    pub private_data: Vec<u8>,
}

/// A REQ as the passive side's consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReqInfo {
    /// Who sent it.
    pub peer: IpAddr,
    /// Service ID asked for.
    pub service_id: u64,
    /// The peer's QP.
    pub remote_qpn: u32,
    /// 0 RC, 1 UC.
    pub transport: u8,
    /// The PSN the peer expects first: our QP's first send PSN.
    pub starting_psn: u32,
    /// The peer's responder resources (bounds our initiator depth).
    pub responder_resources: u8,
    /// The peer's initiator depth (bounds our responder resources).
    pub initiator_depth: u8,
    /// Path MTU enum.
    pub path_mtu: u8,
    /// Transport retry count.
    pub retry_count: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The peer uses an SRQ.
    pub srq: bool,
    /// The peer's local ACK timeout exponent.
    pub local_ack_timeout: u8,
    /// The peer's GID (REQ primary local GID).
    pub remote_gid: [u8; 16],
    /// Our GID as the peer addressed it.
    pub local_gid: [u8; 16],
    /// Hop limit of the path.
    pub hop_limit: u8,
    /// Traffic class of the path.
    pub traffic_class: u8,
    /// The whole private-data field (92 bytes).
    pub private_data: Vec<u8>,
}

/// A REP as the active side's consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepInfo {
    /// The peer's QP.
    pub remote_qpn: u32,
    /// The PSN the peer expects first: our QP's first send PSN.
    pub starting_psn: u32,
    /// The peer's responder resources.
    pub responder_resources: u8,
    /// The peer's initiator depth.
    pub initiator_depth: u8,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// The peer uses an SRQ.
    pub srq: bool,
    /// The whole private-data field (196 bytes).
    pub private_data: Vec<u8>,
}

/// A SIDR_REP as the requester sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidrRepInfo {
    /// 0: the service's QP follows; otherwise the IBTA SIDR status.
    pub status: u8,
    /// The service's UD QP.
    pub qpn: u32,
    /// Its Q_Key.
    pub qkey: u32,
    /// The whole private-data field (136 bytes).
    pub private_data: Vec<u8>,
}

/// What the CM tells its consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEvent {
    /// Passive: a REQ for a service we listen on; answer with [`Cm::accept`](super::Cm::accept)
    /// or [`Cm::reject`](super::Cm::reject).
    Request(ConnId, Box<ReqInfo>),
    /// Active: the peer accepted; set the QP up and call [`Cm::establish`](super::Cm::establish)
    /// (or reject).
    Reply(ConnId, Box<RepInfo>),
    /// The connection is up: passive on RTU, active when it sent RTU.
    Established(ConnId),
    /// The peer rejected the REQ or REP (IBTA reason, private data); the record is gone.
    Rejected(ConnId, u16, Vec<u8>),
    /// A MAD went unanswered after every retry (REQ, REP, DREQ, SIDR_REQ); the record is gone
    /// or in time wait.
    Unreachable(ConnId),
    /// The peer sent DREQ; answer with [`Cm::disconnect`](super::Cm::disconnect) (the DREP).
    DisconnectRequest(ConnId, Vec<u8>),
    /// The connection is closed (DREP received, DREP sent, or our DREQ went unanswered).
    Disconnected(ConnId),
    /// Passive: a SIDR_REQ for a service we listen on; answer with
    /// [`Cm::sidr_reply`](super::Cm::sidr_reply).
    SidrRequest(ConnId, IpAddr, u64, Vec<u8>),
    /// Active: the SIDR_REP.
    SidrReply(ConnId, Box<SidrRepInfo>),
}

/// Why a CM call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmError {
    /// No such connection (never made, or already gone).
    UnknownConn,
    /// The connection is not in a state where this call applies.
    WrongState(State),
    /// Someone already listens on this service ID.
    ServiceInUse,
    /// Too many connection records.
    NoResources,
    /// Private data longer than the message carries, or a field wider than its bits.
    Invalid,
}

impl std::fmt::Display for CmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmError::UnknownConn => write!(f, "no such connection"),
            CmError::WrongState(s) => write!(f, "not allowed in CM state {s:?}"),
            CmError::ServiceInUse => write!(f, "service ID already listened on"),
            CmError::NoResources => write!(f, "too many CM connections"),
            CmError::Invalid => write!(f, "invalid CM parameters"),
        }
    }
}

impl std::error::Error for CmError {}

/// Where a connection stands (IBTA §12.9.6, reduced to what rdma_cm drives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Active: REQ sent, waiting for REP (or REJ, MRA).
    ReqSent,
    /// Passive: REQ received, waiting for the consumer to accept or reject.
    ReqRcvd,
    /// Passive: REP sent, waiting for RTU.
    RepSent,
    /// Active: REP received, waiting for the consumer to establish (send RTU) or reject.
    RepRcvd,
    /// Both QPs connected.
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// DREQ received, waiting for the consumer's DREP.
    DreqRcvd,
    /// Closed; the record answers late duplicates until it expires.
    TimeWait,
    /// Active: SIDR_REQ sent, waiting for SIDR_REP.
    SidrReqSent,
    /// Passive: SIDR_REQ received, waiting for the consumer's SIDR_REP.
    SidrReqRcvd,
}

/// Counters of what the CM did with what it received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmStats {
    /// MADs received.
    pub rx: u64,
    /// MADs that did not parse or were not CM.
    pub rx_bad: u64,
    /// MADs for no known connection, or out of place for its state (dropped or answered).
    pub rx_stray: u64,
    /// MADs sent (first sends and retries).
    pub tx: u64,
    /// Of those, retries.
    pub retries: u64,
    /// MADs not sent because the send queue was full.
    pub tx_dropped: u64,
    /// REQs rejected because the backlog or the record table was full.
    pub rejected_busy: u64,
}

/// Emits `msg` into a fresh MAD.
pub(super) fn encode(msg: &CmMessage<'_>, tid: u64) -> Result<Box<Mad>, CmError> {
    let mut mad = Box::new([0u8; MAD_LEN]);
    msg.emit(tid, &mut mad[..]).map_err(|_| CmError::Invalid)?;
    Ok(mad)
}
