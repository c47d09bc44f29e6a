//! Big-endian field access on slices whose length the caller has already checked.
//!
//! Every caller validates the buffer length in `check_len` before using these, which is what makes
//! the accessors of the `Packet` views panic-free.

// The reads take the field as one slice (one bounds check, one load of the field's width), not a
// byte at a time: a value assembled from byte loads and stored was read back whole at once, a
// store-forwarding stall in the receive path.
pub(crate) fn read_u16(b: &[u8], at: usize) -> u16 {
    let mut v = [0u8; 2];
    v.copy_from_slice(&b[at..at + 2]);
    u16::from_be_bytes(v)
}

pub(crate) fn read_u24(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v[1..].copy_from_slice(&b[at..at + 3]);
    u32::from_be_bytes(v)
}

pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(v)
}

pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(v)
}

pub(crate) fn write_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes the low 24 bits of `v`.
pub(crate) fn write_u24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

pub(crate) fn write_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn write_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Returns `Err(Truncated(what))` unless `len >= need`.
pub(crate) fn need(len: usize, need: usize, what: &'static str) -> crate::Result<()> {
    if len < need { Err(crate::Error::Truncated(what)) } else { Ok(()) }
}

/// Returns the first `len` bytes of `buf` for writing, or `BufferTooSmall`.
pub(crate) fn out(buf: &mut [u8], len: usize) -> crate::Result<&mut [u8]> {
    buf.get_mut(..len).ok_or(crate::Error::BufferTooSmall)
}
