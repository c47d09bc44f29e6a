//! Issue 10: which AEAD for TSS. AES-256-GCM seal + open of UET-sized packets (an ACK, an Ethernet
//! MTU, the PDS/SES bytes of a 4 KiB payload packet; 12+16-byte AAD) with RustCrypto's `aes-gcm`,
//! `ring` and `aws-lc-rs`, on one thread, the same bytes, in one run; prints MB/s of each and their
//! ratios to `aes-gcm`. `tss` uses the fastest at 4 KiB. Then `tss`'s own scatter seal of a data
//! packet, by where its in-place piece ends.
//!
//! `cargo bench -p benches --bench aead`
//!
//! Measured on the development machine (AMD EPYC, Zen 4): at a 4 KiB-payload packet (4152 bytes)
//! aws-lc-rs ran 1.6x ring and 10x aes-gcm, with AVX-512 VAES code ring 0.17 lacks and the partial last
//! block in the same assembly pass; ring is slightly ahead below ~256 bytes, ACK-sized packets that
//! carry a small share of the bytes.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aes_gcm::aead::{AeadInPlace, KeyInit};

const SIZES: [usize; 4] = [64, 256, 1500, 4152];

fn run(name: &str, size: usize, mut f: impl FnMut(u64)) -> f64 {
    // Warm up, then as many rounds as fit in 1 s.
    for i in 0..1000 {
        f(i);
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        for _ in 0..256 {
            f(n);
            n += 1;
        }
    }
    let mbs = (n as f64 * size as f64) / start.elapsed().as_secs_f64() / 1e6;
    println!("  {name:<22} {size:>5} B  {mbs:>9.1} MB/s (seal + open)");
    mbs
}

/// Seals `buf` in place, appends the tag, opens it and drops the tag again, with the `aead`
/// module of a ring-shaped crate (`ring`, `aws-lc-rs`: the same API) and its `LessSafeKey`.
macro_rules! seal_open {
    ($aead:path, $key:expr, $aad:expr, $buf:expr, $i:expr) => {{
        use $aead as m;
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&$i.to_be_bytes());
        let tag = $key
            .seal_in_place_separate_tag(m::Nonce::assume_unique_for_key(nonce), m::Aad::from($aad), $buf)
            .expect("seal");
        $buf.extend_from_slice(tag.as_ref());
        let n = m::Nonce::assume_unique_for_key(nonce);
        let plain = $key.open_in_place(n, m::Aad::from($aad), $buf).expect("open").len();
        $buf.truncate(plain);
        black_box(&$buf);
    }};
}

fn main() {
    let key = [0x42u8; 32];
    let aad = [0x11u8; 28];
    let rc = aes_gcm::Aes256Gcm::new_from_slice(&key).expect("32-byte key");
    let ring_key = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &key).expect("key"),
    );
    let lc_key = aws_lc_rs::aead::LessSafeKey::new(
        aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &key).expect("key"),
    );
    println!("AES-256-GCM, one thread");
    for size in SIZES {
        let mut buf = vec![0x5Au8; size];
        let a = run("RustCrypto aes-gcm", size, |i| {
            let mut nonce = [0u8; 12];
            nonce[4..].copy_from_slice(&i.to_be_bytes());
            let n = aes_gcm::Nonce::from_slice(&nonce);
            let tag = rc.encrypt_in_place_detached(n, &aad, &mut buf).expect("seal");
            rc.decrypt_in_place_detached(n, &aad, &mut buf, &tag).expect("open");
            black_box(&buf);
        });
        let mut buf = vec![0x5Au8; size];
        let b = run("ring", size, |i| seal_open!(ring::aead, ring_key, &aad, &mut buf, i));
        let c = run("aws-lc-rs", size, |i| seal_open!(aws_lc_rs::aead, lc_key, &aad, &mut buf, i));
        println!("  against aes-gcm: ring {:.2}x, aws-lc-rs {:.2}x", b / a, c / a);
    }
    // How `tss` seals a data packet: the PDS+SES headers (56 bytes) in place and the payload
    // scattered from the message, one AEAD pass. Where the in-place piece ends matters: inside a
    // 16-byte block the pass finishes that block a byte at a time (so `UetNode::send` moves the
    // payload's first bytes in with the headers); a partial last block costs too.
    println!("tss seal_scatter + open: in-place bytes + scattered bytes");
    let k = tss::aead::SealingKey::new(&key, [0; 12]);
    let msg = vec![0x5Au8; 4160];
    let mut frame = vec![0u8; 4160 + tss::aead::ICV_LEN];
    let cases = [
        ("0 + 4096", 0, 4096),
        ("0 + 4152", 0, 4152),
        ("0 + 4160", 0, 4160),
        ("56 + 4096", 56, 4096),
        ("64 + 4088", 64, 4088),
    ];
    for (name, head, tail) in cases {
        run(name, head + tail, |i| {
            let (h, rest) = frame.split_at_mut(head);
            assert!(k.seal_scatter(1, i, &aad, h, &msg[..tail], &mut rest[..tail + tss::aead::ICV_LEN]));
            k.open(1, i, &aad, &mut frame[..head + tail + tss::aead::ICV_LEN]).expect("open");
            black_box(&frame);
        });
    }
}
