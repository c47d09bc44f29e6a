//! IPv6 fixed header (RFC 8200 §3). Extension headers are not decoded.

use core::net::Ipv6Addr;

use crate::bytes::{need, out, read_u16, read_u32, write_u16, write_u32};
use crate::{Error, Result};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

packet_view!(
    /// A view of an IPv6 packet.
    Packet
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the fixed header and `payload_len` bytes are in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(len, HEADER_LEN, "IPv6 header")?;
        need(len, HEADER_LEN + usize::from(self.payload_len()), "IPv6 payload")
    }

    /// Version nibble (6 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        ((read_u16(self.buffer.as_ref(), 0) >> 4) & 0xff) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        read_u32(self.buffer.as_ref(), 0) & 0x000f_ffff
    }

    /// Payload length.
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    /// Next header (protocol of the payload).
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[8..24]);
        Ipv6Addr::from(a)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[24..40]);
        Ipv6Addr::from(a)
    }
}

impl<'a> Packet<&'a [u8]> {
    /// The payload (`payload_len` bytes after the fixed header).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

/// A parsed IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Length of the payload.
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Parses a checked packet; rejects a version other than 6.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Ipv6Repr> {
        if packet.version() != 6 {
            return Err(Error::BadVersion("IPv6"));
        }
        Ok(Ipv6Repr {
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
            next_header: packet.next_header(),
            hop_limit: packet.hop_limit(),
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            payload_len: usize::from(packet.payload_len()),
        })
    }

    /// Length of the fixed header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let plen = u16::try_from(self.payload_len)
            .map_err(|_| Error::Inconsistent("IPv6 payload above 65535 (jumbograms unsupported)"))?;
        if self.flow_label > 0x000f_ffff {
            return Err(Error::Inconsistent("IPv6 flow label wider than 20 bits"));
        }
        let b = out(buf, HEADER_LEN)?;
        write_u32(b, 0, (6 << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label);
        write_u16(b, 4, plen);
        b[6] = self.next_header;
        b[7] = self.hop_limit;
        b[8..24].copy_from_slice(&self.src_addr.octets());
        b[24..40].copy_from_slice(&self.dst_addr.octets());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vector() {
        let mut b = [0u8; 48];
        b[..8].copy_from_slice(&[0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 17, 64]);
        b[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        b[39] = 2;
        let p = Packet::new_checked(&b[..]).unwrap();
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(r.traffic_class, 0xb8);
        assert_eq!(r.flow_label, 0x12345);
        assert_eq!(r.next_header, 17);
        assert_eq!(r.hop_limit, 64);
        assert_eq!(r.dst_addr, Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 2));
        let mut o = [0u8; 40];
        r.emit(&mut o).unwrap();
        assert_eq!(o, b[..40]);
        for n in 0..48 {
            assert!(matches!(Packet::new_checked(&b[..n]), Err(Error::Truncated(_))));
        }
        b[0] = 0x4b;
        assert_eq!(Ipv6Repr::parse(&Packet::new_checked(&b[..]).unwrap()), Err(Error::BadVersion("IPv6")));
    }

    pub(crate) fn arb_repr(next_header: u8) -> impl Strategy<Value = Ipv6Repr> {
        (any::<u8>(), 0u32..=0xfffff, any::<u8>(), any::<[u8; 16]>(), any::<[u8; 16]>()).prop_map(
            move |(traffic_class, flow_label, hop_limit, s, d)| Ipv6Repr {
                traffic_class,
                flow_label,
                next_header,
                hop_limit,
                src_addr: Ipv6Addr::from(s),
                dst_addr: Ipv6Addr::from(d),
                payload_len: 0,
            },
        )
    }

    proptest! {
        #[test]
        fn roundtrip(mut r in arb_repr(17), n in 0usize..32) {
            r.payload_len = n;
            let mut buf = [0u8; 72];
            r.emit(&mut buf).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&Packet::new_checked(&buf[..40 + n]).unwrap()), Ok(r));
        }
    }
}
