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

mod codes;
#[cfg(test)]
mod tests;

pub use codes::{ARI_LEN, SIDR_INFO_LEN, attr, msg_code, private_len, rej_reason, sidr_status};

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
