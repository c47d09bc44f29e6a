//! Exported verbs on device objects that this device does not have, answering as rdma-core's
//! defaults answer for a provider without them (its `dummy_ops`): an error number, or `NULL`
//! with `errno`, `EOPNOTSUPP` either way. Without these definitions, the stock library's would
//! run on this library's objects.

use crate::abi::*;
use crate::errno;
use std::ffi::c_int;

/// `ibv_reg_dmabuf_mr`: no dma-buf memory.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_attach_mcast`: no multicast.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_attach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_detach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_query_ece`: no enhanced connection establishment.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_set_ece`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut ibv_ece) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_query_qp_data_in_order`: 0, no in-order guarantee reported (rdma-core's default).
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut ibv_qp,
    _op: ibv_wr_opcode,
    _flags: u32,
) -> c_int {
    0
}

/// `ibv_resolve_eth_l2_from_gid`: addresses are resolved inside the datapath.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    _context: *mut ibv_context,
    _attr: *mut ibv_ah_attr,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_import_device`: no kernel command descriptor to import from.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ibv_context {
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_import_pd`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_pd(_context: *mut ibv_context, _pd_handle: u32) -> *mut ibv_pd {
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_import_mr`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_mr(_pd: *mut ibv_pd, _mr_handle: u32) -> *mut ibv_mr {
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_import_dm`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_import_dm(_context: *mut ibv_context, _dm_handle: u32) -> *mut ibv_dm {
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_unimport_pd`: nothing was imported.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_pd(_pd: *mut ibv_pd) {}

/// `ibv_unimport_mr`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_mr(_mr: *mut ibv_mr) {}

/// `ibv_unimport_dm`.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_unimport_dm(_dm: *mut ibv_dm) {}
