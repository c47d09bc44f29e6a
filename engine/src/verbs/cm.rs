//! rdma_cm's objects on a device: connection identifiers, event channels, their events and
//! parameters, and the port's CM state they live in. [`Context`](super::Context)'s `cm_*` calls
//! (`verbs/context/cm.rs`) drive them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ahash::AHashMap;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use wire::ib::cma::port_space;

use super::cq::Channel;
use super::gsi::Gsi;
use crate::cm::{Cm, CmConfig, ConnId, RepInfo, ReqInfo};
use crate::roce::types::{AddressVector, QpType};
use wire::ib::Mtu;

/// The Q_Key of rdma_cm's UDP port space (`RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// The local ACK timeout exponent asked for (4.096 µs << 14 = 67 ms, as `ibv_rc_pingpong`).
pub(super) const ACK_TIMEOUT: u8 = 14;
/// The RNR NAK timer code set at RTR (rdma_cm's value: 0.64 ms... 12 = 0.64 ms).
pub(super) const MIN_RNR_TIMER: u8 = 12;
/// Ephemeral ports handed to IDs that connect without binding.
pub(super) const EPHEMERAL: std::ops::RangeInclusive<u16> = 32768..=60999;
/// Events a channel holds at most; beyond, the oldest stay and new ones are dropped.
pub(super) const CHANNEL_EVENTS: usize = 4096;

/// An rdma_cm event channel (`rdma_create_event_channel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmChannel(pub(super) u32);

/// An rdma_cm connection identifier (`rdma_cm_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmId(pub(super) u32);

impl CmId {
    /// The identifier's index (stable while it lives).
    pub fn index(self) -> u32 {
        self.0
    }
}

/// rdma_cm port spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpace {
    /// `RDMA_PS_TCP`: RC connections.
    Tcp,
    /// `RDMA_PS_UDP`: UD, looked up with SIDR.
    Udp,
    /// `RDMA_PS_IB`: the QP type decides.
    Ib,
}

impl PortSpace {
    /// The code in service IDs (`enum rdma_port_space`).
    pub fn code(self) -> u16 {
        match self {
            PortSpace::Tcp => port_space::TCP,
            PortSpace::Udp => port_space::UDP,
            PortSpace::Ib => port_space::IB,
        }
    }

    /// The port space of a code.
    pub fn from_code(code: u16) -> Option<PortSpace> {
        match code {
            port_space::TCP => Some(PortSpace::Tcp),
            port_space::UDP => Some(PortSpace::Udp),
            port_space::IB => Some(PortSpace::Ib),
            _ => None,
        }
    }
}

/// Connection parameters (`struct rdma_conn_param`): ours when connecting or accepting, the
/// peer's in events.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnParam {
    /// Private data (the consumer's part: at most 56 bytes in a REQ, 196 in a REP, 180 in a
    /// SIDR_REQ, 136 in a SIDR_REP).
    pub private_data: Vec<u8>,
    /// RDMA READ / atomic requests accepted at once.
    pub responder_resources: u8,
    /// RDMA READ / atomic requests sent at once.
    pub initiator_depth: u8,
    /// Transport retry count (0..=7).
    pub retry_count: u8,
    /// RNR retry count (0..=7, 7 = forever).
    pub rnr_retry_count: u8,
    /// The QP uses an SRQ.
    pub srq: bool,
    /// The QP number (in events: the peer's).
    pub qp_num: u32,
}

/// What a UD lookup found (`struct rdma_ud_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdParam {
    /// The service's QP.
    pub qp_num: u32,
    /// Its Q_Key.
    pub qkey: u32,
    /// How to reach it.
    pub ah: AddressVector,
}

/// rdma_cm event types (`enum rdma_cm_event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmEventKind {
    /// `rdma_resolve_addr` found a local device and the peer is reachable.
    AddrResolved,
    /// It did not.
    AddrError,
    /// `rdma_resolve_route` done.
    RouteResolved,
    /// A REQ or SIDR_REQ arrived for a listening ID; `id` is the new connection's ID.
    ConnectRequest,
    /// Active, no QP attached: the REP came; set the QP up and call `cm_establish`.
    ConnectResponse,
    /// Setting the QP up failed.
    ConnectError,
    /// The peer did not answer (or a SIDR lookup failed).
    Unreachable,
    /// The peer rejected; `status` is the IBTA reason.
    Rejected,
    /// Connected (UD: the lookup succeeded).
    Established,
    /// The connection is closed.
    Disconnected,
}

/// One rdma_cm event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmIdEvent {
    /// The ID it is about (for a connect request: the new ID).
    pub id: CmId,
    /// For a connect request: the listening ID.
    pub listen_id: Option<CmId>,
    /// What happened.
    pub kind: CmEventKind,
    /// REJ reason (Rejected), SIDR status (Unreachable), or 0.
    pub status: i32,
    /// The peer's connection parameters and private data.
    pub param: ConnParam,
    /// UD: where the service is.
    pub ud: Option<UdParam>,
}

/// Where an ID stands, as rdma_cm tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdState {
    Idle,
    AddrBound,
    /// Waiting for the neighbour table to know the peer's MAC, until the deadline; asked again
    /// at the next poll.
    AddrQuery {
        deadline: Duration,
        next_poll: Duration,
    },
    AddrResolved,
    RouteResolved,
    Listening,
    Connecting,
    Connected,
    Disconnected,
}

#[derive(Debug)]
pub(super) struct Id {
    pub(super) channel: u32,
    pub(super) ps: PortSpace,
    pub(super) state: IdState,
    pub(super) local: Option<SocketAddr>,
    pub(super) remote: Option<SocketAddr>,
    pub(super) dmac: Option<[u8; 6]>,
    pub(super) qp: Option<u32>,
    pub(super) qp_type: Option<QpType>,
    pub(super) conn: Option<ConnId>,
    pub(super) listen: Option<u64>,
    /// Passive: the REQ this ID answers.
    pub(super) req: Option<Box<ReqInfo>>,
    /// Active: the REP.
    pub(super) rep: Option<Box<RepInfo>>,
    /// Our connect or accept parameters.
    pub(super) param: ConnParam,
    /// Our QP's first send PSN.
    pub(super) psn: u32,
    /// The type of service (`rdma_set_option(RDMA_OPTION_ID_TOS)`): the traffic class of the REQ's
    /// path and of an active side's QP.
    pub(super) tos: u8,
    /// DISCONNECTED was reported (on the DREQ), so the DREP's end is not reported again.
    pub(super) down_reported: bool,
    /// The ID holds its local port (bound, listening, or connecting from it); the IDs of
    /// accepted requests share their listener's and hold none (the port can be bound again once
    /// the listener is gone, as perftest's second connection does).
    pub(super) holds_port: bool,
}

impl Id {
    pub(super) fn new(channel: u32, ps: PortSpace) -> Id {
        Id {
            channel,
            ps,
            state: IdState::Idle,
            local: None,
            remote: None,
            dmac: None,
            qp: None,
            qp_type: None,
            conn: None,
            listen: None,
            req: None,
            rep: None,
            param: ConnParam::default(),
            psn: 0,
            tos: 0,
            down_reported: false,
            holds_port: false,
        }
    }

    pub(super) fn ud(&self) -> bool {
        self.ps == PortSpace::Udp || self.qp_type == Some(QpType::Ud)
    }
}

/// The port's CM with the rdma_cm state on top.
#[derive(Debug)]
pub(super) struct CmPort {
    pub(super) cm: Cm,
    pub(super) gsi: Gsi,
    pub(super) ids: Vec<Option<Id>>,
    pub(super) channels: Vec<Option<Channel<CmIdEvent>>>,
    pub(super) by_conn: AHashMap<ConnId, u32>,
    /// Service ID -> listening ID.
    pub(super) listeners: AHashMap<u64, u32>,
    /// IDs put in [`IdState::AddrQuery`] (some may have left it since): the only ones a progress
    /// round looks at for address resolution, so that it costs nothing per idle ID.
    pub(super) querying: Vec<u32>,
    pub(super) next_port: u16,
    pub(super) rng: Xoshiro256PlusPlus,
}

impl CmPort {
    pub(super) fn new(mac: [u8; 6], seed: u64) -> CmPort {
        let ca_guid = u64::from_be_bytes([mac[0] ^ 2, mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]]);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let cfg = CmConfig { ca_guid, seed: rng.next_u32(), ..CmConfig::default() };
        let next_port = *EPHEMERAL.start() + (rng.next_u32() % 20000) as u16;
        CmPort {
            cm: Cm::new(cfg),
            gsi: Gsi::default(),
            ids: Vec::new(),
            channels: Vec::new(),
            by_conn: AHashMap::new(),
            listeners: AHashMap::new(),
            querying: Vec::new(),
            next_port,
            rng,
        }
    }

    pub(super) fn deadline(&self) -> Option<Duration> {
        let polls = self.querying.iter().filter_map(|&i| match self.ids.get(i as usize) {
            Some(Some(Id { state: IdState::AddrQuery { next_poll, .. }, .. })) => Some(*next_poll),
            _ => None,
        });
        self.cm.poll_timeout().into_iter().chain(polls).min()
    }
}

/// The IBTA path MTU code of an MTU.
pub(super) fn mtu_code(m: Mtu) -> u8 {
    match m {
        Mtu::Mtu256 => 1,
        Mtu::Mtu512 => 2,
        Mtu::Mtu1024 => 3,
        Mtu::Mtu2048 => 4,
        Mtu::Mtu4096 => 5,
    }
}

pub(super) fn mtu_of(code: u8) -> Option<Mtu> {
    Mtu::from_bytes(128u32.checked_shl(u32::from(code))?)
}

pub(super) fn gid_bytes(ip: IpAddr) -> [u8; 16] {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}
