//! The RMA operations of an endpoint (`fi_read`, `fi_write` and their vector, message, inject
//! and remote-data forms): UET READ and WRITE to a peer's region named by its key, `addr` being an
//! offset into the region (the domain has no FI_MR_VIRT_ADDR). The bytes of a write are taken
//! when it is posted; a read's are copied into the program's buffer when its completion is read.

use core::ffi::c_void;

use crate::abi::{self, fi_addr_t, fi_msg_rma, fi_ops_rma, fid_ep, iovec};
use crate::endpoint::{TX_MSG_FLAGS, bytes, one_iov, with};
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

/// A write of `buf` to `dest`'s region `key` at `offset`, `data` for the target's completion;
/// `context` `None` for an inject.
///
/// # Safety
/// `ep` null or an endpoint of this provider; `buf` holds `len` bytes.
unsafe fn post_write(
    ep: *mut fid_ep,
    (buf, len): (*const c_void, usize),
    data: Option<u64>,
    (dest, offset, key): Remote,
    context: Option<*mut c_void>,
) -> isize {
    // SAFETY: this function's contract: `buf` holds `len` readable bytes (fi_write(3)), as `bytes`
    // requires; it answers `None` for null with bytes.
    let Some(b) = (unsafe { bytes(buf, len) }) else { return EINVAL as isize };
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires; the closure touches no raw pointer (`b` is the slice above, copied by the engine
    // before `post` returns).
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

/// A read of `len` bytes from `dest`'s region `key` at `offset` into `buf`.
///
/// # Safety
/// `ep` null or an endpoint of this provider; `buf` holds `len` bytes until the read completes.
unsafe fn post_read(
    ep: *mut fid_ep,
    (buf, len): Local,
    (dest, offset, key): Remote,
    context: *mut c_void,
) -> isize {
    if buf.is_null() && len > 0 {
        return EINVAL as isize;
    }
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires, and `buf` (not null with bytes, checked) holds `len` writable bytes until the read
    // completes, when the CQ writes them (fi_read(3)).
    unsafe {
        with(ep, |e| e.post(Some(context), (buf.cast(), len), |ep, id| ep.read(len, dest, key, offset, id)))
    }
}

/// A local buffer and its length.
type Local = (*mut c_void, usize);
/// A peer, an offset into its region, and the region's key.
type Remote = (fi_addr_t, u64, u64);

/// The one target of an `fi_msg_rma` (`rma_iov_limit` is 1) and its one local buffer.
///
/// # Safety
/// `m`'s arrays hold their counts.
unsafe fn msg_parts(m: &fi_msg_rma) -> Option<(Local, Remote)> {
    // SAFETY: this function's contract: `msg_iov` holds `iov_count` iovecs, as `one_iov` requires.
    let local = unsafe { one_iov(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return None;
    }
    // SAFETY: `rma_iov_count == 1` and `rma_iov` not null (checked), and the message's array holds
    // that many entries (this function's contract).
    let r = unsafe { &*m.rma_iov };
    (r.len == local.1).then_some((local, (m.addr, r.addr, r.key)))
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
    unsafe { post_read(ep, (buf, len), (src, addr, key), context) }
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
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `one_iov` requires; it
    // reads one only when `count == 1` and `iov` is not null.
    let Some(local) = (unsafe { one_iov(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_readv(3)'s arguments, passed on: `ep` is this op's, and the one iovec (`one_iov`
    // read it) names `len` writable bytes until the read completes.
    unsafe { post_read(ep, local, (src, addr, key), context) }
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
    // SAFETY: fi_readmsg(3): `ep` is this op's, and the message's one iovec names writable bytes
    // until the read completes.
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
    // holds `len` readable bytes during the call.
    unsafe { post_write(ep, (buf, len), None, (dest, addr, key), Some(context)) }
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
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `one_iov` requires; it
    // reads one only when `count == 1` and `iov` is not null.
    let Some((b, l)) = (unsafe { one_iov(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_writev(3)'s arguments, passed on: `ep` is this op's, and `b` holds `l` bytes, as
    // the one iovec says.
    unsafe { post_write(ep, (b, l), None, (dest, addr, key), Some(context)) }
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
    let Some(((b, l), target)) = (unsafe { msg_parts(m) }) else { return EINVAL as isize };
    let data = (flags & u64::from(abi::FI_REMOTE_CQ_DATA) != 0).then_some(m.data);
    let context = (flags & u64::from(abi::FI_INJECT) == 0).then_some(m.context);
    // SAFETY: fi_writemsg(3): `ep` is this op's, and `b` holds `l` bytes, as the message's one
    // iovec says.
    unsafe { post_write(ep, (b, l), data, target, context) }
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
    // the call (the engine copies them before it returns).
    unsafe { post_write(ep, (buf, len), None, (dest, addr, key), None) }
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
    // call.
    unsafe { post_write(ep, (buf, len), Some(data), (dest, addr, key), Some(context)) }
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
    // during the call.
    unsafe { post_write(ep, (buf, len), Some(data), (dest, addr, key), None) }
}
