//! Completion queues, completion counters, event queues and address vectors
//! (`../shared/spec/uet-libfabric.md` "Objects and the usual call flow", "Addressing",
//! "Completion and errors").

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::rc::{Rc, Weak};
use std::time::Duration;

use super::errno::{FiErrno, FiError};

/// What the objects need of their fabric: manual progress, virtual time and the control plane's
/// JobID check. The fabric (`endpoint.rs`) implements it, so that this file does not depend on it.
pub(super) trait FabricOps {
    /// One round of every endpoint; true if anything moved.
    fn progress(&self) -> bool;
    /// Progress, or virtual time to the next event; false when nothing can happen any more.
    fn step(&self) -> bool;
    /// Virtual time.
    fn now(&self) -> Duration;
    /// Whether the control plane assigned `job_id` to `process`.
    fn may_use(&self, process: u32, job_id: u32) -> bool;
}

/// An endpoint bound to an address vector: it serves the JobIDs the AV's auth keys add.
pub(super) trait JobSink {
    /// Lets the endpoint's semantic sublayer serve `job_id`.
    fn authorize_job(&self, job_id: u32);
}

/// An address vector index (`fi_addr_t`).
pub type FiAddr = u64;
/// No address: a receive from anyone, or a source not in the AV.
pub const FI_ADDR_UNSPEC: FiAddr = u64::MAX;

/// A UET endpoint address (`FI_ADDR_UET`), what `Endpoint::getname` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UetAddr {
    /// The fabric endpoint's IP address.
    pub ip: Ipv4Addr,
    /// PIDonFEP.
    pub pid_on_fep: u16,
    /// Resource index (the service's first index).
    pub resource_index: u16,
    /// Initiator ID (the sender's rank).
    pub initiator: u32,
    /// Fabric Endpoint Capabilities: bit 0 AI Base, bit 1 AI Full, bit 2 HPC.
    pub profiles: u8,
}

impl UetAddr {
    /// Bytes of an address as `fi_getname` gives it and `fi_av_insert` takes it.
    pub const LEN: usize = 28;
    /// The layout's version (byte 0).
    const VERSION: u8 = 1;
    /// Address mode (byte 1): the FEP address is IPv4, stored IPv4-mapped.
    const MODE_IPV4: u8 = 4;
    /// Valid flags (byte 2): IP address, PIDonFEP, initiator, resource index, profiles.
    const VALID_ALL: u8 = 0x1F;

    /// The address as bytes: version, address mode, valid flags, profiles, PIDonFEP, resource
    /// index (big endian, 2 bytes each), initiator (4), the FEP address (16, IPv4-mapped).
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&[Self::VERSION, Self::MODE_IPV4, Self::VALID_ALL, self.profiles]);
        b[4..6].copy_from_slice(&self.pid_on_fep.to_be_bytes());
        b[6..8].copy_from_slice(&self.resource_index.to_be_bytes());
        b[8..12].copy_from_slice(&self.initiator.to_be_bytes());
        b[12..].copy_from_slice(&self.ip.to_ipv6_mapped().octets());
        b
    }

    /// Reads what [`to_bytes`](Self::to_bytes) wrote; FI_EINVAL for anything else (another
    /// length, version, mode or valid set, a PIDonFEP above 12 bits, unknown profile bits, an
    /// address that is not IPv4-mapped).
    pub fn from_bytes(b: &[u8]) -> Result<UetAddr, FiError> {
        let bad = |why: &str| FiError::new(FiErrno::EINVAL, format!("not a softrdma UET address: {why}"));
        let b: &[u8; Self::LEN] =
            b.try_into().map_err(|_| bad(&format!("{} bytes, not {}", b.len(), Self::LEN)))?;
        if b[..3] != [Self::VERSION, Self::MODE_IPV4, Self::VALID_ALL] {
            return Err(bad("unknown version, address mode or valid flags"));
        }
        let pid_on_fep = u16::from_be_bytes([b[4], b[5]]);
        if pid_on_fep > 0xFFF || b[3] & !0b111 != 0 || b[3] == 0 {
            return Err(bad("PIDonFEP above 12 bits or unknown profiles"));
        }
        let octets: [u8; 16] = b[12..].try_into().map_err(|_| bad("address"))?;
        let ip = std::net::Ipv6Addr::from(octets).to_ipv4_mapped().ok_or_else(|| bad("not IPv4-mapped"))?;
        Ok(UetAddr {
            ip,
            pid_on_fep,
            resource_index: u16::from_be_bytes([b[6], b[7]]),
            initiator: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            profiles: b[3],
        })
    }
}

/// Bind flags for [`Endpoint::bind_cq`](super::Endpoint::bind_cq) and
/// [`Endpoint::bind_cntr`](super::Endpoint::bind_cntr).
pub mod bind {
    /// Transmit completions (FI_TRANSMIT / FI_SEND, FI_READ, FI_WRITE).
    pub const TRANSMIT: u64 = super::cq_flags::SEND | super::cq_flags::READ | super::cq_flags::WRITE;
    /// Receive completions (FI_RECV, and remote writes with completion data).
    pub const RECV: u64 = super::cq_flags::RECV | super::cq_flags::REMOTE_WRITE;
}

/// Completion flags (`FI_SEND`, `FI_RECV`, ...).
pub mod cq_flags {
    /// A send (tagged or not).
    pub const SEND: u64 = 1 << 0;
    /// A receive.
    pub const RECV: u64 = 1 << 1;
    /// RMA.
    pub const RMA: u64 = 1 << 2;
    /// Atomic.
    pub const ATOMIC: u64 = 1 << 3;
    /// Read (RMA read or fetching atomic).
    pub const READ: u64 = 1 << 4;
    /// Write.
    pub const WRITE: u64 = 1 << 5;
    /// Tagged message.
    pub const TAGGED: u64 = 1 << 6;
    /// Untagged message.
    pub const MSG: u64 = 1 << 7;
    /// The entry carries the peer's completion data.
    pub const REMOTE_CQ_DATA: u64 = 1 << 8;
    /// A peer's write to a local region (with completion data).
    pub const REMOTE_WRITE: u64 = 1 << 9;
    /// The last completion of a multi-receive buffer ([`Endpoint::recv_multi`]): it is released.
    ///
    /// [`Endpoint::recv_multi`]: crate::provider::Endpoint::recv_multi
    pub const MULTI_RECV: u64 = 1 << 10;
}

/// A successful completion (`fi_cq_tagged_entry` with the source and the data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CqEntry {
    /// The operation's context.
    pub op_context: u64,
    /// [`cq_flags`].
    pub flags: u64,
    /// Bytes moved.
    pub len: usize,
    /// Received, read or fetched bytes.
    pub buf: Vec<u8>,
    /// Completion data.
    pub data: Option<u64>,
    /// The tag of a tagged receive.
    pub tag: Option<u64>,
    /// The sender of a receive, as an AV index ([`FI_ADDR_UNSPEC`] if not in the AV).
    pub src: FiAddr,
    /// Where in a multi-receive buffer the message landed (0 for other operations).
    pub offset: usize,
}

/// A failed completion (`fi_cq_err_entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CqErrEntry {
    /// The operation's context.
    pub op_context: u64,
    /// [`cq_flags`].
    pub flags: u64,
    /// Bytes placed before the failure (a truncated receive: what fit).
    pub len: usize,
    /// libfabric errno.
    pub err: FiErrno,
    /// The SES return code of the target's answer (0 when the failure was not an answer).
    pub prov_errno: u8,
    /// Bytes placed (a truncated receive's first `len` bytes).
    pub buf: Vec<u8>,
}

#[derive(Debug, Default)]
pub(super) struct CqInner {
    pub(super) queue: VecDeque<Result<CqEntry, CqErrEntry>>,
}

/// A completion queue. Reading it makes progress on every endpoint of the fabric (manual progress).
#[derive(Debug, Clone)]
pub struct CompletionQueue {
    pub(super) inner: Rc<RefCell<CqInner>>,
    pub(super) fabric: Weak<dyn FabricOps>,
}

impl CompletionQueue {
    pub(super) fn new(fabric: Weak<dyn FabricOps>) -> CompletionQueue {
        CompletionQueue { inner: Rc::default(), fabric }
    }

    pub(super) fn push(&self, e: Result<CqEntry, CqErrEntry>) {
        self.inner.borrow_mut().queue.push_back(e);
    }

    fn progress(&self) {
        if let Some(f) = self.fabric.upgrade() {
            f.progress();
        }
    }

    /// `fi_cq_read`: the next completion, `None` if there is none (FI_EAGAIN), or FI_EAVAIL
    /// when the next one is an error (take it with [`readerr`](Self::readerr)).
    pub fn read(&self) -> Result<Option<CqEntry>, FiError> {
        self.progress();
        let mut q = self.inner.borrow_mut();
        match q.queue.front() {
            None => Ok(None),
            Some(Err(_)) => Err(FiError::new(FiErrno::EAVAIL, "an error completion is waiting")),
            Some(Ok(_)) => Ok(q.queue.pop_front().and_then(Result::ok)),
        }
    }

    /// `fi_cq_readerr`: the error completion at the head, if that is what is there.
    pub fn readerr(&self) -> Option<CqErrEntry> {
        let mut q = self.inner.borrow_mut();
        match q.queue.front() {
            Some(Err(_)) => q.queue.pop_front().and_then(Result::err),
            _ => None,
        }
    }

    /// `fi_cq_sread`: waits (moving the simulated network's time) for the next completion,
    /// success or error, up to `limit` of virtual time; FI_ETIMEDOUT if none comes.
    pub fn sread(&self, limit: Duration) -> Result<Result<CqEntry, CqErrEntry>, FiError> {
        let fabric = self.fabric.upgrade().ok_or_else(|| FiError::new(FiErrno::EINVAL, "fabric closed"))?;
        let until = fabric.now() + limit;
        loop {
            if let Some(e) = self.inner.borrow_mut().queue.pop_front() {
                return Ok(e);
            }
            if !fabric.step() || fabric.now() > until {
                return Err(FiError::new(FiErrno::ETIMEDOUT, "no completion"));
            }
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct CntrInner {
    pub(super) completions: u64,
    pub(super) bytes: u64,
    pub(super) errors: u64,
}

/// A completion counter (FI_CNTR_EVENTS_COMP and FI_CNTR_EVENTS_BYTES).
#[derive(Debug, Clone)]
pub struct Counter {
    pub(super) inner: Rc<RefCell<CntrInner>>,
    pub(super) fabric: Weak<dyn FabricOps>,
}

impl Counter {
    pub(super) fn new(fabric: Weak<dyn FabricOps>) -> Counter {
        Counter { inner: Rc::default(), fabric }
    }

    pub(super) fn count(&self, ok: bool, bytes: usize) {
        let mut c = self.inner.borrow_mut();
        if ok {
            c.completions += 1;
            c.bytes += bytes as u64;
        } else {
            c.errors += 1;
        }
    }

    fn progress(&self) {
        if let Some(f) = self.fabric.upgrade() {
            f.progress();
        }
    }

    /// `fi_cntr_read`: successful completions.
    pub fn read(&self) -> u64 {
        self.progress();
        self.inner.borrow().completions
    }

    /// Bytes of the successful completions.
    pub fn read_bytes(&self) -> u64 {
        self.progress();
        self.inner.borrow().bytes
    }

    /// `fi_cntr_readerr`: failed completions.
    pub fn readerr(&self) -> u64 {
        self.progress();
        self.errors_counted()
    }

    /// Failed completions counted so far, without making progress first: what `fi_cntr_wait`
    /// compares against, so that an error that arrives once it waits ends the wait.
    pub fn errors_counted(&self) -> u64 {
        self.inner.borrow().errors
    }

    /// `fi_cntr_add`.
    pub fn add(&self, value: u64) {
        let mut c = self.inner.borrow_mut();
        c.completions = c.completions.wrapping_add(value);
    }

    /// `fi_cntr_set`.
    pub fn set(&self, value: u64) {
        self.inner.borrow_mut().completions = value;
    }

    /// `fi_cntr_adderr`.
    pub fn adderr(&self, value: u64) {
        let mut c = self.inner.borrow_mut();
        c.errors = c.errors.wrapping_add(value);
    }

    /// `fi_cntr_seterr`.
    pub fn seterr(&self, value: u64) {
        self.inner.borrow_mut().errors = value;
    }
}

/// An asynchronous event (`fi_eq_read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EqEvent {
    /// A memory registration completed (FI_MR_COMPLETE).
    MrComplete {
        /// The key.
        key: u64,
    },
    /// Addresses were inserted (FI_AV_COMPLETE).
    AvComplete {
        /// How many.
        count: usize,
    },
    /// An asynchronous error: a PDC to a peer failed.
    Error {
        /// libfabric errno.
        err: FiErrno,
        /// What happened.
        what: String,
    },
}

/// An event queue.
#[derive(Debug, Clone, Default)]
pub struct EventQueue {
    pub(super) inner: Rc<RefCell<VecDeque<EqEvent>>>,
}

impl EventQueue {
    /// The next event.
    pub fn read(&self) -> Option<EqEvent> {
        self.inner.borrow_mut().pop_front()
    }

    pub(super) fn push(&self, e: EqEvent) {
        self.inner.borrow_mut().push_back(e);
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct AvEntry {
    pub(super) addr: UetAddr,
    /// The JobID of the auth key the address was inserted with (AV JobID method).
    pub(super) job: Option<u32>,
    /// Removed (`fi_av_remove`): the index stays taken, and names nobody.
    pub(super) removed: bool,
}

#[derive(Debug, Default)]
pub(super) struct AvInner {
    pub(super) entries: Vec<AvEntry>,
    pub(super) auth_keys: Vec<u32>,
    pub(super) endpoints: Vec<Weak<dyn JobSink>>,
    pub(super) eq: Option<EventQueue>,
}

impl AvInner {
    /// The entry at index `a`, unless there is none or it was removed.
    pub(super) fn live(&self, a: FiAddr) -> Option<&AvEntry> {
        usize::try_from(a).ok().and_then(|i| self.entries.get(i)).filter(|e| !e.removed)
    }
}

/// An address vector with table semantics (`FI_AV_TABLE`: index = insertion order, contiguous).
#[derive(Debug, Clone)]
pub struct AddressVector {
    pub(super) inner: Rc<RefCell<AvInner>>,
    /// The process the domain belongs to (for auth key checks) and the control plane.
    pub(super) process: u32,
    pub(super) fabric: Weak<dyn FabricOps>,
}

/// An auth key handle returned by [`AddressVector::insert_auth_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AuthKey(pub(super) usize);

impl AddressVector {
    /// `fi_av_insert`: appends the addresses; their indices follow insertion order.
    pub fn insert(&self, addrs: &[UetAddr]) -> Vec<FiAddr> {
        self.insert_entries(addrs.iter().map(|&addr| AvEntry { addr, job: None, removed: false }))
    }

    fn insert_entries(&self, entries: impl Iterator<Item = AvEntry>) -> Vec<FiAddr> {
        let mut av = self.inner.borrow_mut();
        let first = av.entries.len();
        av.entries.extend(entries);
        let out: Vec<FiAddr> = (first..av.entries.len()).map(|i| i as FiAddr).collect();
        if let Some(eq) = &av.eq {
            eq.push(EqEvent::AvComplete { count: out.len() });
        }
        out
    }

    /// `fi_av_insert_auth_key`: a JobID this endpoint's process was assigned by the control plane
    /// (FI_EKEYREJECTED otherwise); endpoints bound to this AV then also serve that JobID.
    pub fn insert_auth_key(&self, job_id: u32) -> Result<AuthKey, FiError> {
        let fabric = self.fabric.upgrade().ok_or_else(|| FiError::new(FiErrno::EINVAL, "fabric closed"))?;
        if !fabric.may_use(self.process, job_id) {
            return Err(FiError::new(
                FiErrno::EKEYREJECTED,
                format!("JobID {job_id} is not assigned to this process"),
            ));
        }
        let mut av = self.inner.borrow_mut();
        if av.auth_keys.len() >= 16 {
            return Err(FiError::new(FiErrno::ENOKEY, "at most 16 auth keys per AV"));
        }
        av.auth_keys.push(job_id);
        for ep in av.endpoints.iter().filter_map(Weak::upgrade) {
            ep.authorize_job(job_id);
        }
        Ok(AuthKey(av.auth_keys.len() - 1))
    }

    /// `fi_av_insert` with `FI_AUTH_KEY`: addresses whose operations carry the auth key's JobID.
    pub fn insert_with_auth_key(&self, addrs: &[UetAddr], key: AuthKey) -> Result<Vec<FiAddr>, FiError> {
        let job = *self
            .inner
            .borrow()
            .auth_keys
            .get(key.0)
            .ok_or_else(|| FiError::new(FiErrno::EINVAL, "no such auth key"))?;
        Ok(self.insert_entries(addrs.iter().map(|&addr| AvEntry { addr, job: Some(job), removed: false })))
    }

    /// `fi_av_lookup`.
    pub fn lookup(&self, addr: FiAddr) -> Option<UetAddr> {
        self.inner.borrow().live(addr).map(|e| e.addr)
    }

    /// `fi_av_remove`: the addresses name nobody from now on (operations to them and receives
    /// directed at them are refused with FI_EINVAL; messages from them complete with source
    /// FI_ADDR_UNSPEC); the other indices keep their meaning, and new ones follow the last. The
    /// whole call is refused, removing nothing, if any address is not in the AV.
    pub fn remove(&self, addrs: &[FiAddr]) -> Result<(), FiError> {
        let mut av = self.inner.borrow_mut();
        if let Some(a) = addrs.iter().find(|&&a| av.live(a).is_none()) {
            return Err(FiError::new(FiErrno::EINVAL, format!("no AV entry {a}")));
        }
        for &a in addrs {
            av.entries[a as usize].removed = true;
        }
        Ok(())
    }

    /// `fi_av_lookup_auth_key`: the JobID an address was inserted with (FI_ENOKEY if none).
    pub fn lookup_auth_key(&self, addr: FiAddr) -> Result<u32, FiError> {
        let av = self.inner.borrow();
        let e = av.live(addr).ok_or_else(|| FiError::new(FiErrno::EINVAL, "no such address"))?;
        e.job.ok_or_else(|| FiError::new(FiErrno::ENOKEY, "the address has no auth key"))
    }

    /// Number of addresses.
    pub fn len(&self) -> usize {
        self.inner.borrow().entries.len()
    }

    /// No addresses yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Binds an event queue (FI_AV_COMPLETE events).
    pub fn bind_eq(&self, eq: &EventQueue) {
        self.inner.borrow_mut().eq = Some(eq.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn address_bytes_round_trip(ip: u32, pid in 0u16..0x1000, ri: u16, initiator: u32, profiles in 1u8..8) {
            let a = UetAddr { ip: Ipv4Addr::from_bits(ip), pid_on_fep: pid, resource_index: ri, initiator, profiles };
            prop_assert_eq!(UetAddr::from_bytes(&a.to_bytes()), Ok(a));
        }

        #[test]
        fn any_bytes_are_an_address_or_einval(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Err(e) = UetAddr::from_bytes(&b) {
                prop_assert_eq!(e.errno, FiErrno::EINVAL);
            }
        }
    }

    #[test]
    fn foreign_addresses_are_refused() {
        let a = UetAddr {
            ip: Ipv4Addr::new(10, 0, 0, 1),
            pid_on_fep: 7,
            resource_index: 1,
            initiator: 3,
            profiles: 0b101,
        };
        let good = a.to_bytes();
        let mutate = |at: usize, v: u8| {
            let mut b = good;
            b[at] = v;
            UetAddr::from_bytes(&b).map_err(|e| e.errno)
        };
        assert_eq!(mutate(0, 2), Err(FiErrno::EINVAL), "another version");
        assert_eq!(mutate(1, 6), Err(FiErrno::EINVAL), "IPv6 mode");
        assert_eq!(mutate(3, 0b1000), Err(FiErrno::EINVAL), "unknown profile");
        assert_eq!(mutate(4, 0x10), Err(FiErrno::EINVAL), "PIDonFEP above 12 bits");
        assert_eq!(mutate(22, 0), Err(FiErrno::EINVAL), "not IPv4-mapped");
        assert_eq!(UetAddr::from_bytes(&good[..27]).map_err(|e| e.errno), Err(FiErrno::EINVAL));
    }
}
