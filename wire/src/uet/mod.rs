//! Ultra Ethernet Transport 1.0 headers (`../shared/spec/uet-wire.md`).
//!
//! ```text
//! Eth | IPv4/IPv6 | (UDP dport 4793 | entropy hdr if native IP) | [TSS] | PDS | [SES (+ext)] | payload
//!     | [ICV 16 B if TSS] or [CRC32C 4 B if enabled]
//! ```
//! Where the sources disagree, the spec page's **Decisions** table is implemented; every disputed size
//! or position is one constant in [`layout`].

pub mod entropy;
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

/// The sizes and positions the sources disagree on, each defined once (uet-wire.md, "Decisions").
pub mod layout {
    /// RUDI request/response header: prologue, rsvd16, pkt_id (REF and XDP2; WS says 6).
    pub const RUDI_LEN: usize = 8;
    /// ACK_CCX and NACK_CCX congestion state (REF and WS; XDP2 writes 8).
    pub const CCX_STATE_LEN: usize = 16;
    /// CP header with its 4-byte payload word (REF and WS; XDP2 writes 12).
    pub const CP_LEN: usize = 16;
    /// CP control type 9 is NEGOTIATION (REF and XDP2; WS lacks it).
    pub const CP_NEGOTIATION: u8 = 9;
    /// CP flag 0x20 is ISROD (REF; WS counts it reserved).
    pub const CP_FLAG_ISROD: u8 = 0x20;
    /// Rendezvous extension header (REF and WS; XDP2 writes 8).
    pub const RENDEZVOUS_EXT_LEN: usize = 24;
    /// Response-with-data-small (REF and XDP2; WS parses 4).
    pub const RSP_DATA_SMALL_LEN: usize = 12;
    /// Medium request: 32 bytes, bytes 2-3 are `rsvd:2 | request_length:14` (REF; XDP2 writes
    /// message_id there, WS mis-parses).
    pub const MEDIUM_REQUEST_LEN: usize = 32;
    /// Atomic extension `sem_ctl`: REF's flag bits in the low bits (XDP2 uses the MSBs).
    pub const SEM_CTL_CACHEABLE: u8 = 0x01;
    /// See [`SEM_CTL_CACHEABLE`].
    pub const SEM_CTL_CPU_COHERENT: u8 = 0x02;
    /// ACK flag 0x40 (ref-prov's EPSN) is reserved in 1.0: never sent, carried unchanged on receive.
    pub const ACK_FLAG_RESERVED_EPSN: u8 = 0x40;
    /// Optional CRC trailer: CRC32C (Castagnoli) over PDS header through payload, 4 bytes, sent
    /// big-endian (no source gives the byte order; network order chosen).
    pub const CRC_LEN: usize = 4;
    /// Computes the CRC trailer value.
    pub fn crc32c(data: &[u8]) -> u32 {
        static CASTAGNOLI: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
        CASTAGNOLI.checksum(data)
    }
}
