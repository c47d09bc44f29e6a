//! Shared receive queues on IDs (`rdma_create_srq`, `rdma_create_srq_ex`, `rdma_destroy_srq`)
//! and Enhanced Connection Establishment (`rdma_set_local_ece`, `rdma_get_remote_ece`,
//! `rdma_reject_ece`), which this device does not negotiate: a local ECE is taken and not sent,
//! the remote one reads as none (vendor ID 0), as for a peer without ECE.

use super::conn::rdma_reject;
use super::objects::{SoftId, err};
use crate::abi::*;
use crate::cm_abi::*;
use std::ffi::{c_int, c_void};

/// `rdma_create_srq`: an SRQ on `pd` (or the ID's PD), kept in `id->srq` for the QP made next.
///
/// # Safety
/// As `rdma_create_srq`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `pd` is null or a PD of this library not yet deallocated.
/// - `attr` is null or a valid `ibv_srq_init_attr` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    let pd = if pd.is_null() { s.id().pd } else { pd };
    if attr.is_null() || pd.is_null() || !s.id().srq.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: our own verb; the caller passes a valid attribute structure.
    let srq = unsafe { crate::srq_ah::ibv_create_srq(pd, attr) };
    if srq.is_null() {
        return -1;
    }
    s.id().srq = srq;
    s.id().pd = pd;
    0
}

/// `rdma_create_srq_ex`: basic SRQs only (XRC and tag matching: `EOPNOTSUPP`).
///
/// # Safety
/// As `rdma_create_srq_ex`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `attr` is null or a valid `ibv_srq_init_attr_ex` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int {
    // SAFETY: the caller passes a valid attribute structure or null.
    let Some(a) = (unsafe { attr.as_ref() }) else { return err(libc::EINVAL) };
    if a.srq_type != IBV_SRQT_BASIC || a.comp_mask & !(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE) != 0 {
        return err(libc::EOPNOTSUPP);
    }
    let pd = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 { a.pd } else { std::ptr::null_mut() };
    let mut basic = ibv_srq_init_attr { srq_context: a.srq_context, attr: a.attr };
    // SAFETY: this library's own function; `basic` is a valid attribute structure.
    unsafe { rdma_create_srq(id, pd, &mut basic) }
}

/// `rdma_destroy_srq`.
///
/// # Safety
/// As `rdma_destroy_srq`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    let Some(s) = SoftId::get(id) else { return };
    let Some(mut s) = s.lock() else { return };
    let s = &mut s;
    if !s.id().srq.is_null() {
        // SAFETY: `s.id().srq` is not null (checked), so the SRQ `rdma_create_srq` made for this ID;
        // the field is cleared below, so it is destroyed once.
        unsafe { crate::srq_ah::ibv_destroy_srq(s.id().srq) };
        s.id().srq = std::ptr::null_mut();
    }
}

/// `rdma_set_local_ece`: checked as librdmacm checks it (an ID without a QP, a vendor ID), then
/// taken; ECE is not negotiated.
///
/// # Safety
/// As `rdma_set_local_ece`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `ece` is null or a valid `ibv_ece` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    let Some(s) = SoftId::get(id) else { return err(libc::EINVAL) };
    let Some(mut s) = s.lock() else { return err(libc::EINVAL) };
    let s = &mut s;
    // SAFETY: the caller passes a valid structure or null.
    match unsafe { ece.as_ref() } {
        Some(e) if e.vendor_id != 0 && s.id().qp.is_null() => 0,
        _ => err(libc::EINVAL),
    }
}

/// `rdma_get_remote_ece`: none (vendor ID 0): the peer's ECE is not negotiated.
///
/// # Safety
/// As `rdma_get_remote_ece`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `ece` is null or a valid `ibv_ece` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, ece: *mut ibv_ece) -> c_int {
    if SoftId::get(id).as_ref().and_then(|s| s.lock()).is_none() || ece.is_null() {
        return err(libc::EINVAL);
    }
    // SAFETY: checked non-null; the caller passes a writable structure.
    unsafe { ece.write(ibv_ece { vendor_id: 0, options: 0, comp_mask: 0 }) };
    0
}

/// `rdma_reject_ece`: a rejection (the ECE reason is not sent).
///
/// # Safety
/// As `rdma_reject_ece`'s callers promise:
/// - `id` is null or any pointer: IDs are looked up among the live ones.
/// - `private_data` is null or holds `private_data_len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: the caller's arguments, as `rdma_reject` takes them.
    unsafe { rdma_reject(id, private_data, private_data_len) }
}
