//! Which QPs a progress round visits: the ones with something to do, not all of them (issue 29:
//! a device with 10,000 idle QPs must cost what a device with one costs).
//!
//! A QP can only get work through the context: a verb on it, a packet for it, or its timer. Each
//! of those [`touch`](Sched::touch)es it, which puts it on the active list; a round takes the list
//! ([`round`](Sched::round)), sends, delivers completions and reports errors for those QPs, and
//! hands each back ([`keep`](Sched::keep)) with whether it still has frames to send (then it stays
//! active) and its next deadline. Deadlines wait in a min-heap, one live entry per QP: a deadline
//! that moves later leaves the earlier entry in place, which finds the QP not yet due when it
//! fires and re-arms it; one that moves earlier is pushed and the old entry goes stale. So a busy
//! QP whose retransmission timer is pushed back by every ACK costs one heap entry per timeout
//! period, not one per round.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// The active list and the timer heap of a context's QPs, by QP index.
#[derive(Debug, Default)]
pub(super) struct Sched {
    active: Vec<u32>,
    /// The list a round took, handed back empty ([`Sched::recycle`]): the two lists take turns,
    /// so a round allocates nothing.
    spare: Vec<u32>,
    /// Per QP index: on the active list.
    listed: Vec<bool>,
    /// Per QP index: the deadline of its live heap entry.
    armed: Vec<Option<Duration>>,
    timers: BinaryHeap<Reverse<(Duration, u32)>>,
}

impl Sched {
    /// QP `i` may have work: the next round visits it.
    pub(super) fn touch(&mut self, i: usize) {
        if i >= self.listed.len() {
            self.listed.resize(i + 1, false);
            self.armed.resize(i + 1, None);
        }
        if !self.listed[i] {
            self.listed[i] = true;
            self.active.push(i as u32);
        }
    }

    /// The QPs whose deadline has come by `now` (touched: the round visits them). Stale heap
    /// entries are dropped on the way.
    pub(super) fn due(&mut self, now: Duration) -> Vec<usize> {
        let mut due = Vec::new();
        while let Some(&Reverse((at, i))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let i = i as usize;
            if self.armed.get(i) == Some(&Some(at)) {
                self.armed[i] = None;
                self.touch(i);
                due.push(i);
            }
        }
        due
    }

    /// Takes the active list for a round, in QP index order (the order transmission always had).
    pub(super) fn round(&mut self) -> Vec<u32> {
        let spare = std::mem::take(&mut self.spare);
        let mut list = std::mem::replace(&mut self.active, spare);
        list.sort_unstable();
        for &i in &list {
            self.listed[i as usize] = false;
        }
        list
    }

    /// Gives back the list a round took, for the next round.
    pub(super) fn recycle(&mut self, mut list: Vec<u32>) {
        list.clear();
        self.spare = list;
    }

    /// Hands QP `i` back after a round: `busy` (frames still to send) keeps it active; `deadline`
    /// is its next timer.
    pub(super) fn keep(&mut self, i: usize, busy: bool, deadline: Option<Duration>) {
        if busy {
            self.touch(i);
        }
        if let Some(t) = deadline {
            if self.armed[i].is_none_or(|a| t < a) {
                self.armed[i] = Some(t);
                self.timers.push(Reverse((t, i as u32)));
            }
        }
    }

    /// The QPs on the active list (not yet taken by a round).
    pub(super) fn active(&self) -> &[u32] {
        &self.active
    }

    /// The earliest armed deadline (possibly a stale entry's, which is no later than the QP's
    /// real one: waking for it is early, never late).
    pub(super) fn deadline(&self) -> Option<Duration> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Heap entries, live and stale (for the bound test).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_round_visits_the_touched_qps_once_in_index_order() {
        let mut s = Sched::default();
        for i in [7, 2, 7, 5, 2] {
            s.touch(i);
        }
        assert_eq!(s.round(), [2, 5, 7]);
        assert!(s.round().is_empty(), "nothing touched since");
        s.keep(5, true, None);
        s.keep(7, false, None);
        let list = s.round();
        assert_eq!(list, [5], "a QP with frames left stays active");
        // The lists take turns: a steady round allocates nothing.
        let at = list.as_ptr();
        s.recycle(list);
        s.touch(5);
        let next = s.round();
        s.recycle(next);
        s.touch(5);
        let again = s.round();
        assert_eq!(again.as_ptr(), at);
    }

    #[test]
    fn timers_fire_once_at_their_deadline() {
        let mut s = Sched::default();
        s.touch(3);
        s.round();
        s.keep(3, false, Some(ms(10)));
        assert!(s.due(ms(9)).is_empty());
        assert_eq!(s.deadline(), Some(ms(10)));
        assert_eq!(s.due(ms(10)), [3]);
        assert_eq!(s.round(), [3], "a due QP is visited");
        assert!(s.due(ms(20)).is_empty(), "fired once");
    }

    #[test]
    fn a_deadline_moved_later_fires_early_harmlessly_and_one_moved_earlier_wins() {
        let mut s = Sched::default();
        s.touch(1);
        s.round();
        s.keep(1, false, Some(ms(10)));
        // Pushed back by an ACK: the 10 ms entry stays; the QP is found not due then.
        s.keep(1, false, Some(ms(30)));
        assert_eq!(s.due(ms(10)), [1]);
        s.round();
        s.keep(1, false, Some(ms(30)));
        assert!(s.due(ms(29)).is_empty());
        assert_eq!(s.due(ms(30)), [1]);
        // Brought forward: the earlier entry fires, the later one is stale.
        s.round();
        s.keep(1, false, Some(ms(50)));
        s.keep(1, false, Some(ms(40)));
        assert_eq!(s.due(ms(40)), [1]);
        s.round();
        assert!(s.due(ms(60)).is_empty(), "the 50 ms entry was stale");
    }

    #[test]
    fn a_busy_qp_pushing_its_timer_back_every_round_keeps_the_heap_small() {
        let mut s = Sched::default();
        for round in 0..100_000u64 {
            let now = Duration::from_micros(round);
            s.due(now);
            s.touch(0);
            s.round();
            // A retransmission timer 67 ms after the last ACK, pushed back every microsecond.
            s.keep(0, true, Some(now + ms(67)));
        }
        assert!(s.entries() <= 3, "{} heap entries", s.entries());
    }
}
