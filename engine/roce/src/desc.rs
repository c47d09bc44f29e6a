//! What the requester hands the QP to send: a packet's headers and where its payload comes from.

use super::path::HeaderTemplate;
use super::types::WrOpcode;
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
    pub(crate) template: Option<HeaderTemplate>,
    /// Sending this packet completes the oldest send request (UC and UD).
    pub(crate) completes: bool,
}
