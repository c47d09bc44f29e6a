//! The RMA operations of an endpoint (`fi_read`, `fi_write` and their vector, message, inject
//! and remote-data forms): UET READ and WRITE to a peer's region named by its key, `addr` being an
//! offset into the region (the domain has no FI_MR_VIRT_ADDR). The bytes of a write are taken
//! when it is posted; a read's are copied into the program's buffer when its completion is read.

use core::ffi::c_void;

use crate::abi::{self, fi_addr_t, fi_msg_rma, fi_ops_rma, fid_ep, iovec};
use crate::cq::Op;
use crate::endpoint::{TX_MSG_FLAGS, bytes, gather, iovs, scatter, with};
use crate::util::EINVAL;

/// The RMA table of an endpoint whose domain offers FI_RMA.
pub(crate) static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject_write),
    writedata: Some(writedata),
    injectdata: Some(inject_writedata),
};

/// A write of `b` (`None`: a null buffer with bytes) to `dest`'s region `key` at `offset`,
/// `data` for the target's completion; `context` `None` for an inject.
///
/// # Safety
/// `ep` null or an endpoint of this provider.
unsafe fn post_write(
    ep: *mut fid_ep,
    b: Option<&[u8]>,
    data: Option<u64>,
    (dest, offset, key): Remote,
    context: Option<*mut c_void>,
) -> isize {
    let Some(b) = b else { return EINVAL as isize };
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires; the closure touches no raw pointer (`b` is copied by the engine before `post`
    // returns).
    unsafe {
        with(ep, |e| {
            e.post(context, (core::ptr::null_mut(), 0), |ep, id| match (context, data) {
                (None, _) => ep.inject_write(b, data, dest, key, offset),
                (Some(_), Some(d)) => ep.writedata(b, d, dest, key, offset, id),
                (Some(_), None) => ep.write(b, dest, key, offset, id),
            })
        })
    }
}

/// A read from `dest`'s region `key` at `offset` into the program's buffers `iov` (`None`: a null
/// buffer with bytes), as many bytes as they hold.
///
/// # Safety
/// `ep` null or an endpoint of this provider; the buffers are writable for their lengths until
/// the read completes.
unsafe fn post_read(
    ep: *mut fid_ep,
    iov: &[iovec],
    (dest, offset, key): Remote,
    context: *mut c_void,
) -> isize {
    let Some((first, len, pieces)) = scatter(iov) else { return EINVAL as isize };
    let op = Op { scatter: pieces, ..Op::new(context, first, len, false) };
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires, and the buffers (none null with bytes: `scatter` checked) are writable until the
    // read completes, when the CQ writes them (fi_read(3)).
    unsafe { with(ep, |e| e.post_op(Some(op), |ep, id| ep.read(len, dest, key, offset, id))) }
}

/// One local buffer as an iovec.
fn iov1(buf: *mut c_void, len: usize) -> [iovec; 1] {
    [iovec { iov_base: buf, iov_len: len }]
}

/// A peer, an offset into its region, and the region's key.
type Remote = (fi_addr_t, u64, u64);

/// The local buffers of an `fi_msg_rma` and its one target (`rma_iov_limit` is 1), which is as
/// long as they are together.
///
/// # Safety
/// `m`'s arrays hold their counts.
unsafe fn msg_parts<'a>(m: &fi_msg_rma) -> Option<(&'a [iovec], Remote)> {
    // SAFETY: this function's contract: `msg_iov` holds `iov_count` iovecs, as `iovs` requires.
    let local = unsafe { iovs(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return None;
    }
    // SAFETY: `rma_iov_count == 1` and `rma_iov` not null (checked), and the message's array holds
    // that many entries (this function's contract).
    let r = unsafe { &*m.rma_iov };
    let total = local.iter().try_fold(0usize, |t, v| t.checked_add(v.iov_len))?;
    (r.len == total).then_some((local, (m.addr, r.addr, r.key)))
}

unsafe extern "C" fn read(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: fi_read(3): `ep` is this op's (null or a live endpoint of this provider), and `buf`
    // holds `len` writable bytes until the read completes.
    unsafe { post_read(ep, &iov1(buf, len), (src, addr, key), context) }
}

unsafe extern "C" fn readv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_readv(3)'s arguments, passed on: `ep` is this op's, and the iovecs name writable
    // bytes until the read completes.
    unsafe { post_read(ep, iov, (src, addr, key), context) }
}

unsafe extern "C" fn readmsg(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_rma` (fi_readmsg(3)); `as_ref` answers `None`
    // for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !TX_MSG_FLAGS != 0 || flags & u64::from(abi::FI_INJECT) != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's arrays hold their counts (the `*msg` call's contract), as the helper
    // requires.
    let Some((local, target)) = (unsafe { msg_parts(m) }) else { return EINVAL as isize };
    // SAFETY: fi_readmsg(3): `ep` is this op's, and the message's iovecs name writable bytes until
    // the read completes.
    unsafe { post_read(ep, local, target, m.context) }
}

unsafe extern "C" fn write(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: fi_write(3): `ep` is this op's (null or a live endpoint of this provider), and `buf`
    // holds `len` readable bytes during the call, as `bytes` requires.
    unsafe { post_write(ep, bytes(buf, len), None, (dest, addr, key), Some(context)) }
}

unsafe extern "C" fn writev(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_writev(3)'s arguments: `ep` is this op's, and each iovec's buffer holds its bytes
    // during the call, as `gather` requires.
    unsafe { post_write(ep, gather(iov).as_deref(), None, (dest, addr, key), Some(context)) }
}

unsafe extern "C" fn writemsg(ep: *mut fid_ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_rma` (fi_writemsg(3)); `as_ref` answers `None`
    // for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !TX_MSG_FLAGS != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's arrays hold their counts (the `*msg` call's contract), as the helper
    // requires.
    let Some((local, target)) = (unsafe { msg_parts(m) }) else { return EINVAL as isize };
    let data = (flags & u64::from(abi::FI_REMOTE_CQ_DATA) != 0).then_some(m.data);
    let context = (flags & u64::from(abi::FI_INJECT) == 0).then_some(m.context);
    // SAFETY: fi_writemsg(3): `ep` is this op's, and each of the message's iovecs holds its bytes
    // during the call, as `gather` requires.
    unsafe { post_write(ep, gather(local).as_deref(), data, target, context) }
}

unsafe extern "C" fn inject_write(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    // SAFETY: fi_inject_write(3): `ep` is this op's, and `buf` holds `len` readable bytes during
    // the call (the engine copies them before it returns), as `bytes` requires.
    unsafe { post_write(ep, bytes(buf, len), None, (dest, addr, key), None) }
}

unsafe extern "C" fn writedata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: fi_writedata(3): `ep` is this op's, and `buf` holds `len` readable bytes during the
    // call, as `bytes` requires.
    unsafe { post_write(ep, bytes(buf, len), Some(data), (dest, addr, key), Some(context)) }
}

unsafe extern "C" fn inject_writedata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    // SAFETY: fi_inject_writedata(3): `ep` is this op's, and `buf` holds `len` readable bytes
    // during the call, as `bytes` requires.
    unsafe { post_write(ep, bytes(buf, len), Some(data), (dest, addr, key), None) }
}
