//! BTH opcodes and the table of headers each one carries (roce-wire.md §1.1).

use core::fmt;

/// A BTH opcode. Any byte is kept; [`Opcode::info`] says whether the table knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// The transport an opcode belongs to (its top three bits, plus CNP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connected (base 0x00).
    Rc,
    /// Unreliable connected (base 0x20).
    Uc,
    /// Reliable datagram (base 0x40): decoded, never used by rxe.
    Rd,
    /// Unreliable datagram (base 0x60).
    Ud,
    /// RoCEv2 congestion notification packet (0x81).
    Cnp,
}

impl Transport {
    /// The opcode base of this transport.
    pub const fn base(self) -> u8 {
        match self {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Rd => 0x40,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
        }
    }

    /// The name used in opcode names ("RC", "UC", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
        }
    }
}

/// The operation part of an opcode (its low five bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the names are the spec's
pub enum Operation {
    SendFirst,
    SendMiddle,
    SendLast,
    SendLastImm,
    SendOnly,
    SendOnlyImm,
    WriteFirst,
    WriteMiddle,
    WriteLast,
    WriteLastImm,
    WriteOnly,
    WriteOnlyImm,
    ReadRequest,
    ReadResponseFirst,
    ReadResponseMiddle,
    ReadResponseLast,
    ReadResponseOnly,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    Resync,
    SendLastInv,
    SendOnlyInv,
    Flush,
    AtomicWrite,
    /// The CNP body (16 reserved bytes).
    Cnp,
}

impl Operation {
    const fn from_offset(v: u8) -> Option<Operation> {
        use Operation::*;
        Some(match v {
            0x00 => SendFirst,
            0x01 => SendMiddle,
            0x02 => SendLast,
            0x03 => SendLastImm,
            0x04 => SendOnly,
            0x05 => SendOnlyImm,
            0x06 => WriteFirst,
            0x07 => WriteMiddle,
            0x08 => WriteLast,
            0x09 => WriteLastImm,
            0x0A => WriteOnly,
            0x0B => WriteOnlyImm,
            0x0C => ReadRequest,
            0x0D => ReadResponseFirst,
            0x0E => ReadResponseMiddle,
            0x0F => ReadResponseLast,
            0x10 => ReadResponseOnly,
            0x11 => Acknowledge,
            0x12 => AtomicAcknowledge,
            0x13 => CompareSwap,
            0x14 => FetchAdd,
            0x15 => Resync,
            0x16 => SendLastInv,
            0x17 => SendOnlyInv,
            0x1C => Flush,
            0x1D => AtomicWrite,
            _ => return None,
        })
    }

    /// The operation offset added to the transport base (0x01 for CNP's 0x81).
    pub const fn offset(self) -> u8 {
        use Operation::*;
        match self {
            SendFirst => 0x00,
            SendMiddle => 0x01,
            SendLast => 0x02,
            SendLastImm => 0x03,
            SendOnly => 0x04,
            SendOnlyImm => 0x05,
            WriteFirst => 0x06,
            WriteMiddle => 0x07,
            WriteLast => 0x08,
            WriteLastImm => 0x09,
            WriteOnly => 0x0A,
            WriteOnlyImm => 0x0B,
            ReadRequest => 0x0C,
            ReadResponseFirst => 0x0D,
            ReadResponseMiddle => 0x0E,
            ReadResponseLast => 0x0F,
            ReadResponseOnly => 0x10,
            Acknowledge => 0x11,
            AtomicAcknowledge => 0x12,
            CompareSwap => 0x13,
            FetchAdd => 0x14,
            Resync => 0x15,
            SendLastInv => 0x16,
            SendOnlyInv => 0x17,
            Flush => 0x1C,
            AtomicWrite => 0x1D,
            Cnp => 0x01,
        }
    }

    /// The spec page's name of the operation.
    pub const fn name(self) -> &'static str {
        use Operation::*;
        match self {
            SendFirst => "SEND_FIRST",
            SendMiddle => "SEND_MIDDLE",
            SendLast => "SEND_LAST",
            SendLastImm => "SEND_LAST_IMM",
            SendOnly => "SEND_ONLY",
            SendOnlyImm => "SEND_ONLY_IMM",
            WriteFirst => "WRITE_FIRST",
            WriteMiddle => "WRITE_MIDDLE",
            WriteLast => "WRITE_LAST",
            WriteLastImm => "WRITE_LAST_IMM",
            WriteOnly => "WRITE_ONLY",
            WriteOnlyImm => "WRITE_ONLY_IMM",
            ReadRequest => "RDMA_READ_REQUEST",
            ReadResponseFirst => "READ_RESP_FIRST",
            ReadResponseMiddle => "READ_RESP_MIDDLE",
            ReadResponseLast => "READ_RESP_LAST",
            ReadResponseOnly => "READ_RESP_ONLY",
            Acknowledge => "ACKNOWLEDGE",
            AtomicAcknowledge => "ATOMIC_ACKNOWLEDGE",
            CompareSwap => "COMPARE_SWAP",
            FetchAdd => "FETCH_ADD",
            Resync => "RESYNC",
            SendLastInv => "SEND_LAST_INV",
            SendOnlyInv => "SEND_ONLY_INV",
            Flush => "FLUSH",
            AtomicWrite => "ATOMIC_WRITE",
            Cnp => "CNP",
        }
    }

    /// True for responses (the responder sends them): READ responses and acknowledgements.
    pub const fn is_response(self) -> bool {
        use Operation::*;
        matches!(
            self,
            ReadResponseFirst
                | ReadResponseMiddle
                | ReadResponseLast
                | ReadResponseOnly
                | Acknowledge
                | AtomicAcknowledge
        )
    }

    /// The extension headers of this operation on RC/UC (without RDETH/DETH).
    const fn base_headers(self) -> Headers {
        use Operation::*;
        match self {
            SendLastImm | SendOnlyImm | WriteLastImm => Headers::IMMDT,
            WriteFirst | WriteOnly | ReadRequest | AtomicWrite => Headers::RETH,
            WriteOnlyImm => Headers(Headers::RETH.0 | Headers::IMMDT.0),
            ReadResponseFirst | ReadResponseLast | ReadResponseOnly | Acknowledge => Headers::AETH,
            AtomicAcknowledge => Headers(Headers::AETH.0 | Headers::ATOMIC_ACK_ETH.0),
            CompareSwap | FetchAdd => Headers::ATOMIC_ETH,
            SendLastInv | SendOnlyInv => Headers::IETH,
            Flush => Headers(Headers::FETH.0 | Headers::RETH.0),
            _ => Headers::NONE,
        }
    }

    const fn payload(self) -> PayloadRule {
        use Operation::*;
        match self {
            SendFirst | SendMiddle | SendLast | SendLastImm | SendOnly | SendOnlyImm | WriteFirst
            | WriteMiddle | WriteLast | WriteLastImm | WriteOnly | WriteOnlyImm | ReadResponseFirst
            | ReadResponseMiddle | ReadResponseLast | ReadResponseOnly | SendLastInv | SendOnlyInv => {
                PayloadRule::Any
            }
            AtomicWrite => PayloadRule::Exact(8),
            Cnp => PayloadRule::Exact(16),
            _ => PayloadRule::Empty,
        }
    }
}

/// A set of extension headers. The bit order is the wire order (roce-wire.md §1.1: FETH before RETH,
/// AETH before AtomicAckETH, DETH before ImmDt, RETH before ImmDt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headers(pub u16);

impl Headers {
    /// No extension header.
    pub const NONE: Headers = Headers(0);
    /// Reliable datagram extended transport header.
    pub const RDETH: Headers = Headers(1 << 0);
    /// Datagram extended transport header.
    pub const DETH: Headers = Headers(1 << 1);
    /// Flush extended transport header.
    pub const FETH: Headers = Headers(1 << 2);
    /// RDMA extended transport header.
    pub const RETH: Headers = Headers(1 << 3);
    /// Atomic extended transport header.
    pub const ATOMIC_ETH: Headers = Headers(1 << 4);
    /// ACK extended transport header.
    pub const AETH: Headers = Headers(1 << 5);
    /// Atomic acknowledge extended transport header.
    pub const ATOMIC_ACK_ETH: Headers = Headers(1 << 6);
    /// Immediate data.
    pub const IMMDT: Headers = Headers(1 << 7);
    /// Invalidate extended transport header.
    pub const IETH: Headers = Headers(1 << 8);

    /// True if every header of `other` is in `self`.
    pub const fn contains(self, other: Headers) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both sets.
    pub const fn with(self, other: Headers) -> Headers {
        Headers(self.0 | other.0)
    }

    /// Bytes the headers of the set take on the wire (roce-wire.md §1.1, "Header sizes").
    pub fn wire_len(self) -> usize {
        use crate::header::FixedHeader;
        use crate::ib::{
            AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, FethRepr, IethRepr, ImmDt, RdethRepr,
            RethRepr,
        };
        [
            (Headers::RDETH, RdethRepr::LEN),
            (Headers::DETH, DethRepr::LEN),
            (Headers::FETH, FethRepr::LEN),
            (Headers::RETH, RethRepr::LEN),
            (Headers::ATOMIC_ETH, AtomicEthRepr::LEN),
            (Headers::AETH, AethRepr::LEN),
            (Headers::ATOMIC_ACK_ETH, AtomicAckEthRepr::LEN),
            (Headers::IMMDT, ImmDt::LEN),
            (Headers::IETH, IethRepr::LEN),
        ]
        .into_iter()
        .filter(|&(h, _)| self.contains(h))
        .map(|(_, len)| len)
        .sum()
    }
}

/// What payload an opcode may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadRule {
    /// No payload and no pad.
    Empty,
    /// Any length (the transport checks it against the MTU).
    Any,
    /// Exactly this many bytes.
    Exact(usize),
}

/// What the opcode table says of one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// Transport.
    pub transport: Transport,
    /// Operation.
    pub operation: Operation,
    /// Extension headers, in wire order.
    pub headers: Headers,
    /// Payload rule.
    pub payload: PayloadRule,
}

impl Opcode {
    /// The RoCEv2 CNP opcode as NICs send it.
    pub const CNP: Opcode = Opcode(0x81);

    /// The opcode for an operation on a transport, if the table has it.
    pub const fn new(transport: Transport, operation: Operation) -> Option<Opcode> {
        let op = Opcode(transport.base() | operation.offset());
        match op.info() {
            Some(i) if i.operation as u8 == operation as u8 => Some(op),
            _ => None,
        }
    }

    /// Looks the opcode up in the table; `None` for opcodes rxe, real NICs and the IBTA do not define
    /// for these transports (XRC, manufacturer-specific, ...). One indexed load: every received
    /// packet asks.
    pub const fn info(self) -> Option<OpcodeInfo> {
        OPCODE_TABLE[self.0 as usize]
    }

    /// The table entry of this opcode, worked out from the transport and operation rules
    /// (`OPCODE_TABLE` holds all 256, built at compile time).
    const fn derive_info(self) -> Option<OpcodeInfo> {
        use Operation::*;
        if self.0 == Opcode::CNP.0 {
            return Some(OpcodeInfo {
                transport: Transport::Cnp,
                operation: Cnp,
                headers: Headers::NONE,
                payload: PayloadRule::Exact(16),
            });
        }
        let transport = match self.0 & 0xE0 {
            0x00 => Transport::Rc,
            0x20 => Transport::Uc,
            0x40 => Transport::Rd,
            0x60 => Transport::Ud,
            _ => return None,
        };
        let Some(operation) = Operation::from_offset(self.0 & 0x1F) else {
            return None;
        };
        let off = operation.offset();
        let supported = match transport {
            Transport::Rc => off != Resync.offset(),
            Transport::Uc => off <= WriteOnlyImm.offset(),
            Transport::Rd => off <= Resync.offset(),
            Transport::Ud => matches!(operation, SendOnly | SendOnlyImm),
            Transport::Cnp => false,
        };
        if !supported {
            return None;
        }
        let base = operation.base_headers();
        let headers = match transport {
            Transport::Ud => base.with(Headers::DETH),
            Transport::Rd if operation.is_response() => base.with(Headers::RDETH),
            Transport::Rd => base.with(Headers::RDETH).with(Headers::DETH),
            _ => base,
        };
        Some(OpcodeInfo { transport, operation, headers, payload: operation.payload() })
    }
}

/// [`Opcode::info`] of every opcode byte.
const OPCODE_TABLE: [Option<OpcodeInfo>; 256] = {
    let mut table = [None; 256];
    let mut op = 0;
    while op < 256 {
        table[op] = Opcode(op as u8).derive_info();
        op += 1;
    }
    table
};

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(OpcodeInfo { transport: Transport::Cnp, .. }) => f.write_str("CNP"),
            Some(i) => write!(f, "{}_{}", i.transport.name(), i.operation.name()),
            None => write!(f, "UNKNOWN_{:#04x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn table_matches_spec_page() {
        let count = |base: u8| (0..32u8).filter(|o| Opcode(base | o).info().is_some()).count();
        assert_eq!(count(0x00), 25, "RC: 0x00-0x14, 0x16, 0x17, 0x1C, 0x1D");
        assert_eq!(count(0x20), 12, "UC: 0x20-0x2B");
        assert_eq!(count(0x40), 22, "RD: 0x40-0x55");
        assert_eq!(count(0x60), 2, "UD: SEND_ONLY and SEND_ONLY_IMM");
        assert!(Opcode(0x15).info().is_none());
        assert!(Opcode(0x80).info().is_none());
        assert!(Opcode(0xC0).info().is_none());
        assert_eq!(Opcode(0x81).info().unwrap().payload, PayloadRule::Exact(16));
    }

    #[test]
    fn header_sets() {
        let h = |op: u8| Opcode(op).info().unwrap().headers;
        assert_eq!(h(0x0B), Headers::RETH.with(Headers::IMMDT)); // WRITE_ONLY_IMM
        assert_eq!(h(0x07), Headers::NONE); // WRITE_MIDDLE has no RETH
        assert_eq!(h(0x08), Headers::NONE); // WRITE_LAST has no RETH
        assert_eq!(h(0x0E), Headers::NONE); // READ_RESP_MIDDLE has no AETH
        assert_eq!(h(0x12), Headers::AETH.with(Headers::ATOMIC_ACK_ETH));
        assert_eq!(h(0x65), Headers::DETH.with(Headers::IMMDT));
        assert_eq!(h(0x1C), Headers::FETH.with(Headers::RETH));
        assert_eq!(h(0x1D), Headers::RETH);
        assert_eq!(h(0x17), Headers::IETH);
        assert_eq!(h(0x44), Headers::RDETH.with(Headers::DETH));
        assert_eq!(h(0x51), Headers::RDETH.with(Headers::AETH));
        // Sizes from roce-wire.md §1.1: RETH 16 + ImmDt 4; RDETH 4 + DETH 8 + AtomicETH 28.
        assert_eq!(h(0x0B).wire_len(), 20);
        assert_eq!(h(0x53).wire_len(), 40);
        assert_eq!(Headers::NONE.wire_len(), 0);
    }

    #[test]
    fn names_and_new() {
        assert_eq!(Opcode(0x0A).to_string(), "RC_WRITE_ONLY");
        assert_eq!(Opcode(0x64).to_string(), "UD_SEND_ONLY");
        assert_eq!(Opcode(0x81).to_string(), "CNP");
        assert_eq!(Opcode(0xfe).to_string(), "UNKNOWN_0xfe");
        assert_eq!(Opcode::new(Transport::Uc, Operation::WriteOnlyImm), Some(Opcode(0x2B)));
        assert_eq!(Opcode::new(Transport::Uc, Operation::ReadRequest), None);
        assert_eq!(Opcode::new(Transport::Cnp, Operation::Cnp), Some(Opcode::CNP));
        for b in 0..=255u8 {
            if let Some(i) = Opcode(b).info() {
                assert_eq!(Opcode::new(i.transport, i.operation), Some(Opcode(b)));
            }
        }
    }
}
