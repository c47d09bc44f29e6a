//! The RoCEv2 invariant CRC (roce-wire.md §1.3).
//!
//! `ICRC = crc32(8 x 0xFF || masked(IP header || UDP header || BTH || ext headers || payload || pad))`,
//! the standard reflected CRC-32 (crc32fast), sent little-endian. Masked to all-ones: IPv4 TOS, TTL and
//! header checksum; IPv6 traffic class, flow label and hop limit; the UDP checksum; BTH byte 4 (FECN,
//! BECN, resv6). Everything else, IPv4 ID and total length included, is covered.

use crate::bytes::{need, out};
use crate::{Error, Result};

/// Size of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The masked-LRH prefix of the CRC.
const PREFIX: [u8; 8] = [0xFF; 8];

/// Computes the ICRC of a whole RoCEv2 IP datagram (IP header through the ICRC slot, whose contents
/// are ignored). The IP header length and version come from the datagram itself.
pub fn compute(ip_packet: &[u8]) -> Result<u32> {
    let first = *ip_packet.first().ok_or(Error::Truncated("IP header"))?;
    // The masked prefix, IP, UDP and BTH headers go into one buffer so the CRC runs over them in
    // one pass: [8 x 0xFF | IP header (20-60) | UDP (8) | BTH (12)].
    let mut head = [0u8; 8 + 60 + 8 + 12];
    head[..8].copy_from_slice(&PREFIX);
    let ip_len = match first >> 4 {
        4 => {
            let hlen = usize::from(first & 0x0F) * 4;
            if hlen < 20 {
                return Err(Error::BadLength("IPv4 IHL below 5"));
            }
            need(ip_packet.len(), hlen, "IPv4 header")?;
            let h = &mut head[8..8 + hlen];
            h.copy_from_slice(&ip_packet[..hlen]);
            h[1] = 0xFF; // TOS
            h[8] = 0xFF; // TTL
            h[10] = 0xFF; // header checksum
            h[11] = 0xFF;
            hlen
        }
        6 => {
            need(ip_packet.len(), 40, "IPv6 header")?;
            let h = &mut head[8..48];
            h.copy_from_slice(&ip_packet[..40]);
            h[0] |= 0x0F; // traffic class (low nibble of byte 0, high of byte 1)
            h[1] = 0xFF; // traffic class and flow label
            h[2] = 0xFF;
            h[3] = 0xFF;
            h[7] = 0xFF; // hop limit
            40
        }
        _ => return Err(Error::BadVersion("IP")),
    };
    let bth_at = ip_len + 8;
    need(ip_packet.len(), bth_at + 12 + ICRC_LEN, "ICRC-covered packet")?;
    let end = ip_packet.len() - ICRC_LEN;
    let head_len = 8 + bth_at + 12;
    head[8 + ip_len..head_len].copy_from_slice(&ip_packet[ip_len..bth_at + 12]);
    head[8 + ip_len + 6] = 0xFF; // UDP checksum
    head[8 + ip_len + 7] = 0xFF;
    head[8 + bth_at + 4] = 0xFF; // BTH byte 4: FECN, BECN, resv6

    let mut h = crc32fast::Hasher::new();
    h.update(&head[..head_len]);
    h.update(&ip_packet[bth_at + 12..end]);
    Ok(h.finalize())
}

/// The ICRC stored in the last four bytes of `ip_packet` (little-endian on the wire).
pub fn wire_value(ip_packet: &[u8]) -> Result<u32> {
    need(ip_packet.len(), ICRC_LEN, "ICRC")?;
    let t = &ip_packet[ip_packet.len() - ICRC_LEN..];
    Ok(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
}

/// Checks the ICRC of a whole RoCEv2 IP datagram.
pub fn verify(ip_packet: &[u8]) -> Result<()> {
    let computed = compute(ip_packet)?;
    let found = wire_value(ip_packet)?;
    if computed == found { Ok(()) } else { Err(Error::BadIcrc { computed, found }) }
}

/// Computes the ICRC of a whole RoCEv2 IP datagram and stores it in the last four bytes.
pub fn fill(ip_packet: &mut [u8]) -> Result<()> {
    let crc = compute(ip_packet)?;
    let len = ip_packet.len();
    out(&mut ip_packet[len - ICRC_LEN..], ICRC_LEN)?.copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;

    /// ConnectX-4 Lx CNP from scapy's roce.uts (captures/roce/cx4lx_cnp_scapy.pcap), Ethernet included.
    pub(crate) const CNP_FRAME: &str = "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff40000118000000000000000000000000000000000000000082fd002a";
    /// rxe READ request from PcapPlusPlus (captures/roce/rxe_read_request_pcapplusplus.pcap).
    pub(crate) const READ_REQ_FRAME: &str = "000c29ae1ca4000c2989a2e508004500003cbe10400040118a4bc0a83881c0a83883df9412b7002800000c00ffff000000118054cb6300007fee260fb000000002b80001000008c6154a";

    #[test]
    fn spec_vectors() {
        let cnp = hex(CNP_FRAME);
        assert_eq!(compute(&cnp[14..]), Ok(0x2a00_fd82));
        assert_eq!(&cnp[cnp.len() - 4..], &[0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(verify(&cnp[14..]), Ok(()));
        let rr = hex(READ_REQ_FRAME);
        assert_eq!(verify(&rr[14..]), Ok(()));
        assert_eq!(&rr[rr.len() - 4..], &[0x08, 0xc6, 0x15, 0x4a]);
    }

    #[test]
    fn masked_fields_do_not_count() {
        let mut rr = hex(READ_REQ_FRAME);
        let ip = 14;
        for at in [ip + 1, ip + 8, ip + 10, ip + 11, ip + 26, ip + 27, ip + 28 + 4] {
            rr[at] ^= 0xA5;
        }
        assert_eq!(verify(&rr[14..]), Ok(()));
        rr[ip + 4] ^= 1; // IP ID is covered
        assert!(matches!(verify(&rr[14..]), Err(Error::BadIcrc { .. })));
    }

    #[test]
    fn fill_then_verify_ipv6() {
        let mut p = [0u8; 40 + 8 + 12 + 4 + 4];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&28u16.to_be_bytes());
        p[6] = 17;
        fill(&mut p).unwrap();
        assert_eq!(verify(&p), Ok(()));
        p[3] ^= 0xff; // flow label: masked
        assert_eq!(verify(&p), Ok(()));
        p[40 + 8 + 12] ^= 1; // payload: covered
        assert!(verify(&p).is_err());
    }

    #[test]
    fn short_and_bad_input() {
        let rr = hex(READ_REQ_FRAME);
        for n in 0..(20 + 8 + 12 + 4) {
            assert!(compute(&rr[14..14 + n]).is_err(), "{n}");
        }
        assert_eq!(compute(&[0x50; 64]), Err(Error::BadVersion("IP")));
        assert_eq!(compute(&[0x44; 64]), Err(Error::BadLength("IPv4 IHL below 5")));
    }
}
