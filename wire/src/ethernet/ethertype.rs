//! EtherType values this codec knows.

/// IPv4.
pub const IPV4: u16 = 0x0800;
/// ARP.
pub const ARP: u16 = 0x0806;
/// IPv6.
pub const IPV6: u16 = 0x86DD;
/// IEEE 802.1Q customer VLAN tag.
pub const VLAN: u16 = 0x8100;
/// IEEE 802.1ad service VLAN tag (QinQ outer tag).
pub const QINQ: u16 = 0x88A8;
