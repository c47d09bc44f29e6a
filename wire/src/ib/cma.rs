//! The addressing conventions of rdma_cm (librdmacm, Linux `cma.c`) on top of the IB CM: the
//! IP header at the start of REQ and SIDR_REQ private data, and the service IDs of the IP port
//! spaces (IBTA vol1 annex A11, "RDMA IP CM Service").
//!
//! The header is 36 bytes: byte 0 the CMA version (0x00), byte 1 the IP version in its high nibble
//! (4 or 6, the low nibble reserved), bytes 2..4 the source port (big endian), bytes 4..20 the
//! source address and 20..36 the destination address. An IPv4 address sits in the last 4 bytes of
//! its 16, the first 12 zero. The destination port is the low 16 bits of the service ID.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bytes::{need, out, read_u16, write_u16};
use crate::{Error, Result};

/// Size of the rdma_cm IP header.
pub const CMA_HDR_LEN: usize = 36;
/// The CMA version librdmacm and Linux send.
pub const CMA_VERSION: u8 = 0x00;

/// rdma_cm port spaces (`enum rdma_ucm_port_space`).
pub mod port_space {
    /// TCP-like reliable connections (`RDMA_PS_TCP`).
    pub const TCP: u16 = 0x0106;
    /// UDP-like unreliable datagrams (`RDMA_PS_UDP`).
    pub const UDP: u16 = 0x0111;
    /// Any QP type (`RDMA_PS_IB`).
    pub const IB: u16 = 0x013F;
    /// IPoIB (`RDMA_PS_IPOIB`).
    pub const IPOIB: u16 = 0x0002;
}

/// The rdma_cm IP header of REQ and SIDR_REQ private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmaHdr {
    /// CMA version ([`CMA_VERSION`]); kept as found, not checked.
    pub version: u8,
    /// Source port of the active side.
    pub src_port: u16,
    /// Source address.
    pub src: IpAddr,
    /// Destination address; of the same family as `src`.
    pub dst: IpAddr,
}

fn read_addr(b: &[u8], at: usize, v6: bool) -> IpAddr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    if v6 { IpAddr::V6(Ipv6Addr::from(a)) } else { IpAddr::V4(Ipv4Addr::new(a[12], a[13], a[14], a[15])) }
}

fn write_addr(b: &mut [u8], at: usize, a: IpAddr) {
    let bytes = match a {
        IpAddr::V4(v4) => {
            let mut m = [0u8; 16];
            m[12..].copy_from_slice(&v4.octets());
            m
        }
        IpAddr::V6(v6) => v6.octets(),
    };
    b[at..at + 16].copy_from_slice(&bytes);
}

impl CmaHdr {
    /// Parses the first [`CMA_HDR_LEN`] bytes of `buf` (`Truncated` if shorter). An IP version
    /// other than 4 or 6 is `BadVersion`. The reserved nibble and the 12 bytes before an IPv4
    /// address are ignored.
    pub fn parse(buf: &[u8]) -> Result<CmaHdr> {
        need(buf.len(), CMA_HDR_LEN, "rdma_cm IP header")?;
        let v6 = match buf[1] >> 4 {
            4 => false,
            6 => true,
            _ => return Err(Error::BadVersion("rdma_cm header IP")),
        };
        Ok(CmaHdr {
            version: buf[0],
            src_port: read_u16(buf, 2),
            src: read_addr(buf, 4, v6),
            dst: read_addr(buf, 20, v6),
        })
    }

    /// Writes the header into `buf[..CMA_HDR_LEN]` (reserved bits zero) and returns
    /// [`CMA_HDR_LEN`]. Source and destination of different families are `Inconsistent`; `buf`
    /// shorter than the header is `BufferTooSmall`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let ip_version = match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => return Err(Error::Inconsistent("rdma_cm header source and destination families")),
        };
        let b = out(buf, CMA_HDR_LEN)?;
        b[0] = self.version;
        b[1] = ip_version << 4;
        write_u16(b, 2, self.src_port);
        write_addr(b, 4, self.src);
        write_addr(b, 20, self.dst);
        Ok(CMA_HDR_LEN)
    }
}

/// The service ID under which rdma_cm listens on `port` in `port_space`: `(port_space << 16) |
/// port`. For the IP port spaces (TCP, UDP, IB) this is the IBTA annex A11 form
/// `0x0000_0000_01 | protocol | port`; Linux builds the IPoIB one the same way.
pub fn service_id(port_space: u16, port: u16) -> u64 {
    u64::from(port_space) << 16 | u64::from(port)
}

/// The port space and port of an rdma_cm service ID, or `None` if its upper 32 bits are not zero
/// or its port space is none of [`port_space`].
pub fn split_service_id(id: u64) -> Option<(u16, u16)> {
    if id >> 32 != 0 {
        return None;
    }
    let ps = (id >> 16) as u16;
    match ps {
        port_space::TCP | port_space::UDP | port_space::IB | port_space::IPOIB => Some((ps, id as u16)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;
    use proptest::prelude::*;

    /// The first 36 bytes of the REQ private data in captures/roce/linlinw5/rping.pcap, frame 1
    /// (tshark: IP CM version 0, IP version 4, source port 0xbd69, 10.1.16.62 -> 10.1.16.61).
    const RPING_REQ_HDR: &str =
        concat!("0040bd69", "000000000000000000000000", "0a01103e", "000000000000000000000000", "0a01103d",);

    #[test]
    fn rping_vector() {
        let v = hex(RPING_REQ_HDR);
        let h = CmaHdr::parse(&v).unwrap();
        assert_eq!(
            h,
            CmaHdr {
                version: CMA_VERSION,
                src_port: 0xbd69,
                src: IpAddr::V4(Ipv4Addr::new(10, 1, 16, 62)),
                dst: IpAddr::V4(Ipv4Addr::new(10, 1, 16, 61)),
            }
        );
        let mut o = [0xEEu8; CMA_HDR_LEN + 1];
        assert_eq!(h.emit(&mut o), Ok(CMA_HDR_LEN));
        assert_eq!(o[..CMA_HDR_LEN], v[..]);
        assert_eq!(o[CMA_HDR_LEN], 0xEE);
        for n in 0..CMA_HDR_LEN {
            assert_eq!(CmaHdr::parse(&v[..n]), Err(Error::Truncated("rdma_cm IP header")));
            assert_eq!(h.emit(&mut o[..n]), Err(Error::BufferTooSmall));
        }
    }

    #[test]
    fn errors_and_ignored_bits() {
        let v = hex(RPING_REQ_HDR);
        for ipv in [0u8, 1, 5, 7, 0xF] {
            let mut b = v.clone();
            b[1] = ipv << 4;
            assert_eq!(CmaHdr::parse(&b), Err(Error::BadVersion("rdma_cm header IP")));
        }
        // The reserved nibble and the padding before an IPv4 address are ignored.
        let mut b = v.clone();
        b[1] |= 0x0F;
        b[4] = 0xFF;
        b[20 + 11] = 0x01;
        assert_eq!(CmaHdr::parse(&b), CmaHdr::parse(&v));
        let mixed = CmaHdr {
            version: 0,
            src_port: 1,
            src: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dst: IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        let mut o = [0u8; CMA_HDR_LEN];
        assert!(matches!(mixed.emit(&mut o), Err(Error::Inconsistent(_))));
        let mixed = CmaHdr { src: mixed.dst, dst: mixed.src, ..mixed };
        assert!(matches!(mixed.emit(&mut o), Err(Error::Inconsistent(_))));
    }

    #[test]
    fn service_ids() {
        // rping.pcap frame 1: port 7174 in the TCP port space.
        assert_eq!(service_id(port_space::TCP, 7174), 0x0000_0000_0106_1c06);
        assert_eq!(service_id(port_space::UDP, 1), 0x0000_0000_0111_0001);
        assert_eq!(service_id(port_space::IB, 0xFFFF), 0x0000_0000_013F_FFFF);
        assert_eq!(split_service_id(0x0000_0000_0106_1c06), Some((port_space::TCP, 7174)));
        assert_eq!(split_service_id(0x0000_0001_0106_1c06), None);
        assert_eq!(split_service_id(0x1000_0000_0000_002c), None); // IPoIB-CM style
        assert_eq!(split_service_id(0x0000_0000_0107_0001), None);
    }

    fn addr_pair() -> impl Strategy<Value = (IpAddr, IpAddr)> {
        prop_oneof![
            any::<([u8; 4], [u8; 4])>().prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b))),
            any::<([u8; 16], [u8; 16])>().prop_map(|(a, b)| (IpAddr::from(a), IpAddr::from(b))),
        ]
    }

    proptest! {
        #[test]
        fn roundtrip(version in any::<u8>(), src_port in any::<u16>(), (src, dst) in addr_pair()) {
            let h = CmaHdr { version, src_port, src, dst };
            let mut b = [0xC3u8; CMA_HDR_LEN];
            prop_assert_eq!(h.emit(&mut b), Ok(CMA_HDR_LEN));
            prop_assert_eq!(CmaHdr::parse(&b), Ok(h));
            if src.is_ipv4() {
                prop_assert_eq!(&b[4..16], &[0u8; 12][..]);
                prop_assert_eq!(&b[20..32], &[0u8; 12][..]);
            }
        }

        #[test]
        fn arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..48)) {
            if let Ok(h) = CmaHdr::parse(&b) {
                let mut o = [0u8; CMA_HDR_LEN];
                prop_assert_eq!(h.emit(&mut o), Ok(CMA_HDR_LEN));
                prop_assert_eq!(CmaHdr::parse(&o), Ok(h));
            }
        }

        #[test]
        fn service_id_split(ps in prop_oneof![
            Just(port_space::TCP), Just(port_space::UDP), Just(port_space::IB), Just(port_space::IPOIB)
        ], port in any::<u16>()) {
            prop_assert_eq!(split_service_id(service_id(ps, port)), Some((ps, port)));
        }
    }
}
