//! The objects whose addresses programs hold (each starts with rdma-core's structure, so the
//! pointer a program passes back is the object), and the error helpers every module uses.

use super::sockaddr;
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;
use crate::handles::Ctx;
use engine::verbs::{CmChannel, CmId, PortSpace, QpType, VerbsError};
use std::collections::HashSet;
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The addresses of the live objects of each kind this module hands out: a pointer a program
/// passes back is used only if it is one of them (a destroyed ID, an acknowledged event or a
/// stray pointer gets `EINVAL`, not a crash).
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Channel,
    Id,
    Event,
}

static LIVE: Mutex<[Option<HashSet<usize>>; 3]> = Mutex::new([None, None, None]);

fn live() -> MutexGuard<'static, [Option<HashSet<usize>>; 3]> {
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

/// An ID: rdma-core's `struct rdma_cm_id` first.
#[repr(C)]
pub(crate) struct SoftId {
    pub(crate) id: rdma_cm_id,
    pub(crate) cm: CmId,
    pub(crate) ctx: &'static Ctx,
    /// Created without a channel (synchronous: calls wait for their event); the channel is its own.
    pub(crate) sync: bool,
    /// librdmacm made the CQs (and their channels) of the QP: they go with it.
    pub(crate) own_cqs: bool,
    /// `rdma_create_ep` of a passive ID: what `rdma_get_request` creates the QP of a request with.
    pub(crate) qp_init: Option<ibv_qp_init_attr>,
}

impl SoftId {
    /// The ID behind a program's pointer, if it is a live one of this library (a destroyed ID
    /// or a stray pointer: `None`).
    pub(crate) fn from<'a>(p: *mut rdma_cm_id) -> Option<&'a mut SoftId> {
        // SAFETY: an address in the live set is a boxed `SoftId` (its `rdma_cm_id` first, `repr(C)`)
        // not yet destroyed. The `&mut` is unique only while no other call on the same ID runs:
        // a program that calls on one ID from two threads at once (or destroys it meanwhile)
        // breaks that, and nothing here serializes them yet (librdmacm holds a per-ID lock).
        alive(Kind::Id, p as usize).then(|| unsafe { &mut *p.cast::<SoftId>() })
    }

    /// Copies the engine's view of the addresses into `id->route.addr`.
    pub(crate) fn sync_addrs(&mut self) {
        let Ok((local, remote)) = self.ctx.dev.lock().cm_addrs(self.cm) else { return };
        let addr = &mut self.id.route.addr;
        // SAFETY: both address unions of `rdma_addr` have a `sockaddr_storage` member, so each is
        // writable for one, as `sockaddr::write` requires; `self` is borrowed exclusively.
        unsafe {
            if let Some(l) = local {
                sockaddr::write(std::ptr::addr_of_mut!(addr.__bindgen_anon_1).cast(), l);
            }
            if let Some(r) = remote {
                sockaddr::write(std::ptr::addr_of_mut!(addr.__bindgen_anon_2).cast(), r);
            }
        }
        if local.is_some() {
            self.id.verbs = self.ctx.ibv();
            self.id.port_num = 1;
        }
    }

    /// A new ID object for engine ID `cm` (the caller registers it).
    pub(crate) fn boxed(
        ctx: &'static Ctx,
        cm: CmId,
        channel: *mut rdma_event_channel,
        ps: rdma_port_space,
    ) -> *mut SoftId {
        // SAFETY: all-zero is a valid `rdma_cm_id` (null pointers, empty addresses).
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.channel = channel;
        id.ps = ps;
        id.qp_type = if ps == RDMA_PS_UDP { IBV_QPT_UD } else { IBV_QPT_RC };
        let p = Box::into_raw(Box::new(SoftId { id, cm, ctx, sync: false, own_cqs: false, qp_init: None }));
        ctx.objects().cm_ids.insert(cm, p as usize);
        born(Kind::Id, p as usize);
        p
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
pub(crate) fn is_ud(s: &SoftId) -> bool {
    qp_type_of(s.id.qp_type) == Some(QpType::Ud)
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
