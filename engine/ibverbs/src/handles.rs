//! The objects whose addresses programs hold: each starts with rdma-core's structure, so the
//! pointer a program passes back is the object. Every other module reaches them from here (and
//! this module reaches no other but the ABI, the configuration and the error helpers).

use crate::abi::*;
use crate::config::DevInfo;
use crate::errno;
use engine::verbs::{
    Ah, Context, Cq, Device, InlineData, Pd, Qp, QpCap, QpType, SendFlags, SendRef, SendWr, Srq, SrqAttr,
};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::mem::offset_of;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Objects of a context, by their engine handle: what events and channels name.
#[derive(Default)]
pub(crate) struct Objects {
    pub(crate) cqs: HashMap<Cq, usize>,
    pub(crate) qps: HashMap<Qp, usize>,
    pub(crate) srqs: HashMap<Srq, usize>,
}

/// An opened device: rdma-core's `struct verbs_context` (which ends with the `struct ibv_context`
/// programs hold) first.
#[repr(C)]
pub(crate) struct Ctx {
    pub(crate) v: verbs_context,
    pub(crate) dev: Device,
    pub(crate) info: &'static DevInfo,
    pub(crate) objects: Mutex<Objects>,
    pub(crate) async_fd: rustix::fd::OwnedFd,
}

impl Ctx {
    /// The context behind a program's `ibv_context` pointer.
    ///
    /// # Safety
    /// `p` is null or a context this library opened and has not closed.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_context) -> Option<&'a Ctx> {
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` points at `v.context` of a live `Ctx` (`v` is its first field).
        Some(unsafe { &*p.cast::<u8>().sub(offset_of!(verbs_context, context)).cast::<Ctx>() })
    }

    /// The `ibv_context` pointer programs hold.
    pub(crate) fn ibv(&self) -> *mut ibv_context {
        std::ptr::addr_of!(self.v.context).cast_mut()
    }

    pub(crate) fn objects(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A protection domain: rdma-core's `struct ibv_pd` first.
#[repr(C)]
pub(crate) struct SoftPd {
    pub(crate) ibv: ibv_pd,
    pub(crate) pd: Pd,
}

impl SoftPd {
    /// # Safety
    /// `p` is null or a PD of this library not yet deallocated.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_pd) -> Option<(&'a SoftPd, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every PD handed out is the first field of a live `SoftPd`.
        let pd = unsafe { &*p.cast::<SoftPd>() };
        // SAFETY: `ibv_alloc_pd` set `context` to a context this library opened, and a context
        // outlives its PDs (closing it with objects open breaks the verbs contract).
        Some((pd, unsafe { Ctx::from(pd.ibv.context) }?))
    }
}

/// A completion queue: rdma-core's `struct ibv_cq_ex` first, whose first fields are the
/// `struct ibv_cq` (`ibv_cq_ex_to_cq` is a cast), so every CQ is both; a plain one
/// (`ibv_create_cq`) has no `start_poll` or `read_*` callbacks.
#[repr(C)]
pub(crate) struct SoftCq {
    /// In an `UnsafeCell` (same layout as the structure itself): this library writes `cqe`
    /// (`ibv_resize_cq`) and, polling an extended CQ, `status` and `wr_id`, while other threads
    /// may hold a `&SoftCq` (a poll of the same CQ).
    pub(crate) ex: UnsafeCell<ibv_cq_ex>,
    pub(crate) cq: Cq,
    /// The completion an extended poll is on (from `start_poll` or `next_poll`), as
    /// `ibv_poll_cq` gives it; the `read_*` callbacks read it.
    pub(crate) current: Mutex<ibv_wc>,
    /// An extended poll is under way: taken by a `start_poll` that found a completion, let go by
    /// `end_poll`, so that one thread at a time walks the CQ, as rxe's CQ lock makes it.
    pub(crate) polling: AtomicBool,
}

impl SoftCq {
    /// # Safety
    /// `p` is null or a CQ of this library not yet destroyed.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_cq) -> Option<(&'a SoftCq, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every CQ handed out is the first field (through `ex`, whose first fields are
        // the `ibv_cq`) of a live `SoftCq`.
        let c = unsafe { &*p.cast::<SoftCq>() };
        // SAFETY: `cq::create` set `context` to the live context it was created on, and nothing
        // writes it after (`cq->context` is read-only to programs).
        Some((c, unsafe { Ctx::from((*c.ex.get()).context) }?))
    }

    pub(crate) fn current(&self) -> MutexGuard<'_, ibv_wc> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Work requests being built with the `ibv_wr_*` API, posted by `ibv_wr_complete`: each with its
/// inline data, if any.
pub(crate) type Batch = Vec<(SendWr, Option<Vec<u8>>)>;

/// A queue pair: rdma-core's `struct ibv_qp_ex` (whose first field is the `struct ibv_qp`) first.
#[repr(C)]
pub(crate) struct SoftQp {
    /// In an `UnsafeCell` (same layout as the structure itself): the program writes `wr_id` and
    /// `wr_flags` of it, and this library `qp->state`, while other threads may hold a `&SoftQp`
    /// (a post on the same QP), which must not claim the structure immutable.
    pub(crate) ex: UnsafeCell<ibv_qp_ex>,
    pub(crate) qp: Qp,
    pub(crate) ty: QpType,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
    pub(crate) batch: Mutex<Batch>,
    /// The first error of the batch being built (`ibv_wr_complete` returns it).
    pub(crate) batch_error: Mutex<Option<i32>>,
}

impl SoftQp {
    /// # Safety
    /// `p` is null or a QP of this library not yet destroyed.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_qp) -> Option<(&'a SoftQp, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every QP handed out is the first field (through `ex.qp_base`) of a live `SoftQp`.
        let q = unsafe { &*p.cast::<SoftQp>() };
        // SAFETY: `create` set `context` to the live context of the QP's PD, and nothing writes
        // it after (libibverbs' `qp->context` is read-only to programs).
        Some((q, unsafe { Ctx::from((*q.ex.get()).qp_base.context) }?))
    }

    pub(crate) fn batch(&self) -> MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Posts one request. An inline one's data (from `inline`, or else from the addresses of its
    /// SGEs) is copied once, straight into the engine's queue entry; nothing is allocated.
    ///
    /// # Safety
    /// Without `inline`, an inline request's SGE addresses point at readable bytes.
    pub(crate) unsafe fn post_one(
        &self,
        c: &mut Context,
        w: SendRef<'_>,
        inline: Option<&[u8]>,
    ) -> Result<(), i32> {
        if !w.flags.contains(SendFlags::INLINE) {
            return c.post_send_ref(self.qp, w, InlineData::Sges).map_err(|e| errno::of(&e));
        }
        let total: u64 = match inline {
            Some(d) => d.len() as u64,
            None => w.sg_list.iter().map(|s| u64::from(s.length)).sum(),
        };
        if total > u64::from(self.cap.max_inline_data) {
            return Err(libc::EINVAL);
        }
        if inline.is_none() && w.sg_list.iter().any(|s| s.length > 0 && s.addr == 0) {
            return Err(libc::EINVAL);
        }
        let sges = w.sg_list;
        let mut fill = |dst: &mut [u8]| match inline {
            Some(d) => dst.copy_from_slice(d),
            None => {
                let mut at = 0;
                for s in sges.iter().filter(|s| s.length > 0) {
                    let n = s.length as usize;
                    // SAFETY: an inline request's data is read from its SGE addresses during the
                    // post, with no MR (ibv_post_send(3)): the caller promises `n` readable bytes
                    // at `addr` until this call returns; `addr` is not null and `n > 0` (checked
                    // above). `dst` is `total` bytes long, the sum of the lengths, so `at + n`
                    // stays inside it.
                    let src = unsafe { std::slice::from_raw_parts(s.addr as usize as *const u8, n) };
                    dst[at..at + n].copy_from_slice(src);
                    at += n;
                }
            }
        };
        // The data is given here, so the core reads no SGE.
        let w = SendRef { sg_list: &[], ..w };
        c.post_send_ref(self.qp, w, InlineData::Fill { len: total as usize, fill: &mut fill })
            .map_err(|e| errno::of(&e))
    }
}

/// A shared receive queue: rdma-core's `struct ibv_srq` first.
#[repr(C)]
pub(crate) struct SoftSrq {
    pub(crate) ibv: ibv_srq,
    pub(crate) srq: Srq,
    pub(crate) attr: std::sync::Mutex<SrqAttr>,
}

impl SoftSrq {
    /// # Safety
    /// `p` is null or an SRQ of this library not yet destroyed.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_srq) -> Option<(&'a SoftSrq, &'a Ctx)> {
        if p.is_null() {
            return None;
        }
        // SAFETY: every SRQ handed out is the first field of a live `SoftSrq`.
        let s = unsafe { &*p.cast::<SoftSrq>() };
        // SAFETY: `ibv_create_srq` set `context` to the live context of the SRQ's PD.
        Some((s, unsafe { Ctx::from(s.ibv.context) }?))
    }
}

/// An address handle: rdma-core's `struct ibv_ah` first.
#[repr(C)]
pub(crate) struct SoftAh {
    pub(crate) ibv: ibv_ah,
    pub(crate) ah: Ah,
}

impl SoftAh {
    /// # Safety
    /// `p` is null or an AH of this library not yet destroyed.
    pub(crate) unsafe fn from<'a>(p: *mut ibv_ah) -> Option<&'a SoftAh> {
        // SAFETY: every AH handed out is the first field of a live `SoftAh`.
        (!p.is_null()).then(|| unsafe { &*p.cast::<SoftAh>() })
    }
}
