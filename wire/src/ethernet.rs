//! Ethernet II framing (IEEE 802.3 with an EtherType), with up to two 802.1Q/802.1ad tags.

pub mod ethertype;

use core::fmt;

use crate::bytes::{out, read_u16, write_u16};
use crate::vlan::{self, VlanTag};
use crate::{Error, Result};

/// Length of the untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// How many stacked VLAN tags a frame may carry.
pub const MAX_VLAN_TAGS: usize = 2;

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

fixed_header_view!(
    /// A read/write view of an untagged Ethernet II header and what follows it.
    Frame,
    HEADER_LEN,
    "Ethernet header"
);

impl<T: AsRef<[u8]>> Frame<T> {
    /// Destination MAC address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[0..6]);
        EthernetAddress(a)
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[6..12]);
        EthernetAddress(a)
    }

    /// The EtherType (or VLAN TPID) at offset 12.
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 12)
    }

    /// Everything after the 14-byte header (VLAN tags included, if any).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }

    /// Sets the EtherType (or VLAN TPID) at offset 12.
    pub fn set_ethertype(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), 12, v);
    }
}

/// An Ethernet II header with its VLAN tags, outermost tag first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// VLAN tags in wire order; a `None` may only follow `None`s.
    pub vlan_tags: [Option<VlanTag>; MAX_VLAN_TAGS],
    /// The EtherType of the payload (after all tags).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses the header and tags; returns the repr and the offset of the payload.
    pub fn parse(buf: &[u8]) -> Result<(EthernetRepr, usize)> {
        let frame = Frame::new_checked(buf)?;
        let mut vlan_tags = [None; MAX_VLAN_TAGS];
        let mut ethertype = frame.ethertype();
        let mut offset = HEADER_LEN;
        let mut n = 0;
        while vlan::is_tpid(ethertype) {
            if n == MAX_VLAN_TAGS {
                return Err(Error::Unsupported("more than two VLAN tags"));
            }
            let tag = vlan::Tag::new_checked(&buf[offset..])?;
            vlan_tags[n] = Some(VlanTag { tpid: ethertype, tci: tag.tci() });
            ethertype = tag.ethertype();
            offset += vlan::TAG_LEN;
            n += 1;
        }
        let repr =
            EthernetRepr { dst_addr: frame.dst_addr(), src_addr: frame.src_addr(), vlan_tags, ethertype };
        Ok((repr, offset))
    }

    /// The tags actually present, outermost first.
    pub fn tags(&self) -> impl Iterator<Item = &VlanTag> {
        self.vlan_tags.iter().map_while(Option::as_ref)
    }

    /// Header length including tags.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + vlan::TAG_LEN * self.tags().count()
    }

    /// Writes the header and tags at the start of `buf`; returns the payload offset.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let buf = out(buf, len)?;
        if self.vlan_tags[0].is_none() && self.vlan_tags[1].is_some() {
            return Err(Error::Inconsistent("VLAN tag after an empty slot"));
        }
        let mut frame = Frame::new_unchecked(&mut buf[..]);
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        // Each TPID sits where the previous header's EtherType goes; the real EtherType goes last.
        let mut type_at = 12;
        for tag in self.tags() {
            write_u16(buf, type_at, tag.tpid);
            write_u16(buf, type_at + 2, tag.tci);
            type_at += vlan::TAG_LEN;
        }
        write_u16(buf, type_at, self.ethertype);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TAGGED: [u8; 22] = [
        1, 2, 3, 4, 5, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x20, 0x05, 0x08,
        0x00,
    ];

    #[test]
    fn parses_qinq() {
        let (r, off) = EthernetRepr::parse(&TAGGED).unwrap();
        assert_eq!(off, 22);
        assert_eq!(r.dst_addr, EthernetAddress([1, 2, 3, 4, 5, 6]));
        assert_eq!(r.vlan_tags[0], Some(VlanTag { tpid: 0x88a8, tci: 100 }));
        assert_eq!(r.vlan_tags[1], Some(VlanTag { tpid: 0x8100, tci: 0x2005 }));
        assert_eq!(r.vlan_tags[1].unwrap().vid(), 5);
        assert_eq!(r.vlan_tags[1].unwrap().pcp(), 1);
        assert_eq!(r.ethertype, ethertype::IPV4);
        let mut out = [0u8; 22];
        assert_eq!(r.emit(&mut out), Ok(22));
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn truncated_everywhere() {
        for n in 0..TAGGED.len() {
            assert!(matches!(EthernetRepr::parse(&TAGGED[..n]), Err(Error::Truncated(_))), "{n}");
        }
    }

    #[test]
    fn three_tags_rejected() {
        let mut f = [0u8; 30];
        for i in 0..3 {
            f[12 + 4 * i..14 + 4 * i].copy_from_slice(&[0x81, 0x00]);
        }
        assert_eq!(EthernetRepr::parse(&f), Err(Error::Unsupported("more than two VLAN tags")));
    }

    #[test]
    fn emit_short_buffer() {
        let (r, _) = EthernetRepr::parse(&TAGGED).unwrap();
        assert_eq!(r.emit(&mut [0u8; 21]), Err(Error::BufferTooSmall));
    }

    pub(crate) fn arb_repr() -> impl Strategy<Value = EthernetRepr> {
        let tag = (prop_oneof![Just(0x8100u16), Just(0x88a8u16)], any::<u16>())
            .prop_map(|(tpid, tci)| VlanTag { tpid, tci });
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            0usize..=2,
            tag.clone(),
            tag,
            any::<u16>().prop_filter("not a TPID", |t| !vlan::is_tpid(*t)),
        )
            .prop_map(|(d, s, n, t0, t1, ethertype)| EthernetRepr {
                dst_addr: EthernetAddress(d),
                src_addr: EthernetAddress(s),
                vlan_tags: [(n > 0).then_some(t0), (n > 1).then_some(t1)],
                ethertype,
            })
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_repr()) {
            let mut buf = [0u8; 22];
            let n = r.emit(&mut buf).unwrap();
            prop_assert_eq!(EthernetRepr::parse(&buf[..n]), Ok((r, n)));
        }
    }
}
