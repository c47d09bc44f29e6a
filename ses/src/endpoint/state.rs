//! What a SES endpoint keeps between calls, private to it: where a response goes (`Reply`), the
//! bytes of a message as the caller gave them (`Src`) and a request packet to build (`Req`); at the
//! target, where an arriving message's bytes go (`Dest`, `InMsg`) and the unexpected messages
//! (`Unexpected`); at the initiator, the operations waiting for their response (`OutOp`); and the
//! records of large messages (`Later`, `RdvReq`, `RdvWait`, `Internal`, `Restart`; see `large`).

use std::time::Duration;

use bytes::Bytes;
use pds::{NextHeader, PdcId, Urgency};
use wire::uet::ses::{MediumRequest, RendezvousExt, ReturnCode, SesExt, SesOpcode, SmallRequest};

use super::types::{Addr, CompletionKind};
use crate::matching::{MsgInfo, Posted};
use crate::mode::DeliveryMode;

/// A request received in a compact form (see `compact`).
pub(super) enum Compact<'a> {
    Small(&'a SmallRequest),
    Medium(&'a MediumRequest),
}

/// Where a response goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply<A> {
    /// Over the PDC the request came on, as soon as it asked for.
    Pdc(PdcId, Urgency),
    Rudi(A, u32),
    None,
}

/// Where an arriving message's bytes go.
#[derive(Debug)]
pub(super) enum Dest<A> {
    Recv(Posted<A>),
    Unexpected(u64),
    Rma {
        key: u64,
        base: u64,
    },
    Discard(ReturnCode),
    /// A deferrable send kept on the overflow list: its bytes are dropped, the answer says so.
    Deferred,
}

#[derive(Debug)]
pub(super) struct InMsg<A> {
    pub(super) dest: Dest<A>,
    pub(super) info: MsgInfo<A>,
    pub(super) total: usize,
    pub(super) received: usize,
    pub(super) header_data: Option<u64>,
    pub(super) job_id: u32,
    /// When its last packet came.
    pub(super) last: Duration,
    /// Its entry in the reassembly deadlines.
    pub(super) armed: Duration,
}

#[derive(Debug)]
pub(super) struct Unexpected<A> {
    /// Its partly received message, while packets are still arriving.
    pub(super) inbound: Option<(A, PdcId, u16)>,
    pub(super) info: MsgInfo<A>,
    pub(super) data: Vec<u8>,
    pub(super) complete: bool,
    pub(super) header_data: Option<u64>,
    pub(super) later: Later<A>,
}

#[derive(Debug)]
pub(super) struct OutOp<A> {
    pub(super) context: u64,
    pub(super) kind: CompletionKind,
    pub(super) peer: A,
    pub(super) pdc: Option<PdcId>,
    pub(super) total: usize,
    /// Responses still expected (RUDI operations are one request per piece).
    pub(super) pieces_left: usize,
    pub(super) error: Option<ReturnCode>,
    pub(super) data: Vec<u8>,
    pub(super) got: usize,
    /// The endpoint's own operation (rendezvous read, RTR): no user completion.
    pub(super) internal: Option<Internal>,
    /// An internal region to drop when the operation ends (rendezvous send).
    pub(super) cleanup_key: Option<u64>,
    /// A deferrable send's message, kept for its restart.
    pub(super) restart: Option<Box<Restart<A>>>,
}

/// A message's bytes as the caller gave them: borrowed, copied once when the operation is
/// accepted, or shared, never copied before each packet's payload goes into its frame.
#[derive(Debug, Clone, Copy)]
pub(super) enum Src<'a> {
    Slice(&'a [u8]),
    Shared(&'a Bytes),
}

impl Src<'_> {
    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            Src::Slice(s) => s,
            Src::Shared(b) => b,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub(super) fn to_bytes(self) -> Bytes {
        match self {
            Src::Slice(s) => Bytes::copy_from_slice(s),
            Src::Shared(b) => b.clone(),
        }
    }
}

/// A request packet to build.
pub(super) struct Req {
    pub(super) opcode: SesOpcode,
    pub(super) msg_id: u16,
    pub(super) dst: (u16, u16),
    pub(super) buffer_offset: u64,
    pub(super) key: u64,
    pub(super) header_data: Option<u64>,
    pub(super) total: usize,
    pub(super) ext: Option<SesExt>,
    pub(super) job_id: u32,
}

/// What an unexpected message still needs once a receive takes it.
#[derive(Debug)]
pub(super) enum Later<A> {
    /// Nothing: its bytes are all there (or still arriving).
    Nothing,
    /// A rendezvous: the rest is read from the initiator.
    Rendezvous(RdvReq<A>),
    /// A deferred send: the initiator is asked to restart it.
    Deferred { init_token: u32, job_id: u32 },
}

/// A rendezvous request as the target keeps it until its read is done.
#[derive(Debug, Clone, Copy)]
pub(super) struct RdvReq<A> {
    pub(super) src: A,
    pub(super) reply: Reply<A>,
    pub(super) msg_id: u16,
    pub(super) job_id: u32,
    pub(super) ext: RendezvousExt,
    pub(super) total: usize,
}

/// A receive waiting for the read of a rendezvous.
#[derive(Debug)]
pub(super) struct RdvWait<A> {
    pub(super) posted: Posted<A>,
    pub(super) info: MsgInfo<A>,
    pub(super) header_data: Option<u64>,
    pub(super) req: RdvReq<A>,
}

/// Internal operations: their completion is the endpoint's own business, not the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Internal {
    /// The READ of a rendezvous (its message id, the key of `rdv_waits`).
    RdvRead(u16),
    /// A DEFERRABLE_RTR sent for a reserved receive (its target token).
    Rtr(u32),
}

/// A deferrable send kept for its restart.
#[derive(Debug)]
pub(super) struct Restart<A> {
    pub(super) data: Bytes,
    pub(super) dst: Addr<A>,
    pub(super) tag: Option<u64>,
    pub(super) header_data: Option<u64>,
    pub(super) token: u32,
    pub(super) mode: DeliveryMode,
    pub(super) job_id: u32,
}

/// What waits for room on a PDC, in order: a built response packet, or a READ being served.
#[derive(Debug)]
pub(super) enum Pending<A> {
    Packet(NextHeader, Bytes, Urgency),
    Read(ServedRead<A>),
}

/// A READ being answered: its response packets are built from the region as the PDC takes them.
#[derive(Debug)]
pub(super) struct ServedRead<A> {
    pub(super) peer: A,
    pub(super) key: u64,
    pub(super) base: usize,
    pub(super) len: usize,
    /// Offset of the next packet's bytes.
    pub(super) next: usize,
    pub(super) msg_id: u16,
    pub(super) job_id: u32,
    /// The PSN of a compact READ answered by one RSP_DATA_SMALL (see `compact`).
    pub(super) small_psn: Option<u32>,
}
