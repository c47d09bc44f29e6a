//! The RoCEv2 invariant CRC (roce-wire.md §1.3).
//!
//! `ICRC = crc32(8 x 0xFF || masked(IP header || UDP header || BTH || ext headers || payload || pad))`,
//! the standard reflected CRC-32 (crc32fast), sent little-endian. Masked to all-ones: IPv4 TOS, TTL and
//! header checksum; IPv6 traffic class, flow label and hop limit; the UDP checksum; BTH byte 4 (FECN,
//! BECN, resv6). Everything else, IPv4 ID and total length included, is covered.

use core::sync::atomic::{AtomicBool, Ordering};

use crate::bytes::{need, out};
use crate::{Error, Result};

/// Whether [`compute`] runs crc32fast's table-driven CRC-32 instead of the implementation it
/// detects (carry-less multiplication, PCLMULQDQ, on x86-64). Both give the same CRC; the table is
/// the faster one where the CPU's carry-less multiplication is emulated (a VM in software
/// emulation: 2.8-3.3 against 4.1-4.6 us per 1,060-byte packet), the detected one everywhere else
/// (73 against 236 ns natively here). See [`use_table_crc`].
static TABLE_CRC: AtomicBool = AtomicBool::new(false);

/// Makes [`compute`] (and so every ICRC check and fill) use the table-driven CRC-32, or the
/// detected implementation (the default), for the whole process. The result is the same either
/// way: only the speed differs. The engine chooses by timing both once (`engine::datapath`).
pub fn use_table_crc(table: bool) {
    TABLE_CRC.store(table, Ordering::Relaxed);
}

/// Whether [`use_table_crc`] chose the table-driven CRC-32.
pub fn table_crc() -> bool {
    TABLE_CRC.load(Ordering::Relaxed)
}

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

    // `internal_new_baseline` is crc32fast's table implementation (public, hidden from its docs:
    // the crate offers no other way to skip its detection).
    let mut h =
        if table_crc() { crc32fast::Hasher::internal_new_baseline(0, 0) } else { crc32fast::Hasher::new() };
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

/// Amends the ICRC of `ip_packet` after the covered bytes at `at..at + new.len()` (offsets in the IP
/// packet) change to `new`, writing them, without another pass over the packet: the CRC is linear,
/// so the change moves it by the CRC of the changed bits followed by as many zeros as bytes follow
/// them. The bytes must be ones the ICRC covers (not TOS, TTL, IPv4 header checksum, UDP checksum
/// or BTH byte 4) and lie before the ICRC. A packet whose ICRC was wrong stays wrong.
pub fn amend(ip_packet: &mut [u8], at: usize, new: &[u8]) -> Result<()> {
    let field_end = at.checked_add(new.len()).ok_or(Error::BadLength("ICRC amend"))?;
    need(ip_packet.len(), field_end + ICRC_LEN, "ICRC-covered packet")?;
    let mut diff = 0u32;
    for (old, &new) in ip_packet[at..field_end].iter_mut().zip(new) {
        diff = feed_byte(diff, *old ^ new);
        *old = new;
    }
    let after = ip_packet.len() - ICRC_LEN - field_end;
    let delta = mul_mod_p(diff, x_pow_8n(after, &X8_POW2));
    let stored = wire_value(ip_packet)? ^ delta;
    let len = ip_packet.len();
    ip_packet[len - ICRC_LEN..].copy_from_slice(&stored.to_le_bytes());
    Ok(())
}

/// [`amend`] for the IPv4 identification of packets of one length, with the work that depends only
/// on the length done once: a sender that gives a run of equal-length packets consecutive IDs (the
/// segments of a UDP GSO send, whose IDs the kernel writes) pays a few XORs per packet instead of
/// a pass of polynomial products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4IdAmend {
    len: usize,
    /// `cols[j]`: how the ICRC moves when bit `j` of the identification flips.
    cols: [u32; 16],
}

impl Ipv4IdAmend {
    /// For IPv4 RoCEv2 packets of `ip_packet_len` bytes (IP header through the ICRC).
    pub fn new(ip_packet_len: usize) -> Result<Ipv4IdAmend> {
        need(ip_packet_len, IPV4_ID.end + ICRC_LEN, "ICRC-covered packet")?;
        let shift = x_pow_8n(ip_packet_len - ICRC_LEN - IPV4_ID.end, &X8_POW2);
        let mut cols = [0u32; 16];
        for (j, c) in cols.iter_mut().enumerate() {
            let [hi, lo] = (1u16 << j).to_be_bytes();
            *c = mul_mod_p(feed_byte(feed_byte(0, hi), lo), shift);
        }
        Ok(Ipv4IdAmend { len: ip_packet_len, cols })
    }

    /// The packet length this amends.
    pub fn packet_len(&self) -> usize {
        self.len
    }

    /// Sets the identification of `ip_packet` (IPv4, of [`Self::packet_len`] bytes) to `id` and
    /// amends its ICRC to match, as [`amend`] would; anything else is left alone (an error).
    pub fn set_id(&self, ip_packet: &mut [u8], id: u16) -> Result<()> {
        if ip_packet.len() != self.len {
            return Err(Error::BadLength("ICRC amend: packet length"));
        }
        if ip_packet[0] >> 4 != 4 {
            return Err(Error::BadVersion("IP"));
        }
        let old = u16::from_be_bytes([ip_packet[IPV4_ID.start], ip_packet[IPV4_ID.start + 1]]);
        let mut flips = old ^ id;
        let mut delta = 0u32;
        while flips != 0 {
            delta ^= self.cols[flips.trailing_zeros() as usize];
            flips &= flips - 1;
        }
        ip_packet[IPV4_ID].copy_from_slice(&id.to_be_bytes());
        let stored = wire_value(ip_packet)? ^ delta;
        let len = ip_packet.len();
        ip_packet[len - ICRC_LEN..].copy_from_slice(&stored.to_le_bytes());
        Ok(())
    }
}

/// [`amend`] for one change of one field (the same bytes before and after, at the same offset) in
/// packets of one length, with the polynomial products done once: a receiver that readdresses every
/// frame of a stream (`RocePort`, a UDP port other than 4791) pays a compare and a few XORs per
/// packet. Linear as the CRC is, the ICRC moves by the same amount for every such packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldAmend {
    len: usize,
    at: usize,
    width: usize,
    old: [u8; 4],
    new: [u8; 4],
    delta: u32,
}

impl FieldAmend {
    /// For packets of `ip_packet_len` bytes (IP header through the ICRC) whose covered bytes at
    /// `at..at + old.len()` change from `old` to `new` (1 to 4 bytes, the same number; the same
    /// rules on which bytes as [`amend`]).
    pub fn new(ip_packet_len: usize, at: usize, old: &[u8], new: &[u8]) -> Result<FieldAmend> {
        let width = old.len();
        if width == 0 || width > 4 || new.len() != width {
            return Err(Error::BadLength("ICRC amend: field width"));
        }
        let field_end = at.checked_add(width).ok_or(Error::BadLength("ICRC amend"))?;
        need(ip_packet_len, field_end + ICRC_LEN, "ICRC-covered packet")?;
        let diff = old.iter().zip(new).fold(0u32, |crc, (o, n)| feed_byte(crc, o ^ n));
        let delta = mul_mod_p(diff, x_pow_8n(ip_packet_len - ICRC_LEN - field_end, &X8_POW2));
        let (mut o, mut n) = ([0u8; 4], [0u8; 4]);
        o[..width].copy_from_slice(old);
        n[..width].copy_from_slice(new);
        Ok(FieldAmend { len: ip_packet_len, at, width, old: o, new: n, delta })
    }

    /// Whether this amends a packet of `ip_packet_len` bytes with the field at `at`.
    pub fn fits(&self, ip_packet_len: usize, at: usize) -> bool {
        self.len == ip_packet_len && self.at == at
    }

    /// Changes the field of `ip_packet` and amends its ICRC, as [`amend`] would; a packet of
    /// another length, or whose field does not hold the old bytes, is left alone (an error).
    pub fn apply(&self, ip_packet: &mut [u8]) -> Result<()> {
        if ip_packet.len() != self.len {
            return Err(Error::BadLength("ICRC amend: packet length"));
        }
        let field = &mut ip_packet[self.at..self.at + self.width];
        if *field != self.old[..self.width] {
            return Err(Error::Inconsistent("ICRC amend: the field does not hold the old bytes"));
        }
        field.copy_from_slice(&self.new[..self.width]);
        let stored = wire_value(ip_packet)? ^ self.delta;
        let len = ip_packet.len();
        ip_packet[len - ICRC_LEN..].copy_from_slice(&stored.to_le_bytes());
        Ok(())
    }
}

/// Where an IPv4 header holds the identification.
const IPV4_ID: core::ops::Range<usize> = 4..6;

/// Checks the ICRC of a whole RoCEv2 IPv4 datagram whatever its IP identification was, and returns
/// the identification that makes it right. For a receiver that cannot see the IP header (a UDP
/// socket) and rebuilds it: everything else the ICRC covers is still checked, in one pass. The
/// packet's own identification field is where the computation starts (any value).
pub fn verify_any_ipv4_id(ip_packet: &[u8]) -> Result<u16> {
    if ip_packet.first().map(|b| b >> 4) != Some(4) {
        return Err(Error::BadVersion("IP"));
    }
    let computed = compute(ip_packet)?;
    let found = wire_value(ip_packet)?;
    let own = u16::from_be_bytes([ip_packet[4], ip_packet[5]]);
    if computed == found {
        return Ok(own);
    }
    // found = computed ^ lin(own ^ id) * x^(8 * after): undo the shift, then read the two bytes
    // back out of the CRC register (the top bytes of the CRC table are all different).
    let after = ip_packet.len() - ICRC_LEN - 6;
    let reg = mul_mod_p(computed ^ found, x_pow_8n(after, &X_INV8_POW2));
    let j = INV_TOP[(reg >> 24) as usize];
    let r1_shifted = reg ^ TABLE[usize::from(j)];
    let b0 = INV_TOP[(r1_shifted >> 16 & 0xFF) as usize];
    let r1 = TABLE[usize::from(b0)];
    let b1 = j ^ (r1 & 0xFF) as u8;
    if r1 >> 8 != r1_shifted {
        return Err(Error::BadIcrc { computed, found });
    }
    Ok(own ^ u16::from_be_bytes([b0, b1]))
}

/// CRC-32's polynomial, bit-reflected: bit 31 is x^0, bit 0 is x^31.
const POLY: u32 = 0xEDB8_8320;

/// The CRC register (no initial value, no final XOR) after `byte` is fed into `crc`.
const fn feed_byte(mut crc: u32, byte: u8) -> u32 {
    crc ^= byte as u32;
    let mut i = 0;
    while i < 8 {
        crc = if crc & 1 != 0 { (crc >> 1) ^ POLY } else { crc >> 1 };
        i += 1;
    }
    crc
}

/// `a * b mod P`, both reflected.
const fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    let mut m = 1u32 << 31;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        m >>= 1;
    }
    p
}

/// `x^-1 * r mod P`: one step of the CRC register run backwards over a zero bit.
const fn div_x(r: u32) -> u32 {
    if r & (1 << 31) != 0 { ((r ^ POLY) << 1) | 1 } else { r << 1 }
}

/// `base^(2^k) mod P` for k in 0..32.
const fn pow2_table(base: u32) -> [u32; 32] {
    let mut t = [0u32; 32];
    t[0] = base;
    let mut k = 1;
    while k < 32 {
        t[k] = mul_mod_p(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
}

/// `x^8` (one zero byte), reflected.
const X8: u32 = 1 << (31 - 8);
/// `x^-8`.
const X_INV8: u32 = {
    let mut r = 1u32 << 31;
    let mut i = 0;
    while i < 8 {
        r = div_x(r);
        i += 1;
    }
    r
};
const X8_POW2: [u32; 32] = pow2_table(X8);
const X_INV8_POW2: [u32; 32] = pow2_table(X_INV8);

/// `x^(8n) mod P` (or `x^(-8n)`), from the table of `x^(±8 * 2^k)`.
fn x_pow_8n(mut n: usize, pow2: &[u32; 32]) -> u32 {
    let mut p = 1u32 << 31;
    let mut k = 0;
    while n != 0 && k < 32 {
        if n & 1 != 0 {
            p = mul_mod_p(pow2[k], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// The CRC table: the register after byte `i` is fed into zero.
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = feed_byte(0, i as u8);
        i += 1;
    }
    t
};
/// `INV_TOP[TABLE[i] >> 24] == i` (CRC-32's table has 256 different top bytes).
const INV_TOP: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[(TABLE[i] >> 24) as usize] = i as u8;
        i += 1;
    }
    t
};

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
    fn the_table_crc_gives_the_same_icrc() {
        let rr = hex(READ_REQ_FRAME);
        let mut p = rr[14..].to_vec();
        p.extend((0..4200u32).map(|i| (i * 131 + 7) as u8));
        for len in [rr.len() - 14, 100, 1060, 2100, 4156] {
            let detected = compute(&p[..len]);
            use_table_crc(true);
            assert!(table_crc());
            let table = compute(&p[..len]);
            use_table_crc(false);
            assert_eq!(table, detected, "{len} bytes");
        }
        assert_eq!(verify(&rr[14..]), Ok(()));
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
    fn the_table_inverts() {
        for i in 0..256 {
            assert_eq!(usize::from(INV_TOP[(TABLE[i] >> 24) as usize]), i);
        }
        assert_eq!(mul_mod_p(X8, X_INV8), 1 << 31);
        assert_eq!(mul_mod_p(x_pow_8n(1000, &X8_POW2), x_pow_8n(1000, &X_INV8_POW2)), 1 << 31);
    }

    #[test]
    fn amend_matches_a_fresh_fill() {
        let mut rr = hex(READ_REQ_FRAME);
        let ip = &mut rr[14..];
        for (at, new) in
            [(4, &[0x12, 0x34][..]), (22, &[0x13, 0x88]), (28 + 5, &[7, 8, 9]), (60 - 5, &[0xAA])]
        {
            amend(ip, at, new).unwrap();
            assert_eq!(&ip[at..at + new.len()], new);
            assert_eq!(verify(ip), Ok(()), "{at}");
        }
        assert!(amend(ip, 60 - 4, &[1]).is_err(), "the ICRC itself");
        assert!(amend(ip, usize::MAX, &[1]).is_err());
    }

    #[test]
    fn id_amend_matches_amend_and_refuses_other_lengths() {
        for pad in [0usize, 1, 17, 1024, 4096] {
            let mut p = std::vec![0x5A; 20 + 8 + 12 + pad + 4];
            p[..20].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            fill(&mut p).unwrap();
            let a = Ipv4IdAmend::new(p.len()).unwrap();
            assert_eq!(a.packet_len(), p.len());
            for id in [0u16, 1, 2, 63, 0x8000, 0xFFFF, 0x1234] {
                let mut q = p.clone();
                amend(&mut q, 4, &id.to_be_bytes()).unwrap();
                a.set_id(&mut p, id).unwrap();
                assert_eq!(p, q, "pad {pad} id {id:#x}");
                assert_eq!(verify(&p), Ok(()));
            }
            let mut v6 = p.clone();
            v6[0] = 0x60;
            assert_eq!(a.set_id(&mut v6, 3), Err(Error::BadVersion("IP")));
            let mut longer = p.clone();
            longer.push(0);
            assert_eq!(a.set_id(&mut longer, 3), Err(Error::BadLength("ICRC amend: packet length")));
        }
        assert!(Ipv4IdAmend::new(IPV4_ID.end + ICRC_LEN - 1).is_err());
    }

    #[test]
    fn field_amend_matches_amend_and_refuses_other_packets() {
        for pad in [0usize, 1, 17, 1024, 4096] {
            let mut p = std::vec![0x5A; 20 + 8 + 12 + pad + 4];
            p[..20].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            p[22..24].copy_from_slice(&5000u16.to_be_bytes());
            fill(&mut p).unwrap();
            // The UDP destination port, the BTH opcode, destination QP and AckReq + PSN.
            for (at, new) in [
                (22usize, &4791u16.to_be_bytes()[..]),
                (28, &[0x64][..]),
                (33, &[0x12, 0x34, 0x56][..]),
                (36, &[0x80, 0x12, 0x34, 0x56][..]),
            ] {
                let old = p[at..at + new.len()].to_vec();
                let a = FieldAmend::new(p.len(), at, &old, new).unwrap();
                assert!(a.fits(p.len(), at) && !a.fits(p.len() + 1, at) && !a.fits(p.len(), at + 1));
                let (mut q, mut r) = (p.clone(), p.clone());
                amend(&mut q, at, new).unwrap();
                a.apply(&mut r).unwrap();
                assert_eq!(r, q, "pad {pad} at {at}");
                assert_eq!(verify(&r), Ok(()));
                // Applied again, the field no longer holds the old bytes.
                assert!(a.apply(&mut r).is_err());
                assert_eq!(r, q);
                let mut longer = p.clone();
                longer.push(0);
                assert_eq!(a.apply(&mut longer), Err(Error::BadLength("ICRC amend: packet length")));
            }
        }
        assert!(FieldAmend::new(100, 22, &[1, 2], &[3]).is_err());
        assert!(FieldAmend::new(100, 22, &[], &[]).is_err());
        assert!(FieldAmend::new(100, 22, &[0; 5], &[1; 5]).is_err());
        assert!(FieldAmend::new(25, 22, &[1, 2], &[3, 4]).is_err());
        assert!(FieldAmend::new(100, usize::MAX, &[1], &[2]).is_err());
    }

    #[test]
    fn any_ipv4_id_is_found_and_nothing_else_passes() {
        let rr = hex(READ_REQ_FRAME);
        let wire_id = u16::from_be_bytes([rr[18], rr[19]]);
        assert_eq!(verify_any_ipv4_id(&rr[14..]), Ok(wire_id));
        // A receiver that rebuilt the header with another ID (0) finds the sender's.
        for rebuilt in [0u16, 1, 0xFFFF, wire_id ^ 0x8000] {
            let mut p = rr[14..].to_vec();
            p[4..6].copy_from_slice(&rebuilt.to_be_bytes());
            assert_eq!(verify_any_ipv4_id(&p), Ok(wire_id), "{rebuilt}");
            for at in [2, 13, 15, 22, 28, 40, p.len() - 1] {
                let mut bad = p.clone();
                bad[at] ^= 0x10;
                assert!(matches!(verify_any_ipv4_id(&bad), Err(Error::BadIcrc { .. })), "{at}");
            }
        }
        let mut v6 = [0u8; 68];
        v6[0] = 0x60;
        assert_eq!(verify_any_ipv4_id(&v6), Err(Error::BadVersion("IP")));
        assert!(verify_any_ipv4_id(&rr[14..30]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn every_id_round_trips(id in proptest::prelude::any::<u16>(), pad in 0usize..5000, seed in proptest::prelude::any::<u8>()) {
            let mut p = std::vec![seed; 20 + 8 + 12 + pad + 4];
            p[..20].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            p[4..6].copy_from_slice(&id.to_be_bytes());
            fill(&mut p).unwrap();
            p[4..6].copy_from_slice(&[0, 0]);
            proptest::prop_assert_eq!(verify_any_ipv4_id(&p), Ok(id));
            p[4..6].copy_from_slice(&id.to_be_bytes());
            let other = id.wrapping_mul(7).wrapping_add(u16::from(seed));
            let mut q = p.clone();
            amend(&mut p, 4, &other.to_be_bytes()).unwrap();
            proptest::prop_assert_eq!(verify(&p), Ok(()));
            Ipv4IdAmend::new(q.len()).unwrap().set_id(&mut q, other).unwrap();
            proptest::prop_assert_eq!(q, p);
        }
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
