use core::fmt;

/// Why a buffer could not be parsed or a `Repr` could not be emitted.
///
/// Small and `Copy`, with static context naming the header or field, in the manner of rustls'
/// `InvalidMessage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer ends before the named header or field does.
    Truncated(&'static str),
    /// A version field holds a value this codec does not speak (IP version, BTH TVer).
    BadVersion(&'static str),
    /// A BTH opcode with no entry in the opcode table (roce-wire.md §1.1).
    UnknownOpcode(u8),
    /// The invariant CRC on the wire differs from the one computed over the packet.
    BadIcrc {
        /// ICRC computed over the masked packet.
        computed: u32,
        /// ICRC found on the wire (read little-endian).
        found: u32,
    },
    /// The UET CRC32C trailer differs from the one computed over the packet.
    BadCrc {
        /// CRC computed over PDS header through payload.
        computed: u32,
        /// CRC found on the wire.
        found: u32,
    },
    /// An Internet checksum (IPv4 header, UDP) does not verify.
    BadChecksum(&'static str),
    /// A length field disagrees with the buffer or with the rules of its header.
    BadLength(&'static str),
    /// A field that must be zero (pad bytes, ...) is not.
    Reserved(&'static str),
    /// Well-formed, but not something this codec decodes (an IPv4 fragment, a third VLAN tag, ...).
    Unsupported(&'static str),
    /// On emit: the `Repr` contradicts itself (e.g. its headers do not match its opcode).
    Inconsistent(&'static str),
    /// On emit: the destination buffer is shorter than `buffer_len()`.
    BufferTooSmall,
}

/// Result with the codec [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated(what) => write!(f, "truncated {what}"),
            Error::BadVersion(what) => write!(f, "bad {what} version"),
            Error::UnknownOpcode(op) => write!(f, "unknown BTH opcode {op:#04x}"),
            Error::BadIcrc { computed, found } => {
                write!(f, "bad ICRC: wire {found:#010x}, computed {computed:#010x}")
            }
            Error::BadCrc { computed, found } => {
                write!(f, "bad UET CRC: wire {found:#010x}, computed {computed:#010x}")
            }
            Error::BadChecksum(what) => write!(f, "bad {what} checksum"),
            Error::BadLength(what) => write!(f, "bad length: {what}"),
            Error::Reserved(what) => write!(f, "non-zero reserved field: {what}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
            Error::Inconsistent(what) => write!(f, "inconsistent representation: {what}"),
            Error::BufferTooSmall => write!(f, "emit buffer too small"),
        }
    }
}

impl core::error::Error for Error {}
