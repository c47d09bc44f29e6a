//! A provider shaped like libfabric over UET (`../shared/spec/uet-libfabric.md`): `getinfo` with
//! the three profiles (AI Base, AI Full, HPC), fabric, domain, endpoints (RDM and DGRAM), address
//! vectors with table semantics and auth keys, completion queues with error entries (libfabric
//! errno plus the SES return code as `prov_errno`), completion counters (completions and bytes),
//! event queues, memory registration with user keys, and the data operations (send, senddata,
//! inject, recv, tagged variants, write, writedata, read, atomic, fetch_atomic, compare_atomic).
//!
//! JobIDs come from a [`ControlPlane`] that stands in for the privileged entity: the indirect,
//! direct and AV methods, and the fallback JobID 16777215 with `UET_PROVIDER_INITIATOR_ID`. The
//! configuration variables are read by [`ProviderConfig::from_env`].
//!
//! A fabric is softrdma's simulated network or kernel UDP between processes and hosts (one thread,
//! manual progress; [`Fabric`]); the same SES and PDS run over UDP and AF_XDP in
//! `softrdma perf --transport ...`.

pub mod config;
pub mod control;
pub mod endpoint;
pub mod epoch;
pub mod errno;
pub mod fabric;
pub mod info;
pub mod objects;
pub mod shared;
pub mod stat;
pub mod tclass;
mod usermem;

pub use config::{ConfigError, ProviderConfig, Service, parse_service_file};
pub use control::{ControlPlane, FALLBACK_JOB_ID, SecurityBinding};
pub use endpoint::{Domain, Endpoint, EpAttr, JobIdMethod, MemoryRegion, MrAccess, MrAuth, MultiRecv};
pub use epoch::reserve_epoch;
pub use errno::{FiErrno, FiError, errno_of};
pub use fabric::{Fabric, udp_max_payload};
pub use frame::UserBuf;
pub use info::{Hints, Info, Limits, MAX_PAYLOAD, caps, getinfo};
pub use objects::{
    AddressVector, AuthKey, CompletionQueue, Counter, CqEntry, CqErrEntry, EqEvent, EventQueue,
    FI_ADDR_UNSPEC, FiAddr, UetAddr, bind, cq_flags,
};
pub use shared::{DomainKey, DomainRegion};
pub use stat::{StatNode, StatSink};
pub use usermem::UserMem;
