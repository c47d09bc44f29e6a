//! The objects whose addresses programs hold (each starts with rdma-core's structure, so the
//! pointer a program passes back is the object), and the error helpers every module uses.

use super::sockaddr;
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;
use crate::handles::Ctx;
use engine::verbs::{CmChannel, CmId, PortSpace, QpType, VerbsError};
use std::cell::UnsafeCell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};

/// The addresses of the live channels and events this module hands out: a pointer a program
/// passes back is used only if it is one of them (an acknowledged event or a stray pointer gets
/// `EINVAL`, not a crash). IDs have a table of their own ([`SoftId::get`]).
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Channel,
    Event,
}

static LIVE: Mutex<[Option<HashSet<usize>>; 2]> = Mutex::new([None, None]);

fn live() -> MutexGuard<'static, [Option<HashSet<usize>>; 2]> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `p` is now a live object of `kind`.
pub(crate) fn born(kind: Kind, p: usize) {
    live()[kind as usize].get_or_insert_with(HashSet::new).insert(p);
}

/// `p` is no longer live; whether it was.
pub(crate) fn died(kind: Kind, p: usize) -> bool {
    live()[kind as usize].as_mut().is_some_and(|s| s.remove(&p))
}

/// Whether `p` is a live object of `kind`.
pub(crate) fn alive(kind: Kind, p: usize) -> bool {
    live()[kind as usize].as_ref().is_some_and(|s| s.contains(&p))
}

/// An event channel: rdma-core's `struct rdma_event_channel` (its `fd` is the engine channel's
/// eventfd, readable while events wait) first.
#[repr(C)]
pub(crate) struct SoftCmChannel {
    pub(crate) ch: rdma_event_channel,
    pub(crate) cm: CmChannel,
    pub(crate) ctx: &'static Ctx,
}

impl SoftCmChannel {
    /// The channel behind a program's pointer, if it is a live one of this library.
    pub(crate) fn from<'a>(p: *mut rdma_event_channel) -> Option<&'a SoftCmChannel> {
        // SAFETY: an address in the live set is a boxed `SoftCmChannel` (its `rdma_event_channel`
        // first, `repr(C)`), whose memory is never freed (see `rdma_destroy_event_channel`); the
        // reference is shared, and its mutable state is behind the engine's lock.
        alive(Kind::Channel, p as usize).then(|| unsafe { &*p.cast::<SoftCmChannel>() })
    }
}

/// What this library keeps of an ID beside its `struct rdma_cm_id`, behind the ID's lock.
pub(crate) struct IdState {
    /// Created without a channel (synchronous: calls wait for their event); the channel is its own.
    pub(crate) sync: bool,
    /// librdmacm made the CQs (and their channels) of the QP: they go with it.
    pub(crate) own_cqs: bool,
    /// `rdma_create_ep` of a passive ID: what `rdma_get_request` creates the QP of a request with.
    pub(crate) qp_init: Option<ibv_qp_init_attr>,
    /// `rdma_destroy_id` has begun: every later call on the ID answers `EINVAL`, and no event is
    /// counted against it any more.
    destroyed: bool,
}

/// An ID: rdma-core's `struct rdma_cm_id` first (the address programs hold), then this library's
/// state. Shared (`Arc`) by the table of live IDs, the calls running on it and the events naming
/// it, so its memory outlives all three: a call that raced `rdma_destroy_id` finds it destroyed
/// (`EINVAL`), never freed.
#[repr(C)]
pub(crate) struct SoftId {
    /// Read and written by this library only while `state` is locked (see [`Locked::id`]); the
    /// program reads it, and writes `context`, as it does librdmacm's.
    id: UnsafeCell<rdma_cm_id>,
    pub(crate) cm: CmId,
    pub(crate) ctx: &'static Ctx,
    /// The per-ID lock (librdmacm's `cma_id_private.mut`).
    state: Mutex<IdState>,
    /// Events counted against this ID handed to the program and not yet acknowledged (a connect
    /// request counts against its listener), as librdmacm's `events_reported - events_completed`:
    /// `rdma_destroy_id` waits for 0.
    unacked: AtomicUsize,
    /// The wait for `unacked` to reach 0: a lock of its own, taken by nothing else, so an
    /// acknowledgement never waits for the ID's lock.
    acked_lock: Mutex<()>,
    acked: Condvar,
}

// SAFETY: the raw pointers in `id` are rdma-core's plain handles (CQs, QP, PD, channel, the
// program's context), which this library's other objects allow any thread to use; every access
// of this library to `id` holds `state`'s lock (`Locked`), which serializes them across threads.
unsafe impl Send for SoftId {}
// SAFETY: as for `Send`: shared references reach `id` only through `Locked`, that is under the lock.
unsafe impl Sync for SoftId {}

/// The live IDs: by the address programs hold, and by engine ID (what events name).
#[derive(Default)]
struct Ids {
    by_ptr: HashMap<usize, Arc<SoftId>>,
    by_cm: HashMap<(usize, CmId), usize>,
}

static IDS: LazyLock<Mutex<Ids>> = LazyLock::new(Mutex::default);

fn ids() -> MutexGuard<'static, Ids> {
    IDS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A locked ID not being destroyed: this library's access to its `rdma_cm_id` and state.
pub(crate) struct Locked<'a> {
    pub(crate) s: &'a SoftId,
    /// `None` only inside [`Locked::unlocked`], which holds `self` meanwhile.
    st: Option<MutexGuard<'a, IdState>>,
}

const HELD: &str = "an ID's lock is held outside Locked::unlocked";

impl std::ops::Deref for Locked<'_> {
    type Target = IdState;
    fn deref(&self) -> &IdState {
        self.st.as_ref().expect(HELD)
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut IdState {
        self.st.as_mut().expect(HELD)
    }
}

impl Locked<'_> {
    /// The ID's `struct rdma_cm_id`, this library's alone while the lock is held.
    pub(crate) fn id(&mut self) -> &mut rdma_cm_id {
        // SAFETY: every access of this library to `id` goes through a `Locked`, which holds the
        // ID's lock, and this borrow of `self` is exclusive, so no other reference to it exists
        // in this library meanwhile (the program's own accesses are its business, as with
        // librdmacm, which writes these fields without asking either).
        unsafe { &mut *self.s.id.get() }
    }

    /// Runs `f` with the ID's lock let go (a wait for an event), then takes it again; the ID
    /// may have been destroyed meanwhile ([`Locked::is_destroyed`]).
    pub(crate) fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        drop(self.st.take());
        let r = f();
        self.st = Some(self.s.state.lock().unwrap_or_else(PoisonError::into_inner));
        r
    }

    /// Whether `rdma_destroy_id` began on the ID (only while [`Locked::unlocked`] let it go).
    pub(crate) fn is_destroyed(&self) -> bool {
        self.destroyed
    }

    /// The address programs hold.
    pub(crate) fn ptr(&self) -> *mut rdma_cm_id {
        self.s.id.get()
    }

    /// Copies the engine's view of the addresses into `id->route.addr`.
    pub(crate) fn sync_addrs(&mut self) {
        let Ok((local, remote)) = self.s.ctx.dev.lock().cm_addrs(self.s.cm) else { return };
        let ctx = self.s.ctx;
        let id = self.id();
        let addr = &mut id.route.addr;
        // SAFETY: both address unions of `rdma_addr` have a `sockaddr_storage` member, so each is
        // writable for one, as `sockaddr::write` requires; the ID is borrowed exclusively.
        unsafe {
            if let Some(l) = local {
                sockaddr::write(std::ptr::addr_of_mut!(addr.__bindgen_anon_1).cast(), l);
            }
            if let Some(r) = remote {
                sockaddr::write(std::ptr::addr_of_mut!(addr.__bindgen_anon_2).cast(), r);
            }
        }
        if local.is_some() {
            id.verbs = ctx.ibv();
            id.port_num = 1;
        }
    }

    /// Counts an event against this ID (it is being handed to the program).
    pub(crate) fn count_event(&mut self) {
        self.s.unacked.fetch_add(1, Ordering::AcqRel);
    }

    /// Marks the ID destroyed (later calls answer `EINVAL`) and takes it out of the table of live
    /// IDs: no call or event finds it from now on.
    pub(crate) fn destroy(&mut self) {
        self.destroyed = true;
        let mut t = ids();
        t.by_ptr.remove(&(self.ptr() as usize));
        t.by_cm.remove(&(std::ptr::from_ref(self.s.ctx) as usize, self.s.cm));
    }
}

impl SoftId {
    /// The ID behind a program's pointer, if it is a live one of this library (a destroyed ID or
    /// a stray pointer: `None`); it stays allocated while the `Arc` is held.
    pub(crate) fn get(p: *mut rdma_cm_id) -> Option<Arc<SoftId>> {
        ids().by_ptr.get(&(p as usize)).cloned()
    }

    /// The live ID of engine ID `cm` on `ctx`.
    pub(crate) fn of_cm(ctx: &'static Ctx, cm: CmId) -> Option<Arc<SoftId>> {
        let t = ids();
        let p = t.by_cm.get(&(std::ptr::from_ref(ctx) as usize, cm))?;
        t.by_ptr.get(p).cloned()
    }

    /// Locks the ID; `None` once `rdma_destroy_id` has begun on it.
    pub(crate) fn lock(&self) -> Option<Locked<'_>> {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (!st.destroyed).then_some(Locked { s: self, st: Some(st) })
    }

    /// The address programs hold.
    pub(crate) fn as_ptr(&self) -> *mut rdma_cm_id {
        self.id.get()
    }

    /// An event counted against this ID was acknowledged.
    pub(crate) fn event_acked(&self) {
        if self.unacked.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Taken (and released) so that a destroy between its check and its wait is woken.
            drop(self.acked_lock.lock().unwrap_or_else(PoisonError::into_inner));
            self.acked.notify_all();
        }
    }

    /// Waits until every event counted against this ID is acknowledged (`rdma_destroy_id`, as
    /// librdmacm's waits for `events_completed`).
    pub(crate) fn wait_acked(&self) {
        let mut g = self.acked_lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.unacked.load(Ordering::Acquire) > 0 {
            g = self.acked.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A new live ID for engine ID `cm` with the `rdma_cm_id` `id`; its address is what the
    /// program holds.
    pub(crate) fn register(ctx: &'static Ctx, cm: CmId, id: rdma_cm_id, sync: bool) -> *mut rdma_cm_id {
        let st = IdState { sync, own_cqs: false, qp_init: None, destroyed: false };
        let s = Arc::new(SoftId {
            id: UnsafeCell::new(id),
            cm,
            ctx,
            state: Mutex::new(st),
            unacked: AtomicUsize::new(0),
            acked_lock: Mutex::new(()),
            acked: Condvar::new(),
        });
        let p = s.id.get();
        let mut t = ids();
        t.by_cm.insert((std::ptr::from_ref(ctx) as usize, cm), p as usize);
        t.by_ptr.insert(p as usize, s);
        p
    }

    /// A fresh `rdma_cm_id` on `channel` in port space `ps` (the caller fills the rest).
    pub(crate) fn blank(channel: *mut rdma_event_channel, ps: rdma_port_space) -> rdma_cm_id {
        // SAFETY: all-zero is a valid `rdma_cm_id` (null pointers, empty addresses).
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.channel = channel;
        id.ps = ps;
        id.qp_type = if ps == RDMA_PS_UDP { IBV_QPT_UD } else { IBV_QPT_RC };
        id
    }
}

pub(crate) fn port_space(ps: rdma_port_space) -> Option<PortSpace> {
    match ps {
        RDMA_PS_TCP => Some(PortSpace::Tcp),
        RDMA_PS_UDP => Some(PortSpace::Udp),
        RDMA_PS_IB => Some(PortSpace::Ib),
        _ => None,
    }
}

/// `-1` with `errno` for an engine error.
pub(crate) fn fail(e: &VerbsError) -> c_int {
    errno::set(match e {
        VerbsError::CmState(_) => libc::EINVAL,
        other => errno::of(other),
    });
    -1
}

/// `-1` with `errno = e`.
pub(crate) fn err(e: c_int) -> c_int {
    errno::set(e);
    -1
}

/// Whether an ID's QP type is UD.
pub(crate) fn is_ud(s: &mut Locked<'_>) -> bool {
    qp_type_of(s.id().qp_type) == Some(QpType::Ud)
}

/// The QP type an ID's port space gives (`RDMA_PS_IB`: the QP's).
pub(crate) fn qp_type_of(t: ibv_qp_type) -> Option<QpType> {
    match t {
        IBV_QPT_RC => Some(QpType::Rc),
        IBV_QPT_UC => Some(QpType::Uc),
        IBV_QPT_UD => Some(QpType::Ud),
        _ => None,
    }
}
