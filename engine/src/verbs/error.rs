//! Why a verbs call is refused: the core's reasons ([`QpError`], converted as they are) and what
//! only the API refuses (handles, objects in use, CQs, datapaths, rdma_cm).

use crate::roce::types::QpState;
use crate::roce::{MemError, QpError};

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

impl From<QpError> for VerbsError {
    fn from(e: QpError) -> VerbsError {
        match e {
            QpError::InvalidState(s) => VerbsError::InvalidState(s),
            QpError::InvalidTransition(a, b) => VerbsError::InvalidTransition(a, b),
            QpError::MissingAttr(a) => VerbsError::MissingAttr(a),
            QpError::InvalidAttr(a) => VerbsError::InvalidAttr(a),
            QpError::QueueFull => VerbsError::QueueFull,
            QpError::TooManySge => VerbsError::TooManySge,
            QpError::InvalidSge(m) => VerbsError::InvalidSge(m),
            QpError::InvalidWr(why) => VerbsError::InvalidWr(why),
            QpError::NoDestMac => VerbsError::Unreachable,
            QpError::NoAhPath => VerbsError::InvalidHandle("AH"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_read_the_same_as_the_api_errors_they_become() {
        let all = [
            QpError::InvalidState(QpState::Init),
            QpError::InvalidTransition(QpState::Reset, QpState::Rts),
            QpError::MissingAttr("rq_psn"),
            QpError::InvalidAttr("path_mtu"),
            QpError::QueueFull,
            QpError::TooManySge,
            QpError::InvalidSge(MemError::BadKey),
            QpError::InvalidWr("why"),
            QpError::NoDestMac,
            QpError::NoAhPath,
        ];
        for e in all {
            assert_eq!(VerbsError::from(e).to_string(), e.to_string(), "{e:?}");
        }
        assert_eq!(VerbsError::from(QpError::NoDestMac), VerbsError::Unreachable);
        assert_eq!(VerbsError::from(QpError::NoAhPath), VerbsError::InvalidHandle("AH"));
    }
}
