//! InfiniBand transport headers as carried by RoCEv2 (roce-wire.md §1).
//!
//! One header per file. Every extension-header `Repr` implements [`crate::FixedHeader`], which is what lets
//! [`packet::RoceRepr`] walk the header list an opcode prescribes in one loop.

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm;
pub mod cma;
pub mod deth;
pub mod feth;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod mad;
pub mod mtu;
pub mod opcode;
pub mod packet;
pub mod psn;
pub mod rdeth;
pub mod reth;
mod word;

pub use aeth::{AethKind, AethRepr, NakCode};
pub use atomic_ack_eth::AtomicAckEthRepr;
pub use atomic_eth::AtomicEthRepr;
pub use bth::BthRepr;
pub use cm::{CmMessage, CmPath, Drep, Dreq, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq};
pub use cma::CmaHdr;
pub use deth::DethRepr;
pub use feth::FethRepr;
pub use ieth::IethRepr;
pub use immdt::ImmDt;
pub use mad::MadHeader;
pub use mtu::Mtu;
pub use opcode::{Headers, Opcode, OpcodeInfo, Operation, PayloadRule, Transport};
pub use packet::RoceRepr;
pub use rdeth::RdethRepr;
pub use reth::RethRepr;

pub use crate::FixedHeader;
