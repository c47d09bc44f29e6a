//! IPv4 header (RFC 791), options kept as an opaque slice so that frames re-emit byte for byte.

use core::net::Ipv4Addr;

use crate::bytes::{need, out, read_u16, read_u32, write_u16};
use crate::checksum;
use crate::{Error, Result};

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;
/// The DF bit in the flags/fragment-offset word.
pub const DONT_FRAGMENT: u16 = 0x4000;
/// The MF bit in the flags/fragment-offset word.
pub const MORE_FRAGMENTS: u16 = 0x2000;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

packet_view!(
    /// A view of an IPv4 packet.
    Packet
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the header, its options and `total_len` bytes are all in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(len, MIN_HEADER_LEN, "IPv4 header")?;
        if self.header_len() < MIN_HEADER_LEN {
            return Err(Error::BadLength("IPv4 IHL below 5"));
        }
        need(len, self.header_len(), "IPv4 options")?;
        if usize::from(self.total_len()) < self.header_len() {
            return Err(Error::BadLength("IPv4 total length below header length"));
        }
        need(len, usize::from(self.total_len()), "IPv4 payload")
    }

    /// Version nibble (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Header length in bytes (IHL x 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x0f) * 4
    }

    /// The TOS byte: DSCP (6 bits) and ECN (2 bits).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Total length of header and payload.
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    /// Flags (3 bits) and fragment offset (13 bits), raw.
    pub fn flags_frag(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 6)
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[8]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[9]
    }

    /// Header checksum.
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 10)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        // One 4-byte load, not four byte loads the address is then stored from a byte at a time
        // (and read back whole: a store-forwarding stall in the receive path).
        Ipv4Addr::from(read_u32(self.buffer.as_ref(), 12))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(read_u32(self.buffer.as_ref(), 16))
    }

    /// True if the header checksum verifies. A field of 0xFFFF is refused even where the one's
    /// complement sum accepts it (the "negative zero" of a header whose checksum is 0x0000): no
    /// RFC 791 sender writes it, and every accepted header then re-emits byte for byte.
    pub fn verify_checksum(&self) -> bool {
        self.checksum() != 0xFFFF
            && checksum::finish(checksum::sum(&self.buffer.as_ref()[..self.header_len()])) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the identification (the header checksum is then stale: [`Packet::fill_checksum`]).
    pub fn set_ident(&mut self, id: u16) {
        write_u16(self.buffer.as_mut(), 4, id);
    }

    /// Computes the header checksum and writes it.
    pub fn fill_checksum(&mut self) {
        let hlen = self.header_len();
        let b = self.buffer.as_mut();
        write_u16(b, 10, 0);
        let c = checksum::finish(checksum::sum(&b[..hlen]));
        write_u16(b, 10, c);
    }
}

impl<'a> Packet<&'a [u8]> {
    /// The option bytes between the fixed header and the payload.
    pub fn options(&self) -> &'a [u8] {
        &self.buffer[MIN_HEADER_LEN..self.header_len()]
    }

    /// The payload: `total_len - header_len` bytes (Ethernet padding after it is excluded).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer[self.header_len()..usize::from(self.total_len())]
    }
}

/// A parsed IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr<'a> {
    /// DSCP and ECN (the TOS byte).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset, raw (see [`DONT_FRAGMENT`]).
    pub flags_frag: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol of the payload.
    pub protocol: u8,
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Raw options (a multiple of 4 bytes, at most 40).
    pub options: &'a [u8],
    /// Length of the payload that follows the header.
    pub payload_len: usize,
}

impl<'a> Ipv4Repr<'a> {
    /// Parses a checked packet; rejects a version other than 4 and a bad header checksum. Inline:
    /// returned through memory, the repr was read back while its stores drained (a stall per
    /// received frame).
    #[inline]
    pub fn parse(packet: &Packet<&'a [u8]>) -> Result<Ipv4Repr<'a>> {
        if packet.version() != 4 {
            return Err(Error::BadVersion("IPv4"));
        }
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum("IPv4 header"));
        }
        Ok(Ipv4Repr {
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            flags_frag: packet.flags_frag(),
            ttl: packet.ttl(),
            protocol: packet.protocol(),
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            options: packet.options(),
            payload_len: packet.payload().len(),
        })
    }

    /// Length of the header with options.
    pub fn buffer_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }

    /// True if this is a fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.flags_frag & (MORE_FRAGMENTS | 0x1fff) != 0
    }

    /// Writes the header (with a correct checksum) at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let hlen = self.buffer_len();
        if self.options.len() % 4 != 0 || self.options.len() > 40 {
            return Err(Error::Inconsistent("IPv4 options must be 0..=40 bytes in 4-byte words"));
        }
        let total = u16::try_from(hlen + self.payload_len)
            .map_err(|_| Error::Inconsistent("IPv4 total length above 65535"))?;
        let b = out(buf, hlen)?;
        b[0] = 0x40 | (hlen / 4) as u8;
        b[1] = self.dscp_ecn;
        write_u16(b, 2, total);
        write_u16(b, 4, self.ident);
        write_u16(b, 6, self.flags_frag);
        b[8] = self.ttl;
        b[9] = self.protocol;
        write_u16(b, 10, 0);
        b[12..16].copy_from_slice(&self.src_addr.octets());
        b[16..20].copy_from_slice(&self.dst_addr.octets());
        b[20..hlen].copy_from_slice(self.options);
        let c = checksum::finish(checksum::sum(b));
        write_u16(b, 10, c);
        Ok(hlen)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// IPv4 header of frame 1 of linlinw5/rdma_write_bw.pcap style traffic (rxe: DF, TTL 64).
    pub(crate) const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0,
        0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn set_ident_then_fill_checksum_verifies() {
        let mut h = with_checksum(HDR);
        h[2..4].copy_from_slice(&20u16.to_be_bytes());
        let mut p = Packet::new_checked(&mut h[..]).unwrap();
        p.set_ident(0xBEEF);
        p.fill_checksum();
        assert_eq!((p.ident(), p.verify_checksum()), (0xBEEF, true));
    }

    fn with_checksum(mut h: [u8; 20]) -> [u8; 20] {
        let c = checksum::finish(checksum::sum(&h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn parse_fields() {
        let mut buf = [0u8; 60];
        buf[..20].copy_from_slice(&with_checksum(HDR));
        let p = Packet::new_checked(&buf[..]).unwrap();
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.flags_frag, DONT_FRAGMENT);
        assert_eq!(r.ttl, 64);
        assert_eq!(r.protocol, PROTO_UDP);
        assert_eq!(r.src_addr, Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(r.payload_len, 40);
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        assert_eq!(out, buf[..20]);
    }

    #[test]
    fn negative_zero_checksum_is_refused() {
        // The fuzz case: a header whose checksum is 0x0000 carrying 0xFFFF instead. Find one by
        // adjusting the identification field until the computed checksum is 0.
        let mut h = HDR;
        let id = (0u16..=u16::MAX)
            .find(|&id| {
                h[4..6].copy_from_slice(&id.to_be_bytes());
                checksum::finish(checksum::sum(&h)) == 0
            })
            .expect("some identification makes the checksum 0");
        h[4..6].copy_from_slice(&id.to_be_bytes());
        let mut buf = [0u8; 60];
        buf[..20].copy_from_slice(&h);
        assert!(Packet::new_checked(&buf[..]).unwrap().verify_checksum(), "0x0000 verifies");
        buf[10..12].copy_from_slice(&[0xFF, 0xFF]);
        assert!(!Packet::new_checked(&buf[..]).unwrap().verify_checksum(), "0xFFFF is refused");
    }

    #[test]
    fn negative() {
        let mut buf = [0u8; 60];
        buf[..20].copy_from_slice(&with_checksum(HDR));
        for n in 0..60 {
            assert!(matches!(Packet::new_checked(&buf[..n]), Err(Error::Truncated(_))), "{n}");
        }
        let mut bad = buf;
        bad[8] = 63; // TTL changed, checksum not updated
        assert_eq!(
            Ipv4Repr::parse(&Packet::new_checked(&bad[..]).unwrap()),
            Err(Error::BadChecksum("IPv4 header"))
        );
        let mut v6 = buf;
        v6[0] = 0x65;
        assert_eq!(Ipv4Repr::parse(&Packet::new_checked(&v6[..]).unwrap()), Err(Error::BadVersion("IPv4")));
        let mut ihl = buf;
        ihl[0] = 0x44;
        assert!(matches!(Packet::new_checked(&ihl[..]), Err(Error::BadLength(_))));
        let mut tot = buf;
        tot[3] = 19;
        assert!(matches!(Packet::new_checked(&tot[..]), Err(Error::BadLength(_))));
    }

    pub(crate) fn arb_repr(protocol: u8) -> impl Strategy<Value = Ipv4Repr<'static>> {
        const OPTS: [u8; 40] = [1; 40];
        (
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            0usize..=10,
        )
            .prop_map(move |(dscp_ecn, ident, flags_frag, ttl, s, d, words)| Ipv4Repr {
                dscp_ecn,
                ident,
                flags_frag,
                ttl,
                protocol,
                src_addr: Ipv4Addr::from(s),
                dst_addr: Ipv4Addr::from(d),
                options: &OPTS[..words * 4],
                payload_len: 0,
            })
    }

    proptest! {
        #[test]
        fn roundtrip(mut r in arb_repr(PROTO_UDP), payload_len in 0usize..64) {
            r.payload_len = payload_len;
            let mut buf = [0u8; 60 + 64];
            let n = r.emit(&mut buf).unwrap();
            let p = Packet::new_checked(&buf[..n + payload_len]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(r));
        }
    }
}
