//! The RoCEv2 transports as sans-IO state machines (roce-wire.md §1.6, §1.7).
//!
//! An [`QueuePair`] owns a requester (send queue to packets, go-back-N), a completer (ACKs and responses
//! to completions, retries) and a responder (requests to memory, ACKs, NAKs and READ responses). It
//! takes `now` and parsed packets in ([`QueuePair::handle_packet`], [`QueuePair::handle_timeout`]) and gives
//! frames, deadlines and completions out ([`QueuePair::poll_transmit`], [`QueuePair::poll_timeout`],
//! [`QueuePair::poll_completion`]); it never reads a clock or does I/O. Memory is reached only through
//! the [`MemTable`](crate::verbs::MemTable) the caller passes in.

mod completer;
pub mod dcqcn;
pub mod path;
mod qp;
mod requester;
mod responder;

pub use path::Path;
pub use qp::{CqSide, MAX_MSG_SIZE, QpConfig, QueuePair, ud_sport};
pub use responder::{GRH_LEN, RecvWqe, RespDrops, RxMeta};

pub use requester::{MAX_PKT_PER_ACK, MAX_UNACKED_PSNS, ReqCounters, ack_timeout};

use crate::verbs::WrOpcode;
use wire::ib::RoceRepr;

/// What a send work request does on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Send,
    Write,
    Read,
    Atomic,
}

impl Kind {
    pub(crate) fn of(op: &WrOpcode) -> Kind {
        match op {
            WrOpcode::Send | WrOpcode::SendWithImm { .. } | WrOpcode::SendWithInv { .. } => Kind::Send,
            WrOpcode::RdmaWrite { .. } | WrOpcode::RdmaWriteWithImm { .. } => Kind::Write,
            WrOpcode::RdmaRead { .. } => Kind::Read,
            WrOpcode::AtomicCmpAndSwp { .. } | WrOpcode::AtomicFetchAndAdd { .. } => Kind::Atomic,
        }
    }
}

/// Where a packet's payload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxPayload {
    None,
    /// Bytes `offset..offset + len` of send queue entry `index` (its SGEs or inline data).
    Wqe {
        index: usize,
        offset: u32,
        len: u32,
    },
    /// Remote-readable memory (READ responses).
    Remote {
        rkey: u32,
        va: u64,
        len: u32,
    },
}

/// A packet to send: headers, and where its payload is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxDesc {
    pub(crate) packet: RoceRepr<'static>,
    pub(crate) payload: TxPayload,
    /// The headers of a UD destination (otherwise the QP's path).
    pub(crate) template: Option<path::HeaderTemplate>,
    /// Sending this packet completes the oldest send request (UC and UD).
    pub(crate) completes: bool,
}
