//! The configuration of an [`Endpoint`](crate::Endpoint): its tunables and identity ([`Config`]),
//! its endpoint type ([`EpType`]) and its libfabric profile ([`Profile`]).

use std::time::Duration;

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

/// Which SES request headers an endpoint sends (`ses/README.md`, "SES header forms").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HeaderForms {
    /// The standard header (44 B) for every request, as softrdma sent before the compact forms.
    Standard,
    /// The compact forms where the specification lets a sender use them: the optimized
    /// non-matching header (REQ_SMALL, 20 B) for single-packet RMA and atomics to an OPTIMIZED key
    /// whose RKEY fits the resource index, the small-message header (REQ_MEDIUM, 32 B) for other
    /// single-packet sends, RMA and atomics; the standard header for the rest.
    #[default]
    Compact,
}

/// Tunables and identity of an [`Endpoint`].
///
/// [`Endpoint`]: crate::Endpoint
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
    /// Payload bytes per packet: 1 to [`MAX_PAYLOAD`] (16383, the width of `payload_length`;
    /// [`Config::validate`]).
    pub max_payload: usize,
    /// Largest message or RMA length accepted (requests above it: TOO_LONG).
    pub max_message: usize,
    /// Bytes of unexpected messages kept before further ones are answered NO_MATCH.
    pub unexpected_bytes: usize,
    /// Messages kept as unexpected (of any size, rendezvous requests and deferred sends included)
    /// before further ones are answered NO_MATCH (default 8192).
    pub max_unexpected_msgs: usize,
    /// Eager bytes sent with a rendezvous request (`UET_PROVIDER_MAX_EAGER_SIZE`; at most one
    /// packet's payload is used).
    pub max_eager: usize,
    /// Untagged sends of at least this many bytes use rendezvous (HPC) or deferrable sends (AI
    /// Full) (`UET_PROVIDER_MSG_RENDEZVOUS_SIZE`).
    pub msg_rendezvous_size: usize,
    /// The same for tagged sends (`UET_PROVIDER_TAG_RENDEZVOUS_SIZE`).
    pub tag_rendezvous_size: usize,
    /// READ responses are produced as their PDC takes them: while fewer than this many packets are
    /// queued on it (sent or not), default 512.
    pub read_window: usize,
    /// READs served at once to one source; one more is answered DROPPED (default 1024).
    pub max_served_reads: usize,
    /// Messages partly received over one PDC at a time; the first packet of one more is answered
    /// DROPPED (default 1024).
    pub max_inbound_per_pdc: usize,
    /// Messages partly received from one source (over all its PDCs) at a time; beyond, DROPPED
    /// (default 4096).
    pub max_inbound_per_source: usize,
    /// A partly received message with no packet for this long is dropped: a receive it had taken is
    /// posted again, an unexpected one is discarded (default 10 s).
    pub reassembly_timeout: Duration,
    /// The request headers sent (every form is accepted on receive whatever this says).
    pub forms: HeaderForms,
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
            max_unexpected_msgs: 8192,
            max_eager: 4096,
            msg_rendezvous_size: 64 << 10,
            tag_rendezvous_size: 64 << 10,
            read_window: 512,
            max_served_reads: 1024,
            max_inbound_per_pdc: 1024,
            max_inbound_per_source: 4096,
            reassembly_timeout: Duration::from_secs(10),
            forms: HeaderForms::Compact,
        }
    }
}

/// The largest `max_payload`: the width of a request's `payload_length` field.
pub const MAX_PAYLOAD: usize = 0x3FFF;

/// Why a [`Config`] cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// `max_payload` is 0 or above [`MAX_PAYLOAD`].
    MaxPayload(usize),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::MaxPayload(n) => write!(f, "max_payload {n} is not within 1..={MAX_PAYLOAD}"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Whether the configuration can run.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_payload == 0 || self.max_payload > MAX_PAYLOAD {
            return Err(ConfigError::MaxPayload(self.max_payload));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A max_payload that request headers cannot describe is refused up front.
    #[test]
    fn max_payload_beyond_the_header_field_is_refused() {
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(Config { max_payload: MAX_PAYLOAD, ..Config::default() }.validate(), Ok(()));
        for n in [0, MAX_PAYLOAD + 1, 65536] {
            let cfg = Config { max_payload: n, ..Config::default() };
            assert_eq!(cfg.validate(), Err(ConfigError::MaxPayload(n)));
        }
    }
}
