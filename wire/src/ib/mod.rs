//! InfiniBand transport headers as carried by RoCEv2 (roce-wire.md §1).
//!
//! One header per file. Every extension-header `Repr` implements [`crate::FixedHeader`], which is what lets
//! [`packet::RoceRepr`] walk the header list an opcode prescribes in one loop.

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod deth;
pub mod feth;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod opcode;
pub mod packet;
pub mod psn;
pub mod rdeth;
pub mod reth;

pub use aeth::{AethKind, AethRepr, NakCode};
pub use atomic_ack_eth::AtomicAckEthRepr;
pub use atomic_eth::AtomicEthRepr;
pub use bth::BthRepr;
pub use deth::DethRepr;
pub use feth::FethRepr;
pub use ieth::IethRepr;
pub use immdt::ImmDt;
pub use opcode::{Headers, Opcode, OpcodeInfo, Operation, PayloadRule, Transport};
pub use packet::RoceRepr;
pub use rdeth::RdethRepr;
pub use reth::RethRepr;

pub use crate::FixedHeader;

use crate::Result;

/// Reads the single 32-bit big-endian field of a 4-byte header.
fn parse_word(buf: &[u8], what: &'static str) -> Result<u32> {
    crate::bytes::need(buf.len(), 4, what)?;
    Ok(crate::bytes::read_u32(buf, 0))
}

/// Writes the single 32-bit field of a 4-byte header.
fn emit_word(buf: &mut [u8], v: u32) -> Result<usize> {
    crate::bytes::write_u32(crate::bytes::out(buf, 4)?, 0, v);
    Ok(4)
}
