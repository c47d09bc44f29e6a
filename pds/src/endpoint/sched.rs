//! Which PDCs a poll looks at (issue 29: an endpoint with 10,000 idle PDCs must cost what one with
//! a single PDC costs): the PDCs that may have a packet to send (the active set, in PDC id order
//! for the round robin), a min-heap of their deadlines (retransmission, ACK, probe, credit,
//! CLOSE_REQ and reaper times), and the PDCs whose peer wants credit (RCCC).
//!
//! A PDC only changes through the endpoint: a packet for it, a send on it, a close, a grant, its
//! timer. Each of those [`touch`](Sched::touch)es it, which makes it active and reads its deadline
//! again. The transmit poll drops a PDC from the active set when it has nothing to send. Each PDC
//! has one live heap entry, at its current deadline: when the deadline moves, a new entry is
//! pushed and the old one goes stale. Stale entries are skipped, never left on top (so the next
//! deadline is exact), and the heap is rebuilt when they outnumber the live ones.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::time::Duration;

use crate::config::Config;
use crate::pdc::{Pdc, PdcId};

#[derive(Debug, Default)]
pub(super) struct Sched {
    /// PDCs that may have a packet to send.
    active: BTreeSet<PdcId>,
    /// Per PDC id: in `active` (a quick check before the set, on every packet).
    listed: Vec<bool>,
    /// Per PDC id: the deadline of its live heap entry.
    armed: Vec<Option<Duration>>,
    /// Live entries in `timers`.
    live: usize,
    timers: BinaryHeap<Reverse<(Duration, PdcId)>>,
    /// PDCs whose peer asked for credit not yet granted.
    wants_credit: BTreeSet<PdcId>,
    /// Scratch for [`activate_due`](Sched::activate_due), kept for its capacity.
    due: Vec<(Duration, PdcId)>,
}

impl Sched {
    /// PDC `id` may have changed: it becomes active and its deadline and credit demand are read
    /// again.
    pub(super) fn touch<A: Copy>(&mut self, id: PdcId, p: &Pdc<A>, cfg: &Config) {
        let i = self.grow(id);
        if !self.listed[i] {
            self.listed[i] = true;
            self.active.insert(id);
        }
        self.rearm(id, p, cfg);
    }

    /// Reads PDC `id`'s deadline and credit demand again, without making it active.
    pub(super) fn rearm<A: Copy>(&mut self, id: PdcId, p: &Pdc<A>, cfg: &Config) {
        let i = self.grow(id);
        let at = p.poll_timeout().into_iter().chain(p.reap_at(cfg)).min();
        if self.armed[i] != at {
            self.set(i, at);
        }
        if p.credit_rx.demand() > 0 {
            self.wants_credit.insert(id);
        } else {
            self.wants_credit.remove(&id);
        }
    }

    /// PDC `id`'s index in the per-id tables, grown to hold it.
    fn grow(&mut self, id: PdcId) -> usize {
        let i = usize::from(id);
        if i >= self.listed.len() {
            self.listed.resize(i + 1, false);
            self.armed.resize(i + 1, None);
        }
        i
    }

    /// Arms PDC index `i` at `at` (or disarms it), its old entry left stale.
    fn set(&mut self, i: usize, at: Option<Duration>) {
        match (self.armed[i].is_some(), at.is_some()) {
            (false, true) => self.live += 1,
            (true, false) => self.live -= 1,
            _ => {}
        }
        self.armed[i] = at;
        if let Some(at) = at {
            self.timers.push(Reverse((at, i as PdcId)));
        }
        self.drop_stale_top();
        self.compact();
    }

    /// Pops stale entries off the top of the heap.
    fn drop_stale_top(&mut self) {
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if self.armed.get(usize::from(id)) == Some(&Some(at)) {
                return;
            }
            self.timers.pop();
        }
    }

    /// PDC `id` is gone (its heap entry goes stale).
    pub(super) fn forget(&mut self, id: PdcId) {
        let i = usize::from(id);
        self.idle(id);
        if self.armed.get(i).is_some_and(Option::is_some) {
            self.set(i, None);
        }
        self.wants_credit.remove(&id);
    }

    /// The first active PDC after `cursor`, wrapping around.
    pub(super) fn next_active(&self, cursor: PdcId) -> Option<PdcId> {
        self.active.range(cursor.wrapping_add(1)..).next().or_else(|| self.active.first()).copied()
    }

    /// How many PDCs are active.
    pub(super) fn active_len(&self) -> usize {
        self.active.len()
    }

    /// PDC `id` has nothing to send now.
    pub(super) fn idle(&mut self, id: PdcId) {
        if let Some(l) = self.listed.get_mut(usize::from(id)) {
            if std::mem::take(l) {
                self.active.remove(&id);
            }
        }
    }

    /// The first PDC after `cursor` (wrapping around) whose peer wants credit.
    pub(super) fn next_wanting_credit(&self, cursor: PdcId) -> Option<PdcId> {
        self.wants_credit
            .range(cursor.wrapping_add(1)..)
            .next()
            .or_else(|| self.wants_credit.first())
            .copied()
    }

    /// Whether any PDC's peer wants credit.
    pub(super) fn credit_wanted(&self) -> bool {
        !self.wants_credit.is_empty()
    }

    /// The earliest deadline of all PDCs.
    pub(super) fn next_deadline(&self) -> Option<Duration> {
        self.timers.peek().map(|Reverse((at, _))| *at)
    }

    /// The next PDC whose deadline has come by `now`, disarmed (the caller runs its timers and
    /// touches it, which arms it again).
    pub(super) fn pop_due(&mut self, now: Duration) -> Option<PdcId> {
        let &Reverse((at, id)) = self.timers.peek()?;
        if at > now {
            return None;
        }
        self.set(usize::from(id), None);
        Some(id)
    }

    /// Makes the PDCs whose deadline has come by `now` active without disarming them: a transmit
    /// poll sends what is due (a delayed ACK) even before the caller ran the timers.
    pub(super) fn activate_due(&mut self, now: Duration) {
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            self.due.push((at, id));
        }
        let mut due = std::mem::take(&mut self.due);
        for &(at, id) in &due {
            if !std::mem::replace(&mut self.listed[usize::from(id)], true) {
                self.active.insert(id);
            }
            self.timers.push(Reverse((at, id)));
        }
        due.clear();
        self.due = due;
    }

    /// Rebuilds the heap from the live entries once stale ones outnumber them.
    fn compact(&mut self) {
        if self.timers.len() <= 2 * self.live + 64 {
            return;
        }
        let armed = &self.armed;
        self.timers =
            (armed.iter().enumerate()).filter_map(|(i, a)| a.map(|at| Reverse((at, i as PdcId)))).collect();
    }

    /// Entries in the heap, live and stale (for tests).
    #[cfg(test)]
    pub(super) fn heap_len(&self) -> usize {
        self.timers.len()
    }
}
