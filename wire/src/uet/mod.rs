//! Ultra Ethernet Transport 1.0 headers (`../shared/spec/uet-wire.md`).
//!
//! ```text
//! Eth | IPv4/IPv6 | (UDP dport 4793 | entropy hdr if native IP) | [TSS] | PDS | [SES (+ext)] | payload
//!     | [ICV 16 B if TSS] or [CRC32C 4 B if enabled]
//! ```
//! Where the sources disagree, the spec page's **Decisions** table is implemented; every disputed size
//! or position is one constant in [`layout`].

pub mod entropy;
pub mod layout;
pub mod packet;
pub mod pds;
pub mod ses;
pub mod tss;

pub use entropy::EntropyRepr;
pub use packet::{UetConfig, UetRepr};
pub use pds::PdsRepr;
pub use ses::SesRepr;
pub use tss::TssRepr;

/// UDP destination port of UET (IANA; uet-wire.md §1).
pub const UDP_PORT: u16 = 4793;
/// Default IP protocol number of native-IP UET (RFC 3692 experimental, the ref-prov default).
pub const DEFAULT_IP_PROTO: u8 = 253;
