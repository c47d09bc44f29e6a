//! `fi_getinfo`: what the provider offers per profile (`../shared/spec/uet-libfabric.md`
//! "Profiles"; the per-profile limits of table 2-4 were not available, so the limits are
//! conservative and reported here).

use ses::amo::supported_pairs;
use ses::{EpType, Profile};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

use super::config::{ProviderConfig, Service};
use super::errno::{FiErrno, FiError};

/// Capability bits (libfabric's `FI_*` capabilities that matter here).
pub mod caps {
    /// Untagged messages.
    pub const MSG: u64 = 1 << 1;
    /// RMA (write, read).
    pub const RMA: u64 = 1 << 2;
    /// Tagged messages.
    pub const TAGGED: u64 = 1 << 3;
    /// Atomics (non-fetching, fetching, compare).
    pub const ATOMIC: u64 = 1 << 4;
    /// Tagged receives with ignore bits (wildcards).
    pub const TAG_WILDCARD: u64 = 1 << 5;
    /// Large messages by rendezvous (HPC).
    pub const RENDEZVOUS: u64 = 1 << 6;
    /// Large messages by deferrable send (AI Full).
    pub const DEFERRABLE: u64 = 1 << 7;
    /// Idempotent RMA over RUDI.
    pub const RUDI: u64 = 1 << 8;
    /// Several JobIDs per endpoint through AV auth keys.
    pub const AV_AUTH_KEY: u64 = 1 << 9;
}

/// What the application asks `getinfo` for.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Only this profile.
    pub profile: Option<Profile>,
    /// Only this endpoint type.
    pub ep_type: Option<EpType>,
    /// Capabilities required (bits of [`caps`]).
    pub caps: u64,
    /// A service name (from the service file or predefined).
    pub service: Option<String>,
}

/// Limits reported with an [`Info`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest message.
    pub max_msg_size: usize,
    /// Largest RMA (settable between 1 GiB and 4 GiB - 1 with `set_max_rma_size`).
    pub max_rma_size: usize,
    /// Largest `inject` (one packet).
    pub inject_size: usize,
    /// Largest atomic batch in bytes (one packet).
    pub max_atomic_bytes: usize,
    /// Bits of RKEY in a memory key.
    pub mr_key_bits: u32,
    /// AV auth keys per endpoint.
    pub max_auth_keys: usize,
}

/// One offer of the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// The profile.
    pub profile: Profile,
    /// Endpoint type.
    pub ep_type: EpType,
    /// Capabilities (bits of [`caps`]).
    pub caps: u64,
    /// Limits.
    pub limits: Limits,
    /// (opcode, datatype) pairs of non-fetching atomics.
    pub atomics: Vec<(AmoOpcode, AmoDatatype)>,
    /// (opcode, datatype) pairs of fetching and compare atomics.
    pub fetch_atomics: Vec<(AmoOpcode, AmoDatatype)>,
    /// The service (resource indices) the endpoint will use.
    pub service: Service,
    /// The data traffic class (DSCP) of the domain's endpoints: `UET_PROVIDER_DEF_DATA_TC`, or
    /// what the program asked for ([`crate::provider::tclass`]).
    pub tclass: u8,
    /// The provider configuration this offer was made under.
    pub config: ProviderConfig,
}

/// Payload bytes per packet the provider uses.
pub const MAX_PAYLOAD: usize = 4096;
/// RMA size limits of `fi_setopt` (1 GiB to 4 GiB - 1, all profiles).
pub const RMA_SIZE_RANGE: (usize, usize) = (1 << 30, (1 << 32) - 1);

/// The capabilities of a profile on an endpoint type.
pub fn profile_caps(profile: Profile, ep_type: EpType) -> u64 {
    use caps::*;
    if ep_type == EpType::Dgram {
        return MSG;
    }
    match profile {
        Profile::AiBase => MSG | RMA | ATOMIC | AV_AUTH_KEY,
        Profile::AiFull => MSG | RMA | ATOMIC | TAGGED | DEFERRABLE | AV_AUTH_KEY,
        Profile::Hpc => MSG | RMA | ATOMIC | TAGGED | TAG_WILDCARD | RENDEZVOUS | RUDI | AV_AUTH_KEY,
    }
}

/// `fi_getinfo`: the offers matching `hints`, most capable profile first (HPC, AI Full, AI Base).
/// An unknown service or hints nothing can satisfy give FI_ENODATA.
pub fn getinfo(hints: &Hints, config: &ProviderConfig) -> Result<Vec<Info>, FiError> {
    let service = match &hints.service {
        Some(name) => config
            .service(name)
            .cloned()
            .ok_or_else(|| FiError::new(FiErrno::ENODATA, format!("no service named {name:?}")))?,
        None => config.services[0].clone(),
    };
    let limits = Limits {
        max_msg_size: 1 << 30,
        max_rma_size: RMA_SIZE_RANGE.0,
        inject_size: MAX_PAYLOAD,
        max_atomic_bytes: MAX_PAYLOAD,
        mr_key_bits: 47,
        max_auth_keys: 16,
    };
    let mut out = Vec::new();
    for profile in [Profile::Hpc, Profile::AiFull, Profile::AiBase] {
        for ep_type in [EpType::Rdm, EpType::Dgram] {
            let c = profile_caps(profile, ep_type);
            let wanted =
                hints.profile.is_none_or(|p| p == profile) && hints.ep_type.is_none_or(|t| t == ep_type);
            if !wanted || c & hints.caps != hints.caps {
                continue;
            }
            let atomic = c & caps::ATOMIC != 0;
            out.push(Info {
                profile,
                ep_type,
                caps: c,
                limits,
                atomics: if atomic { supported_pairs(false) } else { Vec::new() },
                fetch_atomics: if atomic { supported_pairs(true) } else { Vec::new() },
                service: service.clone(),
                tclass: config.def_data_tc,
                config: config.clone(),
            });
        }
    }
    if out.is_empty() {
        return Err(FiError::new(FiErrno::ENODATA, "no profile offers what the hints ask for"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_and_their_differences() {
        let c = ProviderConfig::default();
        let all = getinfo(&Hints::default(), &c).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!((all[0].profile, all[0].ep_type), (Profile::Hpc, EpType::Rdm));
        let tagged = getinfo(&Hints { caps: caps::TAGGED, ..Hints::default() }, &c).unwrap();
        assert!(tagged.iter().all(|i| i.profile != Profile::AiBase && i.ep_type == EpType::Rdm));
        let wild = getinfo(&Hints { caps: caps::TAG_WILDCARD, ..Hints::default() }, &c).unwrap();
        assert_eq!(wild.iter().map(|i| i.profile).collect::<Vec<_>>(), [Profile::Hpc]);
        let base =
            getinfo(&Hints { profile: Some(Profile::AiBase), caps: caps::TAGGED, ..Hints::default() }, &c);
        assert_eq!(base.unwrap_err().errno, FiErrno::ENODATA);
        let svc = getinfo(&Hints { service: Some("nope".into()), ..Hints::default() }, &c);
        assert_eq!(svc.unwrap_err().errno, FiErrno::ENODATA);
        assert!(all[0].fetch_atomics.len() > all[0].atomics.len());
    }
}
