//! The public types of a SES [`Endpoint`]: the address ([`Addr`]) and options ([`Opts`]) of an
//! operation, its completion ([`Completion`], [`CompletionKind`], [`Status`]), why one is refused
//! ([`Error`]), and the endpoint's counters ([`Stats`]).
//!
//! [`Endpoint`]: crate::Endpoint

use pds::PdcError;
use wire::uet::ses::ReturnCode;

use crate::matching::Source;

/// A SES endpoint address: the fabric endpoint and the target's PIDonFEP and resource index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Addr<A> {
    /// Fabric endpoint (what the PDS addresses).
    pub fep: A,
    /// PIDonFEP of the target process.
    pub pid_on_fep: u16,
    /// Resource index of the target service.
    pub resource_index: u16,
}

/// Options of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Opts {
    /// Returned in the completion.
    pub context: u64,
    /// The operation's ordering class is on: ROD.
    pub ordered: bool,
    /// Completion data for the target (sends and writes; ignored by reads).
    pub header_data: Option<u64>,
    /// The JobID to put in the request (the destination's auth key with the AV JobID method);
    /// `None`: the endpoint's own (`Config::job_id`).
    pub job_id: Option<u32>,
    /// Nobody waits for the completion (an inject): the packets ask the target for no immediate
    /// ACK, which then comes within its coalescing delay, off the path of whatever the
    /// application does next.
    pub lazy_ack: bool,
}

/// What a completion completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompletionKind {
    /// A send (tagged or not) this side started.
    Send,
    /// A write this side started.
    Write,
    /// A read this side started (`data` holds the bytes read).
    Read,
    /// A posted receive got a message (`data`, `src`, `tag`, `header_data`).
    Recv,
    /// A peer wrote to a region with completion data (`header_data`, `src`, `len`).
    RemoteWrite,
    /// A non-fetching atomic this side started.
    Atomic,
    /// A fetching or compare atomic this side started (`data` holds the old value).
    FetchAtomic,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Done.
    Ok,
    /// The target answered with this return code.
    Remote(ReturnCode),
    /// A receive got a message longer than its buffer: the first `len` bytes were placed.
    Truncated,
    /// The PDC carrying it failed.
    Failed(PdcError),
    /// A RUDI request got no response.
    Timeout,
    /// A receive cancelled.
    Cancelled,
}

/// A completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion<A> {
    /// The context given with the operation or receive.
    pub context: u64,
    /// What completed.
    pub kind: CompletionKind,
    /// How.
    pub status: Status,
    /// Bytes moved.
    pub len: usize,
    /// Received or read bytes (`len` of them).
    pub data: Vec<u8>,
    /// The sender, for receives and remote writes.
    pub src: Option<Source<A>>,
    /// The message tag, for tagged receives.
    pub tag: Option<u64>,
    /// Completion data, when the sender gave some.
    pub header_data: Option<u64>,
}

impl<A> Completion<A> {
    pub(super) fn local(
        context: u64,
        kind: CompletionKind,
        status: Status,
        len: usize,
        data: Vec<u8>,
    ) -> Completion<A> {
        Completion { context, kind, status, len, data, src: None, tag: None, header_data: None }
    }
}

/// Why an operation was refused before anything was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// Longer than `max_message`, or (UUD) than one packet.
    TooLong,
    /// The PDC's send queue has no room for the message now, or all 65536 message ids are held
    /// by outstanding operations; retry after progress.
    Busy,
    /// The operation does not exist on this endpoint type (RMA on DGRAM, ...).
    Unsupported,
    /// The PDS refused (PDC limit).
    NoPdc,
    /// Atomic operands of the wrong length for the datatype (or empty).
    BadOperand,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::TooLong => "message too long",
            Error::Busy => "send queue full or no message id free",
            Error::Unsupported => "operation not supported on this endpoint",
            Error::NoPdc => "no PDC available",
            Error::BadOperand => "atomic operand length does not fit the datatype",
        })
    }
}

impl std::error::Error for Error {}

/// Counters.
///
/// Every packet the PDS delivers is counted once, as used ([`rx_used`](Self::rx_used)) or in one of
/// the refusals [`rx_refused`](Self::rx_refused) sums: [`dropped`](Self::dropped),
/// [`wrong_delivery`](Self::wrong_delivery), [`inbound_refused`](Self::inbound_refused),
/// [`rx_rejected`](Self::rx_rejected).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets taken: placed in a message, served, applied, or matched to an operation of this
    /// side (an error response from the peer is taken too: it ends its operation).
    pub rx_used: u64,
    /// Requests refused with an error return code for what they ask (JobID, PIDonFEP, resource
    /// index, length, memory key or range, opcode, NO_MATCH with the unexpected list full,
    /// DROPPED with `max_served_reads` reached, ...): the first packet of a message is answered,
    /// the others of a message so refused only counted.
    pub rx_rejected: u64,
    /// Responses sent with a return code other than OK (to refused requests, and to partly
    /// received messages given up).
    pub errors_sent: u64,
    /// Of [`errors_sent`](Self::errors_sent), by return code.
    pub errors_sent_codes: pds::CodeCounts,
    /// Completions taken ([`Endpoint::poll_completion`]): operations of this side and messages
    /// received.
    ///
    /// [`Endpoint::poll_completion`]: crate::Endpoint::poll_completion
    pub completions: u64,
    /// Of [`completions`](Self::completions), the operations the target answered with an error,
    /// by return code.
    pub completion_errors: pds::CodeCounts,
    /// Of [`completions`](Self::completions), the operations whose PDC failed or whose RUDI
    /// request got no response.
    pub completions_failed: u64,
    /// Messages kept as unexpected.
    pub unexpected: u64,
    /// Messages answered NO_MATCH because the unexpected list was full (`max_unexpected_msgs`
    /// entries or `unexpected_bytes` bytes); of [`rx_rejected`](Self::rx_rejected).
    pub unexpected_refused: u64,
    /// READs answered DROPPED because `max_served_reads` were being served to their source; of
    /// [`rx_rejected`](Self::rx_rejected).
    pub reads_refused: u64,
    /// Packets the SES could not use (bad header, inconsistent lengths, stray responses).
    pub dropped: u64,
    /// Sends this side started as rendezvous.
    pub rendezvous_sent: u64,
    /// Rendezvous reads this side issued as the target.
    pub rendezvous_reads: u64,
    /// Deferrable sends this side kept on its overflow list (target).
    pub deferred: u64,
    /// Deferrable sends this side restarted on an RTR (initiator).
    pub restarts: u64,
    /// Requests whose opcode does not fit how they were delivered (RUDI: READ or WRITE of one
    /// packet; UUD: one-packet DATAGRAM_SEND), refused (UNSUPPORTED_OP) or dropped (UUD).
    pub wrong_delivery: u64,
    /// Packets of new messages refused (DROPPED, answered on the first packet) because their PDC
    /// or source already had `max_inbound_per_pdc` / `max_inbound_per_source` partly received
    /// messages.
    pub inbound_refused: u64,
    /// Partly received messages dropped after `reassembly_timeout` without a packet.
    pub reassembly_timeouts: u64,
    /// Requests this side sent, by SES opcode ([`SesOpcode`] as `u8`): one per operation over a
    /// PDC or UUD, one per piece over RUDI (each piece is a request of its own), and those the
    /// endpoint starts itself (rendezvous reads, DEFERRABLE_RTR, restarted deferrable sends).
    ///
    /// [`SesOpcode`]: wire::uet::ses::SesOpcode
    pub ops_tx: pds::CodeCounts,
    /// Requests received, by SES opcode: a message once, on the first of its packets to arrive
    /// (one refused once, on its first packet, SOM, which is answered); a READ, an atomic, a
    /// rendezvous send or a DEFERRABLE_RTR (one packet each) once. Requests whose opcode does not
    /// fit their delivery are not counted ([`wrong_delivery`](Self::wrong_delivery)).
    pub ops_rx: pds::CodeCounts,
}

impl Stats {
    /// Packets delivered by the PDS and refused: `dropped + wrong_delivery + inbound_refused +
    /// rx_rejected`. With [`rx_used`](Self::rx_used), every delivered packet.
    pub fn rx_refused(&self) -> u64 {
        self.dropped + self.wrong_delivery + self.inbound_refused + self.rx_rejected
    }

    pub(super) fn count(&mut self, taken: Taken) {
        match taken {
            Ok(()) => self.rx_used += 1,
            Err(Refusal::Dropped) => self.dropped += 1,
            Err(Refusal::WrongDelivery) => self.wrong_delivery += 1,
            Err(Refusal::InboundFull) => self.inbound_refused += 1,
            Err(Refusal::Rejected) => self.rx_rejected += 1,
        }
    }
}

/// Why the SES refused a delivered packet: each is counted in its own field of [`Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Unusable: a bad header, inconsistent lengths, a stray response.
    Dropped,
    /// An opcode the delivery (RUDI, UUD) does not carry.
    WrongDelivery,
    /// A new message beyond the partly received ones allowed.
    InboundFull,
    /// Refused for what it asks, with an error return code.
    Rejected,
}

/// What became of a delivered packet.
pub(super) type Taken = Result<(), Refusal>;
