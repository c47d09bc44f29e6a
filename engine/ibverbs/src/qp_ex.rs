//! The `ibv_wr_*` send API of `struct ibv_qp_ex` (perftest's default posting path): requests are
//! built between `ibv_wr_start` and `ibv_wr_complete`, which posts them in order.

use crate::abi::*;
use crate::errno;
use crate::handles::SoftQp;
use crate::wr;
use engine::verbs::{SendWr, Sge, WrOpcode};
use std::ffi::{c_int, c_void};

/// Fills the `ibv_wr_*` function pointers of a QP.
pub(crate) fn fill_ops(ex: &mut ibv_qp_ex) {
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_send = Some(wr_send);
    ex.wr_send_imm = Some(wr_send_imm);
    ex.wr_send_inv = Some(wr_send_inv);
    ex.wr_rdma_write = Some(wr_rdma_write);
    ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    ex.wr_rdma_read = Some(wr_rdma_read);
    ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
}

/// # Safety
/// `qp` is a QP of this library.
unsafe fn soft<'a>(qp: *mut ibv_qp_ex) -> Option<&'a SoftQp> {
    // SAFETY: this function's contract; `ibv_qp_ex` is the first field of the `repr(C)` `SoftQp`,
    // and its first field the `ibv_qp`, so the cast names the same object.
    unsafe { SoftQp::from(qp.cast()) }.map(|(q, _)| q)
}

fn fail(q: &SoftQp, e: i32) {
    q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(e);
}

/// Starts a request with the QP's current `wr_id` and `wr_flags`.
///
/// # Safety
/// `qp` is null or a live QP of this library: the `ibv_wr_*` op calling this was reached through
/// the function pointers of a QP this library filled.
unsafe fn begin(qp: *mut ibv_qp_ex, op: WrOpcode) {
    // SAFETY: this function's contract.
    let Some(q) = (unsafe { soft(qp) }) else { return };
    // SAFETY: `ex` is the QP's own structure, in an `UnsafeCell`; the program set `wr_id` and
    // `wr_flags` before this builder call and does not write them during it.
    let (wr_id, wr_flags) = unsafe { ((*q.ex.get()).wr_id, (*q.ex.get()).wr_flags) };
    let w = SendWr { wr_id, opcode: op, sg_list: Vec::new(), flags: wr::send_flags(wr_flags), ud: None };
    q.batch().push((w, None));
}

/// Runs `f` on the request being built (a setter before any builder is a caller error).
///
/// # Safety
/// `qp` is null or a live QP of this library, as for [`begin`].
unsafe fn last(qp: *mut ibv_qp_ex, f: impl FnOnce(&mut (SendWr, Option<Vec<u8>>)) -> Result<(), i32>) {
    // SAFETY: `qp` is null or a live QP of this library, as in `begin`.
    let Some(q) = (unsafe { soft(qp) }) else { return };
    let r = q.batch().last_mut().ok_or(libc::EINVAL).and_then(f);
    if let Err(e) = r {
        fail(q, e);
    }
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    // SAFETY: `qp` is null or a live QP of this library (its `wr_start` op).
    if let Some(q) = unsafe { soft(qp) } {
        q.batch().clear();
        *q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    // SAFETY: `qp` is null or a live QP of this library (its `wr_complete` op).
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp.cast()) }) else { return errno::fail(libc::EINVAL) };
    let batch = std::mem::take(&mut *q.batch());
    if let Some(e) = q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        return e;
    }
    let mut e = ctx.dev.lock();
    for (w, inline) in batch {
        // SAFETY: `post_one` reads SGE addresses only for an inline request without its own data:
        // one flagged IBV_SEND_INLINE in `wr_flags` but given SGEs (`wr_set_sge*`). Those SGEs
        // name the caller's buffers, which ibv_wr_post(3) keeps valid until the request
        // completes, so they are readable now; data given with `wr_set_inline_data*` was copied.
        if let Err(err) = unsafe { q.post_one(&mut e, w.borrowed(), inline.as_deref()) } {
            return err;
        }
    }
    0
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    // SAFETY: `qp` is this op's own argument, a live QP of this library or null.
    unsafe { wr_start(qp) };
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::Send) }
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm_data: __be32) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::SendWithImm { imm: u32::from_be(imm_data) }) }
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::SendWithInv { invalidate_rkey }) }
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::RdmaWrite { remote_addr, rkey }) }
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: __be32) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::RdmaWriteWithImm { remote_addr, rkey, imm: u32::from_be(imm_data) }) }
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::RdmaRead { remote_addr, rkey }) }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::AtomicCmpAndSwp { remote_addr, rkey, compare, swap }) }
}

unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    // SAFETY: `qp` is null or a live QP of this library (its op).
    unsafe { begin(qp, WrOpcode::AtomicFetchAndAdd { remote_addr, rkey, add }) }
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: `qp` is null or a live QP of this library (its op); the closure touches no pointer.
    unsafe {
        last(qp, |(w, _)| {
            w.sg_list = vec![Sge { addr, length, lkey }];
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    // SAFETY: `qp` is null or a live QP of this library (its op); `sg_list` is read inside, as said
    // there.
    unsafe {
        last(qp, |(w, _)| {
            // SAFETY: ibv_wr_set_sge_list(3): `sg_list` holds `num_sge` SGEs (`sges` checks null
            // and a count that does not fit an `i32` is refused first).
            w.sg_list = wr::sges(sg_list, i32::try_from(num_sge).map_err(|_| libc::EINVAL)?)?.to_vec();
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buf = ibv_data_buf { addr, length };
    // SAFETY: `qp` is null or a live QP of this library, and `buf` a local list of one buffer: the
    // caller's `length` bytes at `addr`.
    unsafe { wr_set_inline_data_list(qp, 1, &buf) }
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    // SAFETY: `qp` is null or a live QP of this library (its op); the buffers are read inside, as
    // said there.
    unsafe {
        last(qp, |(w, inline)| {
            if num_buf > 0 && buf_list.is_null() {
                return Err(libc::EINVAL);
            }
            let mut data = Vec::new();
            for i in 0..num_buf {
                // SAFETY: `buf_list` (not null when `num_buf > 0`, checked) holds `num_buf` buffers
                // (ibv_wr_set_inline_data_list(3)), and `i < num_buf`.
                let b = &*buf_list.add(i);
                if b.length > 0 {
                    if b.addr.is_null() {
                        return Err(libc::EINVAL);
                    }
                    // SAFETY: the buffer's `length > 0` bytes at `addr` (not null, checked) are
                    // readable during this call, which copies them: inline data is the caller's
                    // again when the setter returns.
                    data.extend_from_slice(std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length));
                }
            }
            w.flags = w.flags | engine::verbs::SendFlags::INLINE;
            *inline = Some(data);
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) {
    // SAFETY: `qp` is null or a live QP of this library (its op); `ah` is null or an AH of this
    // library (ibv_wr_set_ud_addr(3)), which `ud_dest` checks for null.
    unsafe {
        last(qp, |(w, _)| {
            w.ud = Some(wr::ud_dest(ah, remote_qpn, remote_qkey)?);
            Ok(())
        })
    }
}
