//! A whole Ethernet frame: Ethernet (+VLAN) / IPv4 or IPv6 / UDP or UET entropy header / RoCEv2 or UET
//! packet, parsed into one [`FrameRepr`] that re-emits the frame byte for byte (checksums, ICRC and
//! CRC recomputed).

use crate::bytes::{out, read_u16};
use crate::ethernet::{self, EthernetRepr, ethertype};
use crate::header::FixedHeader;
use crate::ib::{RoceRepr, icrc};
use crate::ipv4::{self, Ipv4Repr, PROTO_UDP};
use crate::ipv6::{self, Ipv6Repr};
use crate::ports::ROCEV2_UDP_PORT;
use crate::udp::{self, UdpChecksum, UdpRepr};
use crate::uet::{self, EntropyRepr, UetConfig, UetRepr};
use crate::{Error, Result, checksum};

/// Length of the Ethernet, IPv4 and UDP headers of a frame without VLAN tags or IPv4 options
/// (14 + 20 + 8 = 42 bytes): where the UDP payload of such a frame starts, and the
/// [`UdpTemplate::len`] of an IPv4 flow.
pub const ETH_IPV4_UDP_LEN: usize = ethernet::HEADER_LEN + ipv4::MIN_HEADER_LEN + udp::HEADER_LEN;

/// The IP header of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr<'a> {
    /// IPv4.
    V4(Ipv4Repr<'a>),
    /// IPv6.
    V6(Ipv6Repr),
}

impl IpRepr<'_> {
    /// Header length.
    pub fn buffer_len(&self) -> usize {
        match self {
            IpRepr::V4(r) => r.buffer_len(),
            IpRepr::V6(r) => r.buffer_len(),
        }
    }

    /// The EtherType that carries this header.
    pub fn ethertype(&self) -> u16 {
        match self {
            IpRepr::V4(_) => ethertype::IPV4,
            IpRepr::V6(_) => ethertype::IPV6,
        }
    }

    /// Source address.
    pub fn src_addr(&self) -> core::net::IpAddr {
        match self {
            IpRepr::V4(r) => r.src_addr.into(),
            IpRepr::V6(r) => r.src_addr.into(),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> core::net::IpAddr {
        match self {
            IpRepr::V4(r) => r.dst_addr.into(),
            IpRepr::V6(r) => r.dst_addr.into(),
        }
    }

    /// Pseudo-header sum for a UDP datagram of `len` bytes.
    pub fn udp_pseudo_sum(&self, len: usize) -> u32 {
        match self {
            IpRepr::V4(r) => checksum::pseudo_v4(r.src_addr, r.dst_addr, PROTO_UDP, len as u16),
            IpRepr::V6(r) => checksum::pseudo_v6(r.src_addr, r.dst_addr, PROTO_UDP, len as u32),
        }
    }

    /// Writes the header for `payload_len` bytes of payload.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        match *self {
            IpRepr::V4(r) => Ipv4Repr { payload_len, ..r }.emit(buf),
            IpRepr::V6(r) => Ipv6Repr { payload_len, ..r }.emit(buf),
        }
    }
}

/// What travels inside the IP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Repr<'a> {
    /// RoCEv2: UDP to port 4791 carrying an InfiniBand transport packet.
    Roce {
        /// The UDP header.
        udp: UdpRepr,
        /// The transport packet.
        packet: RoceRepr<'a>,
    },
    /// UET over UDP to port 4793 (the UDP source port carries the entropy).
    UetUdp {
        /// The UDP header.
        udp: UdpRepr,
        /// The UET packet.
        packet: UetRepr<'a>,
    },
    /// Native-IP UET: the entropy header, then the UET packet.
    UetIp {
        /// The entropy header.
        entropy: EntropyRepr,
        /// The UET packet.
        packet: UetRepr<'a>,
    },
}

impl L4Repr<'_> {
    /// Length of the IP payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len()
            + match self {
                L4Repr::Roce { packet, .. } => packet.buffer_len(),
                L4Repr::UetUdp { packet, .. } | L4Repr::UetIp { packet, .. } => packet.buffer_len(),
            }
    }

    /// Length of the UDP or entropy header in front of the transport packet.
    fn header_len(&self) -> usize {
        match self {
            L4Repr::Roce { udp, .. } | L4Repr::UetUdp { udp, .. } => udp.buffer_len(),
            L4Repr::UetIp { .. } => EntropyRepr::LEN,
        }
    }
}

/// The kinds of traffic [`identify`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encapsulation {
    /// RoCEv2 (UDP destination port 4791).
    RoceV2,
    /// UET over UDP (destination port 4793).
    UetUdp,
    /// UET directly over IP (the configured protocol number).
    UetIp,
}

/// Says what a frame is from the fields that identify it only (EtherType after VLAN tags, IP version
/// and protocol, UDP destination port), without validating anything else, so that a damaged frame
/// is still recognised and reported as bad rather than skipped. Native-IP UET is recognised when
/// `config.ip_proto` names its protocol number.
///
/// The UDP header of IPv4 is looked for both after the declared IHL and after a 20-byte header, so
/// that a damaged IHL does not hide the frame.
pub fn identify(frame: &[u8], config: &UetConfig) -> Option<Encapsulation> {
    let u16_at = |at: usize| frame.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    // The Ethernet header is not ICRC-covered; parsing it checks nothing but its length and tags.
    let (ethernet, ip) = EthernetRepr::parse(frame).ok()?;
    let first = *frame.get(ip)?;
    let (protocol, dports) = match ethernet.ethertype {
        ethertype::IPV4 if first >> 4 == 4 => {
            (*frame.get(ip + 9)?, [u16_at(ip + usize::from(first & 0xF) * 4 + 2), u16_at(ip + 20 + 2)])
        }
        ethertype::IPV6 if first >> 4 == 6 => (*frame.get(ip + 6)?, [u16_at(ip + 40 + 2), None]),
        _ => return None,
    };
    if protocol == PROTO_UDP {
        if dports.contains(&Some(ROCEV2_UDP_PORT)) {
            return Some(Encapsulation::RoceV2);
        }
        if dports.contains(&Some(uet::UDP_PORT)) {
            return Some(Encapsulation::UetUdp);
        }
    }
    (Some(protocol) == config.ip_proto).then_some(Encapsulation::UetIp)
}

/// A frame parsed as far as its UDP header ([`FrameRepr::parse_udp`]), for an endpoint that hands
/// the datagram to its own transport parser (and may open it in place: hence a range, not a slice).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UdpFrameRepr<'a> {
    /// Ethernet header and VLAN tags.
    pub ethernet: EthernetRepr,
    /// IP header.
    pub ip: IpRepr<'a>,
    /// UDP header.
    pub udp: UdpRepr,
    /// Where the UDP payload lies in the frame.
    pub payload: core::ops::Range<usize>,
}

/// A flow's Ethernet, IP and UDP headers as bytes, built once, with the lengths and checksums
/// left to patch per packet: a copy of 42 (IPv4) or 62 (IPv6) bytes and a checksum fold instead
/// of building the headers. No VLAN tags or IPv4 options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpTemplate {
    bytes: [u8; 62],
    len: usize,
    v4: bool,
    /// Sum of the IPv4 header words with total length and checksum zero.
    ip_sum: u32,
    /// The UDP pseudo-header sum without the length.
    pseudo: u32,
    checksum: UdpChecksum,
}

impl UdpTemplate {
    /// The template of `ethernet`, `ip` and `udp` (lengths in them are ignored; the UDP checksum
    /// mode is kept).
    pub fn new(ethernet: &EthernetRepr, ip: &IpRepr<'_>, udp: &UdpRepr) -> Result<UdpTemplate> {
        if ethernet.vlan_tags != [None, None] || matches!(ip, IpRepr::V4(r) if !r.options.is_empty()) {
            return Err(Error::Unsupported("a header template has no VLAN tag or IPv4 option"));
        }
        if ethernet.ethertype != ip.ethertype() {
            return Err(Error::Inconsistent("EtherType does not match the IP version"));
        }
        let mut bytes = [0u8; 62];
        let ip_at = ethernet.emit(&mut bytes)?;
        let udp_at = ip_at + ip.emit(&mut bytes[ip_at..], 8)?;
        let len = udp_at + udp.emit(&mut bytes[udp_at..], 0)?;
        let v4 = matches!(ip, IpRepr::V4(_));
        let mut ip_sum = 0;
        if v4 {
            let h = &mut bytes[ip_at..ip_at + 20];
            h[2..4].fill(0);
            h[10..12].fill(0);
            ip_sum = checksum::sum(h);
        }
        Ok(UdpTemplate { bytes, len, v4, ip_sum, pseudo: ip.udp_pseudo_sum(0), checksum: udp.checksum })
    }

    /// Length of the headers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a template holds at least Ethernet, IP and UDP headers.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the headers at the start of `buf` for the `payload_len` bytes already in place after
    /// them, the IPv4 checksum and, in [`UdpChecksum::Computed`] mode, the UDP checksum; returns
    /// the frame's length.
    pub fn write(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        let total = self.len + payload_len;
        let b = out(buf, total)?;
        let udp_len =
            u16::try_from(8 + payload_len).map_err(|_| Error::Inconsistent("UDP length above 65535"))?;
        b[..self.len].copy_from_slice(&self.bytes[..self.len]);
        let ip_at = crate::ethernet::HEADER_LEN;
        if self.v4 {
            let ip_total = 20 + udp_len;
            b[ip_at + 2..ip_at + 4].copy_from_slice(&ip_total.to_be_bytes());
            let c = checksum::finish(self.ip_sum + u32::from(ip_total));
            b[ip_at + 10..ip_at + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            b[ip_at + 4..ip_at + 6].copy_from_slice(&udp_len.to_be_bytes());
        }
        let udp_at = self.len - udp::HEADER_LEN;
        b[udp_at + 4..udp_at + 6].copy_from_slice(&udp_len.to_be_bytes());
        if self.checksum == UdpChecksum::Computed {
            // The pseudo-header counts the UDP length (both IPv4 and IPv6: upper-layer length).
            let pseudo = self.pseudo + u32::from(udp_len);
            let c = match checksum::finish(pseudo + checksum::sum(&b[udp_at..total])) {
                0 => 0xffff,
                c => c,
            };
            b[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
        }
        Ok(total)
    }
}

/// Ethernet and IP of a frame, parsed and checked.
struct IpLayer<'a> {
    ethernet: EthernetRepr,
    ip: IpRepr<'a>,
    /// Offset of the IP header in the frame.
    ip_at: usize,
    /// The IP payload (as long as the IP header says).
    payload: &'a [u8],
    /// Length of the IP datagram.
    len: usize,
    /// IPv4 protocol or IPv6 next header.
    protocol: u8,
}

impl<'a> IpLayer<'a> {
    /// Parses Ethernet and IPv4 (checksum verified, fragments refused) or IPv6. Inline, so the
    /// layer is not returned through memory and read back at once (a stall per frame).
    #[inline]
    fn parse(frame: &'a [u8]) -> Result<IpLayer<'a>> {
        let (ethernet, ip_at) = EthernetRepr::parse(frame)?;
        let ip_buf = &frame[ip_at..];
        let (ip, payload, len, protocol) = match ethernet.ethertype {
            ethertype::IPV4 => {
                let p = ipv4::Packet::new_checked(ip_buf)?;
                let r = Ipv4Repr::parse(&p)?;
                if r.is_fragment() {
                    return Err(Error::Unsupported("IPv4 fragment"));
                }
                (IpRepr::V4(r), p.payload(), usize::from(p.total_len()), r.protocol)
            }
            ethertype::IPV6 => {
                let p = ipv6::Packet::new_checked(ip_buf)?;
                let r = Ipv6Repr::parse(&p)?;
                (IpRepr::V6(r), p.payload(), ipv6::HEADER_LEN + r.payload_len, r.next_header)
            }
            _ => return Err(Error::Unsupported("EtherType other than IPv4/IPv6")),
        };
        Ok(IpLayer { ethernet, ip, ip_at, payload, len, protocol })
    }
}

/// A whole parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameRepr<'a> {
    /// Ethernet header and VLAN tags.
    pub ethernet: EthernetRepr,
    /// IP header.
    pub ip: IpRepr<'a>,
    /// Transport.
    pub l4: L4Repr<'a>,
    /// Bytes after the IP datagram (Ethernet padding), re-emitted as they were.
    pub trailer: &'a [u8],
}

impl<'a> FrameRepr<'a> {
    /// Parses a RoCEv2 or UDP-encapsulated UET frame with the default UET configuration; see
    /// [`FrameRepr::parse_with`].
    pub fn parse(frame: &'a [u8]) -> Result<FrameRepr<'a>> {
        Self::parse_with(frame, &UetConfig::default())
    }

    /// Parses a frame, verifying lengths and the IPv4 and (non-zero) UDP checksums but neither the
    /// ICRC nor the UET CRC; see [`FrameRepr::verify_crc`].
    pub fn parse_with(frame: &'a [u8], config: &UetConfig) -> Result<FrameRepr<'a>> {
        let IpLayer { ethernet, ip, ip_at, payload: ip_payload, len: ip_len, protocol } =
            IpLayer::parse(frame)?;
        let ip_buf = &frame[ip_at..];
        let l4 = if protocol == PROTO_UDP {
            let udp_packet = udp::Packet::new_checked(ip_payload)?;
            let udp = UdpRepr::parse(&udp_packet, ip.udp_pseudo_sum(ip_payload.len()))?;
            match udp.dst_port {
                ROCEV2_UDP_PORT => L4Repr::Roce { udp, packet: RoceRepr::parse(udp_packet.payload())? },
                uet::UDP_PORT => {
                    L4Repr::UetUdp { udp, packet: UetRepr::parse(udp_packet.payload(), config)? }
                }
                _ => return Err(Error::Unsupported("UDP destination port")),
            }
        } else if Some(protocol) == config.ip_proto {
            let entropy = EntropyRepr::parse(ip_payload)?;
            L4Repr::UetIp { entropy, packet: UetRepr::parse(&ip_payload[EntropyRepr::LEN..], config)? }
        } else {
            return Err(Error::Unsupported("IP protocol other than UDP or UET"));
        };
        Ok(FrameRepr { ethernet, ip, l4, trailer: &ip_buf[ip_len..] })
    }

    /// Parses Ethernet, IP and UDP only, with the checks of [`FrameRepr::parse_with`] (lengths,
    /// the IPv4 and non-zero UDP checksums), and says where the UDP payload is: for an endpoint
    /// whose transport parses that payload itself. Inline: returned through memory, its result was
    /// read back in wider pieces than it was written in (a store-forwarding stall per frame).
    #[inline]
    pub fn parse_udp(frame: &'a [u8]) -> Result<UdpFrameRepr<'a>> {
        match Self::parse_udp_plain_v4(frame) {
            Some(r) => Ok(r),
            None => Self::parse_udp_general(frame),
        }
    }

    /// [`parse_udp`](Self::parse_udp) of any frame.
    fn parse_udp_general(frame: &'a [u8]) -> Result<UdpFrameRepr<'a>> {
        let l = IpLayer::parse(frame)?;
        if l.protocol != PROTO_UDP {
            return Err(Error::Unsupported("IP protocol other than UDP"));
        }
        let packet = udp::Packet::new_checked(l.payload)?;
        let udp = UdpRepr::parse(&packet, l.ip.udp_pseudo_sum(l.payload.len()))?;
        let at = l.ip_at + l.ip.buffer_len() + udp.buffer_len();
        let payload = at..at + packet.payload().len();
        Ok(UdpFrameRepr { ethernet: l.ethernet, ip: l.ip, udp, payload })
    }

    /// [`parse_udp`](Self::parse_udp) of the shape nearly every frame has: untagged Ethernet,
    /// IPv4 without options and not a fragment, UDP. The shape is recognised on fixed offsets;
    /// the headers then go through the same parsers as every frame (`EthernetRepr`, `Ipv4Repr`
    /// with its checksum, `UdpRepr` with the pseudo-header), skipping only the general path's
    /// VLAN, IPv6 and option handling. `None` for any other shape and for any frame a check
    /// refuses, which the general parser then parses (and explains): so it returns nothing the
    /// general parser would not (proptest `the_plain_ipv4_path_agrees_with_the_general_one`).
    #[inline]
    fn parse_udp_plain_v4(frame: &'a [u8]) -> Option<UdpFrameRepr<'a>> {
        const IP: usize = 14;
        const L4: usize = IP + ipv4::MIN_HEADER_LEN;
        const PAYLOAD: usize = L4 + udp::HEADER_LEN;
        let h: &[u8; PAYLOAD] = frame.get(..PAYLOAD)?.try_into().ok()?;
        let ip_total = usize::from(read_u16(h, IP + 2));
        let udp_len = ip_total.checked_sub(L4 - IP)?;
        let plain = read_u16(h, 12) == ethertype::IPV4
            && h[IP] == 0x45
            && udp_len >= udp::HEADER_LEN
            && usize::from(read_u16(h, L4 + 4)) == udp_len;
        if !plain {
            return None;
        }
        let (ethernet, _) = EthernetRepr::parse(h).ok()?;
        let ip_packet = ipv4::Packet::new_unchecked(frame.get(IP..IP + ip_total)?);
        let ip = Ipv4Repr::parse(&ip_packet).ok()?;
        if ip.protocol != PROTO_UDP || ip.is_fragment() {
            return None;
        }
        let udp_packet = udp::Packet::new_unchecked(&frame[L4..IP + ip_total]);
        let udp = UdpRepr::parse(&udp_packet, IpRepr::V4(ip).udp_pseudo_sum(udp_len)).ok()?;
        Some(UdpFrameRepr { ethernet, ip: IpRepr::V4(ip), udp, payload: PAYLOAD..IP + ip_total })
    }

    /// Parses a frame and verifies its ICRC (RoCEv2) or CRC trailer (UET with CRC).
    pub fn parse_verified(frame: &'a [u8], config: &UetConfig) -> Result<FrameRepr<'a>> {
        let r = Self::parse_with(frame, config)?;
        r.verify_crc(frame)?;
        Ok(r)
    }

    /// Verifies the ICRC (RoCEv2) or the CRC trailer (UET, when present) of `frame`, the bytes this
    /// repr was parsed from. The datagram is found from the header lengths of the repr, so nothing
    /// is parsed again.
    pub fn verify_crc(&self, frame: &[u8]) -> Result<()> {
        let ip_at = self.ethernet.buffer_len();
        let l4_at = ip_at + self.ip.buffer_len();
        let ip_end = l4_at + self.l4.buffer_len();
        let ip_packet = frame.get(ip_at..ip_end).ok_or(Error::Truncated("IP datagram"))?;
        match &self.l4 {
            L4Repr::Roce { .. } => icrc::verify(ip_packet),
            L4Repr::UetUdp { packet, .. } | L4Repr::UetIp { packet, .. } => {
                packet.verify_crc(&frame[l4_at + self.l4.header_len()..ip_end])
            }
        }
    }

    /// Length of the whole frame.
    pub fn buffer_len(&self) -> usize {
        self.ethernet.buffer_len() + self.ip.buffer_len() + self.l4.buffer_len() + self.trailer.len()
    }

    /// Writes the whole frame, computing the IPv4 checksum, the UDP checksum (if the repr asks
    /// for one), and the ICRC or UET CRC. The IP payload length comes from `l4`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = out(buf, len)?;
        if self.ethernet.ethertype != self.ip.ethertype() {
            return Err(Error::Inconsistent("EtherType does not match the IP version"));
        }
        let ip_at = self.ethernet.emit(b)?;
        let l4_len = self.l4.buffer_len();
        let l4_at = ip_at + self.ip.emit(&mut b[ip_at..], l4_len)?;
        let ip_end = l4_at + l4_len;
        let body = l4_at + self.l4.header_len();
        match &self.l4 {
            L4Repr::Roce { udp, packet } => {
                udp.emit(&mut b[l4_at..], packet.buffer_len())?;
                packet.emit(&mut b[body..])?;
                // The ICRC masks the UDP checksum, and the UDP checksum covers the ICRC.
                icrc::fill(&mut b[ip_at..ip_end])?;
            }
            L4Repr::UetUdp { udp, packet } => {
                udp.emit(&mut b[l4_at..], packet.buffer_len())?;
                packet.emit(&mut b[body..])?;
            }
            L4Repr::UetIp { entropy, packet } => {
                entropy.emit(&mut b[l4_at..])?;
                packet.emit(&mut b[body..])?;
            }
        }
        if let Some(udp) = self.udp() {
            udp.fill_checksum(&mut b[l4_at..ip_end], self.ip.udp_pseudo_sum(l4_len))?;
        }
        b[ip_end..].copy_from_slice(self.trailer);
        Ok(len)
    }

    /// The RoCE transport packet, if this is a RoCEv2 frame.
    pub fn roce(&self) -> Option<&RoceRepr<'a>> {
        match &self.l4 {
            L4Repr::Roce { packet, .. } => Some(packet),
            _ => None,
        }
    }

    /// The UET packet, if this is a UET frame.
    pub fn uet(&self) -> Option<&UetRepr<'a>> {
        match &self.l4 {
            L4Repr::UetUdp { packet, .. } | L4Repr::UetIp { packet, .. } => Some(packet),
            L4Repr::Roce { .. } => None,
        }
    }

    /// The UDP header, if the frame has one.
    pub fn udp(&self) -> Option<&UdpRepr> {
        match &self.l4 {
            L4Repr::Roce { udp, .. } | L4Repr::UetUdp { udp, .. } => Some(udp),
            L4Repr::UetIp { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::EthernetAddress;
    use crate::ib::icrc::tests::{CNP_FRAME, READ_REQ_FRAME};
    use crate::ib::packet::tests::{arb_roce, build, known_opcodes};
    use crate::testutil::hex;
    use crate::udp::UdpChecksum;
    use crate::vlan::VlanTag;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn identify_default(frame: &[u8]) -> Option<Encapsulation> {
        identify(frame, &UetConfig::default())
    }

    #[test]
    fn real_frames_reemit_exactly() {
        for f in [CNP_FRAME, READ_REQ_FRAME] {
            let bytes = hex(f);
            assert_eq!(identify_default(&bytes), Some(Encapsulation::RoceV2));
            let r = FrameRepr::parse_verified(&bytes, &UetConfig::default()).unwrap();
            let mut o = vec![0u8; r.buffer_len()];
            assert_eq!(r.emit(&mut o), Ok(bytes.len()));
            assert_eq!(o, bytes);
        }
        let cnp = hex(CNP_FRAME);
        let r = FrameRepr::parse(&cnp).unwrap();
        let p = r.roce().unwrap();
        assert!(p.bth.becn);
        assert_eq!(p.payload, &[0u8; 16]);
        assert_eq!(r.udp().unwrap().src_port, 0);
    }

    #[test]
    fn truncated_at_every_length() {
        for f in [CNP_FRAME, READ_REQ_FRAME] {
            let bytes = hex(f);
            for n in 0..bytes.len() {
                let e = FrameRepr::parse(&bytes[..n]).unwrap_err();
                assert!(matches!(e, Error::Truncated(_)), "{n}: {e:?}");
            }
        }
    }

    #[test]
    fn bad_icrc_and_lengths() {
        let mut b = hex(READ_REQ_FRAME);
        let n = b.len();
        b[n - 1] ^= 0x40;
        assert!(FrameRepr::parse(&b).is_ok());
        assert!(matches!(FrameRepr::parse_verified(&b, &UetConfig::default()), Err(Error::BadIcrc { .. })));
        let mut b = hex(READ_REQ_FRAME);
        b[14 + 20 + 5] -= 1; // UDP length one short of the IP payload
        assert!(matches!(FrameRepr::parse(&b), Err(Error::BadLength(_))));
        let mut b = hex(READ_REQ_FRAME);
        b[14 + 6] = 0x20; // MF set: a fragment
        let c = checksum::finish(checksum::sum(&{
            let mut h = [0u8; 20];
            h.copy_from_slice(&b[14..34]);
            h[10] = 0;
            h[11] = 0;
            h
        }));
        b[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(FrameRepr::parse(&b), Err(Error::Unsupported("IPv4 fragment")));
    }

    #[test]
    fn identify_ignores_other_traffic() {
        let mut b = hex(READ_REQ_FRAME);
        b[14 + 20 + 3] = 0x35; // UDP port 4661
        assert_eq!(identify_default(&b), None);
        assert_eq!(identify_default(&[0u8; 10]), None);
        let mut arp = hex(READ_REQ_FRAME);
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        assert_eq!(identify_default(&arp), None);
        let mut ihl = hex(READ_REQ_FRAME);
        ihl[14] = 0x46; // damaged IHL: still RoCE by the option-less offset
        assert_eq!(identify_default(&ihl), Some(Encapsulation::RoceV2));
        assert!(FrameRepr::parse(&ihl).is_err());
    }

    /// xdp2_uet_pds.pcap frame 1: UET over UDP 4793 with a computed UDP checksum.
    const UET_FRAME: &str = "aabbccddeeff001122334455080045000054000100004011f743c0a80102c0a801028a6912b90040e01a119012349876543234569abc022b123477abcdef067809abfedcba9876543210fedcba981122334455667788aabbddddeeff001199887766";

    #[test]
    fn uet_sample_frame_reemits_exactly() {
        let bytes = hex(UET_FRAME);
        assert_eq!(identify_default(&bytes), Some(Encapsulation::UetUdp));
        let r = FrameRepr::parse_verified(&bytes, &UetConfig::default()).unwrap();
        assert_eq!(r.udp().unwrap().checksum, UdpChecksum::Computed);
        assert!(r.uet().unwrap().pds().is_some() && r.roce().is_none());
        let mut o = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut o), Ok(bytes.len()));
        assert_eq!(o, bytes);
    }

    #[test]
    fn a_template_writes_the_sample_frame_and_refuses_what_it_cannot_hold() {
        let bytes = hex(UET_FRAME);
        let r = FrameRepr::parse(&bytes).unwrap();
        let mut udp = *r.udp().unwrap();
        let t = UdpTemplate::new(&r.ethernet, &r.ip, &udp).unwrap();
        assert_eq!((t.len(), ETH_IPV4_UDP_LEN), (42, 42));
        let mut w = bytes.clone();
        w[..42].fill(0xAA);
        assert_eq!(t.write(&mut w, bytes.len() - 42), Ok(bytes.len()));
        assert_eq!(w, bytes);
        assert_eq!(t.write(&mut w[..50], bytes.len() - 42), Err(Error::BufferTooSmall));
        udp.checksum = UdpChecksum::Zero;
        let z = UdpTemplate::new(&r.ethernet, &r.ip, &udp).unwrap();
        z.write(&mut w, bytes.len() - 42).unwrap();
        assert_eq!((&w[40..42], &w[..40]), (&[0u8, 0][..], &bytes[..40]));
        let mut tagged = r.ethernet;
        tagged.vlan_tags[0] = Some(crate::vlan::VlanTag { tpid: ethertype::VLAN, tci: 5 });
        assert!(UdpTemplate::new(&tagged, &r.ip, &udp).is_err());
    }

    #[test]
    fn native_ip_needs_the_protocol_number() {
        let mut b = hex(UET_FRAME);
        // Turn it into native IP: protocol 253, entropy header instead of the UDP header.
        let entropy_and_packet: Vec<u8> = [&[0x8a, 0x69, 0, 0][..], &b[42..]].concat();
        b.truncate(34);
        b.extend_from_slice(&entropy_and_packet);
        let total = (b.len() - 14) as u16;
        b[16..18].copy_from_slice(&total.to_be_bytes());
        b[23] = uet::DEFAULT_IP_PROTO;
        b[24..26].copy_from_slice(&[0, 0]);
        let c = checksum::finish(checksum::sum(&b[14..34]));
        b[24..26].copy_from_slice(&c.to_be_bytes());
        let cfg = UetConfig { crc: false, ip_proto: Some(uet::DEFAULT_IP_PROTO) };
        assert_eq!(identify_default(&b), None);
        assert_eq!(FrameRepr::parse(&b), Err(Error::Unsupported("IP protocol other than UDP or UET")));
        assert_eq!(identify(&b, &cfg), Some(Encapsulation::UetIp));
        let r = FrameRepr::parse_verified(&b, &cfg).unwrap();
        let L4Repr::UetIp { entropy, .. } = r.l4 else { panic!("native UET expected") };
        assert_eq!(entropy.entropy, 0x8a69);
        let mut o = vec![0u8; r.buffer_len()];
        r.emit(&mut o).unwrap();
        assert_eq!(o, b);
    }

    fn arb_ip() -> impl Strategy<Value = IpRepr<'static>> {
        prop_oneof![
            crate::ipv4::tests::arb_repr(PROTO_UDP).prop_map(|mut r| {
                r.flags_frag &= !(ipv4::MORE_FRAGMENTS | 0x1fff);
                IpRepr::V4(r)
            }),
            crate::ipv6::tests::arb_repr(PROTO_UDP).prop_map(IpRepr::V6),
        ]
    }

    proptest! {
        #[test]
        fn whole_frame_roundtrip(
            ip in arb_ip(),
            vlan in proptest::option::of(any::<u16>()),
            src_port in any::<u16>(),
            computed in any::<bool>(),
            trailer in proptest::collection::vec(any::<u8>(), 0..8),
            (bth, payload, r) in proptest::sample::select(known_opcodes()).prop_flat_map(arb_roce),
        ) {
            let packet = build(bth, &payload, r);
            let checksum = if computed { UdpChecksum::Computed } else { UdpChecksum::Zero };
            let udp = UdpRepr { src_port, dst_port: ROCEV2_UDP_PORT, checksum };
            let ethernet = EthernetRepr {
                dst_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
                src_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
                vlan_tags: [vlan.map(|tci| VlanTag { tpid: ethertype::VLAN, tci }), None],
                ethertype: ip.ethertype(),
            };
            let mut ip = ip;
            match &mut ip {
                IpRepr::V4(r) => r.payload_len = 8 + packet.buffer_len(),
                IpRepr::V6(r) => r.payload_len = 8 + packet.buffer_len(),
            }
            let f = FrameRepr { ethernet, ip, l4: L4Repr::Roce { udp, packet }, trailer: &trailer };
            let mut b = vec![0u8; f.buffer_len()];
            prop_assert_eq!(f.emit(&mut b), Ok(b.len()));
            prop_assert_eq!(identify_default(&b), Some(Encapsulation::RoceV2));
            prop_assert_eq!(FrameRepr::parse_verified(&b, &UetConfig::default()), Ok(f));
        }

        #[test]
        fn whole_uet_frame_roundtrip(
            ip in arb_ip(),
            native in any::<bool>(),
            port in any::<u16>(),
            d in crate::uet::packet::tests::arb_uet(),
        ) {
            let packet = crate::uet::packet::tests::build(&d);
            let cfg = UetConfig { crc: d.1, ip_proto: Some(uet::DEFAULT_IP_PROTO) };
            let (l4, protocol) = if native {
                (L4Repr::UetIp { entropy: EntropyRepr { entropy: port, reserved: 0 }, packet }, uet::DEFAULT_IP_PROTO)
            } else {
                let udp = UdpRepr { src_port: port, dst_port: uet::UDP_PORT, checksum: UdpChecksum::Computed };
                (L4Repr::UetUdp { udp, packet }, PROTO_UDP)
            };
            let mut ip = ip;
            match &mut ip {
                IpRepr::V4(r) => { r.protocol = protocol; r.payload_len = l4.buffer_len() }
                IpRepr::V6(r) => { r.next_header = protocol; r.payload_len = l4.buffer_len() }
            }
            let ethernet = EthernetRepr {
                dst_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
                src_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
                vlan_tags: [None, None],
                ethertype: ip.ethertype(),
            };
            let f = FrameRepr { ethernet, ip, l4, trailer: &[] };
            let mut b = vec![0u8; f.buffer_len()];
            prop_assert_eq!(f.emit(&mut b), Ok(b.len()));
            let want = if native { Encapsulation::UetIp } else { Encapsulation::UetUdp };
            prop_assert_eq!(identify(&b, &cfg), Some(want));
            prop_assert_eq!(FrameRepr::parse_verified(&b, &cfg), Ok(f));
            // A template of the same headers writes the same frame around the same packet.
            if let L4Repr::UetUdp { udp, .. } = f.l4 {
                if let Ok(t) = UdpTemplate::new(&f.ethernet, &f.ip, &udp) {
                    let mut w = b.clone();
                    w[..t.len()].fill(0);
                    prop_assert_eq!(t.write(&mut w, b.len() - t.len()), Ok(b.len()));
                    prop_assert_eq!(&w, &b);
                } else {
                    prop_assert!(matches!(f.ip, IpRepr::V4(r) if !r.options.is_empty()));
                }
            }
            // Stopping at UDP finds the same headers, and the UET packet where parse_with found it.
            let u = FrameRepr::parse_udp(&b);
            if native {
                prop_assert_eq!(u, Err(Error::Unsupported("IP protocol other than UDP")));
            } else {
                let u = u.unwrap();
                prop_assert_eq!((u.ethernet, u.ip, Some(&u.udp)), (f.ethernet, f.ip, f.udp()));
                prop_assert_eq!(UetRepr::parse(&b[u.payload.clone()], &cfg), Ok(packet));
                prop_assert_eq!(u.payload.end, b.len());
            }
        }

        /// The fixed-offset path of `parse_udp` returns only what the general parser returns, and
        /// takes every untagged IPv4 frame without options; frames are damaged at random header
        /// bytes, half the time with the IPv4 checksum made valid again.
        #[test]
        fn the_plain_ipv4_path_agrees_with_the_general_one(
            ip in arb_ip(),
            vlan in proptest::option::of(any::<u16>()),
            computed in any::<bool>(),
            trailer in proptest::collection::vec(any::<u8>(), 0..8),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            damage in proptest::collection::vec((0usize..64, 1u8..), 0..3),
            fix_ip_checksum in any::<bool>(),
        ) {
            let checksum = if computed { UdpChecksum::Computed } else { UdpChecksum::Zero };
            let udp = UdpRepr { src_port: 0xC123, dst_port: uet::UDP_PORT, checksum };
            let ethernet = EthernetRepr {
                dst_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
                src_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
                vlan_tags: [vlan.map(|tci| VlanTag { tpid: ethertype::VLAN, tci }), None],
                ethertype: ip.ethertype(),
            };
            let plain = vlan.is_none() && matches!(ip, IpRepr::V4(r) if r.options.is_empty());
            let mut ip = ip;
            match &mut ip {
                IpRepr::V4(r) => r.payload_len = 8 + payload.len(),
                IpRepr::V6(r) => r.payload_len = 8 + payload.len(),
            }
            let hl = ethernet.buffer_len() + ip.buffer_len();
            let mut b = vec![0u8; hl + 8 + payload.len()];
            ethernet.emit(&mut b).unwrap();
            ip.emit(&mut b[ethernet.buffer_len()..], 8 + payload.len()).unwrap();
            udp.emit(&mut b[hl..], payload.len()).unwrap();
            b[hl + 8..].copy_from_slice(&payload);
            udp.fill_checksum(&mut b[hl..], ip.udp_pseudo_sum(8 + payload.len())).unwrap();
            b.extend_from_slice(&trailer);
            let whole = FrameRepr::parse_udp_general(&b).unwrap();
            prop_assert_eq!(FrameRepr::parse_udp_plain_v4(&b).is_some(), plain);
            prop_assert_eq!(FrameRepr::parse_udp(&b), Ok(whole));
            for (at, x) in damage {
                let at = at % b.len();
                b[at] ^= x;
            }
            if fix_ip_checksum && b.len() >= 34 {
                b[24..26].fill(0);
                let c = checksum::finish(checksum::sum(&b[14..34]));
                b[24..26].copy_from_slice(&c.to_be_bytes());
            }
            if let Some(r) = FrameRepr::parse_udp_plain_v4(&b) {
                prop_assert_eq!(Ok(r), FrameRepr::parse_udp_general(&b));
            }
            prop_assert_eq!(FrameRepr::parse_udp(&b), FrameRepr::parse_udp_general(&b));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = identify_default(&bytes);
            if let Ok(u) = FrameRepr::parse_udp(&bytes) {
                prop_assert!(u.payload.end <= bytes.len());
            }
            if let Ok(r) = FrameRepr::parse(&bytes) {
                let mut o = vec![0u8; r.buffer_len()];
                prop_assert_eq!(r.emit(&mut o), Ok(bytes.len()));
            }
        }
    }
}
