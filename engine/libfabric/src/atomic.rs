//! The atomic operations of an endpoint (`fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`
//! and their vector, message and inject forms, the `*valid` queries) and the domain's
//! `fi_query_atomic`: UET ATOMIC and FETCHING_ATOMIC on a peer's region, `addr` an offset into it.
//! Non-fetching atomics may carry several elements; fetching and compare atomics carry one (the
//! UEC mapping). A fetched value is copied into the program's result buffer when the completion
//! is read. libfabric's datatypes and operations map one to one onto UET's; the pairs the engine
//! computes are `ses::amo::supported`'s, and others answer -FI_EOPNOTSUPP.

use core::ffi::{c_int, c_void};

use engine::provider::{self, FiErrno};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

use crate::abi::{
    self, fi_addr_t, fi_datatype, fi_ioc, fi_msg_atomic, fi_op, fi_ops_atomic, fid_domain, fid_ep,
};
use crate::endpoint::{ep_of, with};
use crate::util::{EINVAL, neg};

/// The atomic table of an endpoint whose domain offers FI_ATOMIC.
pub(crate) static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: size_of::<fi_ops_atomic>(),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject),
    readwrite: Some(readwrite),
    readwritev: Some(readwritev),
    readwritemsg: Some(readwritemsg),
    compwrite: Some(compwrite),
    compwritev: Some(compwritev),
    compwritemsg: Some(compwritemsg),
    writevalid: Some(writevalid),
    readwritevalid: Some(readwritevalid),
    compwritevalid: Some(compwritevalid),
};

/// UET's datatype for libfabric's.
fn datatype(dt: fi_datatype) -> Option<AmoDatatype> {
    use AmoDatatype::*;
    Some(match dt {
        abi::FI_INT8 => Int8,
        abi::FI_UINT8 => Uint8,
        abi::FI_INT16 => Int16,
        abi::FI_UINT16 => Uint16,
        abi::FI_INT32 => Int32,
        abi::FI_UINT32 => Uint32,
        abi::FI_INT64 => Int64,
        abi::FI_UINT64 => Uint64,
        abi::FI_FLOAT => Float,
        abi::FI_DOUBLE => Double,
        abi::FI_FLOAT_COMPLEX => FloatComplex,
        abi::FI_DOUBLE_COMPLEX => DoubleComplex,
        abi::FI_LONG_DOUBLE => LongDouble,
        abi::FI_LONG_DOUBLE_COMPLEX => LongDoubleComplex,
        abi::FI_INT128 => Int128,
        abi::FI_UINT128 => Uint128,
        _ => return None,
    })
}

/// UET's operation for libfabric's.
fn operation(op: fi_op) -> Option<AmoOpcode> {
    use AmoOpcode::*;
    Some(match op {
        abi::FI_MIN => Min,
        abi::FI_MAX => Max,
        abi::FI_SUM => Sum,
        abi::FI_PROD => Prod,
        abi::FI_LOR => Lor,
        abi::FI_LAND => Land,
        abi::FI_BOR => Bor,
        abi::FI_BAND => Band,
        abi::FI_LXOR => Lxor,
        abi::FI_BXOR => Bxor,
        abi::FI_ATOMIC_READ => Read,
        abi::FI_ATOMIC_WRITE => Write,
        abi::FI_CSWAP => Cswap,
        abi::FI_CSWAP_NE => CswapNe,
        abi::FI_CSWAP_LE => CswapLe,
        abi::FI_CSWAP_LT => CswapLt,
        abi::FI_CSWAP_GE => CswapGe,
        abi::FI_CSWAP_GT => CswapGt,
        abi::FI_MSWAP => Mswap,
        _ => return None,
    })
}

/// The kind of an atomic call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Fetch,
    Compare,
}

/// The UET pair and element size of `(dt, op)` for `kind`, with the most elements one call
/// takes; -FI_EOPNOTSUPP for a pair the engine does not compute, or a compare operation outside
/// `fi_compare_atomic` (and the reverse).
fn valid(
    info: &provider::Info,
    dt: fi_datatype,
    op: fi_op,
    kind: Kind,
) -> Result<(AmoDatatype, AmoOpcode, usize, usize), isize> {
    let unsupported = -(abi::FI_EOPNOTSUPP as isize);
    let (Some(d), Some(o)) = (datatype(dt), operation(op)) else { return Err(unsupported) };
    let size = ses::amo::element_size(d).ok_or(unsupported)?;
    let pairs = if kind == Kind::Write { &info.atomics } else { &info.fetch_atomics };
    if !pairs.contains(&(o, d)) || o.is_compare_swap() != (kind == Kind::Compare) {
        return Err(unsupported);
    }
    let count = if kind == Kind::Write { (info.limits.max_atomic_bytes / size).max(1) } else { 1 };
    Ok((d, o, size, count))
}

/// The bytes of `count` elements of `size` at `buf`.
///
/// # Safety
/// `buf` is null or holds `count * size` bytes.
unsafe fn elements<'a>(buf: *const c_void, count: usize, size: usize) -> Option<&'a [u8]> {
    let n = count.checked_mul(size)?;
    // SAFETY: this function's contract: `buf`, not null in this branch, holds `count * size`
    // readable bytes (the product checked for overflow; callers bound `count` by the offer's limit
    // first), borrowed only during the post.
    (!buf.is_null()).then(|| unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), n) })
}

/// Where an atomic goes.
#[derive(Clone, Copy)]
struct Target {
    dest: fi_addr_t,
    offset: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
}

/// A non-fetching atomic of `count` elements at `buf`; `context` `None` for an inject.
///
/// # Safety
/// `ep` null or an endpoint of this provider; `buf` holds `count` elements.
unsafe fn post_write(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    t: Target,
    context: Option<*mut c_void>,
) -> isize {
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires, and `buf` holds `count` elements, as `elements` requires (`count` checked against
    // the offer's limit first).
    unsafe {
        with(ep, |e| {
            let (dt, op, size, max) = match valid(&e.info, t.dt, t.op, Kind::Write) {
                Ok(v) => v,
                Err(r) => return r,
            };
            if count == 0 || count > max {
                return EINVAL as isize;
            }
            let Some(operands) = elements(buf, count, size) else { return EINVAL as isize };
            e.post(context, (core::ptr::null_mut(), 0), |ep, id| match context {
                None => ep.inject_atomic(operands, t.dest, t.key, t.offset, dt, op),
                Some(_) => ep.atomic(operands, t.dest, t.key, t.offset, dt, op, id),
            })
        })
    }
}

/// A fetching atomic (`compare` `None`) or a compare atomic on one element, its old value into
/// `result`.
///
/// # Safety
/// `ep` null or an endpoint of this provider; `buf`, `compare` (null or) and `result` hold one
/// element, `result` until the completion is read.
unsafe fn post_fetch(
    ep: *mut fid_ep,
    (buf, count): (*const c_void, usize),
    compare: Option<*const c_void>,
    result: *mut c_void,
    t: Target,
    context: *mut c_void,
) -> isize {
    let kind = if compare.is_some() { Kind::Compare } else { Kind::Fetch };
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider, as `with`
    // requires; `buf` and `compare` (null or) hold one element, as `elements` requires, and
    // `result` (not null, checked) one writable element until the completion is read, when the CQ
    // writes `size` bytes there.
    unsafe {
        with(ep, |e| {
            let (dt, op, size, _) = match valid(&e.info, t.dt, t.op, kind) {
                Ok(v) => v,
                Err(r) => return r,
            };
            if count != 1 || result.is_null() {
                return EINVAL as isize;
            }
            // FI_ATOMIC_READ takes no operand: the program may pass none.
            let zero = [0u8; 32];
            let operand = match elements(buf, 1, size) {
                Some(b) => b,
                None if op == AmoOpcode::Read => &zero[..size],
                None => return EINVAL as isize,
            };
            let compare = match compare.map(|c| elements(c, 1, size)) {
                None => None,
                Some(Some(c)) => Some(c),
                Some(None) => return EINVAL as isize,
            };
            e.post(Some(context), (result.cast(), size), |ep, id| match compare {
                None => ep.fetch_atomic(operand, t.dest, t.key, t.offset, dt, op, id),
                Some(c) => ep.compare_atomic(c, operand, t.dest, t.key, t.offset, dt, op, id),
            })
        })
    }
}

/// The one element array of an `fi_ioc` list (`iov_limit` is 1): its address and count.
///
/// # Safety
/// `ioc` holds `count` entries.
unsafe fn one_ioc(ioc: *const fi_ioc, count: usize) -> Option<(*mut c_void, usize)> {
    // SAFETY: the count is 1 and the pointer not null (checked), and the caller's array holds that
    // many entries (this function's contract).
    (count == 1 && !ioc.is_null()).then(|| unsafe { ((*ioc).addr, (*ioc).count) })
}

/// The target of an `fi_msg_atomic` (one `fi_rma_ioc`, as many elements as its buffer).
///
/// # Safety
/// `m`'s arrays hold their counts.
unsafe fn msg_target(m: &fi_msg_atomic) -> Option<((*mut c_void, usize), Target)> {
    // SAFETY: this function's contract: `msg_iov` holds `iov_count` entries, as `one_ioc` requires.
    let local = unsafe { one_ioc(m.msg_iov, m.iov_count) }?;
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return None;
    }
    // SAFETY: the count is 1 and the pointer not null (checked), and the caller's array holds that
    // many entries (this function's contract).
    let r = unsafe { &*m.rma_iov };
    let t = Target { dest: m.addr, offset: r.addr, key: r.key, dt: m.datatype, op: m.op };
    (r.count == local.1).then_some((local, t))
}

/// The flags of the `*msg` forms acted on.
const MSG_FLAGS: u64 =
    (abi::FI_INJECT | abi::FI_COMPLETION | abi::FI_TRANSMIT_COMPLETE | abi::FI_DELIVERY_COMPLETE) as u64;

unsafe extern "C" fn write(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_atomic(3): `ep` is this op's (null or a live endpoint of this provider), and `buf`
    // holds `count` elements of `dt`.
    unsafe { post_write(ep, buf, count, t, Some(context)) }
}

unsafe extern "C" fn writev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` entries (the vector call's contract), as `one_ioc` requires.
    let Some((b, n)) = (unsafe { one_ioc(iov, count) }) else { return EINVAL as isize };
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_atomicv(3)'s arguments, passed on: `ep` is this op's, and the one `fi_ioc`
    // (`one_ioc` read it) names `n` elements at `b`.
    unsafe { post_write(ep, b, n, t, Some(context)) }
}

unsafe extern "C" fn writemsg(ep: *mut fid_ep, msg: *const fi_msg_atomic, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_atomic` (fi_atomicmsg(3)); `as_ref` answers
    // `None` for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !MSG_FLAGS != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's arrays hold their counts (the `*msg` call's contract), as the helper
    // requires.
    let Some(((b, n), t)) = (unsafe { msg_target(m) }) else { return EINVAL as isize };
    let context = (flags & u64::from(abi::FI_INJECT) == 0).then_some(m.context);
    // SAFETY: fi_atomicmsg(3): `ep` is this op's, and the message's one `fi_ioc` names `n` elements
    // at `b`.
    unsafe { post_write(ep, b, n, t, context) }
}

unsafe extern "C" fn inject(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
) -> isize {
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_inject_atomic(3): `ep` is this op's, and `buf` holds `count` elements of `dt`
    // during the call.
    unsafe { post_write(ep, buf, count, t, None) }
}

unsafe extern "C" fn readwrite(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_fetch_atomic(3): `ep` is this op's, `buf` holds `count` elements (null for
    // FI_ATOMIC_READ), and `result` as many writable ones until the completion is read.
    unsafe { post_fetch(ep, (buf, count), None, result, t, context) }
}

unsafe extern "C" fn readwritev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    // SAFETY: each `fi_ioc` array holds its count (the vector call's contract), as `one_ioc`
    // requires.
    let (Some(b), Some((r, 1))) = (unsafe { one_ioc(iov, count) }, unsafe { one_ioc(resultv, result_count) })
    else {
        return EINVAL as isize;
    };
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_fetch_atomicv(3)'s arguments, passed on: the one operand and one result `fi_ioc`
    // (`one_ioc` read them) name their elements, the result's writable until the completion is
    // read.
    unsafe { post_fetch(ep, (b.0.cast_const(), b.1), None, r, t, context) }
}

unsafe extern "C" fn readwritemsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_atomic` (fi_fetch_atomicmsg(3)); `as_ref`
    // answers `None` for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !MSG_FLAGS != 0 || flags & u64::from(abi::FI_INJECT) != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: each `fi_ioc` array holds its count (the vector call's contract), as `one_ioc`
    // requires.
    let (Some((b, t)), Some((r, 1))) = (unsafe { msg_target(m) }, unsafe { one_ioc(resultv, result_count) })
    else {
        return EINVAL as isize;
    };
    // SAFETY: fi_fetch_atomicmsg(3): the message's one operand and the one result `fi_ioc` name
    // their elements, the result's writable until the completion is read.
    unsafe { post_fetch(ep, (b.0.cast_const(), b.1), None, r, t, m.context) }
}

unsafe extern "C" fn compwrite(
    ep: *mut fid_ep,
    buf: *const c_void,
    count: usize,
    _desc: *mut c_void,
    compare: *const c_void,
    _compare_desc: *mut c_void,
    result: *mut c_void,
    _result_desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_compare_atomic(3): `ep` is this op's, `buf` and `compare` hold `count` elements,
    // and `result` as many writable ones until the completion is read.
    unsafe { post_fetch(ep, (buf, count), Some(compare), result, t, context) }
}

unsafe extern "C" fn compwritev(
    ep: *mut fid_ep,
    iov: *const fi_ioc,
    _desc: *mut *mut c_void,
    count: usize,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: fi_datatype,
    op: fi_op,
    context: *mut c_void,
) -> isize {
    // SAFETY: each `fi_ioc` array holds its count (the vector call's contract), as `one_ioc`
    // requires.
    let parts =
        unsafe { (one_ioc(iov, count), one_ioc(comparev, compare_count), one_ioc(resultv, result_count)) };
    let (Some(b), Some((c, 1)), Some((r, 1))) = parts else { return EINVAL as isize };
    let t = Target { dest, offset: addr, key, dt, op };
    // SAFETY: fi_compare_atomicv(3)'s arguments, passed on: the one operand, compare and result
    // `fi_ioc` name their elements, the result's writable until the completion is read.
    unsafe { post_fetch(ep, (b.0.cast_const(), b.1), Some(c.cast_const()), r, t, context) }
}

unsafe extern "C" fn compwritemsg(
    ep: *mut fid_ep,
    msg: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    _compare_desc: *mut *mut c_void,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: *mut *mut c_void,
    result_count: usize,
    flags: u64,
) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_atomic` (fi_compare_atomicmsg(3)); `as_ref`
    // answers `None` for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !MSG_FLAGS != 0 || flags & u64::from(abi::FI_INJECT) != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: each `fi_ioc` array holds its count (the vector call's contract), as `one_ioc`
    // requires.
    let parts = unsafe { (msg_target(m), one_ioc(comparev, compare_count), one_ioc(resultv, result_count)) };
    let (Some((b, t)), Some((c, 1)), Some((r, 1))) = parts else { return EINVAL as isize };
    // SAFETY: fi_compare_atomicmsg(3): the message's operand, compare and result `fi_ioc` name
    // their elements, the result's writable until the completion is read.
    unsafe { post_fetch(ep, (b.0.cast_const(), b.1), Some(c.cast_const()), r, t, m.context) }
}

/// The `*valid` queries: how many elements one call takes, or -FI_EOPNOTSUPP.
///
/// # Safety
/// `ep` null or an endpoint of this provider; `count` null or valid for a write.
unsafe fn count_valid(ep: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize, kind: Kind) -> c_int {
    // SAFETY: this function's contract: `ep` is null or a live endpoint of this provider; `ep_of`
    // answers `None` for null.
    let (Some(e), false) = (unsafe { ep_of(ep.cast()) }, count.is_null()) else { return EINVAL };
    match valid(&e.info, dt, op, kind) {
        Ok((.., n)) => {
            // SAFETY: `count`, not null (checked), is the caller's writable `size_t`
            // (fi_atomicvalid(3)).
            unsafe { *count = n };
            0
        }
        Err(r) => r as c_int,
    }
}

unsafe extern "C" fn writevalid(ep: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_atomicvalid(3): `ep` is this op's, and `count` null or a writable `size_t`.
    unsafe { count_valid(ep, dt, op, count, Kind::Write) }
}

unsafe extern "C" fn readwritevalid(ep: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_fetch_atomicvalid(3): `ep` is this op's, and `count` null or a writable `size_t`.
    unsafe { count_valid(ep, dt, op, count, Kind::Fetch) }
}

unsafe extern "C" fn compwritevalid(ep: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_compare_atomicvalid(3): `ep` is this op's, and `count` null or a writable
    // `size_t`.
    unsafe { count_valid(ep, dt, op, count, Kind::Compare) }
}

/// `fi_query_atomic`: the element size and the most elements of `(dt, op)` for the call
/// `flags` names (0, FI_FETCH_ATOMIC or FI_COMPARE_ATOMIC).
pub(crate) unsafe extern "C" fn query_atomic(
    domain: *mut fid_domain,
    dt: fi_datatype,
    op: fi_op,
    attr: *mut abi::fi_atomic_attr,
    flags: u64,
) -> c_int {
    // SAFETY: `domain` is null or a live domain of this provider: libfabric reaches this op only
    // through the ops table `fi_domain` filled.
    let (Some(d), false) = (unsafe { crate::domain::domain_of(domain) }, attr.is_null()) else {
        return EINVAL;
    };
    if d.caps & u64::from(abi::FI_ATOMIC) == 0 {
        return neg(FiErrno::EOPNOTSUPP);
    }
    let kind = match flags & (abi::FI_FETCH_ATOMIC | abi::FI_COMPARE_ATOMIC) {
        0 => Kind::Write,
        abi::FI_FETCH_ATOMIC => Kind::Fetch,
        abi::FI_COMPARE_ATOMIC => Kind::Compare,
        _ => return EINVAL,
    };
    match valid(&d.info, dt, op, kind) {
        Ok((_, _, size, count)) => {
            // SAFETY: `attr`, not null (checked), is the caller's writable `fi_atomic_attr`
            // (fi_query_atomic(3)).
            unsafe { *attr = abi::fi_atomic_attr { count, size } };
            0
        }
        Err(r) => r as c_int,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::provider::{Hints, ProviderConfig, getinfo};

    #[test]
    fn pairs_map_and_kinds_are_kept_apart() {
        let info = getinfo(&Hints::default(), &ProviderConfig::default()).unwrap().remove(0);
        let (dt, op, size, n) = valid(&info, abi::FI_UINT64, abi::FI_SUM, Kind::Write).ok().unwrap();
        assert_eq!(
            (dt, op, size, n),
            (AmoDatatype::Uint64, AmoOpcode::Sum, 8, info.limits.max_atomic_bytes / 8)
        );
        assert_eq!(valid(&info, abi::FI_UINT64, abi::FI_SUM, Kind::Fetch).ok().unwrap().3, 1);
        assert!(valid(&info, abi::FI_UINT64, abi::FI_CSWAP, Kind::Compare).is_ok());
        let no = -(abi::FI_EOPNOTSUPP as isize);
        assert_eq!(valid(&info, abi::FI_UINT64, abi::FI_CSWAP, Kind::Fetch).err(), Some(no));
        assert_eq!(valid(&info, abi::FI_UINT64, abi::FI_SUM, Kind::Compare).err(), Some(no));
        assert_eq!(valid(&info, abi::FI_DATATYPE_LAST + 9, abi::FI_SUM, Kind::Write).err(), Some(no));
        assert_eq!(valid(&info, abi::FI_UINT64, abi::FI_ATOMIC_OP_LAST, Kind::Write).err(), Some(no));
        for dt in 0..16 {
            assert!(datatype(dt).is_some(), "libfabric datatype {dt} maps");
        }
        for op in 0..abi::FI_ATOMIC_OP_LAST {
            assert!(operation(op).is_some(), "libfabric op {op} maps");
        }
    }
}
