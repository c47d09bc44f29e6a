//! Page-aligned frame and memory buffers: the one buffer type below the simulator (`nicsim`) and every
//! datapath (kernel UDP, AF_XDP), so that no real datapath depends on the simulator.
//!
//! The engine never makes a [`Frame`] itself: it asks its datapath for one (`Datapath::alloc`) and
//! hands it back (`transmit`, `recycle`). A datapath may therefore lend frames backed by its own
//! memory (an AF_XDP UMEM chunk) without the engine changing; today every datapath keeps a
//! [`FramePool`] of these heap pages.
//!
//! `../shared/notes/performance.md` (the glibc memcpy cliff): copying 4 KiB between addresses whose
//! difference modulo 4096 is small but not zero is an order of magnitude slower. Page alignment
//! alone does not keep payload copies out of that window (the distance also holds the offset the
//! application writes at), so the engine copies payloads with `wire::copy_payload`, which avoids it.

use bytemuck::{Pod, Zeroable};

pub mod usermem;

pub use usermem::UserBuf;

/// Size of one page of frame or region memory.
pub const PAGE: usize = 4096;

/// One page-aligned page.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(4096))]
pub struct Page(pub [u8; PAGE]);

/// Page-aligned, zeroed memory of `len` bytes (rounded up to whole pages inside).
#[derive(Clone)]
pub struct AlignedBuf {
    pages: Vec<Page>,
    len: usize,
}

impl AlignedBuf {
    /// Zeroed memory of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf { pages: vec![Page([0; PAGE]); len.div_ceil(PAGE)], len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.pages)[..self.len]
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.pages)[..self.len]
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}

/// Largest frame a [`Frame`] holds: a 4096-byte payload plus every header RoCEv2 or UET adds, with
/// room for two VLAN tags and IPv6.
pub const FRAME_CAPACITY: usize = 2 * PAGE;

/// The pages of one frame.
type FramePages = [Page; FRAME_CAPACITY / PAGE];

/// One Ethernet frame (no FCS) in a page-aligned buffer of [`FRAME_CAPACITY`] bytes.
///
/// Two words (a pointer to a fixed-size buffer and a length), so that a frame moves through the
/// datapath calls in registers: a frame of a `Vec` and a length took five words, copied through the
/// stack at each call and read back while its stores drained. The length word's top bit says that
/// the datapath checked the frame's ICRC ([`Frame::mark_icrc_checked`]).
#[derive(Clone)]
pub struct Frame {
    buf: Box<FramePages>,
    /// The length, and [`ICRC_CHECKED`] once the ICRC of the bytes as they are was checked.
    len: usize,
}

/// The top bit of [`Frame`]'s length word: its ICRC was checked. Every way to change the bytes or
/// the length clears it.
const ICRC_CHECKED: usize = 1 << (usize::BITS - 1);

impl Frame {
    /// An empty frame.
    pub fn new() -> Frame {
        Frame { buf: Box::new(FramePages::zeroed()), len: 0 }
    }

    /// A frame holding a copy of `bytes` (at most [`FRAME_CAPACITY`] of them).
    pub fn from_bytes(bytes: &[u8]) -> Frame {
        let mut f = Frame::new();
        let n = bytes.len().min(FRAME_CAPACITY);
        f.buffer_mut()[..n].copy_from_slice(&bytes[..n]);
        f.len = n;
        f
    }

    /// The frame's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.buf[..])[..self.len()]
    }

    /// The frame's bytes, writable (the ICRC is no longer known to be checked).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len();
        &mut self.buffer_mut()[..len]
    }

    /// The whole buffer, to build a frame in; then call [`Frame::set_len`]. The ICRC is no longer
    /// known to be checked.
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        self.len &= !ICRC_CHECKED;
        bytemuck::cast_slice_mut(&mut self.buf[..])
    }

    /// Sets the frame length (clamped to the capacity); the ICRC is no longer known to be checked.
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(FRAME_CAPACITY);
    }

    /// Frame length.
    pub fn len(&self) -> usize {
        self.len & !ICRC_CHECKED
    }

    /// True for an empty frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records that the frame's ICRC was checked and is right for its bytes as they are now (a
    /// datapath that verified it on receipt, or filled it for a link it was told to trust), so
    /// the engine need not compute it again. Any later change to the bytes or the length forgets
    /// it.
    pub fn mark_icrc_checked(&mut self) {
        self.len |= ICRC_CHECKED;
    }

    /// Whether [`Frame::mark_icrc_checked`] was called since the bytes last changed.
    pub fn icrc_checked(&self) -> bool {
        self.len & ICRC_CHECKED != 0
    }
}

impl Default for Frame {
    fn default() -> Self {
        Frame::new()
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Frame({} bytes)", self.len())
    }
}

/// A free list of frames, so a steady stream allocates nothing.
#[derive(Debug, Default)]
pub struct FramePool {
    free: Vec<Frame>,
}

impl FramePool {
    /// Most frames kept on the free list.
    const KEEP: usize = 4096;

    /// A frame from the free list (contents unspecified, length 0), or a new one.
    pub fn get(&mut self) -> Frame {
        let mut f = self.free.pop().unwrap_or_default();
        f.len = 0;
        f
    }

    /// Fills the free list to `n` frames (at most `KEEP`), made now: a run that
    /// then needs that many does not fault their pages in as it goes (a NIC driver fills its
    /// rings before traffic starts, for the same reason).
    pub fn reserve(&mut self, n: usize) {
        let n = n.min(Self::KEEP);
        while self.free.len() < n {
            self.free.push(Frame::default());
        }
    }

    /// Frames on the free list.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Returns a frame to the free list.
    pub fn put(&mut self, f: Frame) {
        if self.free.len() < Self::KEEP {
            self.free.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_icrc_mark_lasts_until_the_bytes_or_the_length_change() {
        let mut f = Frame::from_bytes(&[1, 2, 3]);
        assert!(!f.icrc_checked());
        f.mark_icrc_checked();
        assert!(f.icrc_checked());
        assert_eq!((f.len(), f.as_slice(), f.is_empty()), (3, &[1, 2, 3][..], false));
        assert!(f.clone().icrc_checked(), "a copy is the same bytes");
        let changes: [fn(&mut Frame); 3] =
            [|f| f.as_mut_slice()[0] = 9, |f| f.buffer_mut()[100] = 9, |f| f.set_len(3)];
        for change in changes {
            let mut g = f.clone();
            change(&mut g);
            assert!(!g.icrc_checked());
            assert_eq!(g.len(), 3);
        }
        let mut pool = FramePool::default();
        pool.put(f);
        let g = pool.get();
        assert!(!g.icrc_checked() && g.is_empty());
    }

    #[test]
    fn aligned_and_sized() {
        let mut f = Frame::from_bytes(&[1, 2, 3]);
        assert_eq!(f.as_slice(), &[1, 2, 3]);
        assert_eq!(f.buffer_mut().as_ptr() as usize % PAGE, 0);
        assert_eq!(f.buffer_mut().len(), FRAME_CAPACITY);
        let b = AlignedBuf::zeroed(5000);
        assert_eq!(b.len(), 5000);
        assert_eq!(b.as_slice().as_ptr() as usize % PAGE, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let big = Frame::from_bytes(&vec![7; FRAME_CAPACITY + 10]);
        assert_eq!(big.len(), FRAME_CAPACITY);
    }

    #[test]
    fn a_reserved_pool_hands_out_what_it_made_first() {
        let mut p = FramePool::default();
        p.reserve(3);
        assert_eq!(p.free(), 3);
        let f = p.get();
        assert_eq!((f.len(), p.free()), (0, 2));
        p.put(f);
        p.reserve(2);
        assert_eq!(p.free(), 3, "never shrinks");
        p.reserve(usize::MAX);
        assert_eq!(p.free(), FramePool::KEEP);
    }

    #[test]
    fn pool_reuses() {
        let mut p = FramePool::default();
        let mut f = p.get();
        f.set_len(10);
        let addr = f.buffer_mut().as_ptr();
        p.put(f);
        let mut g = p.get();
        assert_eq!(g.len(), 0);
        assert_eq!(g.buffer_mut().as_ptr(), addr);
    }
}
