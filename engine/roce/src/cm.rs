//! The InfiniBand Communication Manager (IBTA vol. 1 ch. 12) as a sans-IO state machine: the MADs a
//! port exchanges on QP1 to connect RC/UC queue pairs (REQ, REP, RTU, REJ, MRA, DREQ, DREP) and to
//! look up UD services (SIDR_REQ, SIDR_REP), as rdma_cm drives them over RoCEv2.
//!
//! Like the transports, [`Cm`] does no I/O: the caller passes `now`, feeds received MADs in with
//! [`Cm::handle_mad`], and pulls MADs to send ([`Cm::poll_transmit`]), events ([`Cm::poll_event`])
//! and its next deadline ([`Cm::poll_timeout`]) out. The runtime wraps each MAD in a UD SEND to
//! the peer's QP1 (GSI Q_Key) and back.
//!
//! Every MAD that asks for an answer is sent again until the answer comes, at most
//! [`CmConfig::max_retries`] times; duplicates are answered from the state they find (a second REQ
//! gets an MRA or the REP again, a second REP the RTU again, a second DREQ the DREP again), so each
//! connection is established at most once on each side. State is bounded: at most
//! [`CmConfig::max_conns`] connection records, at most a listener's backlog of REQs waiting for the
//! consumer, and a bounded send queue.

mod conn;
mod endpoint;
mod rx;
#[cfg(test)]
mod tests;
mod types;

pub use endpoint::Cm;
pub use types::{
    AcceptParams, CmConfig, CmError, CmEvent, CmStats, ConnId, ConnectParams, Mad, RepInfo, ReqInfo,
    SidrRepInfo, State,
};
