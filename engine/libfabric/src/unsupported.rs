//! The RMA and atomic operation tables of an endpoint without FI_RMA and FI_ATOMIC (datagram
//! endpoints, and domains opened by a program without FI_MR_ENDPOINT, since UET regions are bound
//! to endpoints), and the tagged one of a profile without FI_TAGGED (AI Base, datagram
//! endpoints): `fi_getinfo` does not claim them, and every entry answers `-FI_ENOSYS`, as
//! libfabric's `fi_no_*` defaults do for a provider without them.

use core::ffi::{c_int, c_void};

use crate::abi::*;
use crate::util::ENOSYS;

unsafe extern "C" fn no_rma_read(
    _: *mut fid_ep,
    _: *mut c_void,
    _: usize,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_readv(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_readmsg(_: *mut fid_ep, _: *const fi_msg_rma, _: u64) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_write(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_writev(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_writemsg(_: *mut fid_ep, _: *const fi_msg_rma, _: u64) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_inject(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_writedata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: u64,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_rma_injectdata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: u64,
    _: fi_addr_t,
    _: u64,
    _: u64,
) -> isize {
    ENOSYS as isize
}

pub(crate) static RMA_NOSYS: fi_ops_rma = fi_ops_rma {
    size: size_of::<fi_ops_rma>(),
    read: Some(no_rma_read),
    readv: Some(no_rma_readv),
    readmsg: Some(no_rma_readmsg),
    write: Some(no_rma_write),
    writev: Some(no_rma_writev),
    writemsg: Some(no_rma_writemsg),
    inject: Some(no_rma_inject),
    writedata: Some(no_rma_writedata),
    injectdata: Some(no_rma_injectdata),
};

unsafe extern "C" fn no_atomic_write(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_writev(
    _: *mut fid_ep,
    _: *const fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_writemsg(_: *mut fid_ep, _: *const fi_msg_atomic, _: u64) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_inject(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_readwrite(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: *mut c_void,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_readwritev(
    _: *mut fid_ep,
    _: *const fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: *mut fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_readwritemsg(
    _: *mut fid_ep,
    _: *const fi_msg_atomic,
    _: *mut fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: u64,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_compwrite(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: *const c_void,
    _: *mut c_void,
    _: *mut c_void,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_compwritev(
    _: *mut fid_ep,
    _: *const fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: *const fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: *mut fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: fi_datatype,
    _: fi_op,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_compwritemsg(
    _: *mut fid_ep,
    _: *const fi_msg_atomic,
    _: *const fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: *mut fi_ioc,
    _: *mut *mut c_void,
    _: usize,
    _: u64,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_atomic_writevalid(_: *mut fid_ep, _: fi_datatype, _: fi_op, _: *mut usize) -> c_int {
    ENOSYS
}

unsafe extern "C" fn no_atomic_readwritevalid(
    _: *mut fid_ep,
    _: fi_datatype,
    _: fi_op,
    _: *mut usize,
) -> c_int {
    ENOSYS
}

unsafe extern "C" fn no_atomic_compwritevalid(
    _: *mut fid_ep,
    _: fi_datatype,
    _: fi_op,
    _: *mut usize,
) -> c_int {
    ENOSYS
}

pub(crate) static ATOMIC_NOSYS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(no_atomic_write),
    writev: Some(no_atomic_writev),
    writemsg: Some(no_atomic_writemsg),
    inject: Some(no_atomic_inject),
    readwrite: Some(no_atomic_readwrite),
    readwritev: Some(no_atomic_readwritev),
    readwritemsg: Some(no_atomic_readwritemsg),
    compwrite: Some(no_atomic_compwrite),
    compwritev: Some(no_atomic_compwritev),
    compwritemsg: Some(no_atomic_compwritemsg),
    writevalid: Some(no_atomic_writevalid),
    readwritevalid: Some(no_atomic_readwritevalid),
    compwritevalid: Some(no_atomic_compwritevalid),
};

unsafe extern "C" fn no_tagged_recv(
    _: *mut fid_ep,
    _: *mut c_void,
    _: usize,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_recvv(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_recvmsg(_: *mut fid_ep, _: *const fi_msg_tagged, _: u64) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_send(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_sendv(
    _: *mut fid_ep,
    _: *const iovec,
    _: *mut *mut c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_sendmsg(_: *mut fid_ep, _: *const fi_msg_tagged, _: u64) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_inject(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: fi_addr_t,
    _: u64,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_senddata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: *mut c_void,
    _: u64,
    _: fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> isize {
    ENOSYS as isize
}

unsafe extern "C" fn no_tagged_injectdata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: u64,
    _: fi_addr_t,
    _: u64,
) -> isize {
    ENOSYS as isize
}

pub(crate) static TAGGED_NOSYS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(no_tagged_recv),
    recvv: Some(no_tagged_recvv),
    recvmsg: Some(no_tagged_recvmsg),
    send: Some(no_tagged_send),
    sendv: Some(no_tagged_sendv),
    sendmsg: Some(no_tagged_sendmsg),
    inject: Some(no_tagged_inject),
    senddata: Some(no_tagged_senddata),
    injectdata: Some(no_tagged_injectdata),
};
