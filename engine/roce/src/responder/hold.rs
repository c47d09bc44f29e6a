//! Copies of the RC request packets responders hold after a gap (`ahead.rs`), from a pool the QPs
//! of a device share. The pool bounds how many exist at once, whatever the peers send: a peer (or
//! many) that leaves a gap on each of a thousand QPs makes the device hold at most
//! [`HoldStats::capacity`] packets, not 255 per QP. A packet that finds the pool spent is not held:
//! the responder drops it, as rdma_rxe drops everything after a gap, and the requester sends it
//! again once the gap is repaired (counted in [`RespDrops::not_held`](super::RespDrops)).
//!
//! A copy goes back to the pool when its packet has been handled or forgotten (the gap filled, an
//! error, the QP reset or destroyed) and serves the next gap on any QP, so a warm pool allocates
//! nothing per loss, and what it keeps after a loss episode is bounded by the same capacity.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use wire::ib::{Operation, RoceRepr};

/// The packets a device holds at most: 16 QPs with a full window (255 PSNs) held each; with the
/// payload of path MTU 4096, about 17 MiB.
pub const DEVICE_HOLD_PACKETS: usize = 4096;

/// A pool of held-packet copies, shared by cloning (see the module documentation).
#[derive(Debug, Clone)]
pub struct HoldPool(Arc<Mutex<Pool>>);

#[derive(Debug)]
struct Pool {
    /// Copies given back, for the next packets. Boxed: a copy moves between the pool and a QP's
    /// slots whole, and a slot stays a tag and a pointer (a `RoceRepr` is 184 bytes).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Held>>,
    /// Copies that exist (held by a QP, or spare).
    made: usize,
    capacity: usize,
}

/// What a [`HoldPool`] has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldStats {
    /// Packets held by QPs now.
    pub held: usize,
    /// Copies kept for the next packets.
    pub spare: usize,
    /// The most that exist at once.
    pub capacity: usize,
}

impl HoldPool {
    /// A pool of at most `capacity` held packets.
    pub fn new(capacity: usize) -> HoldPool {
        HoldPool(Arc::new(Mutex::new(Pool { spare: Vec::new(), made: 0, capacity })))
    }

    /// What the pool has now.
    pub fn stats(&self) -> HoldStats {
        let p = self.lock();
        HoldStats { held: p.made - p.spare.len(), spare: p.spare.len(), capacity: p.capacity }
    }

    /// A copy of `pkt` (opcode `op`), unless the pool is spent.
    pub(super) fn hold(&self, op: Operation, pkt: &RoceRepr<'_>) -> Option<Box<Held>> {
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
        let mut held = {
            let mut p = self.lock();
            match p.spare.pop() {
                Some(h) => h,
                None if p.made < p.capacity => {
                    p.made += 1;
                    Box::new(Held { op, headers, payload: Vec::new() })
                }
                None => return None,
            }
        };
        (held.op, held.headers) = (op, headers);
        held.payload.clear();
        // Exactly: a buffer grows to the longest payload it held (one MTU at most), not beyond.
        held.payload.reserve_exact(pkt.payload.len());
        held.payload.extend_from_slice(pkt.payload);
        Some(held)
    }

    /// A copy whose packet was handled or forgotten, for the next one.
    pub(super) fn give_back(&self, held: Box<Held>) {
        self.lock().spare.push(held);
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        // The pool's counts are updated in one statement each: a panic elsewhere while it was
        // locked leaves them whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A copy of a request packet.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) op: Operation,
    headers: RoceRepr<'static>,
    payload: Vec<u8>,
}

impl Held {
    /// The packet as it came.
    pub(super) fn packet(&self) -> RoceRepr<'_> {
        RoceRepr { payload: &self.payload, ..self.headers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ib::{BthRepr, Opcode, Transport};

    fn pkt(payload: &[u8]) -> RoceRepr<'_> {
        RoceRepr::new(
            BthRepr::new(Opcode::new(Transport::Rc, Operation::SendOnly).unwrap(), 0x11, 5),
            payload,
        )
    }

    #[test]
    fn no_more_than_the_capacity_exist_and_copies_given_back_serve_again() {
        let pool = HoldPool::new(2);
        let a = pool.hold(Operation::SendOnly, &pkt(&[1; 100])).unwrap();
        let b = pool.hold(Operation::SendOnly, &pkt(&[2; 4096])).unwrap();
        assert!(pool.hold(Operation::SendOnly, &pkt(&[3])).is_none(), "spent");
        assert_eq!(pool.stats(), HoldStats { held: 2, spare: 0, capacity: 2 });
        pool.give_back(b);
        let c = pool.hold(Operation::SendOnly, &pkt(&[4; 10])).unwrap();
        assert_eq!((c.packet().payload, c.payload.capacity()), (&[4u8; 10][..], 4096), "b's, reused");
        assert_eq!(a.packet().payload, &[1; 100][..]);
        pool.give_back(a);
        pool.give_back(c);
        assert_eq!(pool.stats(), HoldStats { held: 0, spare: 2, capacity: 2 });
    }
}
