//! RC request packets that arrive after a gap (a loss), kept until it is filled. rxe's responder
//! drops everything after a gap until the missing PSN arrives, so its requester resends the whole
//! window behind a loss; softrdma's responder keeps what follows, so a requester that knows it
//! resends only what was lost (`Requester::retry_selective`). On the wire nothing changes: the NAK
//! for the gap, and the ACK once it is filled, are rxe's.
//!
//! A packet is kept one of two ways:
//! - **Written**: a WRITE MIDDLE or LAST of the WRITE in progress at the expected PSN goes straight
//!   to memory. Its place is known (every packet before a LAST is a full MTU, so packet `d` of the
//!   WRITE lies `d` MTUs on), its R_Key and range were checked with the WRITE's FIRST, and the gap
//!   lies inside that WRITE, so nothing the gap hides can read or change those bytes first. Its
//!   length and position are checked as the in-order path checks them.
//! - **Held**: any other request packet (a SEND, a later WRITE, a READ or an atomic request, a
//!   packet that fails the checks above) is copied and handled once the gap is filled, in PSN
//!   order, by the in-order path itself: every check, completion, response and NAK is what it
//!   would have been had the packet come then. The gap may hide a READ or an atomic, which must see
//!   memory as it was before the WRITEs that follow it, and a SEND takes its receive WQE in order.
//!
//! At most 255 PSNs after the expected one are kept (softrdma's requester widens its window to
//! 256 against a responder that keeps, `LossWindow::widen`; rxe's never has more than 128
//! unacknowledged), each with at most one MTU of payload (the in-order path rejects more). Held
//! copies come from a pool the device's QPs share (`hold.rs`), which bounds them device-wide: a
//! packet that finds it spent is dropped, as rxe drops it. Nothing counts until the gap is filled:
//! the expected PSN then moves over the kept packets as if they had come in order.

use super::hold::{Held, HoldPool};
use crate::mem::MemTable;
use crate::types::Access;
use crate::window::WIDE_CAP;
use std::collections::VecDeque;
use wire::ib::{Operation, RoceRepr};

/// Largest RDMA length a RETH may carry (roce-wire.md §1.7: "RETH length must be <= 2^31").
pub(super) const MAX_DMA_LEN: u32 = 1 << 31;

/// The most PSNs after the expected one a packet is kept at: the widest window of softrdma's
/// requester.
const SPAN: u32 = WIDE_CAP;

/// The WRITE in progress at the expected PSN: the address of its next byte, its R_Key and the
/// bytes left.
#[derive(Debug, Clone, Copy)]
pub(super) struct Current {
    pub(super) va: u64,
    pub(super) rkey: u32,
    pub(super) remaining: u32,
}

/// A kept packet.
#[derive(Debug)]
pub(super) enum Slot {
    /// A packet of the WRITE in progress, written: a MIDDLE, or the LAST (`last`).
    Written { last: bool },
    /// A packet to handle in order once the gap is filled (a copy from the device's pool).
    Held(Box<Held>),
}

/// Packets kept after the expected PSN.
#[derive(Debug)]
pub(super) struct Ahead {
    /// Entry `i`: PSN `epsn + i` (entry 0, the expected PSN itself, is never kept).
    slots: VecDeque<Option<Slot>>,
    /// Entries that are `Some`.
    kept: usize,
    /// Where held copies come from and go back to: the device's, shared by its QPs.
    pool: HoldPool,
}

/// Whether a packet was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    Kept,
    /// Out of reach, a place already taken or too long a payload.
    No,
    /// It would have been held, but the device's pool is spent.
    PoolSpent,
}

/// Packets a WRITE of `len` bytes takes (at least one).
fn packets(len: u32, mtu: u32) -> u64 {
    u64::from(len).div_ceil(u64::from(mtu)).max(1)
}

impl Ahead {
    /// Nothing kept; held copies come from `pool`.
    pub(super) fn new(pool: HoldPool) -> Ahead {
        Ahead { slots: VecDeque::new(), kept: 0, pool }
    }

    /// The pool held copies come from.
    pub(super) fn pool(&self) -> &HoldPool {
        &self.pool
    }

    /// Keeps `pkt` (opcode `op`), `d` PSNs after the expected PSN, unless that place is out of
    /// reach or taken: writes it to the memory of `pd` if it belongs to `cur`, the WRITE in
    /// progress, and holds a copy otherwise.
    pub(super) fn keep(
        &mut self,
        (pd, mtu): (u32, u32),
        d: u32,
        cur: Option<Current>,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
    ) -> Keep {
        if d == 0 || d >= SPAN || pkt.payload.len() > mtu as usize {
            return Keep::No;
        }
        let i = d as usize;
        if self.slots.get(i).is_some_and(Option::is_some) {
            return Keep::No;
        }
        let written = matches!(op, Operation::WriteMiddle | Operation::WriteLast)
            && cur.is_some_and(|c| write_in_progress(c, (pd, mtu), d, op == Operation::WriteLast, pkt, mem));
        let slot = if written {
            Slot::Written { last: op == Operation::WriteLast }
        } else {
            match self.pool.hold(op, pkt) {
                Some(held) => Slot::Held(held),
                None => return Keep::PoolSpent,
            }
        };
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(slot);
        self.kept += 1;
        Keep::Kept
    }

    /// The expected PSN moved `n` PSNs on; what was kept there is forgotten (held copies go
    /// back to the pool).
    pub(super) fn skip(&mut self, n: u32) {
        let n = (n as usize).min(self.slots.len());
        for slot in self.slots.drain(..n).flatten() {
            self.kept -= 1;
            if let Slot::Held(h) = slot {
                self.pool.give_back(h);
            }
        }
    }

    /// The packet kept at the expected PSN, if any (the caller applies it, then skips it).
    pub(super) fn next(&self) -> Option<&Slot> {
        self.slots.front()?.as_ref()
    }

    /// Forgets everything kept (an error, or the QP left RTR/RTS).
    pub(super) fn clear(&mut self) {
        self.skip(SPAN);
        self.slots.clear();
    }

    /// Whether nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.kept == 0
    }
}

impl Drop for Ahead {
    /// A QP reset or destroyed gives its held copies back.
    fn drop(&mut self) {
        self.clear();
    }
}

/// Writes packet `pkt`, `d` PSNs after the expected one, where it belongs in `cur` (a LAST if
/// `last`), if it lies inside that WRITE and has the length it must have there. Whether it did.
fn write_in_progress(
    cur: Current,
    (pd, mtu): (u32, u32),
    d: u32,
    last: bool,
    pkt: &RoceRepr<'_>,
    mem: &mut MemTable,
) -> bool {
    if u64::from(d) >= packets(cur.remaining, mtu) {
        return false;
    }
    let (n, mtu) = (pkt.payload.len() as u64, u64::from(mtu));
    let at = u64::from(d) * mtu;
    let remaining = u64::from(cur.remaining);
    let fits =
        if last { (1..=mtu).contains(&n) && at + n == remaining } else { n == mtu && at + n < remaining };
    fits && write(mem, pd, cur.rkey, cur.va.wrapping_add(at), pkt.payload)
}

/// Writes `data` at `va` of region `rkey`, if it may be written.
fn write(mem: &mut MemTable, pd: u32, rkey: u32, va: u64, data: &[u8]) -> bool {
    match mem.remote_mut(pd, rkey, va, data.len(), Access::REMOTE_WRITE) {
        Ok(dst) => {
            wire::copy_payload(dst, data);
            true
        }
        Err(_) => false,
    }
}
