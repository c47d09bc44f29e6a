//! Memory regions and the one table every transport consults before it touches a byte
//! (notes/architecture.md: "Memory regions are looked up by key in one table").
//!
//! A region's memory belongs to the device (page-aligned, see `frame::AlignedBuf`); the device gives
//! it a virtual address range of its own, which is what SGEs, RETHs and AtomicETHs name. The L_Key
//! and R_Key are equal: a slot index and a generation byte, so a stale key never names a new region,
//! XORed with a random mask of the table; the addresses start at a random page. Neither is then
//! the same from one device or run to the next, so an off-path host cannot guess them (it can
//! still try: the key is 32 bits).

use super::types::{Access, Sge};
use frame::{AlignedBuf, PAGE, UserBuf};

/// Why a memory access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemError {
    /// No live region has this key.
    BadKey,
    /// The range is not inside the region.
    OutOfRange,
    /// The region does not grant the access.
    Access,
    /// The region belongs to another protection domain.
    WrongPd,
    /// The R_Key was invalidated (SEND_WITH_INV).
    Invalidated,
    /// The region does not allow remote invalidation (no `Access::REMOTE_INVALIDATE`).
    NotInvalidatable,
}

impl std::fmt::Display for MemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemError::BadKey => "no memory region has this key",
            MemError::OutOfRange => "range outside the memory region",
            MemError::Access => "memory region does not allow this access",
            MemError::WrongPd => "memory region belongs to another protection domain",
            MemError::Invalidated => "remote key was invalidated",
            MemError::NotInvalidatable => "memory region does not allow remote invalidation",
        })
    }
}

impl std::error::Error for MemError {}

/// Where a region's bytes live.
#[derive(Debug)]
enum Storage {
    /// Allocated by the device ([`MemTable::register`]).
    Owned(AlignedBuf),
    /// The application's own memory ([`MemTable::register_user`]).
    User(UserBuf),
}

impl Storage {
    fn len(&self) -> usize {
        match self {
            Storage::Owned(b) => b.len(),
            Storage::User(b) => b.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Storage::Owned(b) => b.as_slice(),
            Storage::User(b) => b.as_slice(),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Storage::Owned(b) => b.as_mut_slice(),
            Storage::User(b) => b.as_mut_slice(),
        }
    }
}

#[derive(Debug)]
struct Region {
    pd: u32,
    addr: u64,
    access: Access,
    key: u32,
    remote_valid: bool,
    data: Storage,
}

impl Region {
    fn offset(&self, addr: u64, len: u64) -> Result<usize, MemError> {
        let off = addr.checked_sub(self.addr).ok_or(MemError::OutOfRange)?;
        let end = off.checked_add(len).ok_or(MemError::OutOfRange)?;
        if end > self.data.len() as u64 {
            return Err(MemError::OutOfRange);
        }
        Ok(off as usize)
    }
}

/// All memory regions of a device.
#[derive(Debug)]
pub struct MemTable {
    slots: Vec<Option<Region>>,
    generation: u8,
    next_addr: u64,
    /// XORed into every key: `(slot << 8 | generation) ^ key_mask`.
    key_mask: u32,
}

/// Lowest base address of the regions; a random number of pages (below 2^28) is added.
const ADDR_BASE: u64 = 0x7f00_0000_0000;

/// 64 bits an off-path host cannot predict: std's per-process random SipHash keys (drawn from
/// the OS), each call hashing under different ones.
fn unpredictable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

impl Default for MemTable {
    fn default() -> Self {
        MemTable::from_random(unpredictable())
    }
}

impl MemTable {
    /// An empty table whose key mask and first address come from `seed`, not from the OS: the
    /// same seed gives the same keys and addresses, so a seeded simulation is reproducible byte
    /// for byte. Only for runs no off-path host can reach (the simulated network).
    pub fn seeded(seed: u64) -> MemTable {
        // SplitMix64's finaliser: nearby seeds give unrelated masks and addresses.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        MemTable::from_random(z ^ (z >> 31))
    }

    /// Whether no region was ever registered (no key or address handed out yet).
    pub fn is_fresh(&self) -> bool {
        self.slots.is_empty()
    }

    fn from_random(r: u64) -> MemTable {
        let next_addr = ADDR_BASE + ((r >> 32) & 0xFFF_FFFF) * PAGE as u64;
        MemTable { slots: Vec::new(), generation: 0, next_addr, key_mask: r as u32 }
    }
}

impl MemTable {
    /// Registers `len` zeroed bytes for `pd`; returns the key and the base virtual address.
    pub fn register(&mut self, pd: u32, len: usize, access: Access) -> Option<(u32, u64)> {
        let addr = self.next_addr;
        // A guard page between regions keeps off-by-one ranges from landing in a neighbour.
        let span = (len as u64).div_ceil(PAGE as u64) * PAGE as u64 + PAGE as u64;
        let next = self.next_addr.checked_add(span)?;
        let key = self.insert(pd, addr, access, Storage::Owned(AlignedBuf::zeroed(len)))?;
        self.next_addr = next;
        Some((key, addr))
    }

    /// Registers the application's bytes `buf` for `pd`, named by the virtual addresses
    /// `iova..iova + len` (`ibv_reg_mr_iova2`; `ibv_reg_mr` passes the buffer's own address);
    /// returns the key. `None` if the table is full or the range wraps.
    pub fn register_user(&mut self, pd: u32, buf: UserBuf, iova: u64, access: Access) -> Option<u32> {
        iova.checked_add(buf.len() as u64)?;
        self.insert(pd, iova, access, Storage::User(buf))
    }

    fn insert(&mut self, pd: u32, addr: u64, access: Access, data: Storage) -> Option<u32> {
        let index = match self.slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        if index >= 1 << 24 {
            return None;
        }
        self.generation = self.generation.wrapping_add(1);
        let key = ((index as u32) << 8 | u32::from(self.generation)) ^ self.key_mask;
        self.slots[index] = Some(Region { pd, addr, access, key, remote_valid: true, data });
        Some(key)
    }

    /// The slot a key names.
    fn slot(&self, key: u32) -> usize {
        ((key ^ self.key_mask) >> 8) as usize
    }

    fn get(&self, key: u32) -> Result<&Region, MemError> {
        match self.slots.get(self.slot(key)) {
            Some(Some(r)) if r.key == key => Ok(r),
            _ => Err(MemError::BadKey),
        }
    }

    fn get_mut(&mut self, key: u32) -> Result<&mut Region, MemError> {
        let slot = self.slot(key);
        match self.slots.get_mut(slot) {
            Some(Some(r)) if r.key == key => Ok(r),
            _ => Err(MemError::BadKey),
        }
    }

    /// Changes a live region in place (`ibv_rereg_mr`): its protection domain, its bytes (the
    /// application's `buf`, named by `iova..iova + len`) and its access rights, each when given.
    /// New bytes come with a new key (the same slot, a new generation), as a deregistration
    /// followed by a registration would give: the old key then names nothing, so a peer that kept
    /// it is refused even where the old and new ranges overlap. A change of PD or rights alone
    /// keeps the key, as rxe and mlx5 do (programs keep using the keys they sent their peers);
    /// every access checks the PD and the rights anyway. Returns the key. On an error (the key
    /// names no region, or the new range wraps) nothing changes.
    pub fn reregister(
        &mut self,
        key: u32,
        pd: Option<u32>,
        memory: Option<(UserBuf, u64)>,
        access: Option<Access>,
    ) -> Result<u32, MemError> {
        self.get(key)?;
        if let Some((buf, iova)) = &memory {
            iova.checked_add(buf.len() as u64).ok_or(MemError::OutOfRange)?;
        }
        let new_key = if memory.is_some() {
            self.generation = self.generation.wrapping_add(1);
            ((self.slot(key) as u32) << 8 | u32::from(self.generation)) ^ self.key_mask
        } else {
            key
        };
        let r = self.get_mut(key)?;
        r.key = new_key;
        r.remote_valid = true;
        if let Some(pd) = pd {
            r.pd = pd;
        }
        if let Some((buf, iova)) = memory {
            r.addr = iova;
            r.data = Storage::User(buf);
        }
        if let Some(access) = access {
            r.access = access;
        }
        Ok(new_key)
    }

    /// Removes a region.
    pub fn deregister(&mut self, key: u32) -> Result<(), MemError> {
        self.get(key)?;
        let slot = self.slot(key);
        self.slots[slot] = None;
        Ok(())
    }

    /// True if any region belongs to `pd`.
    pub fn pd_in_use(&self, pd: u32) -> bool {
        self.slots.iter().flatten().any(|r| r.pd == pd)
    }

    /// The whole region, for the application.
    pub fn bytes(&self, key: u32) -> Result<&[u8], MemError> {
        Ok(self.get(key)?.data.as_slice())
    }

    /// The whole region, writable, for the application.
    pub fn bytes_mut(&mut self, key: u32) -> Result<&mut [u8], MemError> {
        Ok(self.get_mut(key)?.data.as_mut_slice())
    }

    /// Checks a local SGE: live key, in range, and `need` granted (LOCAL_WRITE for receive buffers).
    pub fn check_local(&self, pd: u32, sge: &Sge, need: Access) -> Result<(), MemError> {
        let r = self.get(sge.lkey)?;
        if r.pd != pd {
            return Err(MemError::WrongPd);
        }
        if !r.access.contains(need) {
            return Err(MemError::Access);
        }
        r.offset(sge.addr, u64::from(sge.length)).map(drop)
    }

    /// Checks remote access to `len` bytes at `va` under `rkey` for a QP of `pd`.
    pub fn check_remote(&self, pd: u32, rkey: u32, va: u64, len: u64, need: Access) -> Result<(), MemError> {
        let r = self.get(rkey)?;
        if r.pd != pd {
            return Err(MemError::WrongPd);
        }
        if !r.remote_valid {
            return Err(MemError::Invalidated);
        }
        if !r.access.contains(need) {
            return Err(MemError::Access);
        }
        r.offset(va, len).map(drop)
    }

    /// Remote bytes for a READ response or atomic, after [`check_remote`](Self::check_remote).
    pub fn remote(&self, pd: u32, rkey: u32, va: u64, len: usize, need: Access) -> Result<&[u8], MemError> {
        self.check_remote(pd, rkey, va, len as u64, need)?;
        let r = self.get(rkey)?;
        let off = r.offset(va, len as u64)?;
        Ok(&r.data.as_slice()[off..off + len])
    }

    /// Remote bytes, writable (RDMA WRITE, atomics).
    pub fn remote_mut(
        &mut self,
        pd: u32,
        rkey: u32,
        va: u64,
        len: usize,
        need: Access,
    ) -> Result<&mut [u8], MemError> {
        self.check_remote(pd, rkey, va, len as u64, need)?;
        let r = self.get_mut(rkey)?;
        let off = r.offset(va, len as u64)?;
        Ok(&mut r.data.as_mut_slice()[off..off + len])
    }

    /// Invalidates an R_Key of `pd` (SEND_WITH_INV): remote access through it fails from now on.
    /// Only a region registered with `Access::REMOTE_INVALIDATE` may be invalidated by a peer.
    pub fn invalidate(&mut self, pd: u32, rkey: u32) -> Result<(), MemError> {
        let r = self.get_mut(rkey)?;
        if r.pd != pd {
            return Err(MemError::WrongPd);
        }
        if !r.access.contains(Access::REMOTE_INVALIDATE) {
            return Err(MemError::NotInvalidatable);
        }
        r.remote_valid = false;
        Ok(())
    }

    /// Copies bytes `offset..offset + dst.len()` of the message an SGE list describes into `dst`.
    pub fn gather(&self, sges: &[Sge], offset: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let mut done = 0;
        for (sge, at, n) in spans(sges, offset, dst.len())? {
            let r = self.get(sge.lkey)?;
            let from = r.offset(sge.addr + at, n as u64)?;
            wire::copy_payload(&mut dst[done..done + n], &r.data.as_slice()[from..from + n]);
            done += n;
        }
        Ok(())
    }

    /// Copies `src` into bytes `offset..` of the buffer an SGE list describes; needs regions of
    /// `pd` with LOCAL_WRITE. Every piece is checked before the first byte is written, so a
    /// failure writes nothing. Receive buffers are checked only here, when a message arrives, as
    /// rxe and hardware check them (not at `post_recv`).
    pub fn scatter(&mut self, pd: u32, sges: &[Sge], offset: u64, src: &[u8]) -> Result<(), MemError> {
        let pieces = spans(sges, offset, src.len())?;
        for (sge, at, n) in pieces.clone() {
            let r = self.get(sge.lkey)?;
            if r.pd != pd {
                return Err(MemError::WrongPd);
            }
            if !r.access.contains(Access::LOCAL_WRITE) {
                return Err(MemError::Access);
            }
            r.offset(sge.addr + at, n as u64)?;
        }
        let mut done = 0;
        for (sge, at, n) in pieces {
            let r = self.get_mut(sge.lkey)?;
            let to = r.offset(sge.addr + at, n as u64)?;
            wire::copy_payload(&mut r.data.as_mut_slice()[to..to + n], &src[done..done + n]);
            done += n;
        }
        Ok(())
    }
}

/// The pieces of bytes `offset..offset + len` of an SGE list's message: (SGE, offset inside it,
/// length), or `OutOfRange` if the list is shorter. An iterator, so the per-packet path allocates
/// nothing; `scatter` walks it twice.
fn spans(sges: &[Sge], offset: u64, len: usize) -> Result<Spans<'_>, MemError> {
    if offset.saturating_add(len as u64) > sge_len(sges) {
        return Err(MemError::OutOfRange);
    }
    Ok(Spans { sges: sges.iter(), offset, len })
}

#[derive(Clone)]
struct Spans<'a> {
    sges: std::slice::Iter<'a, Sge>,
    offset: u64,
    len: usize,
}

impl Iterator for Spans<'_> {
    type Item = (Sge, u64, usize);

    fn next(&mut self) -> Option<Self::Item> {
        while self.len > 0 {
            let sge = *self.sges.next()?;
            let l = u64::from(sge.length);
            if self.offset >= l {
                self.offset -= l;
                continue;
            }
            let at = self.offset;
            let n = ((l - at) as usize).min(self.len);
            self.len -= n;
            self.offset = 0;
            return Some((sge, at, n));
        }
        None
    }
}

/// Total length of an SGE list.
pub fn sge_len(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| u64::from(s.length)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ranges_and_access() {
        let mut m = MemTable::default();
        let (k, a) = m.register(1, 100, Access::LOCAL_WRITE | Access::REMOTE_READ).unwrap();
        assert_eq!(a % PAGE as u64, 0);
        assert!(m.check_remote(1, k, a, 100, Access::REMOTE_READ).is_ok());
        assert_eq!(m.check_remote(1, k, a + 1, 100, Access::REMOTE_READ), Err(MemError::OutOfRange));
        assert_eq!(m.check_remote(1, k, a - 1, 1, Access::REMOTE_READ), Err(MemError::OutOfRange));
        assert_eq!(m.check_remote(1, k, u64::MAX, 2, Access::REMOTE_READ), Err(MemError::OutOfRange));
        assert_eq!(m.check_remote(1, k, a, 8, Access::REMOTE_WRITE), Err(MemError::Access));
        assert_eq!(m.check_remote(2, k, a, 8, Access::REMOTE_READ), Err(MemError::WrongPd));
        assert_eq!(m.check_remote(1, k ^ 1, a, 8, Access::REMOTE_READ), Err(MemError::BadKey));
        m.deregister(k).unwrap();
        let (k2, a2) = m.register(1, 100, Access::ALL | Access::REMOTE_INVALIDATE).unwrap();
        assert_ne!(k, k2, "a new registration never reuses a key");
        assert_ne!(a, a2);
        assert_eq!(m.bytes(k), Err(MemError::BadKey));
        let (k3, _) = m.register(1, 100, Access::ALL).unwrap();
        assert_eq!(m.invalidate(1, k3), Err(MemError::NotInvalidatable));
        m.invalidate(1, k2).unwrap();
        assert_eq!(m.check_remote(1, k2, a2, 1, Access::REMOTE_READ), Err(MemError::Invalidated));
    }

    /// Two devices (or two runs) do not hand out the same first R_Key and address: an off-path
    /// host cannot guess them.
    #[test]
    fn keys_and_addresses_are_not_predictable() {
        let first = || MemTable::default().register(1, 100, Access::ALL).unwrap();
        let (a, b) = (first(), first());
        assert!(a.0 != b.0 && a.1 != b.1, "two tables gave their first region {a:x?} and {b:x?}");
    }

    /// A seeded table is reproducible, and two seeds differ.
    #[test]
    fn seeded_tables_repeat_their_keys_and_addresses() {
        let first = |seed| MemTable::seeded(seed).register(1, 100, Access::ALL).unwrap();
        assert_eq!(first(7), first(7));
        let (a, b) = (first(7), first(8));
        assert!(a.0 != b.0 && a.1 != b.1, "seeds 7 and 8 gave {a:x?} and {b:x?}");
    }

    /// A reregistered region answers to its new PD, range and rights only (and to a new key when
    /// it moved); its old key, range and rights are refused; a failed reregistration changes
    /// nothing.
    #[test]
    fn reregistration_moves_a_region_and_retires_its_key() {
        let user = |len: usize| {
            let bytes: &'static mut [u8] = Box::leak(vec![0u8; len].into_boxed_slice());
            let va = bytes.as_ptr() as u64;
            (UserBuf::from_static(bytes).unwrap(), va)
        };
        let mut m = MemTable::default();
        let ((a, old_va), (b, new_va)) = (user(32), user(16));
        let k = m.register_user(1, a, old_va, Access::ALL).unwrap();
        let k2 = m
            .reregister(k, Some(2), Some((b, new_va)), Some(Access::LOCAL_WRITE | Access::REMOTE_READ))
            .unwrap();
        assert_ne!(k, k2, "new bytes come with a new key");
        assert_eq!(m.check_remote(1, k, old_va, 8, Access::REMOTE_READ), Err(MemError::BadKey));
        assert_eq!(m.check_remote(2, k, new_va, 8, Access::REMOTE_READ), Err(MemError::BadKey));
        assert!(m.check_remote(2, k2, new_va, 16, Access::REMOTE_READ).is_ok());
        assert_eq!(m.check_remote(1, k2, new_va, 8, Access::REMOTE_READ), Err(MemError::WrongPd));
        assert_eq!(m.check_remote(2, k2, new_va, 8, Access::REMOTE_WRITE), Err(MemError::Access));
        assert_eq!(m.check_remote(2, k2, old_va, 8, Access::REMOTE_READ), Err(MemError::OutOfRange));
        assert_eq!(m.check_remote(2, k2, new_va, 17, Access::REMOTE_READ), Err(MemError::OutOfRange));
        m.remote_mut(2, k2, new_va + 4, 2, Access::LOCAL_WRITE).unwrap().copy_from_slice(&[7, 8]);
        // Only the rights: the same key, the same bytes.
        let k3 = m.reregister(k2, None, None, Some(Access::ALL)).unwrap();
        assert_eq!(k3, k2, "a change of rights keeps the key");
        assert_eq!(m.remote(2, k3, new_va + 4, 2, Access::REMOTE_WRITE).unwrap(), &[7, 8]);
        // Refused: a stale key, a wrapping range; the region is as it was.
        assert_eq!(m.reregister(k, Some(1), Some(user(8)), None), Err(MemError::BadKey));
        assert_eq!(m.reregister(k3, None, Some((user(32).0, u64::MAX - 8)), None), Err(MemError::OutOfRange));
        assert!(m.check_remote(2, k3, new_va, 16, Access::REMOTE_ATOMIC).is_ok());
        assert_eq!(m.remote(2, k3, new_va + 4, 2, Access::REMOTE_READ).unwrap(), &[7, 8]);
        m.deregister(k3).unwrap();
        assert_eq!(m.bytes(k3), Err(MemError::BadKey));
    }

    #[test]
    fn gather_and_scatter_across_sges() {
        let mut m = MemTable::default();
        let (k1, a1) = m.register(1, 10, Access::LOCAL_WRITE).unwrap();
        let (k2, a2) = m.register(1, 10, Access::LOCAL_WRITE).unwrap();
        let sges = [Sge { addr: a1 + 2, length: 3, lkey: k1 }, Sge { addr: a2, length: 5, lkey: k2 }];
        m.scatter(1, &sges, 1, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(&m.bytes(k1).unwrap()[..6], &[0, 0, 0, 1, 2, 0]);
        assert_eq!(&m.bytes(k2).unwrap()[..6], &[3, 4, 5, 6, 0, 0]);
        let mut out = [0u8; 4];
        m.gather(&sges, 2, &mut out).unwrap();
        assert_eq!(out, [2, 3, 4, 5]);
        assert_eq!(m.scatter(1, &sges, 5, &[9; 4]), Err(MemError::OutOfRange));
        assert_eq!(&m.bytes(k2).unwrap()[..6], &[3, 4, 5, 6, 0, 0], "failed scatter writes nothing");
        let mut big = [0u8; 9];
        assert_eq!(m.gather(&sges, 0, &mut big), Err(MemError::OutOfRange));
        let (ro, ra) = m.register(1, 10, Access::NONE).unwrap();
        assert_eq!(m.scatter(1, &[Sge { addr: ra, length: 4, lkey: ro }], 0, &[1]), Err(MemError::Access));
        // Another PD's region (the second SGE): refused before the first byte is written.
        let (k3, a3) = m.register(2, 10, Access::LOCAL_WRITE).unwrap();
        let mixed = [Sge { addr: a1, length: 2, lkey: k1 }, Sge { addr: a3, length: 2, lkey: k3 }];
        assert_eq!(m.scatter(1, &mixed, 0, &[9; 4]), Err(MemError::WrongPd));
        assert_eq!(&m.bytes(k1).unwrap()[..2], &[0, 0], "a scatter refused for its PD writes nothing");
        m.scatter(2, &mixed[1..], 0, &[9; 2]).unwrap();
    }
}
