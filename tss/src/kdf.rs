//! Key derivation (`../shared/spec/uet-wire.md` §4 "KDF"): NIST SP 800-108 in counter mode with
//! AES-CMAC-256 as the PRF, an 8-bit counter before the fixed input, fixed input
//! `Label ‖ 0x00 ‖ Context ‖ [L]32` (big-endian), L = 352 bits: a 32-byte key then a 12-byte IV mask.

use aes::Aes256;
use cmac::{Cmac, Mac};

/// Output of one derivation: an AES-256 key and the IV mask.
#[derive(Clone, PartialEq, Eq)]
pub struct Derived {
    /// The derived key.
    pub key: [u8; 32],
    /// XORed into the 12-byte IV.
    pub iv_mask: [u8; 12],
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived { .. }")
    }
}

/// Label of the cluster mode (per-source keys).
pub const LABEL_CLUSTER: &[u8] = b"U1";
/// Label of the server/client mode.
pub const LABEL_SERVER: &[u8] = b"U2";

/// AES-CMAC-256 of `msg` under `key` (NIST SP 800-38B).
pub fn cmac(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    let mut m = <Cmac<Aes256> as Mac>::new_from_slice(key).expect("a 32-byte key");
    m.update(msg);
    m.finalize().into_bytes().into()
}

/// SP 800-108 counter mode, counter (8 bits) before the fixed input: fills `out` (at most 255
/// blocks of 16 bytes).
pub fn kbkdf_ctr_cmac(key: &[u8; 32], fixed_input: &[u8], out: &mut [u8]) {
    assert!(out.len() <= 255 * 16, "an 8-bit counter gives at most 255 blocks");
    let mut mac = <Cmac<Aes256> as Mac>::new_from_slice(key).expect("a 32-byte key");
    for (i, chunk) in out.chunks_mut(16).enumerate() {
        mac.update(&[(i + 1) as u8]);
        mac.update(fixed_input);
        let block = mac.finalize_reset().into_bytes();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

/// The UET context for IPv4 or SSI sources: `epoch(2) ‖ rekey(4) ‖ SSI-or-srcIPv4(4)`.
pub fn context_v4(epoch: u16, rekey: u32, source: u32) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[..2].copy_from_slice(&epoch.to_be_bytes());
    c[2..6].copy_from_slice(&rekey.to_be_bytes());
    c[6..].copy_from_slice(&source.to_be_bytes());
    c
}

/// Derives a key and IV mask: `Label ‖ 0x00 ‖ Context ‖ [352]32`.
pub fn derive(key: &[u8; 32], label: &[u8], context: &[u8]) -> Derived {
    let mut fixed = Vec::with_capacity(label.len() + 1 + context.len() + 4);
    fixed.extend_from_slice(label);
    fixed.push(0);
    fixed.extend_from_slice(context);
    fixed.extend_from_slice(&352u32.to_be_bytes());
    let mut out = [0u8; 44];
    kbkdf_ctr_cmac(key, &fixed, &mut out);
    let mut d = Derived { key: [0; 32], iv_mask: [0; 12] };
    d.key.copy_from_slice(&out[..32]);
    d.iv_mask.copy_from_slice(&out[32..]);
    d
}

/// `N` bytes from the system's cryptographic random generator (aws-lc's): nonces and fresh keys.
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    aws_lc_rs::rand::fill(&mut b).expect("the system's random generator works");
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// NIST SP 800-38B, AES-256 examples (as in `cryptography_vectors/CMAC/nist-800-38b-aes256.txt`).
    #[test]
    fn cmac_nist_vectors() {
        let key: [u8; 32] =
            hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4").try_into().unwrap();
        for (msg, mac) in [
            ("", "028962f61b7bf89efc6b551f4667d983"),
            ("6bc1bee22e409f96e93d7e117393172a", "28a7023f452e8f82bd4bf28d8c37c35c"),
            (
                "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411",
                "aaf3d8f1de5640c232f5b169b9c911e6",
            ),
            (
                "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
                "e1992190549f6ed5696a2c056c315410",
            ),
        ] {
            assert_eq!(cmac(&key, &hex(msg)).to_vec(), hex(mac), "message {msg}");
        }
    }

    /// NIST CAVP KBKDF, counter mode, PRF CMAC_AES256, counter before the fixed input, 8-bit
    /// counter (`nist-800-108-KBKDF-CTR.txt`, COUNT 0, 20 and 30: L = 128, 160 and 320 bits).
    #[test]
    fn kbkdf_nist_vectors() {
        for (ki, fixed, ko) in [
            (
                "aeb7201d055f754212b3e497bd0b25789a49e51da9f363df414a0f80e6f4e42c",
                "11ec30761780d4c44acb1f26ca1eb770f87c0e74505e15b7e456b019ce0c38103c4d14afa1de71d340db51410596627512cf199fffa20ef8c5f4841e",
                "2a9e2fe078bd4f5d3076d14d46f39fb2",
            ),
            (
                "cac968a8ffd81c73948bdfb48bf8a29c1378517d3be294df9a8a80724075bdbd",
                "08817bcd560edf810aa004194c817e455fb66bbc3b84fef1d66df2d1cebb3403c24231fa822f130c5d8fe886217122dcab15cb725197bbcbeb8010f5",
                "651c43e113b32026b204119af394301f0cb9831c",
            ),
            (
                "9debd1762a9643e967dbc174f2040e177b8053afb0829189a81fed94f8c365ee",
                "6c4e1e3fdd7f5c97d58bcdda792642cbd271d6968f6a8e368013d88763d0b306c832b7ab46b84d099596972d12220a4e9c81f82d6f5003d18b93c595",
                "2518a44ea347e924b03a7b4c966ec4e4bd76c1456d09096be9387638c2737faeebba4e2b921b19db",
            ),
        ] {
            let key: [u8; 32] = hex(ki).try_into().unwrap();
            let want = hex(ko);
            let mut out = vec![0; want.len()];
            kbkdf_ctr_cmac(&key, &hex(fixed), &mut out);
            assert_eq!(out, want, "KI {ki}");
        }
    }

    #[test]
    fn derive_lays_out_the_fixed_input_and_splits_key_and_mask() {
        let key = [7u8; 32];
        let ctx = context_v4(3, 0x0102_0304, 0x0A00_0001);
        assert_eq!(ctx, [0, 3, 1, 2, 3, 4, 10, 0, 0, 1]);
        let d = derive(&key, LABEL_CLUSTER, &ctx);
        let mut fixed = b"U1\0".to_vec();
        fixed.extend_from_slice(&ctx);
        fixed.extend_from_slice(&[0, 0, 1, 0x60]);
        let mut out = [0u8; 44];
        kbkdf_ctr_cmac(&key, &fixed, &mut out);
        assert_eq!((&out[..32], &out[32..]), (&d.key[..], &d.iv_mask[..]));
        assert_ne!(derive(&key, LABEL_SERVER, &ctx), d, "the label matters");
        assert_ne!(derive(&key, LABEL_CLUSTER, &context_v4(3, 0x0102_0305, 0x0A00_0001)), d, "so does rekey");
    }
}
