//! Neighbour resolution for the AF_XDP data path, which must never wait
//! ([`Datapath::resolve_now`](crate::datapath::Datapath::resolve_now)): a neighbour missing from
//! the kernel's ARP table is asked for once (the kernel resolves it in the background) and
//! remembered as pending, so that the packets that follow neither wait nor ask again, and read the
//! ARP table at most every [`RECHECK`]. An IP that never resolves (a spoofed source the node
//! answers) is asked for again only after [`NEGATIVE_TTL`], and at most [`MAX_PENDING`] are
//! remembered.

use std::net::Ipv4Addr;
use std::time::Duration;

use ahash::AHashMap as HashMap;

/// How often the ARP table is read again for a pending neighbour.
pub(crate) const RECHECK: Duration = Duration::from_millis(2);
/// How long a neighbour stays pending (not asked for again) after it was asked for.
pub(crate) const NEGATIVE_TTL: Duration = Duration::from_secs(1);
/// Pending neighbours remembered at most; beyond, the expired ones go, then any one.
pub(crate) const MAX_PENDING: usize = 1024;

/// Neighbours asked for and not resolved yet: when asked, and when the ARP table was last read.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    asked: HashMap<Ipv4Addr, (Duration, Duration)>,
}

impl Pending {
    /// The MAC of `ip` at `now`: `lookup` reads the ARP table, `ask` makes the kernel resolve it.
    pub(crate) fn resolve_now(
        &mut self,
        ip: Ipv4Addr,
        now: Duration,
        mut lookup: impl FnMut() -> Option<[u8; 6]>,
        ask: impl FnOnce(),
    ) -> Option<[u8; 6]> {
        match self.asked.get_mut(&ip) {
            Some((asked, _)) if now.saturating_sub(*asked) >= NEGATIVE_TTL => {}
            Some((_, read)) if now.saturating_sub(*read) < RECHECK => return None,
            Some((_, read)) => {
                *read = now;
                let mac = lookup();
                if mac.is_some() {
                    self.asked.remove(&ip);
                }
                return mac;
            }
            None => {}
        }
        // New, or pending for too long: read the table, and ask the kernel if it is not there.
        if let Some(mac) = lookup() {
            self.asked.remove(&ip);
            return Some(mac);
        }
        if self.asked.len() >= MAX_PENDING && !self.asked.contains_key(&ip) {
            self.asked.retain(|_, (asked, _)| now.saturating_sub(*asked) < NEGATIVE_TTL);
            if self.asked.len() >= MAX_PENDING {
                let any = self.asked.keys().next().copied();
                any.map(|k| self.asked.remove(&k));
            }
        }
        ask();
        self.asked.insert(ip, (now, now));
        None
    }

    /// Neighbours pending.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.asked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn an_unresolvable_neighbour_is_asked_for_once_and_never_waited_for() {
        let mut p = Pending::default();
        let ip = Ipv4Addr::new(192, 0, 2, 7);
        let (lookups, asks) = (Cell::new(0), Cell::new(0));
        let step = |p: &mut Pending, now: Duration, known: Option<[u8; 6]>| {
            p.resolve_now(ip, now, || (lookups.set(lookups.get() + 1), known).1, || asks.set(asks.get() + 1))
        };
        // A reply to it every 10 us for half a second: asked for once, the table read every RECHECK.
        let mut now = Duration::ZERO;
        while now < NEGATIVE_TTL / 2 {
            assert_eq!(step(&mut p, now, None), None);
            now += Duration::from_micros(10);
        }
        assert_eq!(asks.get(), 1);
        let most = (NEGATIVE_TTL / 2).as_micros() / RECHECK.as_micros() + 1;
        assert!(lookups.get() as u128 <= most, "{} reads of the ARP table", lookups.get());
        // Once the kernel has it, it is found at the next read.
        let mac = Some([2, 0, 0, 0, 0, 9]);
        assert_eq!(step(&mut p, now + RECHECK, mac), mac);
        assert_eq!(p.len(), 0);
        // An IP still unresolved after NEGATIVE_TTL is asked for again.
        let other = Ipv4Addr::new(192, 0, 2, 8);
        let asked = Cell::new(0);
        for t in [Duration::ZERO, NEGATIVE_TTL / 2, NEGATIVE_TTL] {
            p.resolve_now(other, t, || None, || asked.set(asked.get() + 1));
        }
        assert_eq!(asked.get(), 2);
        // Many unresolvable IPs: a bounded memory of them.
        for i in 0..4 * MAX_PENDING as u32 {
            p.resolve_now(Ipv4Addr::from_bits(0x0A00_0000 + i), now, || None, || {});
        }
        assert!(p.len() <= MAX_PENDING, "{} pending", p.len());
    }
}
