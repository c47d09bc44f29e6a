//! The UET Packet Delivery Sublayer (PDS) as a sans-IO state machine (`../shared/spec/uet-wire.md` §2).
//! A transport core (ARCHITECTURE.md): it depends on `wire` alone; `ses` sits on it and the engine's
//! `UetNode` drives it.
//!
//! `pds/README.md` has the table of the NACK codes it sends (10 of the 28), each with its
//! condition, and why the others are not.
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
mod config;
mod counts;
pub mod credit;
pub mod endpoint;
mod event;
pub mod pdc;
pub mod psn;
pub mod rudi;
mod rx;
mod tx;
mod window;

pub use body::{Body, HEAD_MAX};
pub use config::{Config, RX_WINDOW};
pub use counts::{CODE_SLOTS, CodeCounts};
pub use endpoint::{
    CLOSED_LINGER, Delivery, DeliveryKind, Endpoint, Establishment, SendError, Stats, Transmit,
};
pub use event::{Event, PdcError};
pub use pdc::{PdcId, Role};
pub use tx::Urgency;
pub use wire::uet::pds::{Mode, NackCode, NextHeader};
