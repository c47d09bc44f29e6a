//! The UET Semantic Sublayer (SES), messaging and RMA, as a sans-IO state machine over the PDS
//! (`../shared/spec/uet-wire.md` §3, `../shared/spec/uet-libfabric.md`).
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
//! The delivery mode of each operation follows the mapping ([`delivery_mode`]): ROD when ordering
//! is requested, RUD otherwise, RUDI for RMA to IDEMPOTENT_SAFE keys in the HPC profile, UUD on
//! datagram endpoints.

pub mod amo;
pub mod endpoint;
pub mod key;
pub mod matching;

pub use endpoint::{Addr, Completion, CompletionKind, Endpoint, Error, Opts, Stats, Status};
pub use key::{Access, JobScope, Region, Regions};
pub use matching::{RecvSpec, Source};
pub use wire::uet::ses::ReturnCode;

/// The libfabric mapping's profiles, least to most capable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Profile {
    /// AI Base.
    AiBase,
    /// AI Full.
    AiFull,
    /// HPC: wildcard tags, RUDI for idempotent RMA.
    Hpc,
}

/// Endpoint types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EpType {
    /// Reliable datagram messages (`FI_EP_RDM`): RUD, ROD, RUDI.
    Rdm,
    /// Unreliable datagrams (`FI_EP_DGRAM`): UUD.
    Dgram,
}

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

/// Tunables and identity of an [`Endpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The PDS under it.
    pub pds: pds::Config,
    /// Endpoint type.
    pub ep_type: EpType,
    /// Profile.
    pub profile: Profile,
    /// This endpoint's JobID (24 bits), put in every request.
    pub job_id: u32,
    /// This endpoint's PIDonFEP (12 bits); requests naming another are answered BAD_PID.
    pub pid_on_fep: u16,
    /// This endpoint's resource index (12 bits); requests naming another are answered BAD_INDEX.
    pub resource_index: u16,
    /// The initiator ID put in requests (the sender's rank / AV index).
    pub initiator: u32,
    /// Payload bytes per packet (at most 16383, the width of `payload_length`).
    pub max_payload: usize,
    /// Largest message or RMA length accepted (requests above it: TOO_LONG).
    pub max_message: usize,
    /// Bytes of unexpected messages kept before further ones are answered NO_MATCH.
    pub unexpected_bytes: usize,
    /// Eager bytes sent with a rendezvous request (`UET_PROVIDER_MAX_EAGER_SIZE`; at most one
    /// packet's payload is used).
    pub max_eager: usize,
    /// Untagged sends of at least this many bytes use rendezvous (HPC) or deferrable sends (AI
    /// Full) (`UET_PROVIDER_MSG_RENDEZVOUS_SIZE`).
    pub msg_rendezvous_size: usize,
    /// The same for tagged sends (`UET_PROVIDER_TAG_RENDEZVOUS_SIZE`).
    pub tag_rendezvous_size: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pds: pds::Config::default(),
            ep_type: EpType::Rdm,
            profile: Profile::Hpc,
            job_id: 1,
            pid_on_fep: 0,
            resource_index: 0,
            initiator: 0,
            max_payload: 4096,
            max_message: 1 << 30,
            unexpected_bytes: 16 << 20,
            max_eager: 4096,
            msg_rendezvous_size: 64 << 10,
            tag_rendezvous_size: 64 << 10,
        }
    }
}

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
