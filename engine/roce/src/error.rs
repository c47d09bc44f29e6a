//! Why the core refuses a work request or a QP transition. The verbs API turns these into its own
//! errors (`engine::verbs::VerbsError`), which add what only the API can refuse (handles, CQs,
//! datapaths, rdma_cm).

use super::mem::MemError;
use super::types::QpState;

/// Why a [`QueuePair`](crate::QueuePair) refused a call. Nothing changed when a call returns one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpError {
    /// The QP state does not allow the call.
    InvalidState(QpState),
    /// `modify` cannot go from the first state to the second.
    InvalidTransition(QpState, QpState),
    /// `modify` needs this attribute for the transition.
    MissingAttr(&'static str),
    /// An attribute value is out of range.
    InvalidAttr(&'static str),
    /// The work queue is full.
    QueueFull,
    /// More SGEs than the QP was created for.
    TooManySge,
    /// An SGE does not name usable memory.
    InvalidSge(MemError),
    /// The work request is malformed (the reason says how).
    InvalidWr(&'static str),
    /// The address vector of a connected QP has no destination MAC.
    NoDestMac,
    /// A UD send came without the path of its address handle.
    NoAhPath,
}

impl std::fmt::Display for QpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QpError::InvalidState(s) => write!(f, "not allowed in QP state {s:?}"),
            QpError::InvalidTransition(a, b) => write!(f, "no QP transition from {a:?} to {b:?}"),
            QpError::MissingAttr(a) => write!(f, "modify_qp needs attribute {a}"),
            QpError::InvalidAttr(a) => write!(f, "attribute {a} out of range"),
            QpError::QueueFull => f.write_str("work queue full"),
            QpError::TooManySge => f.write_str("too many scatter/gather entries"),
            QpError::InvalidSge(e) => write!(f, "bad scatter/gather entry: {e}"),
            QpError::InvalidWr(why) => write!(f, "bad work request: {why}"),
            QpError::NoDestMac => f.write_str("destination MAC address unknown"),
            QpError::NoAhPath => f.write_str("invalid AH handle"),
        }
    }
}

impl std::error::Error for QpError {}
