//! The tunables of an [`Endpoint`](crate::Endpoint) ([`Config`]) and the receive window they are
//! bounded by ([`RX_WINDOW`]).

use std::time::Duration;

use crate::{cc, credit};

/// PSNs the receiver tracks beyond the next expected one (its window; the bitmap size). A packet
/// further ahead is answered with NACK PSN_OOR_WINDOW.
pub const RX_WINDOW: u32 = 1024;

/// Tunables of an [`Endpoint`]. The defaults follow the ref-prov (5 ms retransmit timeout, 5
/// retries) and htsim (ACK coalescing) where uet-wire.md §2 "Timers" names them.
///
/// [`Endpoint`]: crate::Endpoint
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
    /// The loss-adaptive window (`window.rs`): with neither `cc` nor `rccc`, a PDC's window halves
    /// on a loss it learns of from the peer (SACK bitmap, ROD_OOO, a NACK for a trimmed or refused
    /// packet), falls to this many packets on a retransmission timeout, and grows back to
    /// `window` as TCP's congestion window does. `None`: always `window` packets. NSCC and RCCC
    /// pace the sender themselves and leave it off.
    pub min_window: Option<u32>,
    /// Packets queued per PDC (sent or not) before `send` returns [`SendError::QueueFull`].
    ///
    /// [`SendError::QueueFull`]: crate::SendError::QueueFull
    pub max_queued: usize,
    /// The receiver acknowledges at once after this many in-order packets.
    pub ack_every: u32,
    /// Otherwise it acknowledges this long after the first unacknowledged packet.
    pub ack_delay: Duration,
    /// PDCs this endpoint holds at most; a SYN beyond it is answered with NACK NO_PDC_AVAIL.
    pub max_pdcs: usize,
    /// Target PDCs one peer (source address) holds at most, so that one source cannot take the
    /// whole table; a SYN beyond it is answered with NACK NO_PDC_AVAIL (counted in
    /// [`Stats::rx_syns_refused`]). Default 256.
    ///
    /// [`Stats::rx_syns_refused`]: crate::Stats::rx_syns_refused
    pub max_pdcs_per_peer: usize,
    /// A target PDC that has only received SYN packets (its initiator never showed it learned the
    /// target's PDCID) and has nothing of its own to send is dropped after this long without a
    /// packet (a SYN flood from spoofed sources leaves such PDCs). Default 1 s.
    pub half_open_timeout: Duration,
    /// A target PDC that has only received SYN packets retransmits its own packets (SES responses)
    /// at most this many times before it fails, instead of `max_retries`: its source may be spoofed
    /// and never answer, and a SYN flood would otherwise make the target send `max_retries` packets
    /// for every SYN. A real initiator acknowledges the first response, which lifts the limit.
    /// Default 3.
    pub half_open_retries: u32,
    /// A target PDC with nothing to send that received nothing for this long asks its initiator to
    /// close it (CLOSE_REQ); if still nothing comes within `half_open_timeout` more, it is dropped.
    /// Default 60 s.
    pub idle_timeout: Duration,
    /// Control packets (NACKs from the endpoint, RUDI responses, UUD datagrams) queued at most
    /// waiting for `poll_transmit`; beyond, one more is dropped and counted in
    /// [`Stats::ctrl_dropped`] (a flood of bad packets would otherwise queue an answer each).
    /// Default 1024.
    ///
    /// [`Stats::ctrl_dropped`]: crate::Stats::ctrl_dropped
    pub max_ctrl: usize,
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
            min_window: Some(4),
            max_queued: 8192,
            ack_every: 16,
            ack_delay: Duration::from_micros(20),
            max_pdcs: 4096,
            max_pdcs_per_peer: 256,
            half_open_timeout: Duration::from_secs(1),
            half_open_retries: 3,
            idle_timeout: Duration::from_secs(60),
            max_ctrl: 1024,
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
