//! Work requests and completions between libibverbs' structures and the engine's.

use crate::abi::*;
use crate::handles::SoftAh;
use engine::verbs::{RecvWr, SendFlags, SendRef, Sge, UdDest, WcOpcode, WcStatus, WorkCompletion, WrOpcode};
use std::ffi::c_uint;

/// The engine's opcode for a send work request's.
pub(crate) fn opcode(wr: &ibv_send_wr) -> Result<WrOpcode, i32> {
    // Each union is read only in the arm of an opcode that names its member: the caller fills
    // that member (ibv_post_send(3)), and the others may be bytes it never wrote.
    // SAFETY: the SEND_WITH_IMM and WRITE_WITH_IMM arms, where the caller set `imm_data`, a
    // plain `u32`.
    let imm = || u32::from_be(unsafe { wr.__bindgen_anon_1.imm_data });
    // SAFETY: the RDMA arms, where the caller set `wr.rdma` (plain integers).
    let rdma = || unsafe { wr.wr.rdma };
    // SAFETY: the atomic arms, where the caller set `wr.atomic` (plain integers).
    let atomic = || unsafe { wr.wr.atomic };
    Ok(match wr.opcode {
        IBV_WR_SEND => WrOpcode::Send,
        IBV_WR_SEND_WITH_IMM => WrOpcode::SendWithImm { imm: imm() },
        IBV_WR_SEND_WITH_INV => WrOpcode::SendWithInv {
            // SAFETY: a SEND_WITH_INV request sets `invalidate_rkey`, a plain `u32`.
            invalidate_rkey: unsafe { wr.__bindgen_anon_1.invalidate_rkey },
        },
        IBV_WR_RDMA_WRITE => {
            let r = rdma();
            WrOpcode::RdmaWrite { remote_addr: r.remote_addr, rkey: r.rkey }
        }
        IBV_WR_RDMA_WRITE_WITH_IMM => {
            let r = rdma();
            WrOpcode::RdmaWriteWithImm { remote_addr: r.remote_addr, rkey: r.rkey, imm: imm() }
        }
        IBV_WR_RDMA_READ => {
            let r = rdma();
            WrOpcode::RdmaRead { remote_addr: r.remote_addr, rkey: r.rkey }
        }
        IBV_WR_ATOMIC_CMP_AND_SWP => {
            let a = atomic();
            WrOpcode::AtomicCmpAndSwp {
                remote_addr: a.remote_addr,
                rkey: a.rkey,
                compare: a.compare_add,
                swap: a.swap,
            }
        }
        IBV_WR_ATOMIC_FETCH_AND_ADD => {
            let a = atomic();
            WrOpcode::AtomicFetchAndAdd { remote_addr: a.remote_addr, rkey: a.rkey, add: a.compare_add }
        }
        _ => return Err(libc::EOPNOTSUPP),
    })
}

// `Sge` is laid out as `ibv_sge` (both `repr(C)`: a u64 and two u32s), so a program's SGE
// list is read in place.
const _: () = {
    assert!(std::mem::size_of::<Sge>() == std::mem::size_of::<ibv_sge>());
    assert!(std::mem::align_of::<Sge>() == std::mem::align_of::<ibv_sge>());
    assert!(std::mem::offset_of!(Sge, addr) == std::mem::offset_of!(ibv_sge, addr));
    assert!(std::mem::offset_of!(Sge, length) == std::mem::offset_of!(ibv_sge, length));
    assert!(std::mem::offset_of!(Sge, lkey) == std::mem::offset_of!(ibv_sge, lkey));
};

/// The SGEs of a request, borrowed from the program's list.
///
/// # Safety
/// `list` points at `n` SGEs (or `n <= 0`) that stay valid and unwritten for `'a`.
pub(crate) unsafe fn sges<'a>(list: *const ibv_sge, n: i32) -> Result<&'a [Sge], i32> {
    if n <= 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: this function's contract: `list` (not null, checked) points at `n > 0` SGEs, as
    // `num_sge` promises in ibv_post_send(3), valid for `'a`; `Sge` has `ibv_sge`'s layout
    // (checked at compile time above) and, like it, is plain integers valid for any bits.
    Ok(unsafe { std::slice::from_raw_parts(list.cast::<Sge>(), n as usize) })
}

/// The send flags the engine knows (`IBV_SEND_IP_CSUM` and others only matter to raw QPs).
pub(crate) fn send_flags(f: c_uint) -> SendFlags {
    SendFlags(f & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE))
}

/// A UD destination.
///
/// # Safety
/// `ah` is null or an AH of this library.
pub(crate) unsafe fn ud_dest(ah: *mut ibv_ah, remote_qpn: u32, remote_qkey: u32) -> Result<UdDest, i32> {
    // SAFETY: this function's contract; `SoftAh::from` answers `None` (EINVAL) for null.
    let ah = unsafe { SoftAh::from(ah) }.ok_or(libc::EINVAL)?;
    Ok(UdDest { ah: ah.ah, remote_qpn, remote_qkey })
}

/// A send work request, its SGE list borrowed; `ud` when the QP is UD.
///
/// # Safety
/// `wr` is a valid request whose SGE list is valid for `'a`.
pub(crate) unsafe fn send_wr<'a>(wr: &'a ibv_send_wr, ud: bool) -> Result<SendRef<'a>, i32> {
    let ud = if ud {
        // SAFETY: a request on a UD QP fills the `ud` member (ibv_post_send(3)): a pointer and
        // two integers, read by value.
        let u = unsafe { wr.wr.ud };
        // SAFETY: `u.ah` is null or an AH of this library, by the same contract.
        Some(unsafe { ud_dest(u.ah, u.remote_qpn, u.remote_qkey) }?)
    } else {
        None
    };
    Ok(SendRef {
        wr_id: wr.wr_id,
        opcode: opcode(wr)?,
        // SAFETY: this function's contract: `sg_list` holds `num_sge` SGEs, valid for `'a`.
        sg_list: unsafe { sges(wr.sg_list, wr.num_sge) }?,
        flags: send_flags(wr.send_flags),
        ud,
    })
}

/// A receive work request.
///
/// # Safety
/// `wr`'s SGE list is valid.
pub(crate) unsafe fn recv_wr(wr: &ibv_recv_wr) -> Result<RecvWr, i32> {
    // SAFETY: this function's contract: `sg_list` holds `num_sge` SGEs.
    Ok(RecvWr { wr_id: wr.wr_id, sg_list: unsafe { sges(wr.sg_list, wr.num_sge) }?.to_vec() })
}

fn status(s: WcStatus) -> ibv_wc_status {
    match s {
        WcStatus::Success => IBV_WC_SUCCESS,
        WcStatus::LocLenErr => IBV_WC_LOC_LEN_ERR,
        WcStatus::LocQpOpErr => IBV_WC_LOC_QP_OP_ERR,
        WcStatus::LocProtErr => IBV_WC_LOC_PROT_ERR,
        WcStatus::WrFlushErr => IBV_WC_WR_FLUSH_ERR,
        WcStatus::RemInvReqErr => IBV_WC_REM_INV_REQ_ERR,
        WcStatus::RemAccessErr => IBV_WC_REM_ACCESS_ERR,
        WcStatus::RemOpErr => IBV_WC_REM_OP_ERR,
        WcStatus::RetryExcErr => IBV_WC_RETRY_EXC_ERR,
        WcStatus::RnrRetryExcErr => IBV_WC_RNR_RETRY_EXC_ERR,
    }
}

/// A completion as libibverbs lays it out.
pub(crate) fn wc(w: &WorkCompletion) -> ibv_wc {
    // SAFETY: `ibv_wc` is integers (its enums are bindgen's `c_uint` aliases) and a union of
    // integers: all-zero is a valid value.
    let mut c: ibv_wc = unsafe { std::mem::zeroed() };
    c.wr_id = w.wr_id;
    c.status = status(w.status);
    c.opcode = match w.opcode {
        WcOpcode::Send => IBV_WC_SEND,
        WcOpcode::RdmaWrite => IBV_WC_RDMA_WRITE,
        WcOpcode::RdmaRead => IBV_WC_RDMA_READ,
        WcOpcode::CompSwap => IBV_WC_COMP_SWAP,
        WcOpcode::FetchAdd => IBV_WC_FETCH_ADD,
        WcOpcode::Recv => IBV_WC_RECV,
        WcOpcode::RecvRdmaWithImm => IBV_WC_RECV_RDMA_WITH_IMM,
    };
    c.byte_len = w.byte_len;
    c.qp_num = w.qp_num;
    c.src_qp = w.src_qp;
    c.pkey_index = 0;
    let mut flags = 0;
    if let Some(imm) = w.imm_data {
        c.__bindgen_anon_1.imm_data = imm.to_be();
        flags |= IBV_WC_WITH_IMM;
    } else if let Some(rkey) = w.invalidated_rkey {
        c.__bindgen_anon_1.invalidated_rkey = rkey;
        flags |= IBV_WC_WITH_INV;
    }
    if let Some(src) = w.src_gid {
        flags |= IBV_WC_GRH;
        // RoCE has no service level; for a UD receive a ConnectX reports in `sl` the L3 header
        // the packet came in (1: IPv6, 2: IPv4), and UCX's UD transport reads it so to find the
        // destination address in the GRH area (at its end for IPv4): with 0 it compares 16 bytes
        // of the IPv4 header against its GIDs and drops every packet.
        c.sl = if src.to_canonical().is_ipv4() { 2 } else { 1 };
    }
    c.wc_flags = flags;
    c
}

/// Walks a program's linked list of work requests, handing each to `post` in order; on the first
/// refused, `*bad_wr` names it and its error number is returned (the ones before it stay posted).
///
/// # Safety
/// `first` is null or a valid list whose links `next` reads; `bad_wr` is null or writable.
pub(crate) unsafe fn post_list<W>(
    first: *mut W,
    bad_wr: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), i32>,
) -> i32 {
    let mut cur = first;
    while !cur.is_null() {
        // SAFETY: this function's contract: every non-null link of the list is a valid request,
        // not written by the caller while it posts.
        let w = unsafe { &*cur };
        if let Err(e) = post(w) {
            if !bad_wr.is_null() {
                // SAFETY: this function's contract: `bad_wr`, not null, is writable.
                unsafe { *bad_wr = cur };
            }
            return crate::errno::fail(e);
        }
        cur = next(w);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::verbs::{WcOpcode, WcStatus};

    fn recv(src_gid: Option<std::net::IpAddr>) -> WorkCompletion {
        WorkCompletion {
            wr_id: 7,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: 48,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: 0x11,
            src_qp: 0x2a,
            src_gid,
            solicited: false,
        }
    }

    #[test]
    fn ud_receives_carry_grh_src_qp_and_the_l3_type_in_sl() {
        let v4 = wc(&recv(Some("10.0.0.2".parse().unwrap())));
        assert_eq!((v4.wc_flags & IBV_WC_GRH, v4.src_qp, v4.sl), (IBV_WC_GRH, 0x2a, 2));
        let mapped = wc(&recv(Some("::ffff:10.0.0.2".parse().unwrap())));
        assert_eq!(mapped.sl, 2);
        let v6 = wc(&recv(Some("fd00::2".parse().unwrap())));
        assert_eq!((v6.wc_flags & IBV_WC_GRH, v6.sl), (IBV_WC_GRH, 1));
        // An RC receive has no GRH and no L3 type.
        let rc = wc(&recv(None));
        assert_eq!((rc.wc_flags & IBV_WC_GRH, rc.sl), (0, 0));
    }
}
