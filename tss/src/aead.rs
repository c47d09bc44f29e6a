//! AES-256-GCM with a 16-byte ICV (`../shared/spec/uet-wire.md` §4), through `aws-lc-rs`.
//!
//! Why `aws-lc-rs`: `cargo bench -p benches --bench aead` seals and opens the same packets with
//! RustCrypto's `aes-gcm` 0.10, `ring` 0.17 and `aws-lc-rs` 1 on one thread. On this machine kind
//! (AMD EPYC with AVX-512 VAES) aws-lc-rs sealed and opened a 4 KiB-payload packet (4152 bytes)
//! at 6.2 GB/s, ring at 3.8 GB/s, aes-gcm at 0.62 GB/s: AWS-LC has AVX-512 AES-GCM code where ring
//! 0.17 stops at AVX2, and it takes a length that is not a whole number of blocks in the same
//! assembly pass, where ring finishes the partial block in Rust (one more AES block and GHASH
//! call per packet; a packet's 56 header bytes leave one). ring is ahead below ~256 bytes (ACKs:
//! 64 bytes, 1.05x), a far smaller share of the bytes. The KDF uses RustCrypto's `aes` and `cmac`.
//!
//! The IV (12 bytes) is the 32-bit source identifier (SSI, or the IPv4 source address) followed by
//! the 64-bit TSC, both big-endian, XORed with the KDF's IV mask in the derived-key modes.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// Length of the ICV appended to every sealed packet.
pub const ICV_LEN: usize = wire::uet::tss::ICV_LEN;

/// A key ready to seal and open, with its IV mask (zero in direct mode).
pub struct SealingKey {
    key: LessSafeKey,
    iv_mask: [u8; 12],
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey { .. }")
    }
}

/// The 12-byte IV of a packet: `source ‖ tsc` XOR `mask`.
pub fn iv(source: u32, tsc: u64, mask: &[u8; 12]) -> [u8; 12] {
    // Built as one 8-byte and one 4-byte word: written a byte at a time, the AEAD's first (wider)
    // load of it waited for those stores to drain (a store-forwarding stall that cost as much as
    // the rest of the per-packet sealing code, measured with ring).
    let (m0, m1) = mask.split_at(8);
    let hi = (u64::from(source) << 32 | tsc >> 32) ^ u64::from_be_bytes(m0.try_into().expect("8 bytes"));
    let lo = (tsc as u32) ^ u32::from_be_bytes(m1.try_into().expect("4 bytes"));
    let mut iv = [0u8; 12];
    iv[..8].copy_from_slice(&hi.to_be_bytes());
    iv[8..].copy_from_slice(&lo.to_be_bytes());
    iv
}

impl SealingKey {
    /// A key and its IV mask.
    pub fn new(key: &[u8; 32], iv_mask: [u8; 12]) -> SealingKey {
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte AES-256 key"));
        SealingKey { key, iv_mask }
    }

    /// Encrypts `buf` in place and appends the ICV. The caller guarantees `(source, tsc)` never
    /// repeats under this key (the TSC rules of [`crate::domain`]).
    pub fn seal(&self, source: u32, tsc: u64, aad: &[u8], buf: &mut Vec<u8>) {
        let tag = self.seal_in_place(source, tsc, aad, buf);
        buf.extend_from_slice(&tag);
    }

    /// Encrypts `data` in place and returns the ICV (for a caller that places it).
    pub fn seal_in_place(&self, source: u32, tsc: u64, aad: &[u8], data: &mut [u8]) -> [u8; ICV_LEN] {
        let nonce = Nonce::assume_unique_for_key(iv(source, tsc, &self.iv_mask));
        let tag = self.key.seal_in_place_separate_tag(nonce, Aad::from(aad), data).expect("GCM length limit");
        tag.as_ref().try_into().expect("16-byte tag")
    }

    /// Encrypts `head` in place and `tail` into `tail_out` (then the ICV, `tail.len() + ICV_LEN`
    /// bytes): one AEAD pass over `head ‖ tail`, the same ciphertext and ICV as sealing the two
    /// joined, without first copying `tail` next to `head` (a payload sealed straight from the
    /// message into the frame). False, and nothing written, if `tail_out` has another length.
    pub fn seal_scatter(
        &self,
        source: u32,
        tsc: u64,
        aad: &[u8],
        head: &mut [u8],
        tail: &[u8],
        tail_out: &mut [u8],
    ) -> bool {
        // aws-lc-rs refuses a `tail_out` of another length before writing anything.
        let nonce = Nonce::assume_unique_for_key(iv(source, tsc, &self.iv_mask));
        self.key.seal_in_place_scatter(nonce, Aad::from(aad), head, tail, tail_out).is_ok()
    }

    /// Decrypts `buf` (ciphertext then ICV) in place; the plaintext length, or `None` if the ICV
    /// does not verify (wrong key, tampered ciphertext or AAD, short buffer).
    pub fn open(&self, source: u32, tsc: u64, aad: &[u8], buf: &mut [u8]) -> Option<usize> {
        if buf.len() < ICV_LEN {
            return None;
        }
        let nonce = Nonce::assume_unique_for_key(iv(source, tsc, &self.iv_mask));
        self.key.open_in_place(nonce, Aad::from(aad), buf).ok().map(|p| p.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// NIST CAVP `gcmEncryptExtIV256.rsp` (96-bit IV, 128-bit tag): [PTlen=128, AADlen=128]
    /// Count 0, [PTlen=408, AADlen=160] Count 0, [PTlen=0, AADlen=0] Count 0. The IV is passed
    /// as `source ‖ tsc` with a zero mask.
    #[test]
    fn nist_gcm_256_vectors() {
        for (key, ivh, pt, aad, ct, tag) in [
            (
                "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b",
                "ac93a1a6145299bde902f21a",
                "2d71bcfa914e4ac045b2aa60955fad24",
                "1e0889016f67601c8ebea4943bc23ad6",
                "8995ae2e6df3dbf96fac7b7137bae67f",
                "eca5aa77d51d4a0a14d9c51e1da474ab",
            ),
            (
                "24501ad384e473963d476edcfe08205237acfd49b5b8f33857f8114e863fec7f",
                "9ff18563b978ec281b3f2794",
                "27f348f9cdc0c5bd5e66b1ccb63ad920ff2219d14e8d631b3872265cf117ee86757accb158bd9abb3868fdc0d0b074b5f01b2c",
                "adb5ec720ccf9898500028bf34afccbcaca126ef",
                "eb7cb754c824e8d96f7c6d9b76c7d26fb874ffbf1d65c6f64a698d839b0b06145dae82057ad55994cf59ad7f67c0fa5e85fab8",
                "bc95c532fecc594c36d1550286a7a3f0",
            ),
        ] {
            let k = SealingKey::new(&hex(key).try_into().unwrap(), [0; 12]);
            let ivb = hex(ivh);
            let source = u32::from_be_bytes(ivb[..4].try_into().unwrap());
            let tsc = u64::from_be_bytes(ivb[4..].try_into().unwrap());
            let mut buf = hex(pt);
            k.seal(source, tsc, &hex(aad), &mut buf);
            let mut want = hex(ct);
            want.extend(hex(tag));
            assert_eq!(buf, want, "key {key}");
            let n = k.open(source, tsc, &hex(aad), &mut buf).expect("opens");
            assert_eq!(&buf[..n], &hex(pt)[..]);
        }
    }

    #[test]
    fn tampering_and_masks() {
        let k = SealingKey::new(&[9; 32], [0; 12]);
        let mut buf = b"PDS and SES bytes".to_vec();
        k.seal(1, 2, b"aad", &mut buf);
        let sealed = buf.clone();
        for (what, aad, flip) in [
            ("ciphertext", &b"aad"[..], Some(3)),
            ("ICV", b"aad", Some(sealed.len() - 1)),
            ("AAD", b"aaD", None),
        ] {
            let mut b = sealed.clone();
            if let Some(i) = flip {
                b[i] ^= 1;
            }
            assert_eq!(k.open(1, 2, aad, &mut b), None, "tampered {what}");
        }
        assert_eq!(k.open(1, 3, b"aad", &mut sealed.clone()), None, "another TSC");
        assert_eq!(
            SealingKey::new(&[8; 32], [0; 12]).open(1, 2, b"aad", &mut sealed.clone()),
            None,
            "wrong key"
        );
        assert_eq!(k.open(1, 2, b"aad", &mut [0u8; 5]), None, "shorter than the ICV");
        assert_eq!(iv(0x0102_0304, 5, &[0xFF; 12])[..4], [0xFE, 0xFD, 0xFC, 0xFB]);
    }

    #[test]
    fn a_scatter_seal_into_a_wrongly_sized_tail_writes_nothing() {
        let k = SealingKey::new(&[9; 32], [0; 12]);
        let (mut head, tail) = (*b"headers", *b"payload");
        for n in [0, tail.len(), tail.len() + ICV_LEN - 1, tail.len() + ICV_LEN + 1] {
            let mut out = vec![0xEEu8; n];
            assert!(!k.seal_scatter(1, 2, b"aad", &mut head, &tail, &mut out), "{n} bytes");
            assert_eq!((&head, out.iter().all(|&b| b == 0xEE)), (b"headers", true), "{n} bytes");
        }
        let mut out = [0u8; 7 + ICV_LEN];
        assert!(k.seal_scatter(1, 2, b"aad", &mut head, &tail, &mut out));
    }
}
