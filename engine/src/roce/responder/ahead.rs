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
//! unacknowledged), each with at most one MTU of payload (the in-order path rejects more), so a QP
//! holds at most 255 MTUs, whatever a peer sends. Nothing counts until the gap is filled: the
//! expected PSN then moves over the kept packets as if they had come in order.

use crate::roce::mem::MemTable;
use crate::roce::types::Access;
use crate::roce::window::WIDE_CAP;
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
#[derive(Debug, Clone, PartialEq, Eq)]
// Slots live in one ring per QP, reused from gap to gap: a box per held packet would cost an
// allocation each.
#[allow(clippy::large_enum_variant)]
pub(super) enum Slot {
    /// A packet of the WRITE in progress, written: a MIDDLE, or the LAST (`last`).
    Written { last: bool },
    /// A packet to handle in order once the gap is filled.
    Held(Held),
}

/// A copy of a request packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) op: Operation,
    headers: RoceRepr<'static>,
    payload: Vec<u8>,
}

impl Held {
    /// A copy of `pkt`, its payload in `payload` (a spare buffer, emptied first).
    fn new(op: Operation, pkt: &RoceRepr<'_>, mut payload: Vec<u8>) -> Held {
        let headers = RoceRepr {
            bth: pkt.bth,
            rdeth: pkt.rdeth,
            deth: pkt.deth,
            feth: pkt.feth,
            reth: pkt.reth,
            atomic_eth: pkt.atomic_eth,
            aeth: pkt.aeth,
            atomic_ack_eth: pkt.atomic_ack_eth,
            immdt: pkt.immdt,
            ieth: pkt.ieth,
            payload: &[],
        };
        payload.clear();
        payload.extend_from_slice(pkt.payload);
        Held { op, headers, payload }
    }

    /// The packet as it came.
    pub(super) fn packet(&self) -> RoceRepr<'_> {
        RoceRepr { payload: &self.payload, ..self.headers }
    }
}

/// Packets kept after the expected PSN.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    /// Entry `i`: PSN `epsn + i` (entry 0, the expected PSN itself, is never kept).
    slots: VecDeque<Option<Slot>>,
    /// Entries that are `Some`.
    kept: usize,
    /// Payload buffers of held packets that were handled, for the next ones (at most one per
    /// place in the window, so a QP keeps at most 255 MTUs whatever happens).
    spare: Vec<Vec<u8>>,
}

/// Packets a WRITE of `len` bytes takes (at least one).
fn packets(len: u32, mtu: u32) -> u64 {
    u64::from(len).div_ceil(u64::from(mtu)).max(1)
}

impl Ahead {
    /// Keeps `pkt` (opcode `op`), `d` PSNs after the expected PSN, unless that place is out of
    /// reach or taken: writes it to the memory of `pd` if it belongs to `cur`, the WRITE in
    /// progress, and holds a copy otherwise. Returns whether it was kept.
    pub(super) fn keep(
        &mut self,
        (pd, mtu): (u32, u32),
        d: u32,
        cur: Option<Current>,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
    ) -> bool {
        if d == 0 || d >= SPAN || pkt.payload.len() > mtu as usize {
            return false;
        }
        let i = d as usize;
        if self.slots.get(i).is_some_and(Option::is_some) {
            return false;
        }
        let written = matches!(op, Operation::WriteMiddle | Operation::WriteLast)
            && cur.is_some_and(|c| write_in_progress(c, (pd, mtu), d, op == Operation::WriteLast, pkt, mem));
        let slot = if written {
            Slot::Written { last: op == Operation::WriteLast }
        } else {
            Slot::Held(Held::new(op, pkt, self.spare.pop().unwrap_or_default()))
        };
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(slot);
        self.kept += 1;
        true
    }

    /// The expected PSN moved `n` PSNs on; what was kept there is forgotten.
    pub(super) fn skip(&mut self, n: u32) {
        let n = (n as usize).min(self.slots.len());
        for slot in self.slots.drain(..n).flatten() {
            self.kept -= 1;
            if let Slot::Held(h) = slot {
                self.spare.push(h.payload);
            }
        }
    }

    /// The packet kept at the expected PSN, if any (taken; the caller applies it, gives a held
    /// one back with [`Ahead::recycle`], and skips it).
    pub(super) fn take_next(&mut self) -> Option<Slot> {
        let slot = self.slots.front_mut()?.take()?;
        self.kept -= 1;
        Some(slot)
    }

    /// A held packet that was handled: its buffer serves the next one.
    pub(super) fn recycle(&mut self, held: Held) {
        self.spare.push(held.payload);
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
