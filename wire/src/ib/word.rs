//! The codec of the 4-byte headers that are one 32-bit big-endian word (IETH, ImmDt, RDETH, FETH).

use crate::Result;

/// Reads the single 32-bit big-endian field of a 4-byte header.
pub(super) fn parse_word(buf: &[u8], what: &'static str) -> Result<u32> {
    crate::bytes::need(buf.len(), 4, what)?;
    Ok(crate::bytes::read_u32(buf, 0))
}

/// Writes the single 32-bit field of a 4-byte header.
pub(super) fn emit_word(buf: &mut [u8], v: u32) -> Result<usize> {
    crate::bytes::write_u32(crate::bytes::out(buf, 4)?, 0, v);
    Ok(4)
}
