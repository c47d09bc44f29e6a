//! UDP header (RFC 768).

use crate::bytes::{need, out, read_u16, write_u16};
use crate::checksum;
use crate::{Error, Result};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

packet_view!(
    /// A view of a UDP datagram.
    Packet
);

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks that the header is present and that the length field fits the buffer exactly.
    ///
    /// The buffer must be the IP payload, so the UDP length must equal its length.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        need(len, HEADER_LEN, "UDP header")?;
        let field = usize::from(self.len());
        if field < HEADER_LEN {
            return Err(Error::BadLength("UDP length below 8"));
        }
        need(len, field, "UDP payload")?;
        if field != len {
            return Err(Error::BadLength("UDP length differs from IP payload length"));
        }
        Ok(())
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// Length of header and payload.
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    /// True if the length field is zero (never, once checked).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The checksum field (0 = not computed).
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 6)
    }

    /// Verifies the checksum given the pseudo-header sum; a zero field always passes.
    pub fn verify_checksum(&self, pseudo_sum: u32) -> bool {
        self.checksum() == 0
            || checksum::finish(pseudo_sum + checksum::sum(&self.buffer.as_ref()[..usize::from(self.len())]))
                == 0
    }
}

impl<'a> Packet<&'a [u8]> {
    /// The payload after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer[HEADER_LEN..usize::from(self.len())]
    }
}

/// Whether a datagram carries a checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpChecksum {
    /// The field is 0: what rdma_rxe sends over IPv4 and IPv6 (roce-wire.md §1.4).
    Zero,
    /// The field holds the RFC 768 checksum (0xFFFF when the sum is 0).
    Computed,
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Checksum mode.
    pub checksum: UdpChecksum,
}

impl UdpRepr {
    /// Parses a checked datagram, verifying a non-zero checksum against `pseudo_sum`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>, pseudo_sum: u32) -> Result<UdpRepr> {
        if !packet.verify_checksum(pseudo_sum) {
            return Err(Error::BadChecksum("UDP"));
        }
        let checksum = if packet.checksum() == 0 { UdpChecksum::Zero } else { UdpChecksum::Computed };
        Ok(UdpRepr { src_port: packet.src_port(), dst_port: packet.dst_port(), checksum })
    }

    /// Length of the header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header for `payload_len` bytes of payload with a zero checksum field.
    ///
    /// With [`UdpChecksum::Computed`], call [`fill_checksum`](Self::fill_checksum) once the payload
    /// is in place.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        let len = u16::try_from(HEADER_LEN + payload_len)
            .map_err(|_| Error::Inconsistent("UDP length above 65535"))?;
        let b = out(buf, HEADER_LEN)?;
        write_u16(b, 0, self.src_port);
        write_u16(b, 2, self.dst_port);
        write_u16(b, 4, len);
        write_u16(b, 6, 0);
        Ok(HEADER_LEN)
    }

    /// Computes the checksum over `datagram` (header and payload, as emitted) if this repr asks for one.
    pub fn fill_checksum(&self, datagram: &mut [u8], pseudo_sum: u32) -> Result<()> {
        let b = out(datagram, HEADER_LEN)?;
        write_u16(b, 6, 0);
        if self.checksum == UdpChecksum::Computed {
            let c = match checksum::finish(pseudo_sum + checksum::sum(datagram)) {
                0 => 0xffff,
                c => c,
            };
            write_u16(datagram, 6, c);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use proptest::prelude::*;

    #[test]
    fn checksum_roundtrip_and_negative() {
        let ps = checksum::pseudo_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 17, 12);
        let r = UdpRepr { src_port: 49152, dst_port: 4791, checksum: UdpChecksum::Computed };
        let mut b = [0u8; 12];
        r.emit(&mut b, 4).unwrap();
        b[8..].copy_from_slice(&[1, 2, 3, 4]);
        r.fill_checksum(&mut b, ps).unwrap();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, ps), Ok(r));
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        b[11] ^= 1;
        assert_eq!(UdpRepr::parse(&Packet::new_checked(&b[..]).unwrap(), ps), Err(Error::BadChecksum("UDP")));
        for n in 0..12 {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength("UDP length below 8")));
    }

    proptest! {
        #[test]
        fn roundtrip(src_port in any::<u16>(), dst_port in any::<u16>(), computed in any::<bool>(),
                     payload in proptest::collection::vec(any::<u8>(), 0..32)) {
            let checksum = if computed { UdpChecksum::Computed } else { UdpChecksum::Zero };
            let r = UdpRepr { src_port, dst_port, checksum };
            let mut b = [0u8; 40];
            let n = 8 + payload.len();
            r.emit(&mut b, payload.len()).unwrap();
            b[8..n].copy_from_slice(&payload);
            r.fill_checksum(&mut b[..n], 1234).unwrap();
            prop_assert_eq!(UdpRepr::parse(&Packet::new_checked(&b[..n]).unwrap(), 1234), Ok(r));
        }
    }
}
