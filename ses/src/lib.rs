//! The UET Semantic Sublayer (SES), messaging and RMA, as a sans-IO state machine over the PDS
//! (`../shared/spec/uet-wire.md` §3, `../shared/spec/uet-libfabric.md`). A transport core
//! (ARCHITECTURE.md): it depends on `wire` and `pds`; the engine's `UetNode` and provider sit on it.
//!
//! An [`Endpoint`] owns a [`pds::Endpoint`] and turns operations into SES requests: SEND and
//! TAGGED_SEND segmented with SOM/EOM, `message_id`, `payload_length`/`message_offset` and
//! `request_length`; WRITE (with `header_data` as completion data) and READ against memory keys in
//! the libfabric key format ([`key`]); DATAGRAM_SEND over UUD. The target matches sends against
//! posted receives (untagged in posted order, tagged with match bits and an ignore mask, optionally
//! by source; [`matching`]), keeps unmatched ones as unexpected messages, checks PIDonFEP, resource
//! index, JobID, key, rights and bounds, and answers every request with a response carrying a return
//! code (OK, NO_MATCH, BAD_MKEY, PERM_VIOLATION, TOO_LONG, BAD_JOB_ID, BAD_ADDR, BAD_PID, BAD_INDEX,
//! UNSUPPORTED_OP). The initiator completes an operation when its response arrives (delivery
//! complete), or when the PDC fails.
//!
//! Requests go in the standard header, or, where the specification lets a sender choose them, in
//! the compact forms (REQ_SMALL, REQ_MEDIUM; [`HeaderForms`]); every form is accepted on receive.
//! `ses/README.md` has the table of which form is sent when, and why.
//!
//! The delivery mode of each operation follows the mapping ([`delivery_mode`]): ROD when ordering
//! is requested, RUD otherwise, RUDI for RMA to IDEMPOTENT_SAFE keys in the HPC profile, UUD on
//! datagram endpoints.

pub mod amo;
mod config;
pub mod endpoint;
pub mod key;
pub mod matching;
mod mode;

pub use config::{Config, ConfigError, EpType, HeaderForms, MAX_PAYLOAD, Profile};
pub use endpoint::{Addr, Completion, CompletionKind, Endpoint, Error, Opts, Stats, Status};
pub use key::{Access, JobScope, Memory, Region, Regions};
pub use matching::{RecvSpec, Source};
pub use mode::{DeliveryMode, OpKind, delivery_mode};
pub use wire::uet::ses::ReturnCode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_selection_follows_the_mapping() {
        use DeliveryMode::*;
        let safe = 5 | key::IDEMPOTENT_SAFE;
        assert_eq!(delivery_mode(EpType::Dgram, Profile::Hpc, OpKind::Message, true, 0), Uud);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::Message, true, 0), Rod);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::Message, false, 0), Rud);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::Rma, false, safe), Rudi);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::Rma, true, safe), Rod);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::AiFull, OpKind::Rma, false, safe), Rud);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::RmaWithData, false, safe), Rud);
        assert_eq!(delivery_mode(EpType::Rdm, Profile::Hpc, OpKind::Rma, false, 5), Rud);
    }
}
