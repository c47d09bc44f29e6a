//! What an [`Endpoint`](crate::Endpoint) reports to the upper layer: its [`Event`]s, and why a PDC
//! failed ([`PdcError`]).

use wire::uet::pds::{Mode, NackCode};

use crate::pdc::PdcId;

/// Why a PDC failed (reported with [`Event::Failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdcError {
    /// A packet was retransmitted `max_retries` times without being acknowledged.
    RetryExceeded,
    /// The target answered with a NACK that ends the PDC (NO_PDC_AVAIL, INV_DPDCID,
    /// PDC_MODE_MISMATCH, INVALID_SYN, CLOSING_IN_ERR, ...).
    Nack(NackCode),
}

impl std::fmt::Display for PdcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PdcError::RetryExceeded => f.write_str("retry limit exceeded"),
            PdcError::Nack(c) => write!(f, "NACK {c:?}"),
        }
    }
}

impl std::error::Error for PdcError {}

/// Something the upper layer must know, from [`Endpoint::poll_event`].
///
/// [`Endpoint::poll_event`]: crate::Endpoint::poll_event
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<A> {
    /// The initiator learned the target's PDCID: the PDC is established (SYN no longer sent).
    Established {
        /// Local PDC.
        pdc: PdcId,
        /// The peer.
        peer: A,
    },
    /// A SYN from `peer` created a PDC on this (target) side.
    Accepted {
        /// Local PDC.
        pdc: PdcId,
        /// The peer.
        peer: A,
        /// Its delivery mode.
        mode: Mode,
    },
    /// The peer has received the packet `send` returned `psn` for (guaranteed delivery).
    Acked {
        /// Local PDC.
        pdc: PdcId,
        /// The packet.
        psn: u32,
        /// The cookie given to `send`.
        cookie: u64,
    },
    /// The PDC failed; its state is gone. `unacked` holds the cookies of the packets not known to
    /// have been received, in PSN order.
    Failed {
        /// Local PDC.
        pdc: PdcId,
        /// The peer.
        peer: A,
        /// Why.
        error: PdcError,
        /// Cookies of the packets not acknowledged.
        unacked: Vec<u64>,
    },
    /// The PDC closed cleanly (CLOSE_CMD acknowledged); its state is gone.
    Closed {
        /// Local PDC.
        pdc: PdcId,
        /// The peer.
        peer: A,
    },
    /// A RUDI request got no response after `max_retries` retransmissions.
    RudiFailed {
        /// The target.
        peer: A,
        /// The request.
        pkt_id: u32,
        /// The cookie given to `rudi_send`.
        cookie: u64,
    },
}
