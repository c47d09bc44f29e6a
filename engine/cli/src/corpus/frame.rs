//! What every generated frame shares: the two endpoints' addresses, the IP header and the emitter.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::ethernet::EthernetAddress;
use wire::{EthernetRepr, FrameRepr, IpRepr, Ipv4Repr, Ipv6Repr, L4Repr};

/// What a generated RoCE frame is, for tests that compare a dissector's reading with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The frame bytes.
    pub bytes: Vec<u8>,
    /// BTH opcode.
    pub opcode: u8,
    /// BTH destination QP.
    pub dest_qp: u32,
    /// BTH PSN.
    pub psn: u32,
}

/// Locally administered MAC addresses of the two generated endpoints.
const MAC_A: EthernetAddress = EthernetAddress([0x02, 0x53, 0x52, 0x00, 0x00, 0x01]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0x53, 0x52, 0x00, 0x00, 0x02]);

/// The IP header of generated frames: 10.77.0.1 -> 10.77.0.2 (DF, TTL 64) or fd00:5352::1 -> ::2.
pub(super) fn ip_header(ipv6: bool, protocol: u8) -> IpRepr<'static> {
    if ipv6 {
        IpRepr::V6(Ipv6Repr {
            traffic_class: 0,
            flow_label: 0,
            next_header: protocol,
            hop_limit: 64,
            src_addr: Ipv6Addr::new(0xfd00, 0x5352, 0, 0, 0, 0, 0, 1),
            dst_addr: Ipv6Addr::new(0xfd00, 0x5352, 0, 0, 0, 0, 0, 2),
            payload_len: 0,
        })
    } else {
        IpRepr::V4(Ipv4Repr {
            dscp_ecn: 0,
            ident: 0,
            flags_frag: wire::ipv4::DONT_FRAGMENT,
            ttl: 64,
            protocol,
            src_addr: Ipv4Addr::new(10, 77, 0, 1),
            dst_addr: Ipv4Addr::new(10, 77, 0, 2),
            options: &[],
            payload_len: 0,
        })
    }
}

/// Emits a frame from MAC_A to MAC_B (lengths, checksums and ICRC/CRC computed by the codec).
pub(super) fn emit_frame(ip: IpRepr<'_>, l4: L4Repr<'_>) -> Vec<u8> {
    let ethernet =
        EthernetRepr { dst_addr: MAC_B, src_addr: MAC_A, vlan_tags: [None; 2], ethertype: ip.ethertype() };
    let f = FrameRepr { ethernet, ip, l4, trailer: &[] };
    let mut bytes = vec![0u8; f.buffer_len()];
    f.emit(&mut bytes).expect("generated frames are consistent by construction");
    bytes
}
