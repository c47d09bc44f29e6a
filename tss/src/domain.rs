//! A secure domain (`../shared/spec/uet-wire.md` §4): two keys selected by AN (make-before-break
//! rotation: install the new key, switch transmission to it, retire the old one later), the key
//! mode (direct, cluster, server/client), the 64-bit TSC (`epoch:16 | counter:48`) that never
//! repeats, implicit rekeying from counter bits, epoch-based rejection, a per-source replay window,
//! and an authentication-failure counter that latches the domain into dropping everything until
//! management lifts it ([`SecureDomain::unlatch`]).
//!
//! Sans-IO: the caller hands in packets and the AAD prefix (the 12 bytes before the TSS header:
//! source and destination addresses and, over UDP, the ports; see the Decisions table) and gets
//! sealed or opened bytes and counters back.

use std::sync::Arc;

use ahash::AHashMap as HashMap;
use wire::uet::tss::TssRepr;

use crate::aead::SealingKey;
use crate::kdf::{LABEL_CLUSTER, LABEL_SERVER, context_v4, derive};

/// How packet keys come from the domain key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    /// The domain key itself.
    Direct,
    /// A key per source: KDF label "U1", context `epoch ‖ rekey ‖ source`.
    Cluster,
    /// The server derives each client's key (label "U2", the client's source ID) for both
    /// directions; the client is given that key and uses it directly ([`KeyMode::Direct`]).
    Server,
}

/// Tunables of a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Secure domain index (24 bits).
    pub sdi: u32,
    /// Key mode.
    pub mode: KeyMode,
    /// Implicit rekeying: the KDF's `rekey` input is `counter >> rekey_shift` (derived-key modes;
    /// `None`: never). The reference provider's test default rekeys every 256 packets (shift 8).
    pub rekey_shift: Option<u8>,
    /// Packets of an epoch older than the current one by more than this are rejected.
    pub max_epoch_lifetime: u16,
    /// Authentication failures after which the domain drops everything (the spec's latch,
    /// default 1000). They are counted from the domain's creation or its last
    /// [`unlatch`](SecureDomain::unlatch), not over a time window: the domain has no clock.
    pub auth_fail_limit: u32,
    /// TSCs per source remembered for replay detection.
    pub replay_window: u64,
    /// Put an SSI in the header (SP) with this value.
    pub ssi: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sdi: 1,
            mode: KeyMode::Direct,
            rekey_shift: Some(8),
            max_epoch_lifetime: 16,
            auth_fail_limit: 1000,
            replay_window: 1024,
            ssi: None,
        }
    }
}

/// Why a packet was not sealed or not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TssError {
    /// The 48-bit counter of this epoch is used up: a TSC would repeat (start a new epoch).
    CounterExhausted,
    /// The domain latched after too many authentication failures: everything is dropped.
    Latched,
    /// Another domain's packet.
    WrongSdi,
    /// No key is installed for the packet's AN (or for sending).
    NoKey,
    /// The packet's epoch is older than the lifetime allows.
    OldEpoch,
    /// This TSC was seen already from this source (or is older than the window).
    Replay,
    /// The ICV did not verify: wrong key, tampered ciphertext, AAD or header.
    AuthFailed,
    /// A buffer to seal into has the wrong length for what it must hold.
    Length,
}

impl std::fmt::Display for TssError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TssError::CounterExhausted => "TSC counter exhausted in this epoch",
            TssError::Latched => "secure domain latched after authentication failures",
            TssError::WrongSdi => "packet of another secure domain",
            TssError::NoKey => "no key installed for this AN",
            TssError::OldEpoch => "epoch too old",
            TssError::Replay => "replayed TSC",
            TssError::Length => "buffer of the wrong length to seal into",
            TssError::AuthFailed => "authentication failed",
        })
    }
}

impl std::error::Error for TssError {}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets sealed.
    pub sealed: u64,
    /// Packets opened and delivered.
    pub opened: u64,
    /// ICV failures.
    pub auth_failures: u64,
    /// Replayed TSCs dropped.
    pub replays: u64,
    /// Old epochs dropped.
    pub old_epochs: u64,
    /// Dropped because latched, of another domain or without a key.
    pub other_drops: u64,
    /// Times the failure latch engaged.
    pub latches: u64,
}

/// Highest TSC seen from a source and a ring bitmap of the TSCs below it (the RFC 6479 scheme):
/// bit `tsc mod bits` stands for `tsc` while `top - tsc < window`. Moving `top` forward clears
/// the bits it passes, so each packet costs O(1) (amortized) whatever the window.
#[derive(Debug, Clone, Default)]
struct Replay {
    top: Option<u64>,
    /// A power of two of words, so that a TSC's bit is found with a mask, not a division.
    seen: Vec<u64>,
}

impl Replay {
    /// The word and bit of `tsc` in the ring.
    fn slot(&self, tsc: u64) -> (usize, u64) {
        let i = tsc & (self.seen.len() as u64 * 64).saturating_sub(1);
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn fresh(&self, window: u64, tsc: u64) -> bool {
        match self.top {
            None => true,
            Some(top) if tsc > top => true,
            Some(top) if top - tsc >= window => false,
            Some(_) => {
                let (w, m) = self.slot(tsc);
                self.seen.get(w).is_none_or(|&v| v & m == 0)
            }
        }
    }

    /// Records `tsc`, which [`Replay::fresh`] accepted.
    fn mark(&mut self, window: u64, tsc: u64) {
        if self.seen.is_empty() {
            self.seen = vec![0; window.div_ceil(64).max(1).next_power_of_two() as usize];
        }
        let bits = self.seen.len() as u64 * 64;
        match self.top {
            Some(top) if tsc <= top => {}
            Some(top) => {
                if tsc - top >= bits {
                    self.seen.iter_mut().for_each(|w| *w = 0);
                } else {
                    // Every slot `top` passes now stands for a TSC not seen yet.
                    for t in top + 1..tsc {
                        let (w, m) = self.slot(t);
                        self.seen[w] &= !m;
                    }
                    let (w, m) = self.slot(tsc);
                    self.seen[w] &= !m;
                }
                self.top = Some(tsc);
            }
            None => self.top = Some(tsc),
        }
        let (w, m) = self.slot(tsc);
        self.seen[w] |= m;
    }
}

/// The largest 48-bit counter; a domain never seals with it (the TSC would repeat after it).
pub const COUNTER_MAX: u64 = (1 << 48) - 1;

/// What a derived key is for: AN, source, epoch and rekey step.
type KeyId = (usize, u32, u16, u32);

/// [`SecureDomain::key`]'s direction: sealing.
const SEAL: usize = 0;
/// [`SecureDomain::key`]'s direction: opening.
const OPEN: usize = 1;

/// The keys derived so far, by (AN, source, epoch, rekey step).
#[derive(Debug, Default)]
struct Derived {
    cache: HashMap<KeyId, Arc<SealingKey>>,
    /// The key each direction (seal, open) used last: a flow's packets share one key until its
    /// next rekey step, so most packets need no lookup. Cleared with the cache.
    last: [Option<(KeyId, Arc<SealingKey>)>; 2],
}

impl Derived {
    /// The key for a packet of `an` (whose domain key is `base`), `source`, `epoch` and
    /// `counter`, sealed or opened (`dir`): the last one `dir` used if it is the same, else from
    /// the cache, derived only the first time this (AN, source, epoch, rekey step) is seen. `base`
    /// by reference: the 33-byte option passed by value was read back while its stores drained.
    #[allow(clippy::too_many_arguments)]
    fn get(
        &mut self,
        cfg: &Config,
        base: Option<&[u8; 32]>,
        dir: usize,
        an: usize,
        source: u32,
        epoch: u16,
        counter: u64,
    ) -> Result<&SealingKey, TssError> {
        let base = base.ok_or(TssError::NoKey)?;
        let rekey = match cfg.mode {
            KeyMode::Direct => 0,
            _ => cfg.rekey_shift.map_or(0, |s| (counter >> s) as u32),
        };
        let id = (an, source, epoch, rekey);
        if self.last[dir].as_ref().is_none_or(|(k, _)| *k != id) {
            if !self.cache.contains_key(&id) {
                // A flow's keys older than the step before this one are dropped: packets that
                // late are rare (reordered within the replay window) and derive theirs again.
                // The cap bounds many sources at once.
                self.cache.retain(|&(a, s, e, r), _| {
                    (a, s, e) != (an, source, epoch) || r.saturating_add(1) >= rekey
                });
                if self.cache.len() >= 4096 {
                    self.forget(None);
                }
            }
            let mode = cfg.mode;
            let key = self.cache.entry(id).or_insert_with(|| {
                Arc::new(match mode {
                    KeyMode::Direct => SealingKey::new(base, [0; 12]),
                    KeyMode::Cluster | KeyMode::Server => {
                        let label = if mode == KeyMode::Cluster { LABEL_CLUSTER } else { LABEL_SERVER };
                        let d = derive(base, label, &context_v4(epoch, rekey, source));
                        SealingKey::new(&d.key, d.iv_mask)
                    }
                })
            });
            self.last[dir] = Some((id, Arc::clone(key)));
        }
        Ok(&self.last[dir].as_ref().expect("set above").1)
    }

    /// Drops the keys of `an` (all of them with `None`).
    fn forget(&mut self, an: Option<usize>) {
        match an {
            Some(an) => self.cache.retain(|k, _| k.0 != an),
            None => self.cache.clear(),
        }
        self.last = [None, None];
    }
}

/// One secure domain, both directions.
#[derive(Debug)]
pub struct SecureDomain {
    cfg: Config,
    keys: [Option<[u8; 32]>; 2],
    tx_an: usize,
    epoch: u16,
    next_counter: u64,
    derived: Derived,
    replay: HashMap<u32, Replay>,
    failures: u32,
    latched: bool,
    stats: Stats,
}

impl SecureDomain {
    /// A domain sending with `key` under AN 0, in epoch `epoch` from counter 0.
    ///
    /// The IV is the source and the TSC, so a (key, TSC) pair must never be sealed twice: a
    /// domain that takes over a key an earlier instance used (a process restart) must start in
    /// an epoch that instance never reached, e.g. one the key's management hands out or one
    /// persisted and advanced at every start; only a key never used before may start anywhere
    /// (0). Receivers accept the epoch while it is not older than their own by more than
    /// `max_epoch_lifetime`, and a restarted sender's higher epoch gives TSCs above every one it
    /// sent before, so a receiver that kept running does not take them for replays.
    pub fn new(cfg: Config, key: [u8; 32], epoch: u16) -> SecureDomain {
        SecureDomain {
            cfg,
            keys: [Some(key), None],
            tx_an: 0,
            epoch,
            next_counter: 0,
            derived: Derived::default(),
            replay: HashMap::new(),
            failures: 0,
            latched: false,
            stats: Stats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether the failure latch has engaged.
    pub fn latched(&self) -> bool {
        self.latched
    }

    /// Authentication failures counting toward the latch: since the domain was made or last
    /// unlatched.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Lifts the failure latch (a management action, e.g. once the keys were checked or
    /// rotated): packets are opened again, and the count toward the next latch restarts at 0.
    /// The latch itself is the spec's (uet-wire.md §4); anyone who can reach the domain's
    /// address with its SDI can engage it, so whoever manages the domain should watch
    /// [`latched`](Self::latched) and [`Stats::latches`].
    pub fn unlatch(&mut self) {
        self.latched = false;
        self.failures = 0;
    }

    /// The epoch packets are sealed in.
    pub fn epoch(&self) -> u16 {
        self.epoch
    }

    /// Installs `key` under `an` (0 or 1); packets with that AN are accepted from now on.
    pub fn install_key(&mut self, an: bool, key: [u8; 32]) {
        self.keys[usize::from(an)] = Some(key);
        self.derived.forget(Some(usize::from(an)));
    }

    /// Sends with the key of `an` from now on (make-before-break: install first).
    pub fn activate(&mut self, an: bool) -> Result<(), TssError> {
        self.keys[usize::from(an)].ok_or(TssError::NoKey)?;
        self.tx_an = usize::from(an);
        Ok(())
    }

    /// Removes the key of `an`: its packets are refused (NoKey).
    pub fn retire(&mut self, an: bool) {
        self.keys[usize::from(an)] = None;
        self.derived.forget(Some(usize::from(an)));
    }

    /// Starts epoch `epoch` (the counter restarts at 0; epochs only move forward).
    pub fn new_epoch(&mut self, epoch: u16) {
        if epoch > self.epoch {
            self.epoch = epoch;
            self.next_counter = 0;
            self.derived.forget(None);
        }
    }

    /// Seals `buf` (the clear PDS bytes onwards) from `source` (this sender's SSI or IPv4
    /// address): takes the next TSC, encrypts in place, appends the ICV. The AAD is `aad_prefix`
    /// followed by the TSS header, which is returned for the caller to write before `buf`.
    pub fn seal(&mut self, source: u32, aad_prefix: &[u8], buf: &mut Vec<u8>) -> Result<TssRepr, TssError> {
        let (hdr, tag) = self.seal_in_place(source, aad_prefix, buf)?;
        buf.extend_from_slice(&tag);
        Ok(hdr)
    }

    /// [`seal`](Self::seal) without allocation: encrypts `data` in place and returns the header and
    /// the ICV for the caller to place around it.
    pub fn seal_in_place(
        &mut self,
        source: u32,
        aad_prefix: &[u8],
        data: &mut [u8],
    ) -> Result<(TssRepr, [u8; crate::aead::ICV_LEN]), TssError> {
        let mut tag = [0; crate::aead::ICV_LEN];
        let hdr = self.seal_with(source, aad_prefix, |key, tsc, aad| {
            tag = key.seal_in_place(source, tsc, aad, data);
            true
        })?;
        Ok((hdr, tag))
    }

    /// [`seal_in_place`](Self::seal_in_place) of `head ‖ tail` where `tail` lies elsewhere:
    /// `head` is encrypted in place, `tail` into `tail_out`, which must be `tail.len()` +
    /// [`ICV_LEN`](crate::aead::ICV_LEN) bytes and receives the ICV after it ([`TssError::Length`]
    /// otherwise, with nothing sealed and no TSC used). Returns the header.
    pub fn seal_scatter(
        &mut self,
        source: u32,
        aad_prefix: &[u8],
        head: &mut [u8],
        tail: &[u8],
        tail_out: &mut [u8],
    ) -> Result<TssRepr, TssError> {
        if tail_out.len() != tail.len() + crate::aead::ICV_LEN {
            return Err(TssError::Length);
        }
        self.seal_with(source, aad_prefix, |key, tsc, aad| {
            key.seal_scatter(source, tsc, aad, head, tail, tail_out)
        })
    }

    /// Takes the next TSC, builds the header and the AAD, finds the key, and has `seal` seal with
    /// them (false: nothing was sealed, and the TSC is not given back: it is never reused).
    fn seal_with(
        &mut self,
        source: u32,
        aad_prefix: &[u8],
        seal: impl FnOnce(&crate::aead::SealingKey, u64, &[u8]) -> bool,
    ) -> Result<TssRepr, TssError> {
        if self.next_counter >= COUNTER_MAX {
            return Err(TssError::CounterExhausted);
        }
        let counter = self.next_counter;
        self.next_counter += 1;
        let an = self.tx_an;
        let tsc = (u64::from(self.epoch) << 48) | counter;
        let hdr =
            TssRepr { reserved: false, an: an == 1, sdi: self.cfg.sdi & 0xFF_FFFF, ssi: self.cfg.ssi, tsc };
        let mut buf = [0u8; MAX_AAD_PREFIX + 16];
        let aad = aad(aad_prefix, &hdr, &mut buf);
        let epoch = self.epoch;
        let key = self.derived.get(&self.cfg, self.keys[an].as_ref(), SEAL, an, source, epoch, counter)?;
        if !seal(key, tsc, aad) {
            return Err(TssError::Length);
        }
        self.stats.sealed += 1;
        Ok(hdr)
    }

    /// The SSI this domain puts in its headers (and in its IVs), if any.
    pub fn ssi(&self) -> Option<u32> {
        self.cfg.ssi
    }

    /// The length of the TSS header this domain writes (12, or 16 with an SSI).
    pub fn header_len(&self) -> usize {
        if self.cfg.ssi.is_some() { 16 } else { 12 }
    }

    /// Opens a packet from `source` with header `hdr`: `buf` is the ciphertext followed by the
    /// ICV; returns the length of the clear bytes now at its start. Every refusal is counted;
    /// `auth_fail_limit` ICV failures latch the domain.
    pub fn open(
        &mut self,
        source: u32,
        aad_prefix: &[u8],
        hdr: &TssRepr,
        buf: &mut [u8],
    ) -> Result<usize, TssError> {
        let r = self.open_inner(source, aad_prefix, hdr, buf);
        match r {
            Ok(_) => self.stats.opened += 1,
            Err(TssError::AuthFailed) => {
                self.stats.auth_failures += 1;
                self.failures = self.failures.saturating_add(1);
                if self.failures >= self.cfg.auth_fail_limit && !self.latched {
                    self.latched = true;
                    self.stats.latches += 1;
                }
            }
            Err(TssError::Replay) => self.stats.replays += 1,
            Err(TssError::OldEpoch) => self.stats.old_epochs += 1,
            Err(_) => self.stats.other_drops += 1,
        }
        r
    }

    fn open_inner(
        &mut self,
        source: u32,
        aad_prefix: &[u8],
        hdr: &TssRepr,
        buf: &mut [u8],
    ) -> Result<usize, TssError> {
        if self.latched {
            return Err(TssError::Latched);
        }
        if hdr.sdi != self.cfg.sdi & 0xFF_FFFF {
            return Err(TssError::WrongSdi);
        }
        if hdr.epoch() < self.epoch.saturating_sub(self.cfg.max_epoch_lifetime) {
            return Err(TssError::OldEpoch);
        }
        let window = self.cfg.replay_window.max(1);
        // One lookup of the source's replay state per packet; a source is only added once a
        // packet of it opens (forged sources add nothing).
        let replay = self.replay.get_mut(&source);
        if replay.as_ref().is_some_and(|r| !r.fresh(window, hdr.tsc)) {
            return Err(TssError::Replay);
        }
        let mut aad_buf = [0u8; MAX_AAD_PREFIX + 16];
        let aad = aad(aad_prefix, hdr, &mut aad_buf);
        let an = usize::from(hdr.an);
        let (base, epoch, counter) = (self.keys[an].as_ref(), hdr.epoch(), hdr.counter());
        let key = self.derived.get(&self.cfg, base, OPEN, an, source, epoch, counter)?;
        let n = key.open(source, hdr.tsc, aad, buf).ok_or(TssError::AuthFailed)?;
        match replay {
            Some(r) => r.mark(window, hdr.tsc),
            None => self.replay.entry(source).or_default().mark(window, hdr.tsc),
        }
        Ok(n)
    }
}

/// Longest AAD prefix: IPv6 source, destination and entropy (36 bytes).
pub const MAX_AAD_PREFIX: usize = 36;

/// The AAD: the prefix (addresses, entropy or UDP ports, at most [`MAX_AAD_PREFIX`] bytes; longer
/// ones are cut) then the TSS header bytes, written into `buf`; returns the written part. The
/// caller's buffer, not a returned array: copying a just-written array out of a function reads it
/// back while its stores are still draining (a store-forwarding stall per packet).
pub fn aad<'a>(prefix: &[u8], hdr: &TssRepr, buf: &'a mut [u8; MAX_AAD_PREFIX + 16]) -> &'a [u8] {
    let p = prefix.len().min(MAX_AAD_PREFIX);
    buf[..p].copy_from_slice(&prefix[..p]);
    let n = hdr.emit(&mut buf[p..]).expect("a TSS header is at most 16 bytes");
    &buf[..p + n]
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: [u8; 12] = [10, 0, 0, 1, 10, 0, 0, 2, 0xC0, 0x01, 0x12, 0xB9];

    fn pair(mode: KeyMode) -> (SecureDomain, SecureDomain) {
        let cfg = Config { mode, auth_fail_limit: 3, ..Config::default() };
        (SecureDomain::new(cfg, [1; 32], 0), SecureDomain::new(cfg, [1; 32], 0))
    }

    fn sealed(tx: &mut SecureDomain, msg: &[u8]) -> (TssRepr, Vec<u8>) {
        let mut b = msg.to_vec();
        let h = tx.seal(0x0A00_0001, &PREFIX, &mut b).unwrap();
        (h, b)
    }

    #[test]
    fn round_trips_in_every_mode_and_rekeys() {
        for mode in [KeyMode::Direct, KeyMode::Cluster, KeyMode::Server] {
            let (mut tx, mut rx) = pair(mode);
            let mut late = None;
            for i in 0..600u32 {
                let (h, mut b) = sealed(&mut tx, &i.to_be_bytes());
                assert_eq!(h.counter(), u64::from(i));
                if i == 10 {
                    late = Some((h, b));
                    continue;
                }
                let n = rx.open(0x0A00_0001, &PREFIX, &h, &mut b).unwrap();
                assert_eq!(&b[..n], i.to_be_bytes(), "{mode:?} packet {i}");
            }
            assert_eq!(rx.stats().opened, 599);
            // Implicit rekeying: a new derived key every 256 packets (600 packets: periods 0, 1,
            // 2), of which each side keeps the last two.
            let want = if mode == KeyMode::Direct { 1 } else { 2 };
            assert_eq!((tx.derived.cache.len(), rx.derived.cache.len()), (want, want), "{mode:?}");
            // A packet of period 0 arriving this late (still inside the replay window) derives
            // its key again and opens.
            let (h, mut b) = late.unwrap();
            let n = rx.open(0x0A00_0001, &PREFIX, &h, &mut b).unwrap();
            assert_eq!(&b[..n], 10u32.to_be_bytes(), "{mode:?} late packet");
        }
    }

    /// Sealing a head in place and a tail from elsewhere gives the bytes and ICV of sealing the
    /// two joined, which open as one; a tail buffer of the wrong length seals nothing.
    #[test]
    fn a_scattered_seal_is_the_joined_seal() {
        let (mut joined, mut rx) = pair(KeyMode::Cluster);
        let (mut split, _) = pair(KeyMode::Cluster);
        let (head, tail): (Vec<u8>, Vec<u8>) = ((0..56u8).collect(), (0..200u8).map(|i| i ^ 0x5A).collect());
        for (cut, tail) in [(0, &tail[..]), (8, &tail), (16, &tail), (56, &tail), (56, &[]), (12, &[])] {
            let whole: Vec<u8> = [&head[..cut], tail].concat();
            let mut a = whole.clone();
            let (ha, tag) = joined.seal_in_place(0x0A00_0001, &PREFIX, &mut a).unwrap();
            let mut h = head[..cut].to_vec();
            let mut out = vec![0u8; tail.len() + crate::aead::ICV_LEN];
            let hb = split.seal_scatter(0x0A00_0001, &PREFIX, &mut h, tail, &mut out).unwrap();
            assert_eq!(ha, hb);
            assert_eq!([&h[..], &out[..tail.len()]].concat(), a, "cut {cut}");
            assert_eq!(out[tail.len()..], tag);
            let mut b = [&h[..], &out[..]].concat();
            let n = rx.open(0x0A00_0001, &PREFIX, &hb, &mut b).unwrap();
            assert_eq!(&b[..n], &whole[..]);
        }
        let counter = split.next_counter;
        let mut short = vec![0u8; tail.len()];
        assert_eq!(split.seal_scatter(1, &PREFIX, &mut [0u8; 4], &tail, &mut short), Err(TssError::Length));
        assert_eq!(split.next_counter, counter, "no TSC spent on a refused seal");
    }

    #[test]
    fn tampering_replay_old_epochs_wrong_keys_and_the_latch() {
        let (mut tx, mut rx) = pair(KeyMode::Cluster);
        let (h, b) = sealed(&mut tx, b"payload");
        let mut ok = b.clone();
        assert!(rx.open(0x0A00_0001, &PREFIX, &h, &mut ok).is_ok());
        assert_eq!(
            rx.open(0x0A00_0001, &PREFIX, &h, &mut b.clone()),
            Err(TssError::Replay),
            "replayed packet"
        );
        let (h2, b2) = sealed(&mut tx, b"payload 2");
        let mut t = b2.clone();
        t[0] ^= 0x80;
        assert_eq!(
            rx.open(0x0A00_0001, &PREFIX, &h2, &mut t),
            Err(TssError::AuthFailed),
            "tampered ciphertext"
        );
        let mut other = PREFIX;
        other[3] = 9;
        assert_eq!(
            rx.open(0x0A00_0001, &other, &h2, &mut b2.clone()),
            Err(TssError::AuthFailed),
            "tampered AAD"
        );
        // A failed packet is not marked seen: the genuine one still opens.
        assert!(rx.open(0x0A00_0001, &PREFIX, &h2, &mut b2.clone()).is_ok());
        // Old epochs.
        rx.new_epoch(20);
        let (h3, b3) = sealed(&mut tx, b"old");
        assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h3, &mut b3.clone()), Err(TssError::OldEpoch));
        tx.new_epoch(20);
        let (h4, b4) = sealed(&mut tx, b"new epoch");
        assert_eq!(h4.counter(), 0, "the counter restarts with the epoch, the TSC does not repeat");
        assert!(rx.open(0x0A00_0001, &PREFIX, &h4, &mut b4.clone()).is_ok());
        // Wrong key: the third failure latches, and then even good packets are dropped.
        let mut wrong = SecureDomain::new(Config { mode: KeyMode::Cluster, ..Config::default() }, [2; 32], 0);
        wrong.new_epoch(20);
        for _ in 0..5 {
            sealed(&mut wrong, b"TSCs this source already used");
        }
        let (h5, b5) = sealed(&mut wrong, b"wrong key");
        assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h5, &mut b5.clone()), Err(TssError::AuthFailed));
        assert!(rx.latched());
        let (h6, b6) = sealed(&mut tx, b"good");
        assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h6, &mut b6.clone()), Err(TssError::Latched));
        let s = rx.stats();
        assert_eq!((s.auth_failures, s.replays, s.old_epochs, s.other_drops, s.opened), (3, 1, 1, 1, 3));
    }

    /// A restarted sender of the same key starts in the epoch it is given: its TSCs (and so its
    /// IVs) differ from the earlier instance's, and a receiver still running accepts it.
    #[test]
    fn a_restarted_domain_starts_in_its_given_epoch_and_is_accepted() {
        let cfg = Config { mode: KeyMode::Cluster, ..Config::default() };
        let mut rx = SecureDomain::new(cfg, [1; 32], 3);
        let mut before = SecureDomain::new(cfg, [1; 32], 3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5 {
            let (h, mut b) = sealed(&mut before, b"first run");
            assert_eq!(h.epoch(), 3);
            seen.insert(h.tsc);
            assert!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b).is_ok());
        }
        let mut after = SecureDomain::new(cfg, [1; 32], 4);
        assert_eq!(after.epoch(), 4);
        for _ in 0..5 {
            let (h, mut b) = sealed(&mut after, b"second run");
            assert!(seen.insert(h.tsc), "TSC {:#x} (and so its IV) sealed again after a restart", h.tsc);
            assert!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b).is_ok(), "the restarted sender is refused");
        }
    }

    /// The latch engages at the limit and is reported; management can lift it, and the count
    /// toward the next latch starts again from zero.
    #[test]
    fn the_latch_is_reported_and_can_be_lifted() {
        let (mut tx, mut rx) = pair(KeyMode::Cluster);
        let mut wrong = SecureDomain::new(Config { mode: KeyMode::Cluster, ..Config::default() }, [2; 32], 0);
        for i in 1..=3 {
            let (h, mut b) = sealed(&mut wrong, b"forged");
            assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b), Err(TssError::AuthFailed));
            assert_eq!(rx.failures(), i);
        }
        assert!(rx.latched());
        assert_eq!(rx.stats().latches, 1);
        let (h, b) = sealed(&mut tx, b"good");
        assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b.clone()), Err(TssError::Latched));
        rx.unlatch();
        assert!(!rx.latched());
        assert_eq!(rx.failures(), 0);
        assert!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b.clone()).is_ok(), "still dropped after unlatch");
        let (h, mut b) = sealed(&mut wrong, b"forged again");
        assert_eq!(rx.open(0x0A00_0001, &PREFIX, &h, &mut b), Err(TssError::AuthFailed));
        assert!(!rx.latched(), "one failure after an unlatch latched again");
        assert_eq!(rx.stats().auth_failures, 4);
    }

    #[test]
    fn make_before_break_rotation() {
        let (mut tx, mut rx) = pair(KeyMode::Direct);
        rx.install_key(true, [5; 32]);
        let (h0, b0) = sealed(&mut tx, b"old key");
        tx.install_key(true, [5; 32]);
        tx.activate(true).unwrap();
        let (h1, b1) = sealed(&mut tx, b"new key");
        assert!(h1.an && !h0.an);
        // Both keys are accepted during the overlap, in any order.
        assert!(rx.open(0x0A00_0001, &PREFIX, &h1, &mut b1.clone()).is_ok());
        assert!(rx.open(0x0A00_0001, &PREFIX, &h0, &mut b0.clone()).is_ok());
        rx.retire(false);
        let (h2, b2) = sealed(&mut SecureDomain::new(Config::default(), [1; 32], 0), b"late");
        assert_eq!(rx.open(0x0A00_0002, &PREFIX, &h2, &mut b2.clone()), Err(TssError::NoKey));
        assert_eq!(tx.activate(false).map(|_| ()), Ok(()));
        tx.retire(false);
        assert_eq!(tx.activate(false), Err(TssError::NoKey));
    }

    #[test]
    fn the_tsc_never_repeats() {
        let (mut tx, _) = pair(KeyMode::Direct);
        tx.next_counter = COUNTER_MAX - 1;
        assert!(sealed(&mut tx, b"last").0.counter() == COUNTER_MAX - 1);
        let mut b = b"one more".to_vec();
        assert_eq!(tx.seal(1, &PREFIX, &mut b), Err(TssError::CounterExhausted));
        tx.new_epoch(1);
        assert!(tx.seal(1, &PREFIX, &mut b).is_ok());
    }

    proptest::proptest! {
        /// The ring bitmap answers as a set of every TSC seen would: fresh if above the highest,
        /// or within the window below it and not seen.
        #[test]
        fn replay_ring_matches_a_set(window in 1u64..300, steps in proptest::collection::vec((0u64..40, proptest::bool::ANY), 1..400)) {
            let (mut r, mut seen, mut top) = (Replay::default(), std::collections::BTreeSet::new(), 0u64);
            for (delta, back) in steps {
                // Mostly forward, sometimes behind the top (reordering, replays, old packets).
                let t = if back { top.saturating_sub(delta * 7) } else { top + delta };
                let want = seen.is_empty() || t > top || (top - t < window && !seen.contains(&t));
                proptest::prop_assert_eq!(r.fresh(window, t), want, "tsc {} top {}", t, top);
                if want {
                    r.mark(window, t);
                    seen.insert(t);
                    top = top.max(t);
                }
            }
        }
    }

    #[test]
    fn replay_window_slides() {
        let mut r = Replay::default();
        let w = 128;
        for t in [5u64, 3, 200, 150, 73] {
            assert!(r.fresh(w, t), "{t}");
            r.mark(w, t);
            assert!(!r.fresh(w, t), "{t} again");
        }
        assert!(!r.fresh(w, 72), "below the window");
        assert!(r.fresh(w, 74) && r.fresh(w, 199) && r.fresh(w, 201));
        r.mark(w, 1000);
        assert!(!r.fresh(w, 200) && !r.fresh(w, 872) && r.fresh(w, 873) && !r.fresh(w, 1000));
    }
}
