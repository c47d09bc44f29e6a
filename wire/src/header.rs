//! The [`FixedHeader`] trait of the headers of fixed size.

use crate::Result;

/// A header of fixed size (the IB extension headers, the UET headers).
pub trait FixedHeader: Sized + Copy {
    /// Size on the wire.
    const LEN: usize;
    /// Parses the header from the start of `buf`.
    fn parse(buf: &[u8]) -> Result<Self>;
    /// Writes the header at the start of `buf`; returns [`Self::LEN`].
    fn emit(&self, buf: &mut [u8]) -> Result<usize>;
}
