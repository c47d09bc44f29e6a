//! Issue 10's measures of a sealed (`--tss`) run: the secure domain both sides derive, the AEAD
//! baseline run in slices interleaved with the run, and the floor loop (sealing with no protocol).

use std::time::{Duration, Instant};

use super::message::{check, message, timed};

/// Bytes of the nonce a `--tss` run's key is derived with: each side's random half.
pub const NONCE_LEN: usize = 32;

/// The secure domain of a `--tss` run: cluster key mode, epoch 0, a test key both sides derive
/// from the run's seed and `nonce` (a real deployment gets its keys from the control plane). The
/// seed alone would give every run with it the same key, and each run seals from TSC 0: the
/// same (key, IV) pairs over different plaintexts. Two-process runs make the nonce from a random
/// half of each side exchanged on the TCP control channel, so each run has a key of its own and
/// epoch 0 is fresh for it.
pub fn tss_domain(seed: u64, nonce: &[u8; NONCE_LEN]) -> tss::SecureDomain {
    let mut base = [0u8; 32];
    for (i, b) in base.iter_mut().enumerate() {
        *b = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(i as u32 * 7) >> 3) as u8;
    }
    let key = tss::kdf::derive(&base, b"softrdma perf", nonce).key;
    tss::SecureDomain::new(tss::Config { mode: tss::KeyMode::Cluster, ..tss::Config::default() }, key, 0)
}

/// The TSS baseline of issue 10: packets of the run's payload size sealed and opened with the
/// chosen AEAD in a plain loop on this thread, in slices a run (or the floor loop) takes between
/// its own steps. This machine's single-thread speed wanders by tens of percent from one second to
/// the next; a baseline measured before or after the run, however often repeated, compares two
/// different machines. Interleaved slices of about a megabyte see the speed the run sees, and
/// both sides are then counted the same way: bytes over the time they took.
pub struct AeadBaseline {
    key: tss::aead::SealingKey,
    buf: Vec<u8>,
    tsc: u64,
    /// Bytes sealed and opened so far.
    pub bytes: u64,
    /// Time that took.
    pub elapsed: Duration,
}

impl AeadBaseline {
    /// Bytes a run moves between two slices of its baseline.
    pub const SLICE: u64 = 1 << 20;

    /// A baseline in `packet`-byte packets.
    pub fn new(packet: usize) -> AeadBaseline {
        let key = tss::aead::SealingKey::new(&[0x42; 32], [0; 12]);
        AeadBaseline { key, buf: vec![0x5A; packet.max(1)], tsc: 0, bytes: 0, elapsed: Duration::ZERO }
    }

    /// Seals and opens whole packets until the baseline has covered `total` bytes.
    pub fn catch_up(&mut self, total: u64) {
        let t0 = Instant::now();
        let aad = [0u8; 24];
        while self.bytes < total {
            seal_and_open(&self.key, self.tsc, &aad, &mut self.buf);
            self.tsc += 1;
            self.bytes += self.buf.len() as u64;
        }
        self.elapsed += t0.elapsed();
    }

    /// MB/s over the slices so far.
    pub fn rate(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }

    /// The baseline as a bandwidth row reports it.
    pub(super) fn report(&self) -> crate::perf::baseline::Baseline {
        let packets = self.bytes / self.buf.len() as u64;
        crate::perf::baseline::Baseline {
            bytes: self.bytes,
            packets,
            elapsed: self.elapsed,
            intact: true,
            threads: 1,
        }
    }
}

/// Seals `buf` in place under `tsc`, appends the ICV, opens it again and drops the ICV: `buf` ends
/// as it began (the baseline's unit of work).
fn seal_and_open(key: &tss::aead::SealingKey, tsc: u64, aad: &[u8], buf: &mut Vec<u8>) {
    let tag = key.seal_in_place(1, tsc, aad, buf);
    buf.extend_from_slice(&tag);
    let n = key.open(1, tsc, aad, buf).expect("what was just sealed opens");
    buf.truncate(n);
}

/// What the floor loop ([`tss_floor`]) reached, in MB/s of message bytes.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Over the whole loop, making and checking the messages included.
    pub all: f64,
    /// Over its engine time (without making and checking the messages, as a run's engine rate
    /// counts).
    pub engine: f64,
    /// The AEAD baseline, in slices interleaved with the loop's messages.
    pub baseline: f64,
}

/// The most a TSS write run could reach on this thread: per message what any engine must do with
/// no protocol at all - the message made and checked as the run does, each packet sealed from it
/// into one (cache-hot) frame, opened there, and copied into the target's memory (a receiver
/// cannot open into that memory: what fails to authenticate must never land). The AEAD baseline
/// runs interleaved with it: `engine / baseline` bounds the share of the baseline a run can reach.
pub fn tss_floor(bytes: usize, packet: usize, size: usize) -> Floor {
    let key = tss::aead::SealingKey::new(&[0x42; 32], [0; 12]);
    let (packet, size) = (packet.max(1), size.max(1));
    let icv = tss::aead::ICV_LEN;
    let (mut msg, mut frame, mut dst) = (Vec::new(), vec![0u8; packet + icv], vec![0u8; size]);
    let mut base = AeadBaseline::new(packet);
    let aad = [0u8; 24];
    let start = Instant::now();
    let (mut done, mut tsc, mut i, mut harness) = (0usize, 0u64, 0u64, Duration::ZERO);
    while done < bytes.max(1) {
        timed(&mut harness, || message(i, size, &mut msg));
        for (chunk, out) in msg.chunks(packet).zip(dst.chunks_mut(packet)) {
            let sealed = &mut frame[..chunk.len() + icv];
            assert!(key.seal_scatter(1, tsc, &aad, &mut [], chunk, sealed), "sized for it");
            let n = key.open(1, tsc, &aad, sealed).expect("what was just sealed opens");
            out.copy_from_slice(&sealed[..n]);
            tsc += 1;
        }
        let intact = timed(&mut harness, || check(&dst, size).is_some());
        assert!(intact, "the floor loop delivers intact messages");
        done += size;
        i += 1;
        if done as u64 >= base.bytes + AeadBaseline::SLICE {
            base.catch_up(done as u64);
        }
    }
    base.catch_up(done as u64);
    let wall = start.elapsed().saturating_sub(base.elapsed);
    let rate = |t: Duration| done as f64 / t.as_secs_f64().max(1e-9) / 1e6;
    Floor { all: rate(wall), engine: rate(wall.saturating_sub(harness)), baseline: base.rate() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_with_the_same_seed_and_fresh_nonces_use_different_keys() {
        let seal = |d: &mut tss::SecureDomain| {
            let mut b = b"the same message".to_vec();
            let h = d.seal(0x0A00_0001, &[0; 12], &mut b).unwrap();
            (h, b)
        };
        let (n1, n2) = (tss::kdf::random::<NONCE_LEN>(), tss::kdf::random::<NONCE_LEN>());
        assert_ne!(n1, n2);
        let (h1, c1) = seal(&mut tss_domain(1, &n1));
        let (h2, c2) = seal(&mut tss_domain(1, &n2));
        assert_eq!(h1.tsc, h2.tsc);
        assert_ne!(c1, c2, "two runs of one seed sealed the same bytes under the same TSC");
        // Both sides of one run derive the same key.
        let mut c = c1.clone();
        assert!(tss_domain(1, &n1).open(0x0A00_0001, &[0; 12], &h1, &mut c).is_ok());
    }

    #[test]
    fn the_tss_floor_loop_runs_and_checks_its_messages() {
        // Small sizes: the loop's own check asserts every message arrives intact.
        for f in [tss_floor(300_000, 1000, 3000), tss_floor(10_000, 4096, 7)] {
            assert!(f.all > 0.0 && f.engine >= f.all && f.baseline > 0.0, "{f:?}");
        }
    }
}
