//! Connections: QPs on IDs (`rdma_create_qp`, `rdma_create_qp_ex`, `rdma_destroy_qp`),
//! `rdma_connect`, `rdma_accept`, `rdma_reject`, `rdma_disconnect`, `rdma_establish`,
//! `rdma_init_qp_attr`, and the synchronous endpoint helpers (`rdma_create_ep`,
//! `rdma_get_request`, `rdma_destroy_ep`).

use super::channel::{self, complete, finish};
use super::id::{rdma_bind_addr, rdma_create_id, rdma_destroy_id, rdma_resolve_addr, rdma_resolve_route};
use super::objects::{Locked, SoftCmChannel, SoftId, err, fail, is_ud};
use crate::abi::*;
use crate::cm_abi::*;
use crate::errno;
use crate::handles::{Ctx, SoftPd, SoftQp};
use engine::verbs::LIMITS;
use engine::verbs::{ConnParam, QpState};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// The PD librdmacm allocates per device for IDs given none (`ucma_get_device`'s `cma_dev->pd`).
fn device_pd(ctx: &'static Ctx) -> *mut ibv_pd {
    static PD: OnceLock<usize> = OnceLock::new();
    // SAFETY: `ctx` is the rdma_cm device's context, which this library opened for the process and
    // never closes, so `ibv_alloc_pd`'s contract holds.
    *PD.get_or_init(|| unsafe { crate::mem::ibv_alloc_pd(ctx.ibv()) } as usize) as *mut ibv_pd
}

/// Makes the CQs (each with its own completion channel, `cq_context` = the ID) an attribute
/// structure lacks, as librdmacm's `ucma_create_cqs`.
fn create_cqs(s: &mut Locked<'_>, attr: &mut ibv_qp_init_attr) -> Result<(), c_int> {
    let ctx = s.s.ctx.ibv();
    let id_ptr = s.ptr().cast::<c_void>();
    let make = |depth: u32| -> Result<(*mut ibv_comp_channel, *mut ibv_cq), c_int> {
        // SAFETY: `ctx` is the ID's context, live for the process (`open_first` never closes it),
        // as `ibv_create_comp_channel` requires.
        let ch = unsafe { crate::cq::ibv_create_comp_channel(ctx) };
        if ch.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: `ctx` is the ID's live context and `ch` the channel just made on it; `id_ptr` is
        // only stored as the CQ's context.
        let cq = unsafe { crate::cq::ibv_create_cq(ctx, depth.max(1) as c_int, id_ptr, ch, 0) };
        if cq.is_null() {
            // SAFETY: `ch` is the channel just made, used by no CQ, so `ibv_destroy_comp_channel`
            // may free it.
            unsafe { crate::cq::ibv_destroy_comp_channel(ch) };
            return Err(libc::ENOMEM);
        }
        Ok((ch, cq))
    };
    if attr.recv_cq.is_null() {
        let (ch, cq) = make(attr.cap.max_recv_wr)?;
        (s.id().recv_cq_channel, s.id().recv_cq, attr.recv_cq) = (ch, cq, cq);
        s.own_cqs = true;
    }
    if attr.send_cq.is_null() {
        let (ch, cq) = make(attr.cap.max_send_wr)?;
        (s.id().send_cq_channel, s.id().send_cq, attr.send_cq) = (ch, cq, cq);
        s.own_cqs = true;
    }
    Ok(())
}

/// Destroys the CQs (and channels) [`create_cqs`] made.
fn destroy_cqs(s: &mut Locked<'_>) {
    if !s.own_cqs {
        return;
    }
    // SAFETY: the CQs and channels are the ones `create_cqs` made (`own_cqs`), each destroyed once:
    // the CQ before its channel, and the fields are cleared below.
    unsafe {
        for (cq, ch) in [(s.id().send_cq, s.id().send_cq_channel), (s.id().recv_cq, s.id().recv_cq_channel)] {
            if !cq.is_null() {
                crate::cq::ibv_destroy_cq(cq);
            }
            if !ch.is_null() {
                crate::cq::ibv_destroy_comp_channel(ch);
            }
        }
    }
    (s.id().send_cq, s.id().send_cq_channel, s.id().recv_cq, s.id().recv_cq_channel) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    s.own_cqs = false;
}

/// The QP of `rdma_create_qp`: on `pd` (or the ID's, or the device's), CQs made where missing,
/// then brought to INIT (UD: to RTS) by the engine's connection manager.
///
/// # Safety
/// `pd` is null or a PD of this library; `attr`'s CQs and SRQ are null or this library's.
unsafe fn create_qp(s: &mut Locked<'_>, pd: *mut ibv_pd, attr: &mut ibv_qp_init_attr) -> c_int {
    if !s.id().qp.is_null() {
        return err(libc::EINVAL);
    }
    let pd = [pd, s.id().pd].into_iter().find(|p| !p.is_null()).unwrap_or_else(|| device_pd(s.s.ctx));
    // SAFETY: `pd` is the caller's (null or a PD of this library, this function's contract), else
    // the ID's (set by this library) or the device's (`device_pd`), as `SoftPd::from` requires.
    match unsafe { SoftPd::from(pd) } {
        Some((_, c)) if std::ptr::eq(c, s.s.ctx) => {}
        _ => return err(libc::EINVAL),
    }
    if let Err(e) = create_cqs(s, attr) {
        destroy_cqs(s);
        return err(e);
    }
    // SAFETY: `pd` was just checked to be a live PD of the ID's context, and `attr`'s CQs are the
    // caller's (this function's contract) or the ones `create_cqs` made.
    let qp = unsafe { crate::qp::ibv_create_qp(pd, attr) };
    // SAFETY: `qp` is null or the QP `ibv_create_qp` just returned, as `SoftQp::from` requires.
    let Some((q, _)) = (unsafe { SoftQp::from(qp) }) else {
        destroy_cqs(s);
        return -1;
    };
    if let Err(e) = s.s.ctx.dev.lock().cm_attach_qp(s.s.cm, q.qp) {
        // SAFETY: `qp` is the QP just made, which nothing else knows yet, destroyed once.
        unsafe { crate::qp::ibv_destroy_qp(qp) };
        destroy_cqs(s);
        return fail(&e);
    }
    // The state the engine moved it to, for programs that read `qp->state`.
    // SAFETY: `qp` is the live QP just made; its `ibv_qp` lies in `SoftQp::ex`, an `UnsafeCell`,
    // so the write does not contradict `q`.
    unsafe { (*qp).state = if is_ud(s) { IBV_QPS_RTS } else { IBV_QPS_INIT } };
    s.id().qp = qp;
    s.id().pd = pd;
    0
}

/// `rdma_create_qp`.
///
/// # Safety
/// As `rdma_create_qp`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `qp_init_attr` is null or a valid `ibv_qp_init_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if qp_init_attr.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: the caller passes a valid attribute structure (librdmacm writes it back too).
    unsafe { create_qp(s, pd, &mut *qp_init_attr) }
}

/// `rdma_create_qp_ex`: the PD from the attributes (or the ID's); no creation flags.
///
/// # Safety
/// As `rdma_create_qp_ex`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `qp_init_attr` is null or a valid `ibv_qp_init_attr_ex` (writable where it is an out
///   parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    qp_init_attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if qp_init_attr.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: the caller passes a valid attribute structure.
    let a = unsafe { &mut *qp_init_attr };
    let mut basic = match crate::qp::basic_attr(a) {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    let pd = if a.comp_mask & IBV_QP_INIT_ATTR_PD != 0 { a.pd } else { std::ptr::null_mut() };
    // SAFETY: the caller's PD and CQs, as `rdma_create_qp_ex`'s callers promise.
    let r = unsafe { create_qp(s, pd, &mut basic) };
    (a.cap, a.send_cq, a.recv_cq) = (basic.cap, basic.send_cq, basic.recv_cq);
    r
}

/// `rdma_destroy_qp`: destroys the QP, and the CQs librdmacm made for it.
///
/// # Safety
/// As `rdma_destroy_qp`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    let Some(s) = SoftId::get(id) else { return };
    let Some(mut s) = s.lock() else { return };
    let s = &mut s;
    if !s.id().qp.is_null() {
        let _ = s.s.ctx.dev.lock().cm_detach_qp(s.s.cm);
        // SAFETY: `s.id().qp` is the QP `create_qp` made for this ID (programs destroy it only
        // through `rdma_destroy_qp`, as with librdmacm), detached from the engine's CM just above;
        // the field is cleared below, so it is destroyed once.
        unsafe { crate::qp::ibv_destroy_qp(s.id().qp) };
        s.id().qp = std::ptr::null_mut();
    }
    destroy_cqs(s);
}

/// Connection parameters from a program's (`NULL`: librdmacm's defaults: the device's READ
/// limits, 7 retries, 7 RNR retries). `0xFF` for the READ limits means the device's.
///
/// # Safety
/// `p` is null or a valid `rdma_conn_param` whose `private_data` is null or holds
/// `private_data_len` readable bytes (rdma_connect(3), rdma_accept(3)).
unsafe fn param(p: *const rdma_conn_param, s: &mut Locked<'_>) -> ConnParam {
    let max = LIMITS.max_rd_atomic;
    // SAFETY: `s.id().qp` is null (checked) or the live QP `create_qp` made for this ID, which
    // `rdma_destroy_qp` clears before it frees it.
    let qp_num = if s.id().qp.is_null() { 0 } else { unsafe { (*s.id().qp).qp_num } };
    // SAFETY: the caller passes a valid parameter structure or null.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return ConnParam {
            responder_resources: max,
            initiator_depth: max,
            retry_count: 7,
            rnr_retry_count: 7,
            qp_num,
            ..ConnParam::default()
        };
    };
    let pick = |v: u8| if v == 0xFF { max } else { v.min(max) };
    let private = if p.private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: `private_data_len` bytes at `private_data`, as the caller promises.
        unsafe { std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len)) }
            .to_vec()
    };
    ConnParam {
        private_data: private,
        responder_resources: pick(p.responder_resources),
        initiator_depth: pick(p.initiator_depth),
        retry_count: p.retry_count.min(7),
        rnr_retry_count: p.rnr_retry_count.min(7),
        srq: p.srq != 0,
        qp_num: if s.id().qp.is_null() { p.qp_num } else { qp_num },
    }
}

/// `rdma_connect`: a REQ (UD: SIDR_REQ); a synchronous ID waits for ESTABLISHED.
///
/// # Safety
/// As `rdma_connect`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `conn_param` is null or a valid `rdma_conn_param` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if s.id().qp.is_null() && conn_param.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: the caller passes a valid parameter structure or null.
    let p = unsafe { param(conn_param, s) };
    let r = s.s.ctx.dev.lock().cm_connect(s.s.cm, &p);
    finish(s, r)
}

/// `rdma_accept`: the QP goes to RTR and RTS, then the REP (UD: SIDR_REP) is sent; a synchronous
/// ID waits for ESTABLISHED (not UD: its requester gets no answer to wait for).
///
/// # Safety
/// As `rdma_accept`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `conn_param` is null or a valid `rdma_conn_param` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if s.id().qp.is_null() && conn_param.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: the caller passes a valid parameter structure or null.
    let p = unsafe { param(conn_param, s) };
    let r = s.s.ctx.dev.lock().cm_accept(s.s.cm, &p);
    if let Err(e) = r {
        return fail(&e);
    }
    if !s.id().qp.is_null() && !is_ud(s) {
        // SAFETY: `s.id().qp` is not null (checked), so the live QP `create_qp` made for this ID; its
        // `ibv_qp` lies in `SoftQp::ex`, an `UnsafeCell`, this library's to write (programs read
        // `qp->state`) while other threads hold a `&SoftQp`.
        unsafe { (*s.id().qp).state = IBV_QPS_RTS };
    }
    if !s.sync {
        return 0;
    }
    if !is_ud(s) {
        return complete(s);
    }
    // No answer to wait for: the request kept is done with (librdmacm acknowledges it here too,
    // so that destroying the listener does not wait for it).
    let kept = std::mem::replace(&mut s.id().event, std::ptr::null_mut());
    channel::ack(kept);
    0
}

/// `rdma_reject`, with private data.
///
/// # Safety
/// As `rdma_reject`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `private_data` is null or holds `private_data_len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    let pd = if private_data.is_null() {
        &[][..]
    } else {
        // SAFETY: `private_data_len` bytes at `private_data`, as the caller promises.
        unsafe { std::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len)) }
    };
    match s.s.ctx.dev.lock().cm_reject(s.s.cm, pd) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

/// `rdma_disconnect`: the QP goes to the error state (its work flushes), then DREQ (or the DREP
/// of a DREQ received); a synchronous ID waits for DISCONNECTED unless it already saw it.
///
/// # Safety
/// As `rdma_disconnect`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    let r = s.s.ctx.dev.lock().cm_disconnect(s.s.cm);
    if !s.id().qp.is_null() {
        // SAFETY: `s.id().qp` is not null (checked), so the live QP `create_qp` made for this ID, as
        // above.
        unsafe { (*s.id().qp).state = IBV_QPS_ERR };
    }
    // SAFETY: `s.id().event` is null (checked) or the event this ID keeps, a live `rdma_cm_event` of
    // this library until it is acknowledged, which clears the field.
    let seen = !s.id().event.is_null() && unsafe { (*s.id().event).event } == RDMA_CM_EVENT_DISCONNECTED;
    match r {
        Err(e) => fail(&e),
        Ok(()) if s.sync && !seen => complete(s),
        Ok(()) => 0,
    }
}

/// `rdma_establish`: the RTU after CONNECT_RESPONSE, for an ID whose QP the program set up
/// itself (with a QP on the ID, librdmacm refuses: `EINVAL`).
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if !s.id().qp.is_null() {
        return err(libc::EINVAL);
    }
    let r = s.s.ctx.dev.lock().cm_establish(s.s.cm);
    finish(s, r)
}

/// `rdma_notify`: a QP event the CM needs to hear of; over RoCEv2 nothing waits for one.
///
/// # Safety
/// None beyond the C ABI: each pointer to an rdma_cm object is looked up among the live ones
/// of this library before it is used (any other value is refused), and no other pointer is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, _event: ibv_event_type) -> c_int {
    if SoftId::get(id).as_ref().and_then(|s| s.lock()).is_none() { err(libc::EINVAL) } else { 0 }
}

/// `rdma_init_qp_attr`: the attributes that move a QP to `qp_attr->qp_state` (INIT, RTR, RTS)
/// for this connection, and their mask.
///
/// # Safety
/// As `rdma_init_qp_attr`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `qp_attr` is null or a valid `ibv_qp_attr` (writable where it is an out parameter).
/// - `qp_attr_mask` is null or a valid `c_int` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    if qp_attr.is_null() || qp_attr_mask.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: checked non-null; the caller passes valid structures.
    let (a, mask) = unsafe { (&mut *qp_attr, &mut *qp_attr_mask) };
    let state = match a.qp_state {
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        _ => return err(libc::EINVAL),
    };
    let q = match s.s.ctx.dev.lock().cm_qp_attr(s.s.cm, state) {
        Ok(q) => q,
        Err(e) => return fail(&e),
    };
    let mut m = IBV_QP_STATE;
    if state == QpState::Init {
        a.pkey_index = 0;
        a.port_num = 1;
        m |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    }
    let mut set = |bit: ibv_qp_attr_mask, present: bool| {
        if present {
            m |= bit;
        }
    };
    if let Some(x) = q.qp_access_flags {
        a.qp_access_flags = x.0;
    }
    set(IBV_QP_ACCESS_FLAGS, q.qp_access_flags.is_some());
    if let Some(x) = q.qkey {
        a.qkey = x;
    }
    set(IBV_QP_QKEY, q.qkey.is_some());
    if let Some(x) = q.path_mtu {
        a.path_mtu = crate::qp::ibv_mtu_of(x);
    }
    set(IBV_QP_PATH_MTU, q.path_mtu.is_some());
    if let Some(x) = q.dest_qp_num {
        a.dest_qp_num = x;
    }
    set(IBV_QP_DEST_QPN, q.dest_qp_num.is_some());
    if let Some(x) = q.rq_psn {
        a.rq_psn = x;
    }
    set(IBV_QP_RQ_PSN, q.rq_psn.is_some());
    if let Some(av) = &q.ah_attr {
        a.ah_attr = crate::qp::ah_attr(av);
    }
    set(IBV_QP_AV, q.ah_attr.is_some());
    if let Some(x) = q.max_dest_rd_atomic {
        a.max_dest_rd_atomic = x;
    }
    set(IBV_QP_MAX_DEST_RD_ATOMIC, q.max_dest_rd_atomic.is_some());
    if let Some(x) = q.min_rnr_timer {
        a.min_rnr_timer = x;
    }
    set(IBV_QP_MIN_RNR_TIMER, q.min_rnr_timer.is_some());
    if let Some(x) = q.sq_psn {
        a.sq_psn = x;
    }
    set(IBV_QP_SQ_PSN, q.sq_psn.is_some());
    if let Some(x) = q.timeout {
        a.timeout = x;
    }
    set(IBV_QP_TIMEOUT, q.timeout.is_some());
    if let Some(x) = q.retry_cnt {
        a.retry_cnt = x;
    }
    set(IBV_QP_RETRY_CNT, q.retry_cnt.is_some());
    if let Some(x) = q.rnr_retry {
        a.rnr_retry = x;
    }
    set(IBV_QP_RNR_RETRY, q.rnr_retry.is_some());
    if let Some(x) = q.max_rd_atomic {
        a.max_rd_atomic = x;
    }
    set(IBV_QP_MAX_QP_RD_ATOMIC, q.max_rd_atomic.is_some());
    *mask = m as c_int;
    0
}

/// `rdma_create_ep`: a synchronous ID for `res`; passive: bound, with `qp_init_attr` kept for
/// the QPs of `rdma_get_request`; active: address and route resolved, and the QP made when
/// `qp_init_attr` is given.
///
/// # Safety
/// As `rdma_create_ep`'s callers promise:
/// - `id` is null or a writable `struct rdma_cm_id *` out parameter.
/// - `res` is null or a valid `rdma_addrinfo` (writable where it is an out parameter).
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `qp_init_attr` is null or a valid `ibv_qp_init_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    if id.is_null() || res.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: `res` (not null, checked) is the caller's `rdma_addrinfo` (rdma_create_ep(3)), e.g.
    // from `rdma_getaddrinfo`.
    let r = unsafe { &*res };
    let mut p: *mut rdma_cm_id = std::ptr::null_mut();
    // SAFETY: this library's own function with a local out pointer.
    if unsafe {
        rdma_create_id(std::ptr::null_mut(), &mut p, std::ptr::null_mut(), r.ai_port_space as rdma_port_space)
    } != 0
    {
        return -1;
    }
    let Some(s) = SoftId::get(p) else { return err(libc::EINVAL) };
    let qp_type = r.ai_qp_type as ibv_qp_type;
    match s.lock() {
        Some(mut g) => g.id().qp_type = qp_type,
        None => return err(libc::EINVAL),
    }
    let ok = if r.ai_flags as u32 & RAI_PASSIVE != 0 {
        // SAFETY: the ID just made, the addrinfo's source address (or null).
        let bound = unsafe { rdma_bind_addr(p, r.ai_src_addr) } == 0;
        match s.lock() {
            Some(mut g) => {
                if bound && !qp_init_attr.is_null() {
                    // SAFETY: `qp_init_attr` (not null, checked) is the caller's `ibv_qp_init_attr`
                    // (rdma_create_ep(3)), copied by value.
                    let mut a = unsafe { *qp_init_attr };
                    a.qp_type = qp_type;
                    g.qp_init = Some(a);
                }
                g.id().pd = pd;
                bound
            }
            None => false,
        }
    } else {
        // SAFETY: the addrinfo's addresses (or null), and the caller's attributes (or null).
        let resolved = unsafe { rdma_resolve_addr(p, r.ai_src_addr, r.ai_dst_addr, 2000) } == 0
            && unsafe { rdma_resolve_route(p, 2000) } == 0;
        // SAFETY: the caller passes a valid attribute structure or null.
        match (unsafe { qp_init_attr.as_mut() }, s.lock()) {
            (Some(a), Some(mut g)) if resolved => {
                a.qp_type = qp_type;
                // SAFETY: `pd` is null or the caller's PD (rdma_create_ep(3)), and `a` the caller's
                // attributes copied into the ID, whose CQs and SRQ are null or the caller's
                // objects, as `create_qp` requires.
                unsafe { create_qp(&mut g, pd, a) == 0 }
            }
            _ => resolved,
        }
    };
    if !ok {
        let e = errno::get();
        // SAFETY: `p` is the ID `rdma_create_id` just made here, which the program never saw;
        // destroyed once.
        unsafe { rdma_destroy_id(p) };
        return err(e);
    }
    // SAFETY: `id` (not null, checked) is the caller's writable `struct rdma_cm_id **` out
    // parameter.
    unsafe { *id = p };
    0
}

/// `rdma_destroy_ep`: the QP (and the CQs made for it), then the ID.
///
/// # Safety
/// As `rdma_destroy_ep`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    // SAFETY: `rdma_destroy_qp` and `rdma_destroy_id` take any pointer: each looks `id` up among
    // the live IDs and does nothing (or EINVAL) for another.
    unsafe {
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
    }
}

/// `rdma_get_request`: waits for a connect request on a synchronous listener; the new ID is
/// synchronous (its own channel), keeps the request in `id->event`, and has a QP when the
/// listener came from `rdma_create_ep` with QP attributes.
///
/// # Safety
/// As `rdma_get_request`'s callers promise:
/// - `listen` is null or any pointer: IDs are looked up among the live ones.
/// - `id` is null or a writable `struct rdma_cm_id *` out parameter.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    let Some(l) = SoftId::get(listen) else { return err(libc::EINVAL) };
    let Some(mut l) = l.lock() else { return err(libc::EINVAL) };
    if id.is_null() || !l.sync {
        return err(libc::EINVAL);
    }
    if complete(&mut l) != 0 {
        return -1;
    }
    let ev = std::mem::replace(&mut l.id().event, std::ptr::null_mut());
    let (qp_init, lpd) = (l.qp_init, l.id().pd);
    // One ID locked at a time: the child's next.
    drop(l);
    // SAFETY: `ev` is the event `complete` just kept in the listener's `id.event`: a live
    // `rdma_cm_event` of this library until it is acknowledged, which happens after this read.
    let (kind, child) = unsafe { ((*ev).event, (*ev).id) };
    let Some(c) = SoftId::get(child).filter(|_| kind == RDMA_CM_EVENT_CONNECT_REQUEST) else {
        channel::ack(ev);
        return err(libc::EINVAL);
    };
    let Some(mut c) = c.lock() else {
        channel::ack(ev);
        return err(libc::EINVAL);
    };
    // The child keeps the request (its next call or its destroy acknowledges it).
    c.id().event = ev;
    // Its own channel, as librdmacm migrates a synchronous listener's requests.
    let ch = match channel::create() {
        Ok(ch) => ch,
        Err(e) => return err(e),
    };
    if let Err(e) = c.s.ctx.dev.lock().cm_migrate_id(c.s.cm, ch.cm) {
        return fail(&e);
    }
    c.id().channel = std::ptr::from_ref::<SoftCmChannel>(ch).cast_mut().cast();
    c.sync = true;
    c.id().pd = if lpd.is_null() { device_pd(c.s.ctx) } else { lpd };
    if let Some(mut a) = qp_init {
        // SAFETY: the listener's PD (from `rdma_create_ep`'s caller) or null.
        if unsafe { create_qp(&mut c, lpd, &mut a) } != 0 {
            let e = errno::get();
            drop(c);
            // SAFETY: the request's ID, live; rejected, then destroyed once.
            let _ = unsafe { rdma_reject(child, std::ptr::null(), 0) };
            // SAFETY: `child` is the request's live ID, just rejected and destroyed here once;
            // nothing uses it after.
            unsafe { rdma_destroy_id(child) };
            return err(e);
        }
    }
    // SAFETY: `id` (not null, checked) is the caller's writable `struct rdma_cm_id **` out
    // parameter.
    unsafe { *id = child };
    0
}

/// `rdma_join_multicast`: multicast is not supported by this device (`ENOSYS`).
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_join_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
    _context: *mut c_void,
) -> c_int {
    err(libc::ENOSYS)
}

/// `rdma_join_multicast_ex`: as `rdma_join_multicast`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    _id: *mut rdma_cm_id,
    _mc_join_attr: *mut rdma_cm_join_mc_attr_ex,
    _context: *mut c_void,
) -> c_int {
    err(libc::ENOSYS)
}

/// `rdma_leave_multicast`: nothing was joined (`ENOSYS`).
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_leave_multicast(_id: *mut rdma_cm_id, _addr: *mut libc::sockaddr) -> c_int {
    err(libc::ENOSYS)
}
