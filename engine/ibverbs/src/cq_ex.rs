//! The extended CQ of `ibv_create_cq_ex` (`verbs_context.create_cq_ex`): a batch of completions
//! walked with `start_poll`, `next_poll` and `end_poll`, each read with the `read_*` callbacks the
//! program asked for in `wc_flags`. The fields offered are rxe's: byte length, immediate data, QP
//! number, source QP, SLID, SL and DLID path bits; no timestamps, VLAN, flow tag or tag matching
//! (`EOPNOTSUPP`, as rxe answers). The CQ is a plain one too: `ibv_poll_cq`,
//! `ibv_req_notify_cq`, its channel and `ibv_destroy_cq` take `ibv_cq_ex_to_cq` of it.

use crate::abi::*;
use crate::cq;
use crate::errno;
use crate::handles::{Ctx, SoftCq};
use crate::wr;
use engine::verbs::WorkCompletion;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::Ordering;

/// The `wc_flags` this device offers: rxe's (its `RXE_SUP_WC_EX_FLAGS`).
const SUP_WC_FLAGS: u64 = (IBV_WC_EX_WITH_BYTE_LEN
    | IBV_WC_EX_WITH_IMM
    | IBV_WC_EX_WITH_QP_NUM
    | IBV_WC_EX_WITH_SRC_QP
    | IBV_WC_EX_WITH_SLID
    | IBV_WC_EX_WITH_SL
    | IBV_WC_EX_WITH_DLID_PATH_BITS) as u64;

/// `verbs_context.create_cq_ex` (behind the inline `ibv_create_cq_ex`): `EOPNOTSUPP` for a
/// `wc_flags` bit, `comp_mask` bit or creation flag it does not have (of the flags, only
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED`, a hint; rxe refuses `IGNORE_OVERRUN` too); a parent
/// domain in `parent_domain` is ignored, as rxe ignores it. Sizes and channels as `ibv_create_cq`.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    if attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // SAFETY: `attr`, not null, points at the caller's attributes (ibv_create_cq_ex(3)); they are
    // copied, not kept.
    let a = unsafe { attr.read() };
    let known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    let flags = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 { a.flags } else { 0 };
    if a.wc_flags & !SUP_WC_FLAGS != 0
        || a.comp_mask & !known_mask != 0
        || flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return errno::null(libc::EOPNOTSUPP);
    }
    let wc_flags = a.wc_flags;
    // SAFETY: `context` is the live context whose `verbs_context` led the inline wrapper here, and
    // `a.channel` is null or a live channel of this library (the verbs' contract).
    unsafe {
        cq::create(context, i64::from(a.cqe), a.cq_context, a.channel, i64::from(a.comp_vector), |ex| {
            fill(ex, wc_flags)
        })
    }
}

/// Sets the polling callbacks, and the `read_*` ones of the fields in `wc_flags` (the others stay
/// null, as rxe leaves them).
fn fill(ex: &mut ibv_cq_ex, wc_flags: u64) {
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_wc_flags = Some(read_wc_flags);
    let has = |f: ibv_create_cq_wc_flags| wc_flags & u64::from(f) != 0;
    if has(IBV_WC_EX_WITH_BYTE_LEN) {
        ex.read_byte_len = Some(read_byte_len);
    }
    if has(IBV_WC_EX_WITH_IMM) {
        ex.read_imm_data = Some(read_imm_data);
    }
    if has(IBV_WC_EX_WITH_QP_NUM) {
        ex.read_qp_num = Some(read_qp_num);
    }
    if has(IBV_WC_EX_WITH_SRC_QP) {
        ex.read_src_qp = Some(read_src_qp);
    }
    if has(IBV_WC_EX_WITH_SLID) {
        ex.read_slid = Some(read_slid);
    }
    if has(IBV_WC_EX_WITH_SL) {
        ex.read_sl = Some(read_sl);
    }
    if has(IBV_WC_EX_WITH_DLID_PATH_BITS) {
        ex.read_dlid_path_bits = Some(read_dlid_path_bits);
    }
}

/// # Safety
/// `p` is null or a CQ of this library not yet destroyed.
unsafe fn soft<'a>(p: *mut ibv_cq_ex) -> Option<(&'a SoftCq, &'a Ctx)> {
    // SAFETY: this function's contract; the `ibv_cq` is the start of the `ibv_cq_ex`.
    unsafe { SoftCq::from(p.cast()) }
}

/// Makes the CQ's next completion the current one (after a progress round if `progress`): 0,
/// `ENOENT` if it has none, or the error (with `errno` set either way but 0).
fn advance(c: &SoftCq, ctx: &Ctx, progress: bool) -> c_int {
    // The engine's completion passes through a buffer of the polling thread's, kept between
    // calls: a busy poll allocates nothing.
    thread_local! {
        static OUT: std::cell::RefCell<Vec<WorkCompletion>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let got = OUT.with_borrow_mut(|out| {
        out.clear();
        let mut e = ctx.dev.lock();
        if progress {
            // A datapath error shows in the completions it causes; polling goes on.
            let _ = e.progress();
        }
        e.poll_cq(c.cq, out, 1).map(|_| out.pop())
    });
    let w = match got {
        Ok(Some(w)) => wr::wc(&w),
        Ok(None) => return errno::fail(libc::ENOENT),
        Err(err) => return errno::fail(errno::of(&err)),
    };
    *c.current() = w;
    // SAFETY: `ex` is live while `c` is; `status` and `wr_id` are written only by the thread that
    // holds `polling` (this one: a `start_poll` took it), and read by the program after this call.
    unsafe {
        (*c.ex.get()).status = w.status;
        (*c.ex.get()).wr_id = w.wr_id;
    }
    0
}

/// `ibv_cq_ex.start_poll`: a progress round, then the first completion of a batch; `ENOENT` if
/// the CQ is empty (then the batch has not started: no `end_poll`). A thread starting a batch
/// while another walks one waits for its `end_poll`, as on rxe.
unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: `cq` is a live CQ of this library: the inline `ibv_start_poll` reached this callback
    // through it.
    let Some((c, ctx)) = (unsafe { soft(cq) }) else { return errno::fail(libc::EINVAL) };
    while c.polling.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::thread::yield_now();
    }
    let r = advance(c, ctx, true);
    if r != 0 {
        c.polling.store(false, Ordering::Release);
    }
    r
}

/// `ibv_cq_ex.next_poll`: the next completion of the batch; `ENOENT` when none is left (the
/// program still calls `end_poll`).
unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: `cq` is a live CQ of this library (reached through its own callback).
    let Some((c, ctx)) = (unsafe { soft(cq) }) else { return errno::fail(libc::EINVAL) };
    advance(c, ctx, false)
}

/// `ibv_cq_ex.end_poll`: ends the batch (its completions were taken off the CQ as it went).
unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: `cq` is a live CQ of this library (reached through its own callback).
    if let Some((c, _)) = unsafe { soft(cq) } {
        c.polling.store(false, Ordering::Release);
    }
}

/// The current completion of the batch, as `ibv_poll_cq` would have given it.
///
/// # Safety
/// `cq` is null or a CQ of this library not yet destroyed.
unsafe fn current(cq: *mut ibv_cq_ex) -> Option<ibv_wc> {
    // SAFETY: this function's contract.
    unsafe { soft(cq) }.map(|(c, _)| *c.current())
}

/// `ibv_cq_ex.read_opcode`.
unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> ibv_wc_opcode {
    // SAFETY: `cq` is a live CQ of this library (reached through its own callback).
    unsafe { current(cq) }.map_or(0, |w| w.opcode)
}

/// `ibv_cq_ex.read_vendor_err`.
unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.vendor_err)
}

/// `ibv_cq_ex.read_wc_flags`: `IBV_WC_WITH_IMM`, `IBV_WC_WITH_INV`, `IBV_WC_GRH`, as in `ibv_wc`.
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.wc_flags)
}

/// `ibv_cq_ex.read_byte_len`.
unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.byte_len)
}

/// `ibv_cq_ex.read_imm_data`, big-endian; also behind `ibv_wc_read_invalidated_rkey` (the two
/// share `ibv_wc`'s union, as in rxe's completion).
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> __be32 {
    // SAFETY: as `read_opcode`. Both members of the union are `u32`, so reading either is valid
    // whichever was written.
    unsafe { current(cq) }.map_or(0, |w| unsafe { w.__bindgen_anon_1.imm_data })
}

/// `ibv_cq_ex.read_qp_num`.
unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.qp_num)
}

/// `ibv_cq_ex.read_src_qp`.
unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.src_qp)
}

/// `ibv_cq_ex.read_slid`: 0 on RoCE.
unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| u32::from(w.slid))
}

/// `ibv_cq_ex.read_sl`: for a UD receive, the L3 header it came in (as in `ibv_wc`).
unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.sl)
}

/// `ibv_cq_ex.read_dlid_path_bits`: 0 on RoCE.
unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    // SAFETY: as `read_opcode`.
    unsafe { current(cq) }.map_or(0, |w| w.dlid_path_bits)
}
