//! The buffers INLINE requests keep their data in: one per request in the queue, reused from
//! request to request so that posting allocates nothing once warmed up.

use super::{Requester, SendWqe};

impl Requester {
    /// An empty buffer of `cap` bytes (the QP's `max_inline_data`, so that it never grows) for an
    /// INLINE request's data. The first INLINE request makes one for each of the `depth` requests
    /// the queue holds (its `max_send_wr`), as rxe's queue ring holds the inline bytes of every
    /// slot: how many are outstanding when a later request is posted (timing, a loaded machine)
    /// then never makes a post allocate.
    pub(crate) fn inline_buf(&mut self, cap: usize, depth: usize) -> Vec<u8> {
        if self.spare_inline.capacity() == 0 {
            self.spare_inline.reserve_exact(depth);
            self.spare_inline.extend((0..depth).map(|_| Vec::with_capacity(cap)));
        }
        let mut v = self.spare_inline.pop().unwrap_or_else(|| Vec::with_capacity(cap));
        v.clear();
        v
    }

    /// Keeps an inline buffer for the next INLINE request. At most one per request the queue
    /// holds ever exists, so the spares are bounded by the send queue's depth.
    pub(crate) fn give_back_inline(&mut self, v: Vec<u8>) {
        self.spare_inline.push(v);
    }

    /// A request that left the queue: its inline buffer is kept for the next one.
    pub(crate) fn retire(&mut self, w: SendWqe) {
        if let Some(v) = w.inline {
            self.give_back_inline(v);
        }
    }
}
