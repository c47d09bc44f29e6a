//! Shared receive queues and address handles.

use crate::abi::*;
use crate::errno;
use crate::handles::{Ctx, SoftAh, SoftPd, SoftSrq};
use crate::qp::{address, ah_attr};
use crate::wr;
use engine::verbs::SrqAttr;
use std::ffi::{c_int, c_void};

/// `ibv_create_srq`.
///
/// # Safety
/// As `ibv_create_srq`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `srq_init_attr` is null or a valid `ibv_srq_init_attr` (writable where it is an out
///   parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    srq_init_attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    if srq_init_attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // SAFETY: `srq_init_attr`, not null (checked), is the caller's structure, read and written
    // back (`max_sge`) by ibv_create_srq(3); no other reference to it exists during the call.
    let init = unsafe { &mut *srq_init_attr };
    let attr = SrqAttr {
        max_wr: init.attr.max_wr,
        max_sge: init.attr.max_sge.max(1),
        srq_limit: init.attr.srq_limit,
    };
    let srq = match ctx.dev.lock().create_srq(p.pd, &attr) {
        Ok(s) => s,
        Err(e) => return errno::null(errno::of(&e)),
    };
    init.attr.max_sge = attr.max_sge;
    // SAFETY: `ibv_srq` is pointers, integers, and a pthread mutex and condition whose zero is
    // their glibc static initialiser: all-zero is valid.
    let mut ibv: ibv_srq = unsafe { std::mem::zeroed() };
    ibv.context = ctx.ibv();
    ibv.srq_context = init.srq_context;
    ibv.pd = pd;
    let ptr: *mut SoftSrq = Box::into_raw(Box::new(SoftSrq { ibv, srq, attr: std::sync::Mutex::new(attr) }));
    ctx.objects().srqs.insert(srq, ptr as usize);
    ptr.cast()
}

/// `ibv_modify_srq`: arms the limit (`IBV_SRQ_LIMIT`); resizing is not supported.
///
/// # Safety
/// As `ibv_modify_srq`'s callers promise:
/// - `srq` is null or an SRQ of this library not yet destroyed.
/// - `srq_attr` is null or a valid `ibv_srq_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    srq_attr: *mut ibv_srq_attr,
    srq_attr_mask: c_int,
) -> c_int {
    // SAFETY: `srq` is null or an SRQ of this library not yet destroyed (the verbs' contract).
    let Some((s, ctx)) = (unsafe { SoftSrq::from(srq) }) else { return errno::fail(libc::EINVAL) };
    if srq_attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let mask = srq_attr_mask as u32;
    if mask & IBV_SRQ_MAX_WR != 0 {
        return errno::fail(libc::EOPNOTSUPP);
    }
    if mask & IBV_SRQ_LIMIT != 0 {
        // SAFETY: `srq_attr`, not null (checked), is the caller's `ibv_srq_attr` (ibv_modify_srq(3)).
        let limit = unsafe { (*srq_attr).srq_limit };
        if let Err(e) = ctx.dev.lock().modify_srq_limit(s.srq, limit) {
            return errno::fail(errno::of(&e));
        }
        s.attr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).srq_limit = limit;
    }
    0
}

/// `ibv_query_srq`.
///
/// # Safety
/// As `ibv_query_srq`'s callers promise:
/// - `srq` is null or an SRQ of this library not yet destroyed.
/// - `srq_attr` is null or a valid `ibv_srq_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, srq_attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: `srq` is null or an SRQ of this library not yet destroyed (the verbs' contract).
    let Some((s, _)) = (unsafe { SoftSrq::from(srq) }) else { return errno::fail(libc::EINVAL) };
    if srq_attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let a = *s.attr.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // SAFETY: `srq_attr`, not null (checked), is the caller's writable `ibv_srq_attr`
    // (ibv_query_srq(3)).
    unsafe { srq_attr.write(ibv_srq_attr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit }) };
    0
}

/// `ibv_destroy_srq`: `EBUSY` while a QP uses it.
///
/// # Safety
/// As `ibv_destroy_srq`'s callers promise:
/// - `srq` is null or an SRQ of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    // SAFETY: `srq` is null or an SRQ of this library not yet destroyed (the verbs' contract).
    let Some((s, ctx)) = (unsafe { SoftSrq::from(srq) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().destroy_srq(s.srq) {
        return errno::fail(errno::of(&e));
    }
    ctx.objects().srqs.remove(&s.srq);
    // SAFETY: `srq` is a `SoftSrq` boxed by `ibv_create_srq`; the engine destroyed the SRQ (no QP
    // uses it) and it left the context's table, and the caller does not use it again.
    drop(unsafe { Box::from_raw(srq.cast::<SoftSrq>()) });
    0
}

/// `ibv_context_ops.post_srq_recv` (behind the inline `ibv_post_srq_recv`).
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: `srq` is null or a live SRQ of this library: the inline `ibv_post_srq_recv` reaches
    // this op only through `srq->context->ops`.
    let Some((s, ctx)) = (unsafe { SoftSrq::from(srq) }) else {
        // SAFETY: `wr` and `bad_wr` are the caller's, which ibv_post_srq_recv(3) makes a valid list
        // (or null) and a writable out pointer (or null); every request is refused.
        return unsafe { wr::post_list(wr, bad_wr, |w| w.next, |_| Err(libc::EINVAL)) };
    };
    let mut e = ctx.dev.lock();
    // SAFETY: `wr` is null or a valid list of requests, each with `num_sge` SGEs, and `bad_wr` null
    // or writable (ibv_post_srq_recv(3)).
    unsafe {
        wr::post_list(
            wr,
            bad_wr,
            |w| w.next,
            |w| {
                let rw = wr::recv_wr(w)?;
                e.post_srq_recv(s.srq, std::slice::from_ref(&rw)).map_err(|(_, err)| errno::of(&err))
            },
        )
    }
}

/// `ibv_create_ah`: a GRH with an IPv4-mapped destination GID (RoCEv2 over IPv4).
///
/// # Safety
/// As `ibv_create_ah`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `attr` is null or a valid `ibv_ah_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let Some((p, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    if attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // SAFETY: `attr`, not null (checked), is the caller's `ibv_ah_attr` (ibv_create_ah(3)).
    let av = match address(unsafe { &*attr }) {
        Ok(av) => av,
        Err(e) => return errno::null(e),
    };
    let ah = match ctx.dev.lock().create_ah(p.pd, &av) {
        Ok(ah) => ah,
        Err(e) => return errno::null(errno::of(&e)),
    };
    let ibv = ibv_ah { context: ctx.ibv(), pd, handle: 0 };
    Box::into_raw(Box::new(SoftAh { ibv, ah })).cast()
}

/// `ibv_destroy_ah`.
///
/// # Safety
/// As `ibv_destroy_ah`'s callers promise:
/// - `ah` is null or an AH of this library not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: `ah` is null or an AH of this library not yet destroyed (the verbs' contract).
    let Some(a) = (unsafe { SoftAh::from(ah) }) else { return errno::fail(libc::EINVAL) };
    // SAFETY: `ibv_create_ah` set `context` to the live context of the AH's PD.
    let Some(ctx) = (unsafe { Ctx::from(a.ibv.context) }) else { return errno::fail(libc::EINVAL) };
    if let Err(e) = ctx.dev.lock().destroy_ah(a.ah) {
        return errno::fail(errno::of(&e));
    }
    // SAFETY: `ah` is a `SoftAh` boxed by `ibv_create_ah`, and the engine destroyed the AH; the
    // caller does not use it again (ibv_destroy_ah(3)).
    drop(unsafe { Box::from_raw(ah.cast::<SoftAh>()) });
    0
}

/// `ibv_init_ah_from_wc`: the address of a UD receive's sender, from the GRH area of its buffer
/// (for IPv4, 20 zero bytes and the IPv4 header, as rxe writes it; else the IPv6 header).
///
/// # Safety
/// As `ibv_init_ah_from_wc`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `wc` is null or a valid `ibv_wc` (writable where it is an out parameter).
/// - `grh` is null or the 40-byte GRH area at the start of the completion's receive buffer.
/// - `ah_attr_out` is null or a valid `ibv_ah_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut c_void,
    ah_attr_out: *mut ibv_ah_attr,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    if unsafe { Ctx::from(context) }.is_none() || port_num != 1 || wc.is_null() || ah_attr_out.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // SAFETY: `wc` (not null, checked) is the caller's completion, and `grh` null or the 40-byte
    // GRH area at the start of its UD receive buffer (ibv_init_ah_from_wc(3)); `[u8; 40]` has
    // alignment 1.
    let (w, g) = unsafe { (&*wc, grh.cast::<[u8; 40]>().as_ref()) };
    let Some(g) = g.filter(|_| w.wc_flags & IBV_WC_GRH != 0) else { return errno::fail(libc::EINVAL) };
    let (sgid, tclass, flow) = if g[20] >> 4 == 4 {
        let ip = std::net::Ipv4Addr::new(g[32], g[33], g[34], g[35]);
        (ip.to_ipv6_mapped().octets(), g[21], 0)
    } else {
        let mut s = [0u8; 16];
        s.copy_from_slice(&g[8..24]);
        let vtf = u32::from_be_bytes([g[0], g[1], g[2], g[3]]);
        (s, (vtf >> 20) as u8, vtf & 0xf_ffff)
    };
    let Some(dgid) = crate::config::gid_to_ip(&sgid) else { return errno::fail(libc::EINVAL) };
    let mut av = engine::verbs::AddressVector::new(dgid);
    av.traffic_class = tclass;
    av.flow_label = flow;
    av.hop_limit = 0xff;
    let mut a = ah_attr(&av);
    a.sl = 0;
    // SAFETY: `ah_attr_out`, not null (checked), is the caller's writable `ibv_ah_attr`.
    unsafe { ah_attr_out.write(a) };
    0
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
/// As `ibv_create_ah_from_wc`'s callers promise:
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `wc` is null or a valid `ibv_wc` (writable where it is an out parameter).
/// - `grh` is null or a valid `ibv_grh` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    // SAFETY: `pd` is null or a live PD of this library (the verbs' contract).
    let Some((_, ctx)) = (unsafe { SoftPd::from(pd) }) else { return errno::null(libc::EINVAL) };
    // SAFETY: `ibv_ah_attr` is integers and a GRH of integers and a GID: all-zero is valid.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the context is the PD's live one, `a` a local, and `wc` and `grh` the caller's, which
    // ibv_create_ah_from_wc(3) makes a completion and its receive buffer's 40-byte GRH area (or
    // null, refused there).
    let r = unsafe { ibv_init_ah_from_wc(ctx.ibv(), port_num, wc, grh.cast(), &mut a) };
    if r != 0 {
        return errno::null(r);
    }
    // SAFETY: `pd` is the live PD checked above and `a` a local attribute structure.
    unsafe { ibv_create_ah(pd, &mut a) }
}
