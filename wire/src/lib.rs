//! Zero-copy codecs for RoCEv2 and Ultra Ethernet Transport: the bottom layer of softrdma
//! (ARCHITECTURE.md). Every other crate builds and parses headers through it, and each protocol
//! constant (ports, protocol numbers, header lengths) is defined here once.
//!
//! The style follows smoltcp's `wire` module: every header has a `Packet<T: AsRef<[u8]>>` view whose
//! `new_checked` validates the buffer length once, after which no accessor panics, and a `Repr` with
//! `parse`, `emit` and `buffer_len`. Unknown field values are kept at the view level; `Repr::parse`
//! decides what is an error. Nothing here allocates, does I/O, or panics on any input.
//!
//! Layouts follow `../shared/spec/roce-wire.md` (RoCEv2 as rdma_rxe and Wireshark implement it).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

/// Declares a zero-copy view `$name<T: AsRef<[u8]>>` with `new_unchecked`, `new_checked` (which calls
/// the view's own `check_len`) and `into_inner`. Once `check_len` passed, no accessor panics.
macro_rules! packet_view {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer after [`check_len`](Self::check_len).
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Returns the underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

/// A [`packet_view!`] over a fixed-size header, with the `check_len` that needs `$len` bytes.
macro_rules! fixed_header_view {
    ($(#[$m:meta])* $name:ident, $len:expr, $what:expr) => {
        packet_view!($(#[$m])* $name);

        impl<T: AsRef<[u8]>> $name<T> {
            /// Ensures that the buffer holds the whole header, so that no accessor panics.
            pub fn check_len(&self) -> $crate::Result<()> {
                $crate::bytes::need(self.buffer.as_ref().len(), $len, $what)
            }
        }
    };
}

/// Declares a spec value table as an enum that keeps values it does not name (`Unknown(u8)`), with
/// `From<u8>`, `From<Enum> for u8` and the spec's `name()`. `From<u8>` maps a named value to its
/// variant, so `Unknown` only ever holds unnamed values.
macro_rules! wire_enum {
    ($(#[$m:meta])* pub enum $name:ident { $($var:ident = $val:expr => $text:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(missing_docs)] // the variants are the spec's names
        pub enum $name {
            $($var,)*
            /// A value the spec table does not name, kept as it was.
            Unknown(u8),
        }

        impl From<u8> for $name {
            fn from(v: u8) -> Self {
                match v {
                    $($val => $name::$var,)*
                    v => $name::Unknown(v),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                match v {
                    $($name::$var => $val,)*
                    $name::Unknown(v) => v,
                }
            }
        }

        impl $name {
            /// The spec's name of the value ("UNKNOWN" for unnamed values).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$var => $text,)*
                    $name::Unknown(_) => "UNKNOWN",
                }
            }
        }
    };
}

mod bytes;
pub mod checksum;
pub mod copy;
mod error;
pub mod ethernet;
pub mod frame;
mod header;
pub mod ib;
pub mod ipv4;
pub mod ipv6;
mod ports;
#[cfg(test)]
mod testutil;
pub mod udp;
pub mod uet;
pub mod vlan;

pub use copy::copy_payload;
pub use error::{Error, Result};
pub use ethernet::{EthernetAddress, EthernetRepr};
pub use frame::{FrameRepr, IpRepr, L4Repr, UdpFrameRepr, UdpTemplate};
pub use header::FixedHeader;
pub use ipv4::Ipv4Repr;
pub use ipv6::Ipv6Repr;
pub use ports::ROCEV2_UDP_PORT;
pub use udp::{UdpChecksum, UdpRepr};
pub use vlan::VlanTag;
