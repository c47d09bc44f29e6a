//! What a PDS packet carries after its own header.

use bytes::Bytes;

/// Longest upper-layer header a [`Body`] holds inline: the longest SES header, a standard request
/// (44 bytes) with the compare-and-swap extension (36), fits with room to spare.
pub const HEAD_MAX: usize = 96;

/// The bytes after a PDS header: the upper layer's header, held inline, then the payload it
/// describes, shared (reference-counted) rather than copied: a payload can be a slice of the
/// message it belongs to, copied once, into the frame, each time the packet is (re)transmitted.
/// Building a body allocates nothing. A body made from one [`Bytes`] is all payload.
#[derive(Clone)]
pub struct Body {
    head: [u8; HEAD_MAX],
    head_len: u8,
    data: Bytes,
}

impl Body {
    /// `head` followed by `data`. A head longer than [`HEAD_MAX`] (no SES header is) is joined to
    /// the data in a new buffer instead.
    pub fn new(head: &[u8], data: Bytes) -> Body {
        if head.len() > HEAD_MAX {
            return Body::from(Bytes::from([head, &data[..]].concat()));
        }
        Body::with_head(data, |h| {
            h[..head.len()].copy_from_slice(head);
            head.len()
        })
    }

    /// A body whose header `emit` writes straight into the inline space (returning its length, at
    /// most [`HEAD_MAX`]), followed by `data`. Built elsewhere and copied in, a header is read back
    /// while the stores that built it still drain: a stall per packet.
    pub fn with_head(data: Bytes, emit: impl FnOnce(&mut [u8; HEAD_MAX]) -> usize) -> Body {
        let mut b = Body { head: [0; HEAD_MAX], head_len: 0, data };
        b.head_len = emit(&mut b.head).min(HEAD_MAX) as u8;
        b
    }

    /// The upper-layer header.
    pub fn head(&self) -> &[u8] {
        &self.head[..usize::from(self.head_len)]
    }

    /// What follows the header.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        usize::from(self.head_len) + self.data.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the body to the start of `buf`; its length, or `None` if `buf` is too short.
    pub fn write_to(&self, buf: &mut [u8]) -> Option<usize> {
        let (h, end) = (usize::from(self.head_len), self.len());
        let out = buf.get_mut(..end)?;
        out[..h].copy_from_slice(self.head());
        wire::copy_payload(&mut out[h..], &self.data);
        Some(end)
    }

    /// Copies the header only to the start of `buf`, which must have room for the whole body (the
    /// data is placed after it by the caller); the header's length, or `None` if `buf` is too short.
    pub fn write_head_to(&self, buf: &mut [u8]) -> Option<usize> {
        let h = usize::from(self.head_len);
        if buf.len() < self.len() {
            return None;
        }
        buf[..h].copy_from_slice(self.head());
        Some(h)
    }

    /// The body as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        [self.head(), &self.data[..]].concat()
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::from(Bytes::new())
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.len() == other.len() && self.to_vec() == other.to_vec()
    }
}

impl Eq for Body {}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Body").field("head", &self.head()).field("data_len", &self.data.len()).finish()
    }
}

impl From<Bytes> for Body {
    fn from(data: Bytes) -> Body {
        Body { head: [0; HEAD_MAX], head_len: 0, data }
    }
}

impl From<Vec<u8>> for Body {
    fn from(data: Vec<u8>) -> Body {
        Body::from(Bytes::from(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_head_then_data_and_refuses_a_short_buffer() {
        let b = Body::new(b"head", Bytes::from_static(b"-data"));
        assert_eq!((b.len(), b.head(), &b.data()[..]), (9, &b"head"[..], &b"-data"[..]));
        let mut buf = [0u8; 12];
        assert_eq!(b.write_to(&mut buf), Some(9));
        assert_eq!(&buf[..9], b"head-data");
        assert_eq!(b.to_vec(), b"head-data");
        assert_eq!(b.write_to(&mut buf[..8]), None);
        let one = Body::from(Bytes::from_static(b"all"));
        assert_eq!((one.len(), one.to_vec()), (3, b"all".to_vec()));
        assert!(Body::default().is_empty());
        assert_eq!(one, Body::new(b"a", Bytes::from_static(b"ll")), "equal bytes, however split");
    }

    #[test]
    fn a_head_too_long_to_hold_inline_joins_the_data() {
        let head = [7u8; HEAD_MAX + 1];
        let b = Body::new(&head, Bytes::from_static(b"xy"));
        assert_eq!(b.len(), HEAD_MAX + 3);
        assert_eq!(&b.to_vec()[HEAD_MAX..], &[7, b'x', b'y']);
        let full = Body::new(&head[..HEAD_MAX], Bytes::new());
        assert_eq!(full.head().len(), HEAD_MAX);
    }
}
