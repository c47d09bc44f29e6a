//! The bytes of UET perf messages (a ramp pattern with the index in the first 8 bytes), their
//! check, and the harness's clock.

use std::time::{Duration, Instant};

use crate::perf::PerfError;

/// The bytes of message `i` (the first 8 carry `i` when they fit; shorter ones are all alike).
pub(super) fn message(i: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    // Under 8 bytes the index does not fit: every such message is message 0's pattern, as `check`
    // expects (it made every sub-8-byte UET message count as an error).
    let d = ramp_start(if size >= 8 { i } else { 0 });
    buf.reserve(size);
    while buf.len() < size {
        let n = (size - buf.len()).min(RAMP_RUN);
        buf.extend_from_slice(&RAMP[d..d + n]);
    }
    if size >= 8 {
        buf[..8].copy_from_slice(&i.to_le_bytes());
    }
}

/// Bytes of a message written or checked at once (a multiple of 256).
const RAMP_RUN: usize = 4096;

/// `RAMP[j] = 131 j mod 256`: byte k of message i is `131 k + 7919 i (mod 256)`, which (131 being
/// odd) is `RAMP[d + k mod 256]` with `d = 7919 i / 131 (mod 256)`, so messages are written and
/// checked [`RAMP_RUN`] bytes at a time by copying and comparing slices of this table.
static RAMP: [u8; 256 + RAMP_RUN] = {
    let mut t = [0u8; 256 + RAMP_RUN];
    let mut j = 0;
    while j < t.len() {
        t[j] = (j as u8).wrapping_mul(131);
        j += 1;
    }
    t
};

/// Where message `i`'s pattern starts in [`RAMP`] (43 is the inverse of 131 modulo 256).
fn ramp_start(i: u64) -> usize {
    usize::from((i.wrapping_mul(7919) as u8).wrapping_mul(43))
}

/// The index a received message claims, if it is intact (0 for messages under 8 bytes).
pub(super) fn check(data: &[u8], size: usize) -> Option<u64> {
    if data.len() != size {
        return None;
    }
    let i = if size >= 8 { u64::from_le_bytes(data[..8].try_into().ok()?) } else { 0 };
    let d = ramp_start(i);
    let skip = if size >= 8 { 8 } else { 0 };
    let intact = data.chunks(RAMP_RUN).enumerate().all(|(n, chunk)| {
        let from = if n == 0 { skip } else { 0 };
        chunk[from..] == RAMP[d + from..d + chunk.len()]
    });
    intact.then_some(i)
}

/// Whether `data` is message `i` intact (any intact message under 8 bytes, which all look alike).
pub(super) fn is_message(data: &[u8], size: usize, i: u64) -> bool {
    check(data, size).is_some_and(|got| got == i || size < 8)
}

/// Runs `f`, adding its wall-clock time to `clock`: the harness's own work (making and checking
/// messages), which the engine-time rates leave out, as the RC runs do (`BwRow::check_time`).
pub(super) fn timed<R>(clock: &mut Duration, f: impl FnOnce() -> R) -> R {
    let t0 = Instant::now();
    let r = f();
    *clock += t0.elapsed();
    r
}

pub(super) fn ses_error(e: ses::Error) -> PerfError {
    match e {
        ses::Error::Busy => PerfError::Stalled("UET send queue full"),
        ses::Error::TooLong => PerfError::Stalled("message too long"),
        ses::Error::Unsupported => PerfError::Stalled("operation not supported on this endpoint"),
        ses::Error::NoPdc => PerfError::Stalled("no PDC"),
        ses::Error::BadOperand => PerfError::Stalled("atomic operand does not fit the datatype"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_the_pattern_and_check_finds_any_changed_byte() {
        let mut m = Vec::new();
        for (i, size) in [(0u64, 3usize), (5, 7), (1, 8), (77, 255), (12345, 1000), (u64::MAX, 70000)] {
            message(i, size, &mut m);
            let pattern = if size >= 8 { i } else { 0 };
            for (k, b) in m.iter().enumerate() {
                let want = if size >= 8 && k < 8 {
                    i.to_le_bytes()[k]
                } else {
                    (k as u64).wrapping_mul(131).wrapping_add(pattern.wrapping_mul(7919)) as u8
                };
                assert_eq!(*b, want, "message {i} byte {k}");
            }
            assert_eq!(check(&m, size), Some(if size >= 8 { i } else { 0 }));
            for k in [0, size / 2, size - 1] {
                m[k] ^= 0x10;
                assert_eq!(check(&m, size).filter(|&got| got == i || size < 8), None, "byte {k} of {size}");
                m[k] ^= 0x10;
            }
            assert_eq!(check(&m[..size - 1], size), None);
        }
    }
}
