//! The objects whose addresses programs hold (each starts with rdma-core's structure, so the
//! pointer a program passes back is the object), and the error helpers every module uses.

use super::sockaddr;
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;
use crate::handles::Ctx;
use engine::verbs::{CmChannel, CmId, PortSpace, QpType, VerbsError};
use std::ffi::c_int;

/// An event channel: rdma-core's `struct rdma_event_channel` (its `fd` is the engine channel's
/// eventfd, readable while events wait) first.
#[repr(C)]
pub(crate) struct SoftCmChannel {
    pub(crate) ch: rdma_event_channel,
    pub(crate) cm: CmChannel,
    pub(crate) ctx: &'static Ctx,
}

impl SoftCmChannel {
    /// # Safety
    /// `p` is null or a channel of this library.
    pub(crate) unsafe fn from<'a>(p: *mut rdma_event_channel) -> Option<&'a SoftCmChannel> {
        // SAFETY: every channel handed out is the first field of a `SoftCmChannel` never freed.
        (!p.is_null()).then(|| unsafe { &*p.cast::<SoftCmChannel>() })
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
    /// The ID behind a program's pointer.
    ///
    /// # Safety
    /// `p` is null or an ID this library created and has not destroyed.
    pub(crate) unsafe fn from<'a>(p: *mut rdma_cm_id) -> Option<&'a mut SoftId> {
        // SAFETY: every ID handed out is the first field of a live `SoftId`.
        (!p.is_null()).then(|| unsafe { &mut *p.cast::<SoftId>() })
    }

    /// Copies the engine's view of the addresses into `id->route.addr`.
    pub(crate) fn sync_addrs(&mut self) {
        let Ok((local, remote)) = self.ctx.dev.lock().cm_addrs(self.cm) else { return };
        let addr = &mut self.id.route.addr;
        // SAFETY: both unions are a `sockaddr_storage` wide.
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
