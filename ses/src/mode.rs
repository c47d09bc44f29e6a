//! The delivery mode of an operation as the libfabric mapping prescribes it ([`delivery_mode`]):
//! UUD, ROD, RUDI or RUD ([`DeliveryMode`]) by endpoint type, profile, kind of operation
//! ([`OpKind`]), ordering and memory key.

use crate::config::{EpType, Profile};
use crate::key;

/// How a packet of an operation is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryMode {
    /// Reliable unordered (a PDC).
    Rud,
    /// Reliable ordered (a PDC).
    Rod,
    /// Reliable unordered idempotent (no PDC).
    Rudi,
    /// Unreliable datagram.
    Uud,
}

/// Kinds of operation, for [`delivery_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// SEND or TAGGED_SEND.
    Message,
    /// WRITE without completion data, or READ.
    Rma,
    /// WRITE with completion data (a target completion: not idempotent).
    RmaWithData,
    /// An atomic (never idempotent).
    Atomic,
}

/// The delivery mode the libfabric mapping prescribes (uet-libfabric.md "Endpoint types and
/// delivery modes"): UUD on DGRAM endpoints; ROD when the operation's ordering class is on; RUDI
/// for RMA to an IDEMPOTENT_SAFE key in the HPC profile; RUD otherwise.
pub fn delivery_mode(ep: EpType, profile: Profile, op: OpKind, ordered: bool, key: u64) -> DeliveryMode {
    match (ep, op) {
        (EpType::Dgram, _) => DeliveryMode::Uud,
        _ if ordered => DeliveryMode::Rod,
        (_, OpKind::Rma) if profile == Profile::Hpc && key & key::IDEMPOTENT_SAFE != 0 => DeliveryMode::Rudi,
        _ => DeliveryMode::Rud,
    }
}
