//! RC WRITE packets that arrive after a gap (a loss), placed where they belong before the gap is
//! filled. rxe's responder drops everything after a gap until the missing PSN arrives, so its
//! requester resends the whole window behind a loss; softrdma's responder keeps what it can place,
//! so a requester that knows it resends only what was lost (`Requester::resend_oldest`). On the
//! wire nothing changes: the NAK for the gap, and the ACK once it is filled, are rxe's.
//!
//! A WRITE packet can be placed without the packets before it when its range is known: a FIRST or
//! ONLY carries it (RETH), and a MIDDLE or LAST lies a whole number of MTUs after the FIRST of its
//! WRITE (every packet before a LAST is a full MTU) - the WRITE in progress at the expected PSN, or
//! the latest one whose FIRST was placed. Placement checks what the in-order path checks (the R_Key,
//! range and access for the whole WRITE, each packet's length and position). A packet of the WRITE
//! in progress is written at once: the gap lies inside that WRITE, so nothing the gap hides can
//! read or change those bytes first. A packet of a later message is held (copied; at most 127
//! packets per QP) and written when the gap is filled: the gap may hide a READ or an atomic, which
//! must see memory as it was before the WRITEs that follow it. Nothing counts until the gap is
//! filled: then the expected PSN moves over the placed packets as if they had come in order
//! ([`Mark`]). Not placed, and so left for their resend: SEND packets
//! (a SEND's length is not known before its last packet), a WRITE with immediate (it needs a
//! receive WQE and completes one), READ and atomic requests, and anything more than 127 PSNs ahead.

use crate::roce::mem::MemTable;
use crate::roce::types::Access;
use std::collections::VecDeque;
use wire::ib::{Operation, RoceRepr, psn};

/// Largest RDMA length a RETH may carry (roce-wire.md §1.7: "RETH length must be <= 2^31").
pub(super) const MAX_DMA_LEN: u32 = 1 << 31;

/// The most PSNs after the expected one a packet is placed at (rxe's window is 128).
const SPAN: u32 = 128;

/// What a placed packet does to the responder once the gap before it is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// A WRITE FIRST: the WRITE it starts (its RETH), whose first packet is written.
    First { va: u64, rkey: u32, len: u32 },
    /// A WRITE ONLY: a whole message.
    Only,
    /// A WRITE MIDDLE.
    Middle,
    /// A WRITE LAST: the end of a message.
    Last,
}

/// The WRITE in progress at the expected PSN: the address of its next byte, its R_Key and the
/// bytes left.
#[derive(Debug, Clone, Copy)]
pub(super) struct Current {
    pub(super) va: u64,
    pub(super) rkey: u32,
    pub(super) remaining: u32,
}

/// A placed packet: what it does, and its payload if it is held until the gap is filled (the
/// address, R_Key and bytes to write then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placed {
    pub(super) mark: Mark,
    pub(super) held: Option<(u64, u32, Vec<u8>)>,
}

/// Packets placed ahead of the expected PSN.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    /// Entry `i`: PSN `epsn + i` (entry 0, the expected PSN itself, is never placed).
    slots: VecDeque<Option<Placed>>,
    /// The WRITE started by the latest FIRST placed, until its LAST is: (PSN of the FIRST, VA,
    /// R_Key, length).
    open: Option<(u32, u64, u32, u32)>,
}

/// Packets a WRITE of `len` bytes takes (at least one).
fn packets(len: u32, mtu: u32) -> u64 {
    u64::from(len).div_ceil(u64::from(mtu)).max(1)
}

impl Ahead {
    /// Places `pkt` (opcode `op`), `d` PSNs after the expected PSN `epsn`, in the memory of `pd`,
    /// if its place is known and every check passes; `cur` is the WRITE in progress at `epsn`.
    /// Returns whether it did.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn place(
        &mut self,
        (pd, mtu): (u32, u32),
        epsn: u32,
        d: u32,
        cur: Option<Current>,
        op: Operation,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
    ) -> bool {
        if d == 0 || d >= SPAN || self.slots.get(d as usize).is_some_and(Option::is_some) {
            return false;
        }
        let p = psn::add(epsn, d);
        let n = pkt.payload.len() as u64;
        let mtu64 = u64::from(mtu);
        let in_cur = cur.is_some_and(|c| u64::from(d) < packets(c.remaining, mtu));
        let open_at = self.open.map(|(first, ..)| psn::diff(p, first));
        let in_open =
            self.open.zip(open_at).is_some_and(|((_, _, _, len), k)| k > 0 && (k as u64) < packets(len, mtu));
        let placed = match op {
            Operation::WriteFirst | Operation::WriteOnly => {
                // A message cannot start inside another one.
                let Some(reth) = pkt.reth.filter(|_| !in_cur && !in_open) else { return false };
                let only = op == Operation::WriteOnly;
                let len = u64::from(reth.dma_len);
                let length_ok = if only { n == len && n <= mtu64 } else { n == mtu64 && len > mtu64 };
                if !length_ok
                    || reth.dma_len > MAX_DMA_LEN
                    || (len > 0
                        && mem.check_remote(pd, reth.rkey, reth.va, len, Access::REMOTE_WRITE).is_err())
                {
                    return false;
                }
                // A later message: held until the gap is filled.
                let held = Some((reth.va, reth.rkey, pkt.payload.to_vec()));
                if only {
                    Placed { mark: Mark::Only, held }
                } else {
                    self.open = Some((p, reth.va, reth.rkey, reth.dma_len));
                    Placed { mark: Mark::First { va: reth.va, rkey: reth.rkey, len: reth.dma_len }, held }
                }
            }
            Operation::WriteMiddle | Operation::WriteLast => {
                let last = op == Operation::WriteLast;
                // Where the packet's WRITE continues from: the expected PSN's position, or the
                // open WRITE's FIRST.
                let (from, va, rkey, remaining) = match (cur, self.open, open_at) {
                    (Some(c), ..) if in_cur => (0, c.va, c.rkey, c.remaining),
                    (_, Some((_, va, rkey, len)), Some(k)) if in_open => (k as u64, va, rkey, len),
                    _ => return false,
                };
                let at = if in_cur { u64::from(d) * mtu64 } else { from * mtu64 };
                let remaining = u64::from(remaining);
                let fits = if last {
                    (1..=mtu64).contains(&n) && at + n == remaining
                } else {
                    n == mtu64 && at + n < remaining
                };
                if !fits {
                    return false;
                }
                let va = va.wrapping_add(at);
                // The WRITE in progress is written now; a later one's bytes wait for the gap.
                let held = if in_cur {
                    if !write(mem, pd, rkey, va, pkt.payload) {
                        return false;
                    }
                    None
                } else {
                    if mem.check_remote(pd, rkey, va, n, Access::REMOTE_WRITE).is_err() {
                        return false;
                    }
                    Some((va, rkey, pkt.payload.to_vec()))
                };
                if last && !in_cur {
                    self.open = None;
                }
                Placed { mark: if last { Mark::Last } else { Mark::Middle }, held }
            }
            _ => return false,
        };
        let i = d as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.slots[i] = Some(placed);
        true
    }

    /// The expected PSN moved `n` PSNs on (a request was taken in order, or a placed packet).
    pub(super) fn skip(&mut self, n: u32) {
        let n = (n as usize).min(self.slots.len());
        self.slots.drain(..n);
    }

    /// The expected PSN `epsn`'s packet, if it was placed (taken; the caller applies it, writes
    /// what it holds, and skips it).
    pub(super) fn placed_at(&mut self, epsn: u32) -> Option<Placed> {
        let placed = self.slots.front_mut()?.take()?;
        if matches!(placed.mark, Mark::First { .. }) && self.open.is_some_and(|(first, ..)| first == epsn) {
            // Its WRITE is the one in progress now.
            self.open = None;
        }
        Some(placed)
    }

    /// Whether nothing is placed any more.
    pub(super) fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }
}

/// Writes `data` at `va` of region `rkey`, if it may be written.
pub(super) fn write(mem: &mut MemTable, pd: u32, rkey: u32, va: u64, data: &[u8]) -> bool {
    if data.is_empty() {
        return true;
    }
    match mem.remote_mut(pd, rkey, va, data.len(), Access::REMOTE_WRITE) {
        Ok(dst) => {
            wire::copy_payload(dst, data);
            true
        }
        Err(_) => false,
    }
}
