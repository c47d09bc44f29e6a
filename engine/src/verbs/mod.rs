//! The verbs API: devices, protection domains, memory regions, completion queues and RC queue
//! pairs, shaped after libibverbs, with a busy-polling progress call.
//!
//! A [`Context`] is one opened device (one port of a datapath). It owns every object created on it;
//! the application holds small `Copy` handles. Nothing runs in the background: [`Context::progress`]
//! receives frames, runs timers, sends frames and moves completions to their CQs.

mod cm;
mod context;
mod cq;
mod device;
mod error;
mod gsi;
mod sched;
mod stats;
mod tx;

pub use crate::roce::mem;
pub use crate::roce::types::{
    Access, AddressVector, Ah, QpAttr, QpCap, QpState, QpType, RecvWr, SendFlags, SendWindow, SendWr, Sge,
    UdDest, WcOpcode, WcStatus, WorkCompletion, WrOpcode,
};
pub use crate::roce::{DeviceLimits, InlineData, LIMITS, MAX_MSG_SIZE, MemError, MemTable, QpError, SendRef};
pub use cm::{CmChannel, CmEventKind, CmId, CmIdEvent, ConnParam, PortSpace, RDMA_UDP_QKEY, UdParam};
pub use context::{AsyncEvent, CompChannel, Context, Cq, Mr, Pd, Qp, QpInitAttr, Srq, SrqAttr};
pub use device::{Device, HANDOVER};
pub use error::VerbsError;
pub use frame::UserBuf;
pub use stats::{QpStats, Stats};
pub use wire::ib::Mtu;
