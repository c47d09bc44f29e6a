//! The bytes of perf messages: a per-lane pattern, and message `n`'s stamp in its first 8 bytes.

/// Mixed into message stamps so a stamp never starts with an EtherType followed by two zero bytes,
/// which Wireshark's InfiniBand dissector would take for EtherType-encapsulated payload.
const STAMP_KEY: u64 = 0x5A5A_5A5A_5A5A_5A5A;

/// The first 8 bytes of message `n`.
pub(crate) fn stamp(n: u64) -> [u8; 8] {
    (n ^ STAMP_KEY).to_le_bytes()
}

/// The message number a buffer's first 8 bytes name (`u64::MAX ^ key` if it is shorter).
pub(crate) fn unstamp(data: &[u8]) -> u64 {
    u64::from_le_bytes(data.get(..8).and_then(|d| d.try_into().ok()).unwrap_or([0xFF; 8])) ^ STAMP_KEY
}

/// Fills a lane's source ring with its pattern (xorshift from `salt`).
pub(crate) fn fill_pattern(bytes: &mut [u8], salt: u64) {
    let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}
