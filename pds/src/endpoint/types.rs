//! The public types of a PDS [`Endpoint`]: the packets it writes out ([`Transmit`]) and the bytes
//! it hands up ([`Delivery`], [`DeliveryKind`]), why it refuses a send ([`SendError`]), its
//! counters ([`Stats`]), how it accepts new PDCs ([`Establishment`], [`CLOSED_LINGER`]) and what it
//! tells about one ([`PdcInfo`]).
//!
//! [`Endpoint`]: crate::Endpoint

use std::time::Duration;

use wire::uet::pds::{Mode, NextHeader};

use crate::counts::CodeCounts;
use crate::pdc::{PdcId, Role};

/// How long a target remembers a closed PDC, to ignore delayed duplicates of its SYN packets
/// (longer than any packet lives in a data-center network, like TCP's TIME-WAIT).
pub const CLOSED_LINGER: Duration = Duration::from_secs(1);

/// A packet to send, written into the caller's buffer by [`Endpoint::poll_transmit`].
///
/// [`Endpoint::poll_transmit`]: crate::Endpoint::poll_transmit
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<A> {
    /// Destination fabric address.
    pub dst: A,
    /// Bytes written: PDS header and what follows it.
    pub len: usize,
    /// A PDS control packet (ACK, NACK, CP CLOSE_REQ, CREDIT, CREDIT_REQ; not the sequenced
    /// CLOSE_CMD), which carries no SES header: the runtime may send it in another traffic class
    /// (DSCP) than the data.
    pub control: bool,
}

/// Which service delivered a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryKind {
    /// A new (never before delivered) packet of a PDC; for ROD, the next in order.
    Pdc {
        /// The local PDC.
        pdc: PdcId,
        /// Its PSN.
        psn: u32,
        /// The PDC's mode.
        mode: Mode,
        /// The packet asked for an immediate ACK (AR). A response to one that did not may wait
        /// for company ([`Urgency::Held`]).
        ///
        /// [`Urgency::Held`]: crate::Urgency::Held
        ack_requested: bool,
    },
    /// A RUDI request: answer it with [`Endpoint::rudi_respond`].
    ///
    /// [`Endpoint::rudi_respond`]: crate::Endpoint::rudi_respond
    RudiRequest {
        /// Its id.
        pkt_id: u32,
    },
    /// The response to a RUDI request this side sent.
    RudiResponse {
        /// Its id.
        pkt_id: u32,
        /// The cookie given to [`Endpoint::rudi_send`].
        ///
        /// [`Endpoint::rudi_send`]: crate::Endpoint::rudi_send
        cookie: u64,
    },
    /// A UUD datagram.
    Uud,
}

/// Upper-layer bytes handed up by [`Endpoint::handle_packet`], borrowed from the packet.
///
/// [`Endpoint::handle_packet`]: crate::Endpoint::handle_packet
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a, A> {
    /// The sender.
    pub peer: A,
    /// Which service.
    pub kind: DeliveryKind,
    /// The SES header format of `body`.
    pub next_hdr: NextHeader,
    /// Everything after the PDS header.
    pub body: &'a [u8],
}

/// Why a send was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendError {
    /// `max_queued` packets are already waiting on this PDC.
    QueueFull,
    /// No such PDC (never opened, failed or closed).
    UnknownPdc,
    /// The PDC is closing.
    Closing,
    /// `max_pdcs` PDCs exist already.
    NoPdcAvailable,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SendError::QueueFull => "send queue full",
            SendError::UnknownPdc => "no such PDC",
            SendError::Closing => "PDC is closing",
            SendError::NoPdcAvailable => "PDC limit reached",
        })
    }
}

impl std::error::Error for SendError {}

/// Counters of an endpoint.
///
/// Every packet given to `handle_packet` is counted once: [`rx_malformed`](Self::rx_malformed) if
/// it does not parse, else in [`rx_packets`](Self::rx_packets) and in one of
/// [`rx_delivered`](Self::rx_delivered) (handed up), [`rx_control`](Self::rx_control) (taken by the
/// PDS) or the refusals [`rx_refused`](Self::rx_refused) sums. Trimmed packets (`handle_trimmed`)
/// are counted apart: [`rx_trimmed`](Self::rx_trimmed) when they parse (the caller counts the
/// others, which get an error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets written by `poll_transmit`.
    pub tx_packets: u64,
    /// Of which retransmissions (PDC and RUDI).
    pub tx_retransmits: u64,
    /// ACKs sent.
    pub tx_acks: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// NACKs sent, by NACK code (of [`tx_nacks`](Self::tx_nacks)).
    pub tx_nack_codes: CodeCounts,
    /// Packets queued again after a SACK or NACK showed them lost.
    pub fast_retransmits: u64,
    /// Retransmit timer expiries.
    pub timeouts: u64,
    /// Packets received (parsed).
    pub rx_packets: u64,
    /// Packets that did not parse (not counting trimmed ones).
    pub rx_malformed: u64,
    /// Packets handed up: new packets of a PDC, RUDI requests and the responses to this side's,
    /// UUD datagrams.
    pub rx_delivered: u64,
    /// ACKs, NACKs and CPs taken by their PDC, and RUDI NACKs for a request still waiting.
    pub rx_control: u64,
    /// Sequenced packets received twice (dropped).
    pub rx_duplicates: u64,
    /// ROD packets dropped for arriving out of order.
    pub rx_out_of_order: u64,
    /// Packets beyond the receive window (dropped).
    pub rx_out_of_window: u64,
    /// ACKs, NACKs (RUDI ones too) and RUDI responses for no PDC or request of their source, and
    /// SYNs of a PDC closed within
    /// [`CLOSED_LINGER`] (dropped).
    pub rx_stale: u64,
    /// Requests and CPs naming no PDC of their source (answered with NACK INV_DPDCID).
    pub rx_unknown_pdc: u64,
    /// Requests in another delivery mode than their PDC's (answered with NACK PDC_MODE_MISMATCH).
    pub rx_mode_mismatch: u64,
    /// SYNs naming a PDC this side has with another Start_PSN (answered with NACK INVALID_SYN).
    pub rx_invalid_syns: u64,
    /// ACKs received (of [`rx_control`](Self::rx_control) and [`rx_stale`](Self::rx_stale)).
    pub rx_acks: u64,
    /// NACKs received (of [`rx_control`](Self::rx_control), [`rx_stale`](Self::rx_stale) and
    /// [`rx_nacks_ignored`](Self::rx_nacks_ignored)).
    pub rx_nacks: u64,
    /// NACKs received, by NACK code (of [`rx_nacks`](Self::rx_nacks)).
    pub rx_nack_codes: CodeCounts,
    /// SYNs refused by secure establishment (answered with NACK NEW_START_PSN).
    pub rx_stale_syns: u64,
    /// SYNs answered with NACK NO_PDC_AVAIL (`max_pdcs` or `max_pdcs_per_peer` reached).
    pub rx_syns_refused: u64,
    /// NACKs that would end (or restart) a PDC, ignored: their PSN is outside the PDC's window.
    pub rx_nacks_ignored: u64,
    /// Requests for a PSN after the CLOSE_CMD of their PDC (answered with NACK CLOSING).
    pub rx_after_close: u64,
    /// Control packets of a type the PDC does not act on (CLEAR_REQ, NEGOTIATION, CLOSE_REQ to a
    /// target, reserved types; answered with NACK UNEXP_EVENT).
    pub rx_unexpected_cps: u64,
    /// Target PDCs opened by a SYN.
    pub pdcs_accepted: u64,
    /// Target PDCs dropped by the reaper (half-open or idle, see `Config::half_open_timeout`).
    pub pdcs_reaped: u64,
    /// Control packets dropped because `Config::max_ctrl` were queued already.
    pub ctrl_dropped: u64,
    /// Trimmed packets received (answered with NACK TRIMMED when their PDC is known).
    pub rx_trimmed: u64,
    /// RCCC: CP CREDIT packets sent (grants not carried by an ACK).
    pub tx_credits: u64,
    /// RCCC: CP CREDIT_REQ packets sent (sends waiting for credit).
    pub tx_credit_reqs: u64,
    /// Cuts of the PDCs' adaptive windows ([`Config::min_window`]): halvings on a loss round,
    /// falls to the floor on a timeout.
    ///
    /// [`Config::min_window`]: crate::Config::min_window
    pub window_cuts: u64,
    /// Tail probes of the adaptive window: the oldest and newest unacknowledged packets of a
    /// stalled PDC sent again after twice its smoothed RTT without progress.
    pub tail_probes: u64,
}

impl Stats {
    /// Parsed packets refused, for every reason: stale, unknown PDC, mode mismatch, invalid, stale
    /// and refused SYNs, duplicates, out of order, out of window, NACKs ignored. With
    /// [`rx_delivered`](Self::rx_delivered) and [`rx_control`](Self::rx_control), every parsed
    /// packet.
    pub fn rx_refused(&self) -> u64 {
        self.rx_stale
            + self.rx_unknown_pdc
            + self.rx_mode_mismatch
            + self.rx_invalid_syns
            + self.rx_stale_syns
            + self.rx_syns_refused
            + self.rx_duplicates
            + self.rx_out_of_order
            + self.rx_out_of_window
            + self.rx_nacks_ignored
            + self.rx_after_close
            + self.rx_unexpected_cps
    }

    pub(super) fn refused(&mut self, why: Refused) {
        *match why {
            Refused::Stale => &mut self.rx_stale,
            Refused::UnknownPdc => &mut self.rx_unknown_pdc,
            Refused::ModeMismatch => &mut self.rx_mode_mismatch,
            Refused::InvalidSyn => &mut self.rx_invalid_syns,
            Refused::StaleSyn => &mut self.rx_stale_syns,
            Refused::NoPdcAvail => &mut self.rx_syns_refused,
            Refused::Duplicate => &mut self.rx_duplicates,
            Refused::OutOfOrder => &mut self.rx_out_of_order,
            Refused::OutOfWindow => &mut self.rx_out_of_window,
            Refused::NackIgnored => &mut self.rx_nacks_ignored,
            Refused::AfterClose => &mut self.rx_after_close,
            Refused::UnexpectedCp => &mut self.rx_unexpected_cps,
        } += 1;
    }
}

/// Why a parsed packet was refused: each is counted in its own field of [`Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// For no PDC or request of its source (`rx_stale`).
    Stale,
    /// A request after its PDC's CLOSE_CMD (`rx_after_close`).
    AfterClose,
    /// A CP the PDC does not act on (`rx_unexpected_cps`).
    UnexpectedCp,
    /// A request or CP naming no PDC of its source (`rx_unknown_pdc`).
    UnknownPdc,
    /// A request in another mode than its PDC's (`rx_mode_mismatch`).
    ModeMismatch,
    /// A SYN with another Start_PSN than its PDC's (`rx_invalid_syns`).
    InvalidSyn,
    /// A SYN secure establishment refused (`rx_stale_syns`).
    StaleSyn,
    /// A SYN beyond the PDC limits (`rx_syns_refused`).
    NoPdcAvail,
    /// Received before (`rx_duplicates`).
    Duplicate,
    /// ROD, ahead of the expected PSN (`rx_out_of_order`).
    OutOfOrder,
    /// Beyond the receive window (`rx_out_of_window`).
    OutOfWindow,
    /// A fatal NACK naming a PSN outside its PDC's window (`rx_nacks_ignored`).
    NackIgnored,
}

/// How a target accepts the Start_PSN of a new PDC (uet-wire.md §4, secure PDC establishment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Establishment {
    /// Any Start_PSN (outside a secure domain). A closed PDC's SYN is ignored for
    /// [`CLOSED_LINGER`] after the close; a duplicate the network delivers later than that opens
    /// the PDC again (like TCP, open establishment relies on a maximum packet lifetime).
    #[default]
    Open,
    /// 0-RTT: a Start_PSN at or after the PSN following the last one received on the previous PDC
    /// from that peer (in that mode); an older one is refused with NACK NEW_START_PSN carrying that
    /// PSN. The initiator starts each new PDC after the last PSN of its previous one, so it is
    /// normally never refused.
    ZeroRtt,
    /// 1-RTT: only a Start_PSN this side minted: every new PDC's first SYN is answered with NACK
    /// NEW_START_PSN carrying a random Start_PSN, used once.
    OneRtt,
}

/// What [`Endpoint::pdc_info`] tells about a PDC.
///
/// [`Endpoint::pdc_info`]: crate::Endpoint::pdc_info
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdcInfo<A> {
    /// The peer.
    pub peer: A,
    /// The peer's PDCID, once known.
    pub peer_id: Option<u16>,
    /// Delivery mode.
    pub mode: Mode,
    /// Who opened it.
    pub role: Role,
    /// Start_PSN of both directions.
    pub start_psn: u32,
    /// PSN the next packet sent gets.
    pub next_psn: u32,
    /// Lowest PSN not yet received from the peer.
    pub expected_psn: u32,
    /// The peer's CLEAR_PSN as last received.
    pub clear_psn: u32,
    /// Packets queued or not yet acknowledged.
    pub unacked: usize,
    /// Close in progress.
    pub closing: bool,
    /// The NSCC window in bytes, when congestion control runs.
    pub cwnd: Option<usize>,
    /// The adaptive window in packets ([`Config::min_window`]), once the PDC has sent.
    ///
    /// [`Config::min_window`]: crate::Config::min_window
    pub window: Option<u32>,
    /// RCCC: credit units (256 bytes) granted to this PDC's peer so far.
    pub credit_granted: u64,
    /// The smoothed round-trip time, once an ACK measured one.
    pub srtt: Option<Duration>,
}
