//! The UET Packet Delivery Sublayer (PDS) as a sans-IO state machine (`../shared/spec/uet-wire.md` §2).
//!
//! An [`Endpoint`] is one fabric endpoint's PDS. It never reads a clock, sleeps or does I/O: the caller
//! passes `now`, feeds received PDS packets in with [`Endpoint::handle_packet`] (the bytes after UDP,
//! with any CRC trailer already checked and removed), and pulls packets out with
//! [`Endpoint::poll_transmit`], the next deadline with [`Endpoint::poll_timeout`] and events with
//! [`Endpoint::poll_event`], as quinn-proto does.
//!
//! Delivery modes:
//! - **RUD** (reliable, unordered) and **ROD** (reliable, ordered) run over packet delivery contexts
//!   ([`pdc`]): established by the initiator with SYN and a random Start_PSN, 32-bit PSNs, cumulative
//!   ACKs with a 64-bit SACK bitmap (ACK_CC), ROD_OOO NACKs, per-packet retransmit timers with
//!   exponential backoff and a retry limit, CLEAR_PSN, close with CLOSE_CMD / CLOSE_REQ.
//! - **RUDI** (reliable, unordered, idempotent): no PDC; a `pkt_id` per request, one response each,
//!   the initiator retransmits on timeout ([`rudi`]).
//! - **UUD** (unreliable datagrams): one packet, no state.
//!
//! What the upper layer (SES) sends is opaque here: a `next_hdr` value and the bytes that follow the
//! PDS header (SES header and payload).

mod body;
pub mod cc;
pub mod credit;
pub mod endpoint;
pub mod pdc;
pub mod psn;
pub mod rudi;
mod rx;
mod tx;

use std::time::Duration;

pub use body::{Body, HEAD_MAX};
pub use endpoint::{Delivery, DeliveryKind, Endpoint, Establishment, SendError, Stats, Transmit};
pub use pdc::{PdcId, Role};
pub use wire::uet::pds::{Mode, NackCode, NextHeader};

/// PSNs the receiver tracks beyond the next expected one (its window; the bitmap size). A packet
/// further ahead is answered with NACK PSN_OOR_WINDOW.
pub const RX_WINDOW: u32 = 1024;

/// Tunables of an [`Endpoint`]. The defaults follow the ref-prov (5 ms retransmit timeout, 5
/// retries) and htsim (ACK coalescing) where uet-wire.md §2 "Timers" names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Initial retransmit timeout of a packet.
    pub rto: Duration,
    /// Upper bound of the exponential backoff.
    pub max_rto: Duration,
    /// Retransmissions of one packet after which its PDC (or RUDI request) fails.
    pub max_retries: u32,
    /// Packets in flight per PDC; at most [`RX_WINDOW`].
    pub window: u32,
    /// Packets queued per PDC (sent or not) before `send` returns [`SendError::QueueFull`].
    pub max_queued: usize,
    /// The receiver acknowledges at once after this many in-order packets.
    pub ack_every: u32,
    /// Otherwise it acknowledges this long after the first unacknowledged packet.
    pub ack_delay: Duration,
    /// PDCs this endpoint holds at most; a SYN beyond it is answered with NACK NO_PDC_AVAIL.
    pub max_pdcs: usize,
    /// Sender congestion control: NSCC with these parameters, or none (the window alone).
    pub cc: Option<cc::NsccConfig>,
    /// Receiver-credit congestion control (RCCC, [`credit`]): send new data against granted
    /// credit, and grant credit at this rate. Both ends should run it; with NSCC too, both limit.
    pub rccc: Option<credit::RcccConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            rto: Duration::from_millis(5),
            max_rto: Duration::from_millis(320),
            max_retries: 5,
            window: 256,
            max_queued: 8192,
            ack_every: 16,
            ack_delay: Duration::from_micros(20),
            max_pdcs: 4096,
            cc: None,
            rccc: None,
        }
    }
}

impl Config {
    /// The retransmit timeout after `retries` retransmissions: `rto * 2^retries`, capped.
    pub fn backoff(&self, retries: u32) -> Duration {
        self.rto.saturating_mul(1 << retries.min(20)).min(self.max_rto)
    }
}

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
