//! The counters a device keeps: its totals ([`Stats`]) and each QP's ([`QpStats`]).

use crate::roce::types::QpState;
use crate::roce::{ReqCounters, RespDrops};

/// Datapath counters of a context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes of the frames sent.
    pub tx_bytes: u64,
    /// Frames the datapath had no room for when first offered (back-pressure): each waited in the
    /// device, and no QP sent anything until it had gone (the datapath's own counters count every
    /// refusal).
    pub tx_stalls: u64,
    /// Frames the datapath could not send at all (dropped; `progress` returned the error).
    pub tx_failed: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes of the frames received.
    pub rx_bytes: u64,
    /// Frames dropped as malformed (bad ICRC, checksum, length...).
    pub rx_bad: u64,
    /// RoCE frames for another address or an unknown QP.
    pub rx_unknown: u64,
    /// What responders dropped or answered specially (UD Q_Key mismatches, no receive WQE, UC gaps,
    /// NAKs sent, duplicates), summed over the QPs that exist now.
    pub drops: RespDrops,
    /// What requesters sent and received (packets, retries, timeouts, NAKs), summed likewise.
    pub requests: ReqCounters,
}

/// One QP's counters ([`Context::qp_stats`](super::Context::qp_stats)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpStats {
    /// The QP number.
    pub qpn: u32,
    /// Its state.
    pub state: QpState,
    /// What its requester sent and received.
    pub requests: ReqCounters,
    /// What its responder dropped or answered specially.
    pub drops: RespDrops,
}
