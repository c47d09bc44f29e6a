//! Why a work request or a QP/memory operation is refused: the core's errors, which the verbs API
//! returns as they are.

use super::mem::MemError;
use super::types::QpState;

/// Why a verbs call was refused. Nothing changed when a call returns one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbsError {
    /// The handle names nothing (destroyed, or from another context).
    InvalidHandle(&'static str),
    /// The object is still used by another (a PD with regions or QPs, a CQ with QPs).
    Busy(&'static str),
    /// The QP state does not allow the call.
    InvalidState(QpState),
    /// `modify_qp` cannot go from the first state to the second.
    InvalidTransition(QpState, QpState),
    /// `modify_qp` needs this attribute for the transition.
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
    /// A memory access by the application failed.
    Memory(MemError),
    /// The completion queue overflowed; completions were lost.
    CqOverrun,
    /// No more keys, QP numbers or addresses.
    OutOfResources,
    /// The peer's MAC address is unknown to the device.
    Unreachable,
    /// The datapath refused a frame or failed.
    Datapath(&'static str),
    /// The rdma_cm ID is not in a state where the call applies (the reason says which).
    CmState(&'static str),
    /// The address (port space and port) is bound by another rdma_cm ID.
    AddrInUse,
    /// The address is not this device's.
    AddrNotAvailable,
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerbsError::InvalidHandle(what) => write!(f, "invalid {what} handle"),
            VerbsError::Busy(what) => write!(f, "{what} is still in use"),
            VerbsError::InvalidState(s) => write!(f, "not allowed in QP state {s:?}"),
            VerbsError::InvalidTransition(a, b) => write!(f, "no QP transition from {a:?} to {b:?}"),
            VerbsError::MissingAttr(a) => write!(f, "modify_qp needs attribute {a}"),
            VerbsError::InvalidAttr(a) => write!(f, "attribute {a} out of range"),
            VerbsError::QueueFull => f.write_str("work queue full"),
            VerbsError::TooManySge => f.write_str("too many scatter/gather entries"),
            VerbsError::InvalidSge(e) => write!(f, "bad scatter/gather entry: {e}"),
            VerbsError::InvalidWr(why) => write!(f, "bad work request: {why}"),
            VerbsError::Memory(e) => write!(f, "memory access failed: {e}"),
            VerbsError::CqOverrun => f.write_str("completion queue overrun"),
            VerbsError::OutOfResources => f.write_str("out of resources"),
            VerbsError::Unreachable => f.write_str("destination MAC address unknown"),
            VerbsError::Datapath(why) => write!(f, "datapath error: {why}"),
            VerbsError::CmState(why) => write!(f, "rdma_cm: {why}"),
            VerbsError::AddrInUse => f.write_str("address already in use"),
            VerbsError::AddrNotAvailable => f.write_str("address not available on this device"),
        }
    }
}

impl std::error::Error for VerbsError {}
