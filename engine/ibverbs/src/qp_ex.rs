//! The `ibv_wr_*` send API of `struct ibv_qp_ex` (perftest's default posting path): requests are
//! built between `ibv_wr_start` and `ibv_wr_complete`, which posts them in order.

use crate::abi::*;
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
    // SAFETY: `ibv_qp_ex` is the first field of `SoftQp`, and its first field the `ibv_qp`.
    unsafe { SoftQp::from(qp.cast()) }.map(|(q, _)| q)
}

fn fail(q: &SoftQp, e: i32) {
    q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert(e);
}

/// Starts a request with the QP's current `wr_id` and `wr_flags`.
unsafe fn begin(qp: *mut ibv_qp_ex, op: WrOpcode) {
    let Some(q) = (unsafe { soft(qp) }) else { return };
    let w = SendWr {
        wr_id: q.ex.wr_id,
        opcode: op,
        sg_list: Vec::new(),
        flags: wr::send_flags(q.ex.wr_flags),
        ud: None,
    };
    q.batch().push((w, None));
}

/// Runs `f` on the request being built (a setter before any builder is a caller error).
unsafe fn last(qp: *mut ibv_qp_ex, f: impl FnOnce(&mut (SendWr, Option<Vec<u8>>)) -> Result<(), i32>) {
    let Some(q) = (unsafe { soft(qp) }) else { return };
    let r = q.batch().last_mut().ok_or(libc::EINVAL).and_then(f);
    if let Err(e) = r {
        fail(q, e);
    }
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    if let Some(q) = unsafe { soft(qp) } {
        q.batch().clear();
        *q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    let Some((q, ctx)) = (unsafe { SoftQp::from(qp.cast()) }) else { return libc::EINVAL };
    let batch = std::mem::take(&mut *q.batch());
    if let Some(e) = q.batch_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        return e;
    }
    let mut e = ctx.dev.lock();
    for (w, inline) in batch {
        // SAFETY: inline data was copied at `wr_set_inline_data`; other SGEs name registered memory.
        if let Err(err) = unsafe { q.post_one(&mut e, w, inline.as_deref()) } {
            return err;
        }
    }
    0
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    unsafe { wr_start(qp) };
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    unsafe { begin(qp, WrOpcode::Send) }
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm_data: __be32) {
    unsafe { begin(qp, WrOpcode::SendWithImm { imm: u32::from_be(imm_data) }) }
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, invalidate_rkey: u32) {
    unsafe { begin(qp, WrOpcode::SendWithInv { invalidate_rkey }) }
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    unsafe { begin(qp, WrOpcode::RdmaWrite { remote_addr, rkey }) }
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm_data: __be32) {
    unsafe { begin(qp, WrOpcode::RdmaWriteWithImm { remote_addr, rkey, imm: u32::from_be(imm_data) }) }
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    unsafe { begin(qp, WrOpcode::RdmaRead { remote_addr, rkey }) }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    unsafe { begin(qp, WrOpcode::AtomicCmpAndSwp { remote_addr, rkey, compare, swap }) }
}

unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    unsafe { begin(qp, WrOpcode::AtomicFetchAndAdd { remote_addr, rkey, add }) }
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    unsafe {
        last(qp, |(w, _)| {
            w.sg_list = vec![Sge { addr, length, lkey }];
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    unsafe {
        last(qp, |(w, _)| {
            // SAFETY: the caller passes `num_sge` SGEs.
            w.sg_list = wr::sges(sg_list, i32::try_from(num_sge).map_err(|_| libc::EINVAL)?)?;
            Ok(())
        })
    }
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buf = ibv_data_buf { addr, length };
    unsafe { wr_set_inline_data_list(qp, 1, &buf) }
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    num_buf: usize,
    buf_list: *const ibv_data_buf,
) {
    unsafe {
        last(qp, |(w, inline)| {
            if num_buf > 0 && buf_list.is_null() {
                return Err(libc::EINVAL);
            }
            let mut data = Vec::new();
            for i in 0..num_buf {
                // SAFETY: the caller passes `num_buf` buffers of readable bytes, copied now as
                // inline data is.
                let b = &*buf_list.add(i);
                if b.length > 0 {
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
    unsafe {
        last(qp, |(w, _)| {
            w.ud = Some(wr::ud_dest(ah, remote_qpn, remote_qkey)?);
            Ok(())
        })
    }
}
