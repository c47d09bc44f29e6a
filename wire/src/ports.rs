//! UDP destination ports of the transports carried over UDP.

/// UDP destination port of RoCEv2 (`ROCE_V2_UDP_DPORT`, roce-wire.md §1.4).
pub const ROCEV2_UDP_PORT: u16 = 4791;
