//! Communication Manager messages (IBTA vol1 chapter 12), each one whole 256-byte MAD sent to QP1.
//!
//! The field layout is that of IBTA vol1 tables 106..120 (Linux `include/rdma/ibta_vol1_c12.h`):
//! bit fields are numbered from the most significant bit of their byte, multi-byte fields are big
//! endian. The offsets below are from the start of the MAD (the tables count from the end of the
//! 24-byte header). Reserved bits and the vendor-ID fields are ignored by parse and written as zero
//! by emit. Private data and the other trailing byte regions are returned at their full capacity.

use crate::bytes::{read_u16, read_u24, read_u32, read_u64, write_u16, write_u24, write_u32, write_u64};
use crate::ib::mad::{
    BASE_VERSION, CM_CLASS_VERSION, MAD_HEADER_LEN, MAD_LEN, METHOD_SEND, MGMT_CLASS_CM, MadHeader,
};
use crate::{Error, Result};

/// CM attribute IDs (IBTA vol1 table 104).
pub mod attr {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// ConnectRequest.
    pub const REQ: u16 = 0x0010;
    /// MsgRcptAck.
    pub const MRA: u16 = 0x0011;
    /// ConnectReject.
    pub const REJ: u16 = 0x0012;
    /// ConnectReply.
    pub const REP: u16 = 0x0013;
    /// ReadyToUse.
    pub const RTU: u16 = 0x0014;
    /// DisconnectRequest.
    pub const DREQ: u16 = 0x0015;
    /// DisconnectReply.
    pub const DREP: u16 = 0x0016;
    /// ServiceIDResReq.
    pub const SIDR_REQ: u16 = 0x0017;
    /// ServiceIDResReqResp.
    pub const SIDR_REP: u16 = 0x0018;
    /// LoadAlternatePath.
    pub const LAP: u16 = 0x0019;
    /// AlternatePathResponse.
    pub const APR: u16 = 0x001A;
}

/// Private-data capacity of each message, in bytes.
pub mod private_len {
    /// REQ.
    pub const REQ: usize = 92;
    /// MRA.
    pub const MRA: usize = 222;
    /// REJ.
    pub const REJ: usize = 148;
    /// REP.
    pub const REP: usize = 196;
    /// RTU.
    pub const RTU: usize = 224;
    /// DREQ.
    pub const DREQ: usize = 220;
    /// DREP.
    pub const DREP: usize = 224;
    /// SIDR_REQ.
    pub const SIDR_REQ: usize = 216;
    /// SIDR_REP.
    pub const SIDR_REP: usize = 136;
}

/// Size of the REJ Additional Rejection Information region.
pub const ARI_LEN: usize = 72;
/// Size of the SIDR_REP Additional Information region (a ClassPortInfo on redirect).
pub const SIDR_INFO_LEN: usize = 72;

/// REJ reason codes (IBTA vol1 table 112; Linux `enum ib_cm_rej_reason`).
pub mod rej_reason {
    /// No QP available.
    pub const NO_QP: u16 = 1;
    /// No EEC available.
    pub const NO_EEC: u16 = 2;
    /// No resources available.
    pub const NO_RESOURCES: u16 = 3;
    /// Timeout.
    pub const TIMEOUT: u16 = 4;
    /// Unsupported request.
    pub const UNSUPPORTED: u16 = 5;
    /// Invalid communication ID.
    pub const INVALID_COMM_ID: u16 = 6;
    /// Invalid communication instance.
    pub const INVALID_COMM_INSTANCE: u16 = 7;
    /// Invalid service ID (no listener).
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// Invalid transport service type.
    pub const INVALID_TRANSPORT_TYPE: u16 = 9;
    /// Stale connection.
    pub const STALE_CONN: u16 = 10;
    /// RDC does not exist.
    pub const RDC_NOT_EXIST: u16 = 11;
    /// Primary remote port GID rejected.
    pub const INVALID_GID: u16 = 12;
    /// Primary remote port LID rejected.
    pub const INVALID_LID: u16 = 13;
    /// Primary SL rejected.
    pub const INVALID_SL: u16 = 14;
    /// Primary traffic class rejected.
    pub const INVALID_TRAFFIC_CLASS: u16 = 15;
    /// Primary hop limit rejected.
    pub const INVALID_HOP_LIMIT: u16 = 16;
    /// Primary packet rate rejected.
    pub const INVALID_PACKET_RATE: u16 = 17;
    /// Alternate remote port GID rejected.
    pub const INVALID_ALT_GID: u16 = 18;
    /// Alternate remote port LID rejected.
    pub const INVALID_ALT_LID: u16 = 19;
    /// Alternate SL rejected.
    pub const INVALID_ALT_SL: u16 = 20;
    /// Alternate traffic class rejected.
    pub const INVALID_ALT_TRAFFIC_CLASS: u16 = 21;
    /// Alternate hop limit rejected.
    pub const INVALID_ALT_HOP_LIMIT: u16 = 22;
    /// Alternate packet rate rejected.
    pub const INVALID_ALT_PACKET_RATE: u16 = 23;
    /// Port CM redirection.
    pub const PORT_CM_REDIRECT: u16 = 24;
    /// Port redirection.
    pub const PORT_REDIRECT: u16 = 25;
    /// Invalid path MTU.
    pub const INVALID_MTU: u16 = 26;
    /// Insufficient responder resources.
    pub const INSUFFICIENT_RESP_RESOURCES: u16 = 27;
    /// Consumer reject (what `rdma_reject` sends).
    pub const CONSUMER_REJECT: u16 = 28;
    /// Invalid RNR NAK retry count.
    pub const INVALID_RNR_RETRY: u16 = 29;
    /// Duplicate local communication ID.
    pub const DUPLICATE_LOCAL_COMM_ID: u16 = 30;
    /// Unsupported class version.
    pub const INVALID_CLASS_VERSION: u16 = 31;
    /// Invalid primary flow label.
    pub const INVALID_FLOW_LABEL: u16 = 32;
    /// Invalid alternate flow label.
    pub const INVALID_ALT_FLOW_LABEL: u16 = 33;
    /// Vendor option not supported.
    pub const VENDOR_OPTION_NOT_SUPPORTED: u16 = 35;
}

/// The values of the 2-bit "message MRAed" (MRA) and "message rejected" (REJ) fields.
pub mod msg_code {
    /// The REQ.
    pub const REQ: u8 = 0;
    /// The REP.
    pub const REP: u8 = 1;
    /// Another message (LAP).
    pub const OTHER: u8 = 2;
}

/// SIDR_REP status values (IBTA vol1 table 121).
pub mod sidr_status {
    /// The QPN and Q_Key are valid.
    pub const SUCCESS: u8 = 0;
    /// The service ID is not supported.
    pub const UNSUPPORTED: u8 = 1;
    /// The service provider rejected the request.
    pub const REJECT: u8 = 2;
    /// No QP available.
    pub const NO_QP: u8 = 3;
    /// Redirect: the additional information holds a ClassPortInfo.
    pub const REDIRECT: u8 = 4;
    /// Unsupported class version.
    pub const UNSUPPORTED_VERSION: u8 = 5;
}

/// A whole MAD, after the length check.
type Mad = [u8; MAD_LEN];

/// Offset in the MAD of a field at `off` in the IBTA tables (which count from the end of the header).
const fn at(off: usize) -> usize {
    MAD_HEADER_LEN + off
}

/// `Inconsistent(what)` unless `v` fits in `bits` bits.
fn fits(v: u32, bits: u32, what: &'static str) -> Result<()> {
    if v >> bits == 0 { Ok(()) } else { Err(Error::Inconsistent(what)) }
}

/// `BadLength` unless `data` fits in `cap` bytes.
fn fits_len(data: &[u8], cap: usize, what: &'static str) -> Result<()> {
    if data.len() <= cap { Ok(()) } else { Err(Error::BadLength(what)) }
}

/// The `len`-byte region at MAD offset `off`.
fn region(m: &Mad, off: usize, len: usize) -> &[u8] {
    &m[off..off + len]
}

/// Copies `data` (already checked to fit) to MAD offset `off`; the rest of the region stays zero.
fn put(m: &mut Mad, off: usize, data: &[u8]) {
    m[off..off + data.len()].copy_from_slice(data);
}

/// The path fields of a REQ (primary or alternate), 44 bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmPath {
    /// Local port LID (0xFFFF on RoCE).
    pub local_lid: u16,
    /// Remote port LID (0xFFFF on RoCE).
    pub remote_lid: u16,
    /// Local port GID.
    pub local_gid: [u8; 16],
    /// Remote port GID.
    pub remote_gid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Packet rate (6 bits, the IB static rate encoding).
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Subnet local.
    pub subnet_local: bool,
    /// Local ACK timeout (5 bits).
    pub local_ack_timeout: u8,
}

impl CmPath {
    /// Size of a path in the REQ.
    const LEN: usize = 44;

    fn read(m: &Mad, p: usize) -> CmPath {
        let mut local_gid = [0u8; 16];
        local_gid.copy_from_slice(region(m, p + 4, 16));
        let mut remote_gid = [0u8; 16];
        remote_gid.copy_from_slice(region(m, p + 20, 16));
        CmPath {
            local_lid: read_u16(m, p),
            remote_lid: read_u16(m, p + 2),
            local_gid,
            remote_gid,
            flow_label: read_u32(m, p + 36) >> 12,
            packet_rate: m[p + 39] & 0x3F,
            traffic_class: m[p + 40],
            hop_limit: m[p + 41],
            sl: m[p + 42] >> 4,
            subnet_local: m[p + 42] & 0x08 != 0,
            local_ack_timeout: m[p + 43] >> 3,
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.flow_label, 20, "CM path flow label is 20-bit")?;
        fits(self.packet_rate.into(), 6, "CM path packet rate is 6-bit")?;
        fits(self.sl.into(), 4, "CM path SL is 4-bit")?;
        fits(self.local_ack_timeout.into(), 5, "CM path local ACK timeout is 5-bit")
    }

    fn write(&self, m: &mut Mad, p: usize) {
        write_u16(m, p, self.local_lid);
        write_u16(m, p + 2, self.remote_lid);
        put(m, p + 4, &self.local_gid);
        put(m, p + 20, &self.remote_gid);
        write_u32(m, p + 36, self.flow_label << 12 | u32::from(self.packet_rate));
        m[p + 40] = self.traffic_class;
        m[p + 41] = self.hop_limit;
        m[p + 42] = self.sl << 4 | u8::from(self.subnet_local) << 3;
        m[p + 43] = self.local_ack_timeout << 3;
    }
}

/// ConnectRequest (IBTA vol1 table 106).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Req<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Service ID (see [`crate::ib::cma::service_id`] for rdma_cm's).
    pub service_id: u64,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Local Q_Key (unused for RC).
    pub local_qkey: u32,
    /// Local QPN (24 bits).
    pub local_qpn: u32,
    /// Responder resources (incoming RDMA reads / atomics the sender accepts).
    pub responder_resources: u8,
    /// Local EE context number (24 bits).
    pub local_eecn: u32,
    /// Initiator depth (outstanding RDMA reads / atomics the sender issues).
    pub initiator_depth: u8,
    /// Remote EE context number (24 bits).
    pub remote_eecn: u32,
    /// Remote CM response timeout (5 bits, 4.096 us * 2^value).
    pub remote_cm_response_timeout: u8,
    /// Transport service type (2 bits: 0 RC, 1 UC, 2 RD).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// Starting PSN (24 bits).
    pub starting_psn: u32,
    /// Local CM response timeout (5 bits).
    pub local_cm_response_timeout: u8,
    /// Retry count (3 bits).
    pub retry_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Path packet payload MTU (4 bits, the IB MTU encoding: 1 = 256 .. 5 = 4096).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// Max CM retries (4 bits).
    pub max_cm_retries: u8,
    /// The sender uses an SRQ.
    pub srq: bool,
    /// Extended transport type (3 bits).
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary: CmPath,
    /// Alternate path (all zero when there is none).
    pub alternate: CmPath,
    /// Private data (on parse: all [`private_len::REQ`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> Req<'a> {
    const PRIMARY: usize = at(52);
    const ALTERNATE: usize = at(96);
    const PRIVATE: usize = at(140);

    fn read(m: &'a Mad) -> Req<'a> {
        Req {
            local_comm_id: read_u32(m, at(0)),
            service_id: read_u64(m, at(8)),
            local_ca_guid: read_u64(m, at(16)),
            local_qkey: read_u32(m, at(28)),
            local_qpn: read_u24(m, at(32)),
            responder_resources: m[at(35)],
            local_eecn: read_u24(m, at(36)),
            initiator_depth: m[at(39)],
            remote_eecn: read_u24(m, at(40)),
            remote_cm_response_timeout: m[at(43)] >> 3,
            transport_service_type: m[at(43)] >> 1 & 0x3,
            end_to_end_flow_control: m[at(43)] & 0x1 != 0,
            starting_psn: read_u24(m, at(44)),
            local_cm_response_timeout: m[at(47)] >> 3,
            retry_count: m[at(47)] & 0x7,
            pkey: read_u16(m, at(48)),
            path_mtu: m[at(50)] >> 4,
            rdc_exists: m[at(50)] & 0x08 != 0,
            rnr_retry_count: m[at(50)] & 0x7,
            max_cm_retries: m[at(51)] >> 4,
            srq: m[at(51)] & 0x08 != 0,
            extended_transport_type: m[at(51)] & 0x7,
            primary: CmPath::read(m, Self::PRIMARY),
            alternate: CmPath::read(m, Self::ALTERNATE),
            private_data: region(m, Self::PRIVATE, private_len::REQ),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.local_qpn, 24, "REQ local QPN is 24-bit")?;
        fits(self.local_eecn, 24, "REQ local EECN is 24-bit")?;
        fits(self.remote_eecn, 24, "REQ remote EECN is 24-bit")?;
        fits(self.remote_cm_response_timeout.into(), 5, "REQ remote CM response timeout is 5-bit")?;
        fits(self.transport_service_type.into(), 2, "REQ transport service type is 2-bit")?;
        fits(self.starting_psn, 24, "REQ starting PSN is 24-bit")?;
        fits(self.local_cm_response_timeout.into(), 5, "REQ local CM response timeout is 5-bit")?;
        fits(self.retry_count.into(), 3, "REQ retry count is 3-bit")?;
        fits(self.path_mtu.into(), 4, "REQ path MTU is 4-bit")?;
        fits(self.rnr_retry_count.into(), 3, "REQ RNR retry count is 3-bit")?;
        fits(self.max_cm_retries.into(), 4, "REQ max CM retries is 4-bit")?;
        fits(self.extended_transport_type.into(), 3, "REQ extended transport type is 3-bit")?;
        self.primary.check()?;
        self.alternate.check()?;
        fits_len(self.private_data, private_len::REQ, "REQ private data longer than 92 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.local_comm_id);
        write_u64(m, at(8), self.service_id);
        write_u64(m, at(16), self.local_ca_guid);
        write_u32(m, at(28), self.local_qkey);
        write_u24(m, at(32), self.local_qpn);
        m[at(35)] = self.responder_resources;
        write_u24(m, at(36), self.local_eecn);
        m[at(39)] = self.initiator_depth;
        write_u24(m, at(40), self.remote_eecn);
        m[at(43)] = self.remote_cm_response_timeout << 3
            | self.transport_service_type << 1
            | u8::from(self.end_to_end_flow_control);
        write_u24(m, at(44), self.starting_psn);
        m[at(47)] = self.local_cm_response_timeout << 3 | self.retry_count;
        write_u16(m, at(48), self.pkey);
        m[at(50)] = self.path_mtu << 4 | u8::from(self.rdc_exists) << 3 | self.rnr_retry_count;
        m[at(51)] = self.max_cm_retries << 4 | u8::from(self.srq) << 3 | self.extended_transport_type;
        self.primary.write(m, Self::PRIMARY);
        self.alternate.write(m, Self::ALTERNATE);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// MsgRcptAck (IBTA vol1 table 107): "received, answer delayed".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mra<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// The message acknowledged (2 bits, [`msg_code`]).
    pub message_mraed: u8,
    /// Service timeout (5 bits).
    pub service_timeout: u8,
    /// Private data (on parse: all [`private_len::MRA`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> Mra<'a> {
    const PRIVATE: usize = at(10);

    fn read(m: &'a Mad) -> Mra<'a> {
        Mra {
            local_comm_id: read_u32(m, at(0)),
            remote_comm_id: read_u32(m, at(4)),
            message_mraed: m[at(8)] >> 6,
            service_timeout: m[at(9)] >> 3,
            private_data: region(m, Self::PRIVATE, private_len::MRA),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.message_mraed.into(), 2, "MRA message MRAed is 2-bit")?;
        fits(self.service_timeout.into(), 5, "MRA service timeout is 5-bit")?;
        fits_len(self.private_data, private_len::MRA, "MRA private data longer than 222 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.local_comm_id);
        write_u32(m, at(4), self.remote_comm_id);
        m[at(8)] = self.message_mraed << 6;
        m[at(9)] = self.service_timeout << 3;
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// ConnectReject (IBTA vol1 table 108).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rej<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID (0 when rejecting a REQ whose sender is unknown).
    pub remote_comm_id: u32,
    /// The message rejected (2 bits, [`msg_code`]).
    pub message_rejected: u8,
    /// Length of the meaningful part of `ari` (7 bits).
    pub reject_info_len: u8,
    /// Reason ([`rej_reason`]).
    pub reason: u16,
    /// Additional rejection information (up to [`ARI_LEN`]; on parse: all of them, whatever
    /// `reject_info_len` says).
    pub ari: &'a [u8],
    /// Private data (on parse: all [`private_len::REJ`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> Rej<'a> {
    const ARI: usize = at(12);
    const PRIVATE: usize = at(84);

    fn read(m: &'a Mad) -> Rej<'a> {
        Rej {
            local_comm_id: read_u32(m, at(0)),
            remote_comm_id: read_u32(m, at(4)),
            message_rejected: m[at(8)] >> 6,
            reject_info_len: m[at(9)] >> 1,
            reason: read_u16(m, at(10)),
            ari: region(m, Self::ARI, ARI_LEN),
            private_data: region(m, Self::PRIVATE, private_len::REJ),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.message_rejected.into(), 2, "REJ message rejected is 2-bit")?;
        fits(self.reject_info_len.into(), 7, "REJ reject info length is 7-bit")?;
        fits_len(self.ari, ARI_LEN, "REJ ARI longer than 72 bytes")?;
        fits_len(self.private_data, private_len::REJ, "REJ private data longer than 148 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.local_comm_id);
        write_u32(m, at(4), self.remote_comm_id);
        m[at(8)] = self.message_rejected << 6;
        m[at(9)] = self.reject_info_len << 1;
        write_u16(m, at(10), self.reason);
        put(m, Self::ARI, self.ari);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// ConnectReply (IBTA vol1 table 110).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rep<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID (the REQ's local one).
    pub remote_comm_id: u32,
    /// Local Q_Key.
    pub local_qkey: u32,
    /// Local QPN (24 bits).
    pub local_qpn: u32,
    /// Local EE context number (24 bits).
    pub local_eecn: u32,
    /// Starting PSN (24 bits).
    pub starting_psn: u32,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Target ACK delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// RNR retry count (3 bits).
    pub rnr_retry_count: u8,
    /// The sender uses an SRQ.
    pub srq: bool,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private data (on parse: all [`private_len::REP`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> Rep<'a> {
    const PRIVATE: usize = at(36);

    fn read(m: &'a Mad) -> Rep<'a> {
        Rep {
            local_comm_id: read_u32(m, at(0)),
            remote_comm_id: read_u32(m, at(4)),
            local_qkey: read_u32(m, at(8)),
            local_qpn: read_u24(m, at(12)),
            local_eecn: read_u24(m, at(16)),
            starting_psn: read_u24(m, at(20)),
            responder_resources: m[at(24)],
            initiator_depth: m[at(25)],
            target_ack_delay: m[at(26)] >> 3,
            failover_accepted: m[at(26)] >> 1 & 0x3,
            end_to_end_flow_control: m[at(26)] & 0x1 != 0,
            rnr_retry_count: m[at(27)] >> 5,
            srq: m[at(27)] & 0x10 != 0,
            local_ca_guid: read_u64(m, at(28)),
            private_data: region(m, Self::PRIVATE, private_len::REP),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.local_qpn, 24, "REP local QPN is 24-bit")?;
        fits(self.local_eecn, 24, "REP local EECN is 24-bit")?;
        fits(self.starting_psn, 24, "REP starting PSN is 24-bit")?;
        fits(self.target_ack_delay.into(), 5, "REP target ACK delay is 5-bit")?;
        fits(self.failover_accepted.into(), 2, "REP failover accepted is 2-bit")?;
        fits(self.rnr_retry_count.into(), 3, "REP RNR retry count is 3-bit")?;
        fits_len(self.private_data, private_len::REP, "REP private data longer than 196 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.local_comm_id);
        write_u32(m, at(4), self.remote_comm_id);
        write_u32(m, at(8), self.local_qkey);
        write_u24(m, at(12), self.local_qpn);
        write_u24(m, at(16), self.local_eecn);
        write_u24(m, at(20), self.starting_psn);
        m[at(24)] = self.responder_resources;
        m[at(25)] = self.initiator_depth;
        m[at(26)] =
            self.target_ack_delay << 3 | self.failover_accepted << 1 | u8::from(self.end_to_end_flow_control);
        m[at(27)] = self.rnr_retry_count << 5 | u8::from(self.srq) << 4;
        write_u64(m, at(28), self.local_ca_guid);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// ReadyToUse (IBTA vol1 table 111).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rtu<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// Private data (on parse: all [`private_len::RTU`] bytes).
    pub private_data: &'a [u8],
}

/// Reads and writes the two communication IDs and the private data of RTU and DREP, which have
/// nothing else.
macro_rules! ids_and_private {
    ($ty:ident, $cap:expr, $what:expr) => {
        impl<'a> $ty<'a> {
            const PRIVATE: usize = at(8);

            fn read(m: &'a Mad) -> $ty<'a> {
                $ty {
                    local_comm_id: read_u32(m, at(0)),
                    remote_comm_id: read_u32(m, at(4)),
                    private_data: region(m, Self::PRIVATE, $cap),
                }
            }

            fn check(&self) -> Result<()> {
                fits_len(self.private_data, $cap, $what)
            }

            fn write(&self, m: &mut Mad) {
                write_u32(m, at(0), self.local_comm_id);
                write_u32(m, at(4), self.remote_comm_id);
                put(m, Self::PRIVATE, self.private_data);
            }
        }
    };
}

ids_and_private!(Rtu, private_len::RTU, "RTU private data longer than 224 bytes");

/// DisconnectRequest (IBTA vol1 table 112).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dreq<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// Remote QPN or EECN (24 bits).
    pub remote_qpn: u32,
    /// Private data (on parse: all [`private_len::DREQ`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> Dreq<'a> {
    const PRIVATE: usize = at(12);

    fn read(m: &'a Mad) -> Dreq<'a> {
        Dreq {
            local_comm_id: read_u32(m, at(0)),
            remote_comm_id: read_u32(m, at(4)),
            remote_qpn: read_u24(m, at(8)),
            private_data: region(m, Self::PRIVATE, private_len::DREQ),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.remote_qpn, 24, "DREQ remote QPN is 24-bit")?;
        fits_len(self.private_data, private_len::DREQ, "DREQ private data longer than 220 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.local_comm_id);
        write_u32(m, at(4), self.remote_comm_id);
        write_u24(m, at(8), self.remote_qpn);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// DisconnectReply (IBTA vol1 table 113).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Drep<'a> {
    /// Local communication ID.
    pub local_comm_id: u32,
    /// Remote communication ID.
    pub remote_comm_id: u32,
    /// Private data (on parse: all [`private_len::DREP`] bytes).
    pub private_data: &'a [u8],
}

ids_and_private!(Drep, private_len::DREP, "DREP private data longer than 224 bytes");

/// ServiceIDResReq (IBTA vol1 table 119): resolves a service ID to a UD QPN and Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrReq<'a> {
    /// Request ID.
    pub request_id: u32,
    /// Partition key.
    pub pkey: u16,
    /// Service ID.
    pub service_id: u64,
    /// Private data (on parse: all [`private_len::SIDR_REQ`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> SidrReq<'a> {
    const PRIVATE: usize = at(16);

    fn read(m: &'a Mad) -> SidrReq<'a> {
        SidrReq {
            request_id: read_u32(m, at(0)),
            pkey: read_u16(m, at(4)),
            service_id: read_u64(m, at(8)),
            private_data: region(m, Self::PRIVATE, private_len::SIDR_REQ),
        }
    }

    fn check(&self) -> Result<()> {
        fits_len(self.private_data, private_len::SIDR_REQ, "SIDR_REQ private data longer than 216 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.request_id);
        write_u16(m, at(4), self.pkey);
        write_u64(m, at(8), self.service_id);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// ServiceIDResReqResp (IBTA vol1 table 120).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrRep<'a> {
    /// Request ID (the SIDR_REQ's).
    pub request_id: u32,
    /// Status ([`sidr_status`]).
    pub status: u8,
    /// Length of the meaningful part of `class_port_info`.
    pub additional_info_len: u8,
    /// QPN (24 bits).
    pub qpn: u32,
    /// Service ID.
    pub service_id: u64,
    /// Q_Key.
    pub qkey: u32,
    /// Additional information, a ClassPortInfo on redirect (up to [`SIDR_INFO_LEN`]; on parse:
    /// all of them).
    pub class_port_info: &'a [u8],
    /// Private data (on parse: all [`private_len::SIDR_REP`] bytes).
    pub private_data: &'a [u8],
}

impl<'a> SidrRep<'a> {
    const INFO: usize = at(24);
    const PRIVATE: usize = at(96);

    fn read(m: &'a Mad) -> SidrRep<'a> {
        SidrRep {
            request_id: read_u32(m, at(0)),
            status: m[at(4)],
            additional_info_len: m[at(5)],
            qpn: read_u24(m, at(8)),
            service_id: read_u64(m, at(12)),
            qkey: read_u32(m, at(20)),
            class_port_info: region(m, Self::INFO, SIDR_INFO_LEN),
            private_data: region(m, Self::PRIVATE, private_len::SIDR_REP),
        }
    }

    fn check(&self) -> Result<()> {
        fits(self.qpn, 24, "SIDR_REP QPN is 24-bit")?;
        fits_len(self.class_port_info, SIDR_INFO_LEN, "SIDR_REP additional info longer than 72 bytes")?;
        fits_len(self.private_data, private_len::SIDR_REP, "SIDR_REP private data longer than 136 bytes")
    }

    fn write(&self, m: &mut Mad) {
        write_u32(m, at(0), self.request_id);
        m[at(4)] = self.status;
        m[at(5)] = self.additional_info_len;
        write_u24(m, at(8), self.qpn);
        write_u64(m, at(12), self.service_id);
        write_u32(m, at(20), self.qkey);
        put(m, Self::INFO, self.class_port_info);
        put(m, Self::PRIVATE, self.private_data);
    }
}

/// One CM message: what a CM MAD carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmMessage<'a> {
    /// ConnectRequest.
    Req(Req<'a>),
    /// MsgRcptAck.
    Mra(Mra<'a>),
    /// ConnectReject.
    Rej(Rej<'a>),
    /// ConnectReply.
    Rep(Rep<'a>),
    /// ReadyToUse.
    Rtu(Rtu<'a>),
    /// DisconnectRequest.
    Dreq(Dreq<'a>),
    /// DisconnectReply.
    Drep(Drep<'a>),
    /// ServiceIDResReq.
    SidrReq(SidrReq<'a>),
    /// ServiceIDResReqResp.
    SidrRep(SidrRep<'a>),
}

/// Applies `$body` to the message inside whichever variant `$msg` is.
macro_rules! each_variant {
    ($msg:expr, $m:ident => $body:expr) => {
        match $msg {
            CmMessage::Req($m) => $body,
            CmMessage::Mra($m) => $body,
            CmMessage::Rej($m) => $body,
            CmMessage::Rep($m) => $body,
            CmMessage::Rtu($m) => $body,
            CmMessage::Dreq($m) => $body,
            CmMessage::Drep($m) => $body,
            CmMessage::SidrReq($m) => $body,
            CmMessage::SidrRep($m) => $body,
        }
    };
}

impl<'a> CmMessage<'a> {
    /// Parses a whole MAD (at least [`MAD_LEN`] bytes, else `Truncated`; of longer input only the
    /// first [`MAD_LEN`] bytes count). A base version other than 1, a management class other than
    /// the CM's or a class version other than 2 is `Unsupported`, and so is an attribute ID that
    /// is not one of the nine messages here (ClassPortInfo, LAP, APR, unknown ones). The method
    /// is not checked: it is in the returned header. Private data and the other trailing regions
    /// borrow their whole capacity from `mad` (always 92 bytes for a REQ, ...).
    pub fn parse(mad: &'a [u8]) -> Result<(MadHeader, CmMessage<'a>)> {
        let m: &'a Mad = mad.first_chunk().ok_or(Error::Truncated("CM MAD"))?;
        let hdr = MadHeader::parse(m)?;
        if hdr.base_version != BASE_VERSION {
            return Err(Error::Unsupported("MAD base version other than 1"));
        }
        if hdr.mgmt_class != MGMT_CLASS_CM {
            return Err(Error::Unsupported("MAD management class other than CM"));
        }
        if hdr.class_version != CM_CLASS_VERSION {
            return Err(Error::Unsupported("CM class version other than 2"));
        }
        let msg = match hdr.attr_id {
            attr::REQ => CmMessage::Req(Req::read(m)),
            attr::MRA => CmMessage::Mra(Mra::read(m)),
            attr::REJ => CmMessage::Rej(Rej::read(m)),
            attr::REP => CmMessage::Rep(Rep::read(m)),
            attr::RTU => CmMessage::Rtu(Rtu::read(m)),
            attr::DREQ => CmMessage::Dreq(Dreq::read(m)),
            attr::DREP => CmMessage::Drep(Drep::read(m)),
            attr::SIDR_REQ => CmMessage::SidrReq(SidrReq::read(m)),
            attr::SIDR_REP => CmMessage::SidrRep(SidrRep::read(m)),
            _ => return Err(Error::Unsupported("CM attribute")),
        };
        Ok((hdr, msg))
    }

    /// Writes the MAD header (base version 1, class CM, class version 2, method `Send()`, status
    /// and class-specific 0, `tid`, the attribute ID of the message, attribute modifier 0) and the
    /// message into `buf[..MAD_LEN]`, every byte not set zero, and returns [`MAD_LEN`].
    ///
    /// `buf` shorter than [`MAD_LEN`] is `BufferTooSmall`; private data (or ARI, SIDR additional
    /// information) longer than its capacity is `BadLength` (shorter is zero-padded); a field value
    /// wider than its bits (24-bit QPN/PSN/EECN, 5-bit timeouts, 3-bit retry counts, 4-bit MTU,
    /// 20-bit flow label, ...) is `Inconsistent`. On error `buf` is left unchanged.
    pub fn emit(&self, tid: u64, buf: &mut [u8]) -> Result<usize> {
        let m: &mut Mad = buf.first_chunk_mut().ok_or(Error::BufferTooSmall)?;
        each_variant!(self, x => x.check())?;
        m.fill(0);
        let hdr = MadHeader {
            base_version: BASE_VERSION,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid,
            attr_id: self.attr_id(),
            attr_mod: 0,
        };
        hdr.emit(m)?;
        each_variant!(self, x => x.write(m));
        Ok(MAD_LEN)
    }

    /// The attribute ID of this message ([`attr`]).
    pub fn attr_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
            CmMessage::SidrReq(_) => attr::SIDR_REQ,
            CmMessage::SidrRep(_) => attr::SIDR_REP,
        }
    }

    /// The private data of this message.
    pub fn private_data(&self) -> &'a [u8] {
        each_variant!(self, x => x.private_data)
    }

    /// The private-data capacity of this kind of message ([`private_len`]).
    pub fn private_capacity(&self) -> usize {
        match self {
            CmMessage::Req(_) => private_len::REQ,
            CmMessage::Mra(_) => private_len::MRA,
            CmMessage::Rej(_) => private_len::REJ,
            CmMessage::Rep(_) => private_len::REP,
            CmMessage::Rtu(_) => private_len::RTU,
            CmMessage::Dreq(_) => private_len::DREQ,
            CmMessage::Drep(_) => private_len::DREP,
            CmMessage::SidrReq(_) => private_len::SIDR_REQ,
            CmMessage::SidrRep(_) => private_len::SIDR_REP,
        }
    }
}

/// `From<Msg> for CmMessage` for each message.
macro_rules! into_message {
    ($($ty:ident),*) => {$(
        impl<'a> From<$ty<'a>> for CmMessage<'a> {
            fn from(m: $ty<'a>) -> CmMessage<'a> {
                CmMessage::$ty(m)
            }
        }
    )*};
}

into_message!(Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep);

// The region of every message ends where the MAD does.
const _: () = {
    assert!(Req::PRIVATE + private_len::REQ == MAD_LEN);
    assert!(Req::ALTERNATE + CmPath::LEN == Req::PRIVATE);
    assert!(Req::PRIMARY + CmPath::LEN == Req::ALTERNATE);
    assert!(Mra::PRIVATE + private_len::MRA == MAD_LEN);
    assert!(Rej::ARI + ARI_LEN == Rej::PRIVATE);
    assert!(Rej::PRIVATE + private_len::REJ == MAD_LEN);
    assert!(Rep::PRIVATE + private_len::REP == MAD_LEN);
    assert!(Rtu::PRIVATE + private_len::RTU == MAD_LEN);
    assert!(Dreq::PRIVATE + private_len::DREQ == MAD_LEN);
    assert!(Drep::PRIVATE + private_len::DREP == MAD_LEN);
    assert!(SidrReq::PRIVATE + private_len::SIDR_REQ == MAD_LEN);
    assert!(SidrRep::INFO + SIDR_INFO_LEN == SidrRep::PRIVATE);
    assert!(SidrRep::PRIVATE + private_len::SIDR_REP == MAD_LEN);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::cma::{self, CmaHdr};
    use crate::testutil::hex;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use std::vec::Vec;

    // The CM MADs of captures/roce/linlinw5/rping.pcap (Linux rdma_rxe, rping over rdma_cm),
    // extracted with `tshark -r rping.pcap -Y infiniband.mad -T fields -e udp.payload`.
    /// rping.pcap frame 1: UDP payload (BTH, DETH, MAD, ICRC).
    const FRAME_REQ: &str = concat!(
        "6400ffff000000018000000680010000000000010107020300000000000000026dc5c06e00100000",
        "000000006ec0c56d000000000000000001061c06025056fffea77d03000000000000000000002c01",
        "00000001000000a0003da6a7ffff37f0ffffffff00000000000000000000ffff0a01103e00000000",
        "000000000000ffff0a01103d70bbd000004000880000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000040bd69000000000000000000000000",
        "0a01103e0000000000000000000000000a01103d0000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000064e63802",
    );
    /// rping.pcap frame 2: UDP payload (BTH, DETH, MAD, ICRC).
    const FRAME_REP: &str = concat!(
        "6400ffff000000018000000480010000000000010107020300000000000000026dc5c06e00130000",
        "000000009d88f4566ec0c56d0000000000002b0000000000febd3d00010178e0025056fffea7129f",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "000000000000000000000000000000000000000000000000000000000000000000000000beb27888",
    );
    /// rping.pcap frame 3: UDP payload (BTH, DETH, MAD, ICRC).
    const FRAME_RTU: &str = concat!(
        "6400ffff000000018000000780010000000000010107020300000000000000026dc5c06e00140000",
        "000000006ec0c56d9d88f45600000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000054764a94",
    );
    /// rping.pcap frame 64: UDP payload (BTH, DETH, MAD, ICRC).
    const FRAME_DREQ: &str = concat!(
        "6400ffff000000018000000880010000000000010107020300000000000000026dc5c06e00150000",
        "000000006ec0c56d9d88f45600002b00000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000070d09643",
    );
    /// rping.pcap frame 65: UDP payload (BTH, DETH, MAD, ICRC).
    const FRAME_DREP: &str = concat!(
        "6400ffff000000018000000580010000000000010107020300000000000000026dc5c06e00160000",
        "000000009d88f4566ec0c56d00000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "000000000000000000000000000000000000000000000000000000000000000000000000243487d5",
    );

    /// The MAD of a captured UDP payload: after BTH (12) and DETH (8), before the ICRC.
    fn mad_of(frame: &str) -> Vec<u8> {
        let p = hex(frame);
        assert_eq!(p.len(), 20 + MAD_LEN + 4);
        p[20..20 + MAD_LEN].to_vec()
    }

    /// `data` zero-padded to `cap` bytes.
    fn pad(data: &[u8], cap: usize) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(cap, 0);
        v
    }

    /// Parses `mad`, checks the CM header of a message emitted by this codec and returns it.
    fn parse_own(mad: &[u8], tid: u64) -> CmMessage<'_> {
        let (hdr, msg) = CmMessage::parse(mad).unwrap();
        assert_eq!(
            hdr,
            MadHeader {
                base_version: 1,
                mgmt_class: MGMT_CLASS_CM,
                class_version: CM_CLASS_VERSION,
                method: METHOD_SEND,
                status: 0,
                class_specific: 0,
                tid,
                attr_id: msg.attr_id(),
                attr_mod: 0,
            }
        );
        msg
    }

    /// Emits `msg` into a buffer that starts dirty and asserts that parsing it gives `expected`.
    fn check_roundtrip(msg: CmMessage<'_>, expected: CmMessage<'_>, tid: u64) {
        let mut b = [0xA5u8; MAD_LEN + 8];
        assert_eq!(msg.emit(tid, &mut b), Ok(MAD_LEN));
        assert_eq!(b[MAD_LEN..], [0xA5u8; 8], "emit wrote past the MAD");
        let got = parse_own(&b, tid);
        assert_eq!(got, expected);
        assert_eq!(got.attr_id(), msg.attr_id());
        assert_eq!(got.private_data().len(), msg.private_capacity());
    }

    /// Parses a captured MAD and re-emits it with the captured TID: the 256 bytes must come back.
    fn reemit_exact(mad: &[u8]) -> (MadHeader, CmMessage<'_>) {
        let (hdr, msg) = CmMessage::parse(mad).unwrap();
        let mut o = [0u8; MAD_LEN];
        assert_eq!(msg.emit(hdr.tid, &mut o), Ok(MAD_LEN));
        assert_eq!(o[..], mad[..], "re-emit of {:#06x} differs", hdr.attr_id);
        (hdr, msg)
    }

    #[test]
    fn rping_req() {
        let mad = mad_of(FRAME_REQ);
        let (hdr, msg) = reemit_exact(&mad);
        assert_eq!(hdr.tid, 0x0000_0002_6dc5_c06e);
        assert_eq!(hdr.attr_id, attr::REQ);
        let CmMessage::Req(r) = msg else { panic!("not a REQ: {msg:?}") };
        let gid = |a: [u8; 4]| {
            let mut g = [0u8; 16];
            g[10] = 0xFF;
            g[11] = 0xFF;
            g[12..].copy_from_slice(&a);
            g
        };
        // Values as `tshark -V` shows them, except the primary flow label and packet rate: the
        // Wireshark CM dissector reads that word 8 bits off (it shows flow label 0x0070b, rate
        // 0x30); the bytes are 70 bb d0 00, i.e. flow label 0x70bbd, reserved 0, rate 0 by the
        // IBTA table 106 layout (20 bits flow label, 6 reserved, 6 packet rate).
        let expected = Req {
            local_comm_id: 0x6ec0_c56d,
            service_id: 0x0000_0000_0106_1c06,
            local_ca_guid: 0x0250_56ff_fea7_7d03,
            local_qkey: 0,
            local_qpn: 0x2c,
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 1,
            remote_eecn: 0,
            remote_cm_response_timeout: 0x14,
            transport_service_type: 0,
            end_to_end_flow_control: false,
            starting_psn: 0x3da6,
            local_cm_response_timeout: 0x14,
            retry_count: 7,
            pkey: 0xFFFF,
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary: CmPath {
                local_lid: 0xFFFF,
                remote_lid: 0xFFFF,
                local_gid: gid([10, 1, 16, 62]),
                remote_gid: gid([10, 1, 16, 61]),
                flow_label: 0x70bbd,
                packet_rate: 0,
                traffic_class: 0,
                hop_limit: 0x40,
                sl: 0,
                subnet_local: false,
                local_ack_timeout: 0x11,
            },
            alternate: CmPath::default(),
            private_data: &mad[164..],
        };
        assert_eq!(r, expected);
        assert_eq!(r.private_data.len(), private_len::REQ);
        assert_eq!(cma::split_service_id(r.service_id), Some((cma::port_space::TCP, 7174)));
        let h = CmaHdr::parse(r.private_data).unwrap();
        assert_eq!(h.src_port, 0xbd69);
        assert_eq!(h.src, core::net::IpAddr::from([10, 1, 16, 62]));
        assert_eq!(h.dst, core::net::IpAddr::from([10, 1, 16, 61]));
        assert!(r.private_data[cma::CMA_HDR_LEN..].iter().all(|&b| b == 0));
    }

    #[test]
    fn rping_rep() {
        let mad = mad_of(FRAME_REP);
        let (hdr, msg) = reemit_exact(&mad);
        assert_eq!(hdr.tid, 0x0000_0002_6dc5_c06e);
        let CmMessage::Rep(r) = msg else { panic!("not a REP: {msg:?}") };
        assert_eq!(
            r,
            Rep {
                local_comm_id: 0x9d88_f456,
                remote_comm_id: 0x6ec0_c56d,
                local_qkey: 0,
                local_qpn: 0x2b,
                local_eecn: 0,
                starting_psn: 0xfe_bd3d,
                responder_resources: 1,
                initiator_depth: 1,
                target_ack_delay: 0x0f,
                failover_accepted: 0,
                end_to_end_flow_control: false,
                rnr_retry_count: 7,
                srq: false,
                local_ca_guid: 0x0250_56ff_fea7_129f,
                private_data: &[0u8; private_len::REP],
            }
        );
    }

    #[test]
    fn rping_rtu_dreq_drep() {
        let mad = mad_of(FRAME_RTU);
        let (_, msg) = reemit_exact(&mad);
        let zeros = [0u8; MAD_LEN];
        assert_eq!(
            msg,
            CmMessage::Rtu(Rtu {
                local_comm_id: 0x6ec0_c56d,
                remote_comm_id: 0x9d88_f456,
                private_data: &zeros[..private_len::RTU],
            })
        );
        let mad = mad_of(FRAME_DREQ);
        let (hdr, msg) = reemit_exact(&mad);
        assert_eq!(hdr.attr_id, attr::DREQ);
        assert_eq!(
            msg,
            CmMessage::Dreq(Dreq {
                local_comm_id: 0x6ec0_c56d,
                remote_comm_id: 0x9d88_f456,
                remote_qpn: 0x2b,
                private_data: &zeros[..private_len::DREQ],
            })
        );
        let mad = mad_of(FRAME_DREP);
        let (hdr, msg) = reemit_exact(&mad);
        assert_eq!(hdr.attr_id, attr::DREP);
        assert_eq!(
            msg,
            CmMessage::Drep(Drep {
                local_comm_id: 0x9d88_f456,
                remote_comm_id: 0x6ec0_c56d,
                private_data: &zeros[..private_len::DREP],
            })
        );
    }

    #[test]
    fn parse_errors() {
        let mad = mad_of(FRAME_REQ);
        for n in [0, 1, MAD_HEADER_LEN - 1, MAD_HEADER_LEN, MAD_LEN - 1] {
            assert_eq!(CmMessage::parse(&mad[..n]), Err(Error::Truncated("CM MAD")));
        }
        // Longer input: only the first 256 bytes count.
        let mut long = mad.clone();
        long.extend_from_slice(&[0xFF; 40]);
        assert_eq!(CmMessage::parse(&long), CmMessage::parse(&mad));

        let with = |at: usize, v: u8| {
            let mut m = mad.clone();
            m[at] = v;
            m
        };
        for (at, v) in [(0, 0x80), (1, 0x03), (1, 0x81), (2, 1), (2, 3)] {
            assert!(
                matches!(CmMessage::parse(&with(at, v)), Err(Error::Unsupported(_))),
                "byte {at} = {v:#x}"
            );
        }
        for a in [0x0000u16, attr::CLASS_PORT_INFO, attr::LAP, attr::APR, 0x001B, 0xFFFF] {
            let mut m = mad.clone();
            m[16..18].copy_from_slice(&a.to_be_bytes());
            assert_eq!(CmMessage::parse(&m), Err(Error::Unsupported("CM attribute")), "{a:#x}");
        }
    }

    /// A REQ with every field in range, for the error tests to break one at a time.
    fn sample_req(pd: &[u8]) -> Req<'_> {
        Req {
            local_comm_id: 1,
            service_id: cma::service_id(cma::port_space::TCP, 4791),
            local_ca_guid: 2,
            local_qkey: 3,
            local_qpn: 0xFF_FFFF,
            responder_resources: 4,
            local_eecn: 0xFF_FFFF,
            initiator_depth: 5,
            remote_eecn: 0xFF_FFFF,
            remote_cm_response_timeout: 31,
            transport_service_type: 3,
            end_to_end_flow_control: true,
            starting_psn: 0xFF_FFFF,
            local_cm_response_timeout: 31,
            retry_count: 7,
            pkey: 0xFFFF,
            path_mtu: 15,
            rdc_exists: true,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: true,
            extended_transport_type: 7,
            primary: CmPath {
                flow_label: 0xF_FFFF,
                packet_rate: 63,
                sl: 15,
                subnet_local: true,
                local_ack_timeout: 31,
                ..CmPath::default()
            },
            alternate: CmPath::default(),
            private_data: pd,
        }
    }

    #[test]
    fn emit_errors() {
        let big = [0x11u8; MAD_LEN];
        let req = sample_req(&big[..private_len::REQ]);
        let mut b = [0u8; MAD_LEN];
        assert_eq!(CmMessage::Req(req).emit(1, &mut b), Ok(MAD_LEN));
        assert_eq!(CmMessage::Req(req).emit(1, &mut b[..MAD_LEN - 1]), Err(Error::BufferTooSmall));

        let over: [fn(&mut Req<'_>); 17] = [
            |r| r.local_qpn = 1 << 24,
            |r| r.local_eecn = 1 << 24,
            |r| r.remote_eecn = 1 << 24,
            |r| r.remote_cm_response_timeout = 32,
            |r| r.transport_service_type = 4,
            |r| r.starting_psn = 1 << 24,
            |r| r.local_cm_response_timeout = 32,
            |r| r.retry_count = 8,
            |r| r.path_mtu = 16,
            |r| r.rnr_retry_count = 8,
            |r| r.max_cm_retries = 16,
            |r| r.extended_transport_type = 8,
            |r| r.primary.flow_label = 1 << 20,
            |r| r.primary.packet_rate = 64,
            |r| r.primary.sl = 16,
            |r| r.primary.local_ack_timeout = 32,
            |r| r.alternate.local_ack_timeout = 0xFF,
        ];
        for (i, f) in over.iter().enumerate() {
            let mut r = req;
            f(&mut r);
            let mut o = [0x5Au8; MAD_LEN];
            assert!(matches!(CmMessage::Req(r).emit(1, &mut o), Err(Error::Inconsistent(_))), "mutation {i}");
            assert_eq!(o, [0x5Au8; MAD_LEN], "mutation {i} wrote into the buffer");
        }

        let inconsistent = |m: CmMessage<'_>| {
            assert!(matches!(m.emit(0, &mut b.clone()), Err(Error::Inconsistent(_))), "{m:?}");
        };
        let rep = Rep {
            local_comm_id: 0,
            remote_comm_id: 0,
            local_qkey: 0,
            local_qpn: 0,
            local_eecn: 0,
            starting_psn: 0,
            responder_resources: 0,
            initiator_depth: 0,
            target_ack_delay: 0,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: 0,
            srq: false,
            local_ca_guid: 0,
            private_data: &[],
        };
        inconsistent(Rep { local_qpn: 1 << 24, ..rep }.into());
        inconsistent(Rep { local_eecn: 1 << 24, ..rep }.into());
        inconsistent(Rep { starting_psn: 1 << 24, ..rep }.into());
        inconsistent(Rep { target_ack_delay: 32, ..rep }.into());
        inconsistent(Rep { failover_accepted: 4, ..rep }.into());
        inconsistent(Rep { rnr_retry_count: 8, ..rep }.into());
        let mra = Mra {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_mraed: 0,
            service_timeout: 0,
            private_data: &[],
        };
        inconsistent(Mra { message_mraed: 4, ..mra }.into());
        inconsistent(Mra { service_timeout: 32, ..mra }.into());
        let rej = Rej {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_rejected: 0,
            reject_info_len: 0,
            reason: rej_reason::CONSUMER_REJECT,
            ari: &[],
            private_data: &[],
        };
        inconsistent(Rej { message_rejected: 4, ..rej }.into());
        inconsistent(Rej { reject_info_len: 128, ..rej }.into());
        let dreq = Dreq { local_comm_id: 0, remote_comm_id: 0, remote_qpn: 1 << 24, private_data: &[] };
        inconsistent(dreq.into());
        let sidr_rep = SidrRep {
            request_id: 0,
            status: sidr_status::SUCCESS,
            additional_info_len: 0,
            qpn: 1 << 24,
            service_id: 0,
            qkey: 0,
            class_port_info: &[],
            private_data: &[],
        };
        inconsistent(sidr_rep.into());

        // Private data, ARI and additional information one byte longer than their capacity.
        let too_long: [CmMessage<'_>; 11] = [
            Req { private_data: &big[..private_len::REQ + 1], ..req }.into(),
            Mra { private_data: &big[..private_len::MRA + 1], ..mra }.into(),
            Rej { private_data: &big[..private_len::REJ + 1], ..rej }.into(),
            Rej { ari: &big[..ARI_LEN + 1], ..rej }.into(),
            Rep { private_data: &big[..private_len::REP + 1], ..rep }.into(),
            Rtu { local_comm_id: 0, remote_comm_id: 0, private_data: &big[..private_len::RTU + 1] }.into(),
            Dreq { remote_qpn: 0, private_data: &big[..private_len::DREQ + 1], ..dreq }.into(),
            Drep { local_comm_id: 0, remote_comm_id: 0, private_data: &big[..private_len::DREP + 1] }.into(),
            SidrReq {
                request_id: 0,
                pkey: 0,
                service_id: 0,
                private_data: &big[..private_len::SIDR_REQ + 1],
            }
            .into(),
            SidrRep { qpn: 0, private_data: &big[..private_len::SIDR_REP + 1], ..sidr_rep }.into(),
            SidrRep { qpn: 0, class_port_info: &big[..SIDR_INFO_LEN + 1], ..sidr_rep }.into(),
        ];
        for m in too_long {
            let mut o = [0x5Au8; MAD_LEN];
            assert!(matches!(m.emit(0, &mut o), Err(Error::BadLength(_))), "{m:?}");
            assert_eq!(o, [0x5Au8; MAD_LEN]);
            // At capacity it fits.
            let fixed = match m {
                CmMessage::Rej(r) if r.ari.len() > ARI_LEN => Rej { ari: &big[..ARI_LEN], ..r }.into(),
                CmMessage::SidrRep(r) if r.class_port_info.len() > SIDR_INFO_LEN => {
                    SidrRep { class_port_info: &big[..SIDR_INFO_LEN], ..r }.into()
                }
                m => with_private(m, &big[..m.private_capacity()]),
            };
            assert_eq!(fixed.emit(0, &mut o), Ok(MAD_LEN), "{fixed:?}");
        }
    }

    /// `m` with its private data replaced by `pd`.
    fn with_private<'a>(m: CmMessage<'a>, pd: &'a [u8]) -> CmMessage<'a> {
        match m {
            CmMessage::Req(x) => Req { private_data: pd, ..x }.into(),
            CmMessage::Mra(x) => Mra { private_data: pd, ..x }.into(),
            CmMessage::Rej(x) => Rej { private_data: pd, ..x }.into(),
            CmMessage::Rep(x) => Rep { private_data: pd, ..x }.into(),
            CmMessage::Rtu(x) => Rtu { private_data: pd, ..x }.into(),
            CmMessage::Dreq(x) => Dreq { private_data: pd, ..x }.into(),
            CmMessage::Drep(x) => Drep { private_data: pd, ..x }.into(),
            CmMessage::SidrReq(x) => SidrReq { private_data: pd, ..x }.into(),
            CmMessage::SidrRep(x) => SidrRep { private_data: pd, ..x }.into(),
        }
    }

    #[test]
    fn emit_zeroes_reserved_and_pads() {
        // Every reserved bit of a REQ set on the wire: parse ignores them, emit writes zero.
        let pd = [0x77u8; 5];
        let req = sample_req(&pd);
        let mut b = [0u8; MAD_LEN];
        CmMessage::Req(req).emit(9, &mut b).unwrap();
        assert_eq!(b[MAD_HEADER_LEN + 140..MAD_HEADER_LEN + 145], pd);
        assert!(b[MAD_HEADER_LEN + 145..].iter().all(|&x| x == 0));
        let mut dirty = b;
        dirty[18] = 0xAB; // MAD header reserved
        dirty[at(4)] = 0xFF; // reserved after the local comm ID
        dirty[at(5)] ^= 0xFF; // vendor ID
        dirty[at(24)] = 0xFF; // reserved before the Q_Key
        dirty[at(88) + 2] |= 0x0F; // reserved bits between flow label and packet rate
        dirty[at(88) + 3] |= 0xC0;
        dirty[at(94)] |= 0x07; // primary SL byte, reserved bits
        dirty[at(95)] |= 0x07; // reserved after the ACK timeout
        dirty[at(139)] |= 0x07; // SAP supported and reserved
        let (_, m) = CmMessage::parse(&dirty).unwrap();
        assert_eq!(m, CmMessage::Req(Req { private_data: &b[at(140)..], ..req }));
        let mut o = [0u8; MAD_LEN];
        m.emit(9, &mut o).unwrap();
        assert_eq!(o, b);
    }

    fn path() -> impl Strategy<Value = CmPath> {
        (
            (any::<u16>(), any::<u16>(), any::<[u8; 16]>(), any::<[u8; 16]>()),
            (0u32..1 << 20, 0u8..64, any::<u8>(), any::<u8>(), 0u8..16, any::<bool>(), 0u8..32),
        )
            .prop_map(|((ll, rl, lg, rg), (fl, rate, tc, hl, sl, sn, ack))| CmPath {
                local_lid: ll,
                remote_lid: rl,
                local_gid: lg,
                remote_gid: rg,
                flow_label: fl,
                packet_rate: rate,
                traffic_class: tc,
                hop_limit: hl,
                sl,
                subnet_local: sn,
                local_ack_timeout: ack,
            })
    }

    const U24: core::ops::Range<u32> = 0..1 << 24;

    fn req() -> impl Strategy<Value = Req<'static>> {
        (
            (any::<u32>(), any::<u64>(), any::<u64>(), any::<u32>(), U24, any::<u8>(), U24, any::<u8>(), U24),
            (0u8..32, 0u8..4, any::<bool>(), U24, 0u8..32, 0u8..8, any::<u16>(), 0u8..16),
            (any::<bool>(), 0u8..8, 0u8..16, any::<bool>(), 0u8..8),
            path(),
            path(),
        )
            .prop_map(|(a, b, c, primary, alternate)| Req {
                local_comm_id: a.0,
                service_id: a.1,
                local_ca_guid: a.2,
                local_qkey: a.3,
                local_qpn: a.4,
                responder_resources: a.5,
                local_eecn: a.6,
                initiator_depth: a.7,
                remote_eecn: a.8,
                remote_cm_response_timeout: b.0,
                transport_service_type: b.1,
                end_to_end_flow_control: b.2,
                starting_psn: b.3,
                local_cm_response_timeout: b.4,
                retry_count: b.5,
                pkey: b.6,
                path_mtu: b.7,
                rdc_exists: c.0,
                rnr_retry_count: c.1,
                max_cm_retries: c.2,
                srq: c.3,
                extended_transport_type: c.4,
                primary,
                alternate,
                private_data: &[],
            })
    }

    fn rep() -> impl Strategy<Value = Rep<'static>> {
        (
            (any::<u32>(), any::<u32>(), any::<u32>(), U24, U24, U24, any::<u8>(), any::<u8>()),
            (0u8..32, 0u8..4, any::<bool>(), 0u8..8, any::<bool>(), any::<u64>()),
        )
            .prop_map(|(a, b)| Rep {
                local_comm_id: a.0,
                remote_comm_id: a.1,
                local_qkey: a.2,
                local_qpn: a.3,
                local_eecn: a.4,
                starting_psn: a.5,
                responder_resources: a.6,
                initiator_depth: a.7,
                target_ack_delay: b.0,
                failover_accepted: b.1,
                end_to_end_flow_control: b.2,
                rnr_retry_count: b.3,
                srq: b.4,
                local_ca_guid: b.5,
                private_data: &[],
            })
    }

    fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        vec(any::<u8>(), 0..=max)
    }

    proptest! {
        #[test]
        fn req_roundtrip(r in req(), pd in bytes(private_len::REQ), tid in any::<u64>()) {
            let full = pad(&pd, private_len::REQ);
            let expected = Req { private_data: &full, ..r };
            check_roundtrip(Req { private_data: &pd, ..r }.into(), expected.into(), tid);
        }

        #[test]
        fn rep_roundtrip(r in rep(), pd in bytes(private_len::REP), tid in any::<u64>()) {
            let full = pad(&pd, private_len::REP);
            let expected = Rep { private_data: &full, ..r };
            check_roundtrip(Rep { private_data: &pd, ..r }.into(), expected.into(), tid);
        }

        #[test]
        fn mra_roundtrip(
            ids in any::<(u32, u32)>(), code in 0u8..4, timeout in 0u8..32,
            pd in bytes(private_len::MRA), tid in any::<u64>(),
        ) {
            let m = |pd| Mra {
                local_comm_id: ids.0, remote_comm_id: ids.1, message_mraed: code,
                service_timeout: timeout, private_data: pd,
            };
            check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::MRA)).into(), tid);
        }

        #[test]
        fn rej_roundtrip(
            ids in any::<(u32, u32)>(), code in 0u8..4, info_len in 0u8..128, reason in any::<u16>(),
            ari in bytes(ARI_LEN), pd in bytes(private_len::REJ), tid in any::<u64>(),
        ) {
            let m = |ari, pd| Rej {
                local_comm_id: ids.0, remote_comm_id: ids.1, message_rejected: code,
                reject_info_len: info_len, reason, ari, private_data: pd,
            };
            let (ari_full, pd_full) = (pad(&ari, ARI_LEN), pad(&pd, private_len::REJ));
            check_roundtrip(m(&ari, &pd).into(), m(&ari_full, &pd_full).into(), tid);
        }

        #[test]
        fn rtu_drep_roundtrip(
            ids in any::<(u32, u32)>(), pd in bytes(private_len::RTU), tid in any::<u64>(),
        ) {
            let full = pad(&pd, private_len::RTU);
            let rtu = |pd| Rtu { local_comm_id: ids.0, remote_comm_id: ids.1, private_data: pd };
            check_roundtrip(rtu(&pd).into(), rtu(&full).into(), tid);
            let drep = |pd| Drep { local_comm_id: ids.0, remote_comm_id: ids.1, private_data: pd };
            check_roundtrip(drep(&pd).into(), drep(&full).into(), tid);
        }

        #[test]
        fn dreq_roundtrip(
            ids in any::<(u32, u32)>(), qpn in U24, pd in bytes(private_len::DREQ), tid in any::<u64>(),
        ) {
            let m = |pd| Dreq {
                local_comm_id: ids.0, remote_comm_id: ids.1, remote_qpn: qpn, private_data: pd,
            };
            check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::DREQ)).into(), tid);
        }

        #[test]
        fn sidr_req_roundtrip(
            id in any::<u32>(), pkey in any::<u16>(), sid in any::<u64>(),
            pd in bytes(private_len::SIDR_REQ), tid in any::<u64>(),
        ) {
            let m = |pd| SidrReq { request_id: id, pkey, service_id: sid, private_data: pd };
            check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::SIDR_REQ)).into(), tid);
        }

        #[test]
        fn sidr_rep_roundtrip(
            id in any::<u32>(), status in any::<u8>(), info_len in any::<u8>(), qpn in U24,
            sid in any::<u64>(), qkey in any::<u32>(),
            info in bytes(SIDR_INFO_LEN), pd in bytes(private_len::SIDR_REP), tid in any::<u64>(),
        ) {
            let m = |info, pd| SidrRep {
                request_id: id, status, additional_info_len: info_len, qpn, service_id: sid, qkey,
                class_port_info: info, private_data: pd,
            };
            check_roundtrip(
                m(&info, &pd).into(),
                m(&pad(&info, SIDR_INFO_LEN), &pad(&pd, private_len::SIDR_REP)).into(),
                tid,
            );
        }

        /// Arbitrary bytes under a CM header: parse never panics, and what it returns re-emits to
        /// bytes that parse to the same message.
        #[test]
        fn arbitrary_body(
            mut mad in vec(any::<u8>(), MAD_LEN..MAD_LEN + 4),
            attr_id in prop_oneof![0x0010u16..=0x0018, any::<u16>()],
        ) {
            mad[..4].copy_from_slice(&[BASE_VERSION, MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND]);
            mad[16..18].copy_from_slice(&attr_id.to_be_bytes());
            match CmMessage::parse(&mad) {
                Ok((hdr, msg)) => {
                    prop_assert_eq!(hdr.attr_id, msg.attr_id());
                    let mut o = [0u8; MAD_LEN];
                    prop_assert_eq!(msg.emit(hdr.tid, &mut o), Ok(MAD_LEN));
                    prop_assert_eq!(parse_own(&o, hdr.tid), msg);
                }
                Err(e) => {
                    prop_assert!(!(0x0010..=0x0018).contains(&attr_id));
                    prop_assert_eq!(e, Error::Unsupported("CM attribute"));
                }
            }
        }
    }
}
