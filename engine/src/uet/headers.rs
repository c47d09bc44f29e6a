//! The Ethernet, IPv4 and UDP headers a [`UetNode`](super::UetNode) sends to each destination,
//! (one set per DSCP it sends there), built once (the next-hop MAC resolved) and remembered for the [`MAX_HEADERS`] destinations
//! used last: every peer that gets an answer, spoofed or not, would otherwise add one for good.

use std::collections::hash_map::Entry;
use std::net::Ipv4Addr;

use ahash::AHashMap as HashMap;
use wire::UdpTemplate;

/// Destinations whose headers a node remembers; beyond, the one used longest ago is forgotten
/// (and built again, its MAC resolved again, if it is used again).
pub const MAX_HEADERS: usize = 1024;

/// The headers per destination, each with when it was last used (a count of lookups).
#[derive(Debug, Default)]
pub(super) struct HeaderCache {
    map: HashMap<(Ipv4Addr, u8), (UdpTemplate, u64)>,
    clock: u64,
    /// Destinations forgotten to make room.
    pub(super) evicted: u64,
}

impl HeaderCache {
    /// The headers to `dst` (a destination and the TOS byte of its frames): remembered, or made by `build` (`None`: not now, nothing is kept).
    /// By reference: a template copied out per packet was read back at once while its stores
    /// drained.
    pub(super) fn get(
        &mut self,
        dst: (Ipv4Addr, u8),
        build: impl FnOnce() -> Option<UdpTemplate>,
    ) -> Option<&UdpTemplate> {
        self.clock += 1;
        let clock = self.clock;
        // Full: a new destination is built first (an unresolvable one takes no one's place), then
        // the one used longest ago makes room (a scan, on this rare path only).
        if self.map.len() >= MAX_HEADERS && !self.map.contains_key(&dst) {
            let t = build()?;
            let oldest = self.map.iter().min_by_key(|(_, v)| v.1).map(|(&k, _)| k);
            if let Some(k) = oldest {
                self.map.remove(&k);
                self.evicted += 1;
            }
            return Some(&self.map.entry(dst).or_insert((t, clock)).0);
        }
        Some(match self.map.entry(dst) {
            Entry::Occupied(e) => {
                let v = e.into_mut();
                v.1 = clock;
                &v.0
            }
            Entry::Vacant(v) => &v.insert((build()?, clock)).0,
        })
    }

    /// Forgets every destination (the node's ECN or TSS mode changed).
    pub(super) fn clear(&mut self) {
        self.map.clear();
    }

    /// Destinations remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ethernet::{EthernetAddress, ethertype};
    use wire::{EthernetRepr, IpRepr, Ipv4Repr, UdpChecksum, UdpRepr};

    /// Headers towards `dst` (any will do: the cache only keeps them).
    fn template(dst: Ipv4Addr) -> UdpTemplate {
        let eth = EthernetRepr {
            dst_addr: EthernetAddress([4; 6]),
            src_addr: EthernetAddress([2; 6]),
            vlan_tags: [None; 2],
            ethertype: ethertype::IPV4,
        };
        let ip = Ipv4Repr {
            dscp_ecn: 0,
            ident: 0,
            flags_frag: 0x4000,
            ttl: 64,
            protocol: wire::ipv4::PROTO_UDP,
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: dst,
            options: &[],
            payload_len: 0,
        };
        let udp =
            UdpRepr { src_port: 0xC000, dst_port: wire::uet::UDP_PORT, checksum: UdpChecksum::Computed };
        UdpTemplate::new(&eth, &IpRepr::V4(ip), &udp).unwrap()
    }

    #[test]
    fn the_header_cache_is_bounded_and_keeps_the_destinations_used_last() {
        let mut c = HeaderCache::default();
        let keep = Ipv4Addr::new(10, 0, 0, 2);
        let mut built = 0;
        c.get((keep, 0), || Some(template(keep))).unwrap();
        for i in 1..=2 * MAX_HEADERS as u32 {
            let dst = Ipv4Addr::from_bits(0x0B00_0000 + i);
            assert_eq!(c.get((dst, 0), || Some(template(dst))), Some(&template(dst)));
            if i % 100 == 0 {
                c.get((keep, 0), || {
                    built += 1;
                    Some(template(keep))
                });
            }
        }
        assert!(c.len() <= MAX_HEADERS, "{} destinations remembered", c.len());
        assert_eq!(c.evicted, (2 * MAX_HEADERS + 1 - c.len()) as u64);
        assert_eq!(built, 0, "the destination in use was never forgotten");
        // Nothing is kept for a destination that cannot be resolved.
        let gone = Ipv4Addr::new(192, 0, 2, 1);
        assert!(c.get((gone, 0), || None).is_none());
        assert_eq!(c.evicted, (2 * MAX_HEADERS + 1 - c.len()) as u64, "and nothing forgotten for it");
    }
}
