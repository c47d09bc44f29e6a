//! The CM's numbers: attribute IDs, private-data sizes, REJ reasons, message codes and SIDR
//! statuses (IBTA vol. 1 ch. 12).

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
