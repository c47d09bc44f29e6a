//! IEEE 802.1Q / 802.1ad VLAN tags.

use crate::bytes::read_u16;
use crate::ethernet::ethertype;

/// Bytes a tag adds after the TPID it replaces (TCI + inner EtherType), i.e. the frame grows by 4.
pub const TAG_LEN: usize = 4;

/// True for the TPIDs this codec treats as VLAN tags (0x8100, 0x88A8).
pub fn is_tpid(v: u16) -> bool {
    v == ethertype::VLAN || v == ethertype::QINQ
}

fixed_header_view!(
    /// A view of the 4 bytes after a TPID: TCI and the next EtherType.
    Tag,
    TAG_LEN,
    "VLAN tag"
);

impl<T: AsRef<[u8]>> Tag<T> {
    /// Tag control information: PCP (3 bits), DEI (1), VID (12).
    pub fn tci(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    /// The EtherType (or next TPID) that follows.
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }
}

/// One VLAN tag as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100 or 0x88A8).
    pub tpid: u16,
    /// Tag control information.
    pub tci: u16,
}

impl VlanTag {
    /// VLAN identifier (low 12 bits of the TCI).
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }

    /// Priority code point (top 3 bits of the TCI).
    pub fn pcp(&self) -> u8 {
        (self.tci >> 13) as u8
    }
}
