//! softrdma's RoCE core: the RoCEv2 transports as sans-IO state machines (roce-wire.md §1.6, §1.7)
//! and the connection manager of QP1 ([`cm`]).
//!
//! A [`QueuePair`] owns a requester (send queue to packets, go-back-N), a completer (ACKs and responses
//! to completions, retries) and a responder (requests to memory, ACKs, NAKs and READ responses). It
//! takes `now` and parsed packets in ([`QueuePair::handle_packet`], [`QueuePair::handle_timeout`]) and gives
//! frames, deadlines and completions out ([`QueuePair::poll_transmit`], [`QueuePair::poll_timeout`],
//! [`QueuePair::poll_completion`]); it never reads a clock or does I/O. Memory is reached only through
//! the [`MemTable`] the caller passes in.
//!
//! The core owns its vocabulary: work requests and completions ([`types`]), the memory table
//! ([`mem`]), a connection's addressing ([`Path`]) and its errors ([`QpError`]). The package
//! depends only on `wire` (the codecs) and `frame` (buffers and the application's registered
//! memory), so the rule that the core sits below the verbs API, the runtime and the datapaths is
//! one Cargo checks: the engine's `verbs` re-exports the vocabulary and adds devices and handles
//! around the core.

pub mod cm;
mod completer;
pub mod dcqcn;
mod desc;
mod error;
pub mod mem;
mod path;
mod qp;
mod requester;
mod responder;
mod rtt;
pub mod types;
mod window;

pub use error::QpError;
pub use mem::{MemError, MemTable};
pub use path::{BuildError, HeaderTemplate, Path, gid_of, udp_sport};
pub use qp::{CqSide, QpConfig, QueuePair, ud_sport};
pub use responder::{DEVICE_HOLD_PACKETS, GRH_LEN, HoldPool, HoldStats, RecvWqe, RespDrops, RxMeta};
pub use types::{DeviceLimits, LIMITS, MAX_MSG_SIZE};

pub use requester::{MAX_PKT_PER_ACK, MAX_UNACKED_PSNS, MAX_WIDE_PSNS, ReqCounters, ack_timeout};
pub use types::{InlineData, SendRef, SendWindow};
