//! Queue pairs: create (plain and extended), modify, query, destroy, and the posting ops.

use crate::abi::*;
use crate::config::gid_to_ip;
use crate::errno;
use crate::handles::{Ctx, SoftCq, SoftPd, SoftQp, SoftSrq};
use crate::wr;
use engine::verbs::{Access, AddressVector, Mtu, QpAttr, QpCap, QpInitAttr, QpState, QpType};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Mutex;

fn qp_type(t: ibv_qp_type) -> Option<QpType> {
    match t {
        IBV_QPT_RC => Some(QpType::Rc),
        IBV_QPT_UC => Some(QpType::Uc),
        IBV_QPT_UD => Some(QpType::Ud),
        _ => None,
    }
}

fn ibv_qp_type_of(t: QpType) -> ibv_qp_type {
    match t {
        QpType::Rc => IBV_QPT_RC,
        QpType::Uc => IBV_QPT_UC,
        QpType::Ud => IBV_QPT_UD,
    }
}

/// The send operations the `ibv_wr_*` API offers here.
const SEND_OPS: u64 = (IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | IBV_QP_EX_WITH_SEND_WITH_INV) as u64;

/// Creates a QP from the fields both create calls share; writes the capacities granted back.
///
/// # Safety
/// `pd` is null or a live PD of this library, and `attr`'s CQ and SRQ pointers are null or live
/// objects of this library (what `ibv_create_qp`'s callers promise).
unsafe fn create(
    ctx: &Ctx,
    pd: *mut ibv_pd,
    attr: &mut ibv_qp_init_attr,
    qp_context: *mut std::ffi::c_void,
) -> Result<*mut ibv_qp, i32> {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let (p, _) = unsafe { SoftPd::from(pd) }.ok_or(libc::EINVAL)?;
    let ty = qp_type(attr.qp_type).ok_or(libc::EOPNOTSUPP)?;
    // SAFETY: `send_cq` is null or a live CQ of this library (ibv_create_qp(3) takes it from the
    // caller's attributes).
    let (scq, _) = unsafe { SoftCq::from(attr.send_cq) }.ok_or(libc::EINVAL)?;
    // SAFETY: `recv_cq` is null or a live CQ of this library, as `send_cq`.
    let (rcq, _) = unsafe { SoftCq::from(attr.recv_cq) }.ok_or(libc::EINVAL)?;
    let srq = if attr.srq.is_null() {
        None
    } else {
        // SAFETY: `srq` is not null (checked), so a live SRQ of this library by the verbs'
        // contract.
        Some(unsafe { SoftSrq::from(attr.srq) }.ok_or(libc::EINVAL)?.0.srq)
    };
    let c = attr.cap;
    let cap = QpCap {
        max_send_wr: c.max_send_wr.max(1),
        max_recv_wr: if srq.is_some() { 0 } else { c.max_recv_wr },
        max_send_sge: c.max_send_sge.max(1),
        max_recv_sge: c.max_recv_sge.max(1),
        max_inline_data: c.max_inline_data,
    };
    let init = QpInitAttr {
        qp_type: ty,
        send_cq: scq.cq,
        recv_cq: rcq.cq,
        srq,
        cap,
        sq_sig_all: attr.sq_sig_all != 0,
    };
    let mut e = ctx.dev.lock();
    let qp = e.create_qp(p.pd, &init).map_err(|e| errno::of(&e))?;
    drop(e);
    attr.cap = ibv_qp_cap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    };
    // SAFETY: all-zero is a valid `ibv_qp_ex`: null `Option` function pointers, null pointers,
    // integers, and a pthread mutex and condition whose zero is their glibc static initialiser.
    let mut ex: ibv_qp_ex = unsafe { std::mem::zeroed() };
    let b = &mut ex.qp_base;
    b.context = ctx.ibv();
    b.qp_context = qp_context;
    b.pd = pd;
    b.send_cq = attr.send_cq;
    b.recv_cq = attr.recv_cq;
    b.srq = attr.srq;
    b.qp_num = qp.qpn();
    b.state = IBV_QPS_RESET;
    b.qp_type = attr.qp_type;
    crate::qp_ex::fill_ops(&mut ex);
    let q = SoftQp {
        ex: UnsafeCell::new(ex),
        qp,
        ty,
        cap,
        sq_sig_all: attr.sq_sig_all != 0,
        batch: Mutex::default(),
        batch_error: Mutex::default(),
    };
    let ptr: *mut SoftQp = Box::into_raw(Box::new(q));
    ctx.objects().qps.insert(qp, ptr as usize);
    Ok(ptr.cast())
}

/// `ibv_create_qp`: RC, UC and UD.
///
/// # Safety
/// As `ibv_create_qp`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `qp_init_attr` is null or a valid `ibv_qp_init_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let Some((_, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    if qp_init_attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // SAFETY: `qp_init_attr`, not null (checked), is the caller's attribute structure, read and
    // written back (`cap`) by ibv_create_qp(3); no other reference to it exists during the call.
    let attr = unsafe { &mut *qp_init_attr };
    // SAFETY: `pd` is the live PD just checked, and `attr` the caller's structure, exclusively
    // borrowed for this call.
    match unsafe { create(ctx, pd, attr, attr.qp_context) } {
        Ok(p) => p,
        Err(e) => errno::null(e),
    }
}

/// The basic attributes of extended ones this device supports (a PD, the `ibv_wr_*` send
/// operations; no creation flags, XRC, RSS or TSO: `EOPNOTSUPP`).
pub(crate) fn basic_attr(a: &ibv_qp_init_attr_ex) -> Result<ibv_qp_init_attr, i32> {
    let known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if a.comp_mask & !known != 0 || a.create_flags != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 && a.send_ops_flags & !SEND_OPS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
    })
}

/// `verbs_context.create_qp_ex` (behind the inline `ibv_create_qp_ex`): a PD, and the `ibv_wr_*`
/// send operations above; no creation flags, XRC, RSS or TSO.
pub(crate) unsafe extern "C" fn create_qp_ex(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: `context` is null or a live context of this library: the inline `ibv_create_qp_ex`
    // reaches this op only through the context's `verbs_context`.
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::null(libc::EINVAL) };
    if attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // SAFETY: `attr`, not null (checked), is the caller's `ibv_qp_init_attr_ex`, read and written
    // back (`cap`) by ibv_create_qp_ex(3); no other reference to it exists during the call.
    let a = unsafe { &mut *attr };
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        return errno::null(libc::EINVAL);
    }
    let mut basic = match basic_attr(a) {
        Ok(b) => b,
        Err(e) => return errno::null(e),
    };
    // SAFETY: `a.pd` is null or a live PD of this library (ibv_create_qp_ex(3)), and `basic` a
    // local structure.
    match unsafe { create(ctx, a.pd, &mut basic, a.qp_context) } {
        Ok(p) => {
            a.cap = basic.cap;
            p
        }
        Err(e) => errno::null(e),
    }
}

/// `ibv_qp_to_qp_ex`: every QP here has the `ibv_wr_*` API.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    qp.cast()
}

fn state(s: ibv_qp_state) -> Result<QpState, i32> {
    Ok(match s {
        IBV_QPS_RESET => QpState::Reset,
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        IBV_QPS_ERR => QpState::Error,
        IBV_QPS_SQD | IBV_QPS_SQE => return Err(libc::EOPNOTSUPP),
        _ => return Err(libc::EINVAL),
    })
}

fn ibv_state(s: QpState) -> ibv_qp_state {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Error => IBV_QPS_ERR,
    }
}

fn mtu(m: ibv_mtu) -> Result<Mtu, i32> {
    Ok(match m {
        IBV_MTU_256 => Mtu::Mtu256,
        IBV_MTU_512 => Mtu::Mtu512,
        IBV_MTU_1024 => Mtu::Mtu1024,
        IBV_MTU_2048 => Mtu::Mtu2048,
        IBV_MTU_4096 => Mtu::Mtu4096,
        _ => return Err(libc::EINVAL),
    })
}

/// A path MTU as `enum ibv_mtu`.
pub(crate) fn ibv_mtu_of(m: Mtu) -> ibv_mtu {
    match m {
        Mtu::Mtu256 => IBV_MTU_256,
        Mtu::Mtu512 => IBV_MTU_512,
        Mtu::Mtu1024 => IBV_MTU_1024,
        Mtu::Mtu2048 => IBV_MTU_2048,
        Mtu::Mtu4096 => IBV_MTU_4096,
    }
}

/// The bits of a GRH flow label (IBTA 8.3.1): the kernel keeps the low 20 of the 32-bit field
/// (`IB_GRH_FLOWLABEL_MASK`), and middleware passes all ones (UCX: `0xFFFFFFFF`).
pub(crate) const FLOW_LABEL_MASK: u32 = 0xF_FFFF;

/// A RoCEv2 address vector: a GRH whose destination GID is IPv4-mapped; the flow label masked to
/// its 20 bits.
pub(crate) fn address(ah: &ibv_ah_attr) -> Result<AddressVector, i32> {
    if ah.is_global == 0 || ah.port_num > 1 {
        return Err(libc::EINVAL);
    }
    // SAFETY: every member of `union ibv_gid` is plain bytes or integers over the same 16 bytes,
    // so any bytes the caller wrote are a valid `raw`.
    let dgid = gid_to_ip(unsafe { &ah.grh.dgid.raw }).ok_or(libc::EINVAL)?;
    let mut av = AddressVector::new(dgid);
    av.traffic_class = ah.grh.traffic_class;
    av.hop_limit = ah.grh.hop_limit;
    av.flow_label = ah.grh.flow_label & FLOW_LABEL_MASK;
    Ok(av)
}

/// An address vector as `ibv_ah_attr`.
pub(crate) fn ah_attr(av: &AddressVector) -> ibv_ah_attr {
    // SAFETY: `ibv_ah_attr` is integers and a GRH of integers and a GID: all-zero is valid.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    let v6 = match av.dgid {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        std::net::IpAddr::V6(v6) => v6,
    };
    a.grh.dgid.raw = v6.octets();
    a.grh.sgid_index = 1;
    a.grh.traffic_class = av.traffic_class;
    a.grh.hop_limit = av.hop_limit;
    a.grh.flow_label = av.flow_label;
    a.is_global = 1;
    a.port_num = 1;
    a
}

fn qp_attr(a: &ibv_qp_attr, mask: c_int) -> Result<QpAttr, i32> {
    let has = |bit: ibv_qp_attr_mask| mask as u32 & bit != 0;
    let mut q = QpAttr::default();
    if has(IBV_QP_ACCESS_FLAGS) {
        q.qp_access_flags = Some(Access(a.qp_access_flags & 0xf));
    }
    if has(IBV_QP_QKEY) {
        q.qkey = Some(a.qkey);
    }
    if has(IBV_QP_PATH_MTU) {
        q.path_mtu = Some(mtu(a.path_mtu)?);
    }
    if has(IBV_QP_DEST_QPN) {
        q.dest_qp_num = Some(a.dest_qp_num);
    }
    if has(IBV_QP_RQ_PSN) {
        q.rq_psn = Some(a.rq_psn & 0xff_ffff);
    }
    if has(IBV_QP_AV) {
        q.ah_attr = Some(address(&a.ah_attr)?);
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
        q.max_dest_rd_atomic = Some(a.max_dest_rd_atomic);
    }
    if has(IBV_QP_MIN_RNR_TIMER) {
        q.min_rnr_timer = Some(a.min_rnr_timer);
    }
    if has(IBV_QP_SQ_PSN) {
        q.sq_psn = Some(a.sq_psn & 0xff_ffff);
    }
    if has(IBV_QP_TIMEOUT) {
        q.timeout = Some(a.timeout);
    }
    if has(IBV_QP_RETRY_CNT) {
        q.retry_cnt = Some(a.retry_cnt);
    }
    if has(IBV_QP_RNR_RETRY) {
        q.rnr_retry = Some(a.rnr_retry);
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) {
        q.max_rd_atomic = Some(a.max_rd_atomic);
    }
    if has(IBV_QP_PORT) && a.port_num != 1 {
        return Err(libc::EINVAL);
    }
    if has(IBV_QP_PKEY_INDEX) && a.pkey_index != 0 {
        return Err(libc::EINVAL);
    }
    if has(IBV_QP_ALT_PATH) || has(IBV_QP_PATH_MIG_STATE) || has(IBV_QP_RATE_LIMIT) || has(IBV_QP_CAP) {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(q)
}

/// `ibv_modify_qp`: the state transitions RESET → INIT → RTR → RTS, to ERR and back to RESET,
/// with the attributes `attr_mask` names.
///
/// # Safety
/// As `ibv_modify_qp`'s callers promise:
/// - `qp` is null or a QP of this library not yet destroyed.
/// - `attr` is null or a valid `ibv_qp_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int {
    // SAFETY: `qp` is null or a QP of this library not yet destroyed (the verbs' contract).
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp) }) else { return errno::fail(libc::EINVAL) };
    if attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // SAFETY: `attr`, not null (checked), is the caller's `ibv_qp_attr` (ibv_modify_qp(3)); its
    // fields are integers and plain structures, valid whatever the mask leaves unset.
    let a = unsafe { &*attr };
    let mut e = ctx.dev.lock();
    let target = if attr_mask as u32 & IBV_QP_STATE != 0 {
        match state(a.qp_state) {
            Ok(s) => s,
            Err(err) => return errno::fail(err),
        }
    } else {
        match e.query_qp(q.qp) {
            Ok((s, _)) => s,
            Err(err) => return errno::fail(errno::of(&err)),
        }
    };
    let qa = match qp_attr(a, attr_mask) {
        Ok(qa) => qa,
        Err(err) => return errno::fail(err),
    };
    if let Err(err) = e.modify_qp(q.qp, target, &qa) {
        return errno::fail(errno::of(&err));
    }
    // SAFETY: `qp` is the live QP `SoftQp::from` checked; its `ibv_qp` lies in `SoftQp::ex`, an
    // `UnsafeCell`, so this write does not contradict the `&SoftQp` this or another thread holds.
    // Programs read `qp->state`.
    unsafe { (*qp).state = ibv_state(target) };
    0
}

/// `ibv_query_qp`: every attribute the QP has, whatever the mask asks.
///
/// # Safety
/// As `ibv_query_qp`'s callers promise:
/// - `qp` is null or a QP of this library not yet destroyed.
/// - `attr` is null or a valid `ibv_qp_attr` (writable where it is an out parameter).
/// - `init_attr` is null or a valid `ibv_qp_init_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: `qp` is null or a QP of this library not yet destroyed (the verbs' contract).
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp) }) else { return errno::fail(libc::EINVAL) };
    if attr.is_null() || init_attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let (s, qa) = match ctx.dev.lock().query_qp(q.qp) {
        Ok(x) => x,
        Err(e) => return errno::fail(errno::of(&e)),
    };
    // SAFETY: `ibv_qp_attr` is integers (its enums are bindgen's `c_uint` aliases) and address
    // vectors of integers: all-zero is valid.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ibv_state(s);
    a.cur_qp_state = a.qp_state;
    a.path_mtu = qa.path_mtu.map_or(IBV_MTU_1024, ibv_mtu_of);
    a.qkey = qa.qkey.unwrap_or(0);
    a.rq_psn = qa.rq_psn.unwrap_or(0);
    a.sq_psn = qa.sq_psn.unwrap_or(0);
    a.dest_qp_num = qa.dest_qp_num.unwrap_or(0);
    a.qp_access_flags = qa.qp_access_flags.map_or(0, |x| x.0 & 0xf);
    a.cap = ibv_qp_cap {
        max_send_wr: q.cap.max_send_wr,
        max_recv_wr: q.cap.max_recv_wr,
        max_send_sge: q.cap.max_send_sge,
        max_recv_sge: q.cap.max_recv_sge,
        max_inline_data: q.cap.max_inline_data,
    };
    if let Some(av) = &qa.ah_attr {
        a.ah_attr = ah_attr(av);
    }
    a.max_rd_atomic = qa.max_rd_atomic.unwrap_or(0);
    a.max_dest_rd_atomic = qa.max_dest_rd_atomic.unwrap_or(0);
    a.min_rnr_timer = qa.min_rnr_timer.unwrap_or(0);
    a.port_num = 1;
    a.timeout = qa.timeout.unwrap_or(0);
    a.retry_cnt = qa.retry_cnt.unwrap_or(0);
    a.rnr_retry = qa.rnr_retry.unwrap_or(0);
    // SAFETY: a read of the QP's own `ibv_qp`, whose pointers `create` set (a program may change
    // `qp_context`, as libibverbs allows, but not during a call on the QP).
    let b = unsafe { &(*q.ex.get()).qp_base };
    let i = ibv_qp_init_attr {
        qp_context: b.qp_context,
        send_cq: b.send_cq,
        recv_cq: b.recv_cq,
        srq: b.srq,
        cap: a.cap,
        qp_type: ibv_qp_type_of(q.ty),
        sq_sig_all: c_int::from(q.sq_sig_all),
    };
    // SAFETY: `attr` and `init_attr`, not null (checked), are the caller's writable structures
    // (ibv_query_qp(3)); `write` does not read their old contents.
    unsafe {
        attr.write(a);
        init_attr.write(i);
    }
    0
}

/// `ibv_destroy_qp`: outstanding requests are dropped with the QP, as libibverbs does.
///
/// # Safety
/// As `ibv_destroy_qp`'s callers promise:
/// - `qp` is null or a QP of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: `qp` is null or a QP of this library not yet destroyed (the verbs' contract).
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp) }) else { return errno::fail(libc::EINVAL) };
    {
        let mut e = ctx.dev.lock();
        if let Err(err) = e.destroy_qp(q.qp) {
            return errno::fail(errno::of(&err));
        }
    }
    ctx.objects().qps.remove(&q.qp);
    // SAFETY: `qp` is a `SoftQp` boxed by `create`; the engine destroyed the QP and it left the
    // context's table, and the caller does not use it again (ibv_destroy_qp(3)).
    drop(unsafe { Box::from_raw(qp.cast::<SoftQp>()) });
    0
}

/// `ibv_context_ops.post_send` (behind the inline `ibv_post_send`): posts the list in order; on
/// the first request refused, `*bad_wr` names it and the ones before it stay posted.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: `qp` is null or a live QP of this library: the inline `ibv_post_send` reaches this op
    // only through `qp->context->ops`.
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp) }) else {
        // SAFETY: `wr` and `bad_wr` are the caller's, which ibv_post_send(3) makes a valid list (or
        // null) and a writable out pointer (or null); every request is refused.
        return unsafe { wr::post_list(wr, bad_wr, |w| w.next, |_| Err(libc::EINVAL)) };
    };
    let mut e = ctx.dev.lock();
    // The frames go out on the caller's next poll, or within two `HANDOVER`s from the progress
    // thread if it polls no more: posting stays cheap, and a busy poller sends in batches.
    // SAFETY: `wr` is null or a valid list of requests, each with `num_sge` SGEs (inline ones
    // naming readable bytes), and `bad_wr` null or writable (ibv_post_send(3)).
    unsafe {
        wr::post_list(
            wr,
            bad_wr,
            |w| w.next,
            |w| wr::send_wr(w, q.ty == QpType::Ud).and_then(|sw| q.post_one(&mut e, sw, None)),
        )
    }
}

/// `ibv_context_ops.post_recv` (behind the inline `ibv_post_recv`).
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: `qp` is null or a live QP of this library: the inline `ibv_post_recv` reaches this op
    // only through `qp->context->ops`.
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp) }) else {
        // SAFETY: `wr` and `bad_wr` are the caller's, which ibv_post_recv(3) makes a valid list (or
        // null) and a writable out pointer (or null); every request is refused.
        return unsafe { wr::post_list(wr, bad_wr, |w| w.next, |_| Err(libc::EINVAL)) };
    };
    let mut e = ctx.dev.lock();
    // SAFETY: `wr` is null or a valid list of requests, each with `num_sge` SGEs, and `bad_wr` null
    // or writable (ibv_post_recv(3)).
    unsafe {
        wr::post_list(
            wr,
            bad_wr,
            |w| w.next,
            |w| {
                let rw = wr::recv_wr(w)?;
                e.post_recv(q.qp, std::slice::from_ref(&rw)).map_err(|(_, err)| errno::of(&err))
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ah(flow_label: u32) -> ibv_ah_attr {
        // SAFETY: `ibv_ah_attr` is integers and a GRH of integers: all-zero is valid.
        let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
        a.is_global = 1;
        a.port_num = 1;
        a.grh.dgid.raw = std::net::Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped().octets();
        a.grh.flow_label = flow_label;
        a
    }

    #[test]
    fn flow_labels_are_masked_to_20_bits_as_the_kernel_does() {
        assert_eq!(address(&ah(0xFFFF_FFFF)).unwrap().flow_label, 0xF_FFFF);
        assert_eq!(address(&ah(0x123_4567)).unwrap().flow_label, 0x3_4567);
        assert_eq!(address(&ah(5)).unwrap().flow_label, 5);
        // The AV goes through modify_qp whole: an all-ones label is no reason to refuse it.
        // SAFETY: all-zero is a valid `ibv_qp_attr`.
        let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.ah_attr = ah(0xFFFF_FFFF);
        let q = qp_attr(&a, IBV_QP_AV as c_int).unwrap();
        assert_eq!(q.ah_attr.unwrap().flow_label, 0xF_FFFF);
    }
}
