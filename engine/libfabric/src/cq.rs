//! `fi_cq_open` and the completion queue's operations. The engine's queue carries the id an
//! endpoint gave each operation; [`Ops`] maps it back to the program's context and, for a
//! receive, its buffer, into which the message is copied when its completion is read.

use core::ffi::{c_char, c_int, c_void};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::provider::{self, CompletionQueue, CqEntry, CqErrEntry, FiErrno, cq_flags};
use ses::ReturnCode;

use crate::abi::{
    self, fi_cq_attr, fi_cq_data_entry, fi_cq_entry, fi_cq_err_entry, fi_cq_format, fi_cq_msg_entry,
    fi_cq_tagged_entry, fi_ops, fi_ops_cq, fid, fid_cq, fid_domain,
};
use crate::util::{EINVAL, ENOSYS, neg};

/// The buffers an operation's bytes are scattered over, in order (see [`Op`]).
pub(crate) type Pieces = Box<[(*mut u8, usize)]>;

/// One operation an endpoint posted, by the id it gave the engine.
#[derive(Debug)]
pub(crate) struct Op {
    /// The program's context.
    pub(crate) context: *mut c_void,
    /// Where the bytes an operation brings back go: a receive's buffer, a read's or a fetching
    /// atomic's result buffer, and its length (null, 0 for a send or a write).
    pub(crate) buf: *mut u8,
    pub(crate) len: usize,
    /// A receive the engine placed in `buf` as it arrived: nothing to copy at completion.
    pub(crate) placed: bool,
    /// The program's buffers when it gave several (`fi_recvv`, `fi_readv`...): the bytes are
    /// scattered over them in order (`buf` is the first, `len` their total); empty for one.
    pub(crate) scatter: Pieces,
    /// A multi-receive buffer (FI_MULTI_RECV): kept until its last completion, each message
    /// completing at its offset in `buf`.
    pub(crate) multi: bool,
}

impl Op {
    /// An operation whose bytes (if any) go to `buf`, `len` bytes.
    pub(crate) fn new(context: *mut c_void, buf: *mut u8, len: usize, placed: bool) -> Op {
        Op { context, buf, len, placed, scatter: Box::default(), multi: false }
    }

    /// Copies `data` (at most `len` bytes) into the operation's buffers.
    ///
    /// # Safety
    /// The buffers are the program's, writable for their lengths until the completion is read
    /// (fi_recv(3), fi_read(3)), and not null where they hold bytes (the posting calls refuse that).
    unsafe fn copy_in(&self, data: &[u8]) {
        let mut rest = &data[..data.len().min(self.len)];
        let one = [(self.buf, self.len)];
        let pieces: &[(*mut u8, usize)] = if self.scatter.is_empty() { &one } else { &self.scatter };
        for &(p, l) in pieces {
            let n = rest.len().min(l);
            if n == 0 {
                continue;
            }
            // SAFETY: this function's contract: `p` (not null, `n > 0` bytes) holds `l >= n`
            // writable bytes, the program's until this completion is read; `rest` is the
            // completion's own data, which does not overlap the program's memory.
            unsafe { core::ptr::copy_nonoverlapping(rest.as_ptr(), p, n) };
            rest = &rest[n..];
        }
    }
}

/// The operations waiting for their completions on one queue.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    next: u64,
    map: HashMap<u64, Op>,
}

impl Ops {
    /// Records `op`; the id to give the engine (never 0, the id of injects, which are not kept).
    pub(crate) fn add(&mut self, op: Op) -> u64 {
        self.next = self.next.wrapping_add(1).max(1);
        self.map.insert(self.next, op);
        self.next
    }

    /// The ids of the operations posted with the program's `context`, oldest first.
    pub(crate) fn ids_of(&self, context: *mut c_void) -> Vec<u64> {
        let mut ids: Vec<u64> =
            self.map.iter().filter(|(_, op)| op.context == context).map(|(&id, _)| id).collect();
        ids.sort_unstable();
        ids
    }

    /// Forgets an operation the engine refused.
    pub(crate) fn cancel(&mut self, id: u64) {
        self.map.remove(&id);
    }
}

/// A completion queue: `fid_cq` first.
#[repr(C)]
pub(crate) struct Cq {
    fid: fid_cq,
    pub(crate) cq: CompletionQueue,
    /// The engine's fabric, whose progress `fi_cq_sread` waits on.
    fabric: provider::Fabric,
    format: fi_cq_format,
    pub(crate) ops: Rc<RefCell<Ops>>,
    /// An error completion taken off the engine's queue, for `fi_cq_readerr`.
    err: RefCell<Option<fi_cq_err_entry>>,
}

static CQ_FI_OPS: fi_ops = crate::util::fid_ops(close, None, Some(control));

static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: size_of::<fi_ops_cq>(),
    read: Some(read),
    readfrom: Some(readfrom),
    readerr: Some(readerr),
    sread: Some(sread),
    sreadfrom: Some(sreadfrom),
    signal: Some(signal),
    strerror: Some(strerror),
};

/// `fi_cq_open`: any format; no wait object beyond `fi_cq_sread` (FI_WAIT_NONE or
/// FI_WAIT_UNSPEC: a wait set or descriptor answers -FI_ENOSYS).
pub(crate) unsafe extern "C" fn open(
    domain: *mut fid_domain,
    attr: *mut fi_cq_attr,
    cq: *mut *mut fid_cq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `domain` is null or a domain of this provider (libfabric reaches this op through the
    // ops table `fi_domain` filled), and `attr` null or the caller's `fi_cq_attr` (fi_cq_open(3));
    // `as_ref` answers `None` for null.
    let (Some(d), Some(attr), false) =
        (unsafe { crate::domain::domain_of(domain) }, unsafe { attr.as_ref() }, cq.is_null())
    else {
        return EINVAL;
    };
    if attr.format > abi::FI_CQ_FORMAT_TAGGED {
        return EINVAL;
    }
    if !matches!(attr.wait_obj, abi::FI_WAIT_NONE | abi::FI_WAIT_UNSPEC) {
        return ENOSYS;
    }
    let c = Box::new(Cq {
        fid: fid_cq {
            fid: fid { fclass: abi::FI_CLASS_CQ as usize, context, ops: (&raw const CQ_FI_OPS).cast_mut() },
            ops: (&raw const CQ_OPS).cast_mut(),
        },
        cq: d.domain.cq_open(),
        fabric: d.fabric.clone(),
        format: if attr.format == abi::FI_CQ_FORMAT_UNSPEC { abi::FI_CQ_FORMAT_CONTEXT } else { attr.format },
        ops: Rc::default(),
        err: RefCell::new(None),
    });
    // SAFETY: `cq`, not null (checked), is the caller's writable `struct fid_cq **` out parameter
    // (fi_cq_open(3)).
    unsafe { *cq = &raw mut Box::leak(c).fid };
    0
}

unsafe extern "C" fn close(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: libfabric calls this close op only through the `fid` of a CQ `open` leaked from a Box
    // (the `fid_cq` and its `fid` first in the `repr(C)` `Cq`), once: fi_close(3) ends the object.
    drop(unsafe { Box::from_raw(f.cast::<Cq>()) });
    0
}

unsafe extern "C" fn control(_: *mut fid, _command: c_int, _arg: *mut c_void) -> c_int {
    // FI_GETWAIT and the rest: no wait object.
    ENOSYS
}

/// The [`Cq`] of a `fid` of class FI_CLASS_CQ of this provider.
///
/// # Safety
/// `f` is null or the fid of a [`Cq`].
pub(crate) unsafe fn cq_of<'a>(f: *mut fid) -> Option<&'a Cq> {
    // SAFETY: `fid` is the first member of `fid_cq`, the first of `Cq`.
    unsafe { f.cast::<Cq>().as_ref() }
}

/// libfabric's completion flags of the engine's.
fn fi_flags(f: u64) -> u64 {
    FLAGS.into_iter().filter(|&(e, _)| f & e != 0).fold(0, |acc, (_, fi)| acc | u64::from(fi))
}

/// The engine's flags of libfabric's (`fi_ep_bind` of a counter).
pub(crate) fn engine_flags(fi: u64) -> u64 {
    FLAGS.into_iter().filter(|&(_, f)| fi & u64::from(f) != 0).fold(0, |acc, (e, _)| acc | e)
}

/// Each engine completion flag and libfabric's.
const FLAGS: [(u64, u32); 11] = [
    (cq_flags::SEND, abi::FI_SEND),
    (cq_flags::RECV, abi::FI_RECV),
    (cq_flags::RMA, abi::FI_RMA),
    (cq_flags::ATOMIC, abi::FI_ATOMIC),
    (cq_flags::READ, abi::FI_READ),
    (cq_flags::WRITE, abi::FI_WRITE),
    (cq_flags::TAGGED, abi::FI_TAGGED),
    (cq_flags::MSG, abi::FI_MSG),
    (cq_flags::REMOTE_CQ_DATA, abi::FI_REMOTE_CQ_DATA),
    (cq_flags::REMOTE_WRITE, abi::FI_REMOTE_WRITE),
    (cq_flags::MULTI_RECV, abi::FI_MULTI_RECV),
];

/// What one engine completion becomes.
enum Taken {
    /// An entry for the program, and the AV address of a receive's sender (FI_ADDR_NOTAVAIL
    /// when it is not in the AV, or for other operations).
    Entry(fi_cq_tagged_entry, abi::fi_addr_t),
    /// An error entry, now waiting for `fi_cq_readerr`.
    Error,
}

impl Cq {
    /// Turns an engine completion into the program's, copying a receive into its buffer.
    fn take(&self, c: Result<CqEntry, CqErrEntry>) -> Taken {
        let id = match &c {
            Ok(e) => e.op_context,
            Err(e) => e.op_context,
        };
        // A multi-receive buffer's operation stays until the completion that releases it.
        let (flags, offset) = match &c {
            Ok(e) => (e.flags, e.offset),
            Err(e) => (e.flags, 0),
        };
        let mut ops = self.ops.borrow_mut();
        let op = match ops.map.get(&id) {
            Some(o) if o.multi && flags & cq_flags::MULTI_RECV == 0 => {
                Op { multi: true, ..Op::new(o.context, o.buf, o.len, true) }
            }
            _ => ops
                .map
                .remove(&id)
                .unwrap_or_else(|| Op::new(core::ptr::null_mut(), core::ptr::null_mut(), 0, false)),
        };
        drop(ops);
        let (context, len) = (op.context, op.len);
        // A multi-receive buffer's message is at its offset there.
        let buf = if op.multi { op.buf.wrapping_add(offset) } else { op.buf };
        // Copies what arrived into the receive's buffers: how many bytes fit (a receive placed as
        // it arrived has its `moved` bytes there already).
        let place = |data: &[u8], moved: usize| {
            if op.placed {
                return moved.min(len);
            }
            // SAFETY: the operation's buffers are the program's, which fi_recv(3) and fi_read(3)
            // keep the provider's until this completion is read; the posting calls refused null
            // ones with bytes.
            unsafe { op.copy_in(data) };
            data.len().min(len)
        };
        match c {
            Ok(e) if e.flags & cq_flags::RECV != 0 && e.buf.len() > len => {
                let n = place(&e.buf, e.len);
                *self.err.borrow_mut() = Some(fi_cq_err_entry {
                    op_context: context,
                    flags: fi_flags(e.flags),
                    len: n,
                    buf: buf.cast(),
                    data: e.data.unwrap_or(0),
                    tag: e.tag.unwrap_or(0),
                    olen: e.buf.len() - n,
                    err: abi::FI_ETRUNC as c_int,
                    prov_errno: 0,
                    err_data: core::ptr::null_mut(),
                    err_data_size: 0,
                });
                Taken::Error
            }
            Ok(e) => {
                let n = if e.flags & cq_flags::RECV != 0 {
                    place(&e.buf, e.len)
                } else {
                    // A read or a fetching atomic: its bytes go to the program's result buffer.
                    place(&e.buf, e.len);
                    e.len
                };
                Taken::Entry(
                    fi_cq_tagged_entry {
                        op_context: context,
                        flags: fi_flags(e.flags),
                        len: n,
                        buf: if e.flags & cq_flags::RECV != 0 { buf.cast() } else { core::ptr::null_mut() },
                        data: e.data.unwrap_or(0),
                        tag: e.tag.unwrap_or(0),
                    },
                    e.src,
                )
            }
            Err(e) => {
                let n = place(&e.buf, e.len);
                *self.err.borrow_mut() = Some(fi_cq_err_entry {
                    op_context: context,
                    flags: fi_flags(e.flags),
                    len: n,
                    buf: if n > 0 { buf.cast() } else { core::ptr::null_mut() },
                    data: 0,
                    tag: 0,
                    olen: e.len.saturating_sub(n),
                    err: e.err.code(),
                    prov_errno: c_int::from(e.prov_errno),
                    err_data: core::ptr::null_mut(),
                    err_data_size: 0,
                });
                Taken::Error
            }
        }
    }

    /// The next engine completion (progressing the endpoint), if any.
    fn next(&self) -> Option<Result<CqEntry, CqErrEntry>> {
        match self.cq.read() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(_) => self.cq.readerr().map(Err),
        }
    }

    /// Writes entry `i` of the queue's format at `buf`.
    ///
    /// # Safety
    /// `buf` holds at least `i + 1` entries of the format.
    unsafe fn write(&self, buf: *mut c_void, i: usize, e: &fi_cq_tagged_entry) {
        // SAFETY: this function's contract: `buf` holds at least `i + 1` entries of the queue's
        // format, and the caller's array is aligned for it. Each arm writes the entry type of its
        // format (every format is a prefix of the tagged entry), all plain `Copy` structures, so
        // the assignment drops nothing.
        unsafe {
            match self.format {
                abi::FI_CQ_FORMAT_CONTEXT => {
                    *buf.cast::<fi_cq_entry>().add(i) = fi_cq_entry { op_context: e.op_context }
                }
                abi::FI_CQ_FORMAT_MSG => {
                    *buf.cast::<fi_cq_msg_entry>().add(i) =
                        fi_cq_msg_entry { op_context: e.op_context, flags: e.flags, len: e.len }
                }
                abi::FI_CQ_FORMAT_DATA => {
                    *buf.cast::<fi_cq_data_entry>().add(i) = fi_cq_data_entry {
                        op_context: e.op_context,
                        flags: e.flags,
                        len: e.len,
                        buf: e.buf,
                        data: e.data,
                    }
                }
                _ => *buf.cast::<fi_cq_tagged_entry>().add(i) = *e,
            }
        }
    }

    /// `fi_cq_read`: up to `count` entries, -FI_EAGAIN for none, -FI_EAVAIL when an error waits;
    /// `fi_cq_readfrom` with `src`, which gets each entry's source address.
    ///
    /// # Safety
    /// `buf` holds `count` entries of the format; `src` is null or holds `count` addresses.
    unsafe fn read(&self, buf: *mut c_void, count: usize, src: *mut abi::fi_addr_t) -> isize {
        let mut n = 0;
        while n < count {
            if self.err.borrow().is_some() {
                break;
            }
            let Some(c) = self.next() else { break };
            match self.take(c) {
                // SAFETY: `n < count` entries of the caller's array (this function's contract:
                // `buf` holds `count` entries, `src` null or `count` addresses).
                Taken::Entry(e, from) => unsafe {
                    self.write(buf, n, &e);
                    if !src.is_null() {
                        *src.add(n) = from;
                    }
                },
                Taken::Error => continue,
            }
            n += 1;
        }
        match n {
            0 if self.err.borrow().is_some() => -(abi::FI_EAVAIL as isize),
            0 => -(abi::FI_EAGAIN as isize),
            n => n as isize,
        }
    }
}

unsafe extern "C" fn read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: fi_cq_read(3) is fi_cq_readfrom(3) without source addresses: `cq` and `buf` (`count`
    // entries) passed on, `src` null.
    unsafe { readfrom(cq, buf, count, core::ptr::null_mut()) }
}

unsafe extern "C" fn readfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut abi::fi_addr_t,
) -> isize {
    // SAFETY: `cq` is null or a live CQ this provider opened: libfabric reaches this op only
    // through its ops table.
    let Some(c) = (unsafe { cq_of(cq.cast()) }) else { return EINVAL as isize };
    if buf.is_null() && count > 0 {
        return EINVAL as isize;
    }
    // SAFETY: `buf` holds `count` entries and `src` (if not null) `count` addresses.
    unsafe { c.read(buf, count, src) }
}

unsafe extern "C" fn readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, _flags: u64) -> isize {
    // SAFETY: `cq` is null or a live CQ this provider opened: libfabric reaches this op only
    // through its ops table.
    let (Some(c), false) = (unsafe { cq_of(cq.cast()) }, buf.is_null()) else { return EINVAL as isize };
    if c.err.borrow().is_none() {
        if let Some(e) = c.cq.readerr() {
            let _ = c.take(Err(e));
        }
    }
    match c.err.borrow_mut().take() {
        Some(e) => {
            // SAFETY: `buf`, not null (checked), is the caller's writable `fi_cq_err_entry`
            // (fi_cq_readerr(3)), a plain `Copy` structure.
            unsafe { *buf = e };
            1
        }
        None => -(abi::FI_EAGAIN as isize),
    }
}

unsafe extern "C" fn sread(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: fi_cq_sread(3) is fi_cq_sreadfrom(3) without source addresses: the arguments passed
    // on, `src` null.
    unsafe { sreadfrom(cq, buf, count, core::ptr::null_mut(), cond, timeout) }
}

unsafe extern "C" fn sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut abi::fi_addr_t,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: `cq` is null or a live CQ this provider opened: libfabric reaches this op only
    // through its ops table.
    let Some(c) = (unsafe { cq_of(cq.cast()) }) else { return EINVAL as isize };
    let end = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
    loop {
        // SAFETY: fi_cq_sreadfrom(3) takes fi_cq_readfrom(3)'s arguments and a wait: `cq`, `buf`
        // (`count` entries) and `src` (null or `count` addresses) passed on.
        let n = unsafe { readfrom(cq, buf, count, src) };
        if n != -(abi::FI_EAGAIN as isize) || end.is_some_and(|e| Instant::now() >= e) {
            return n;
        }
        // Progress, or sleep on the socket until a datagram or the next timer.
        c.fabric.step();
    }
}

unsafe extern "C" fn signal(_: *mut fid_cq) -> c_int {
    // FI_THREAD_DOMAIN: nobody else can be waiting in fi_cq_sread of this domain.
    ENOSYS
}

/// `fi_cq_strerror`: the SES return code of `prov_errno`.
unsafe extern "C" fn strerror(
    _cq: *mut fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // Without a buffer, a string that lives as long as the library: one per return code.
    static NAMES: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();
    let describe = |code: c_int| {
        let name = u8::try_from(code).map_or("not an SES return code", |v| ReturnCode::from(v).name());
        format!("SES return code {code} ({name})")
    };
    let s = describe(prov_errno);
    if buf.is_null() || len == 0 {
        let names = NAMES.get_or_init(|| {
            (0..=256).map(|c| std::ffi::CString::new(describe(c)).unwrap_or_default()).collect()
        });
        let i = usize::try_from(prov_errno).map_or(256, |i| i.min(256));
        return names[i].as_ptr();
    }
    let n = s.len().min(len - 1);
    // SAFETY: `buf` (not null, checked) holds `len > 0` writable bytes (fi_cq_strerror(3)); `n <=
    // len - 1` bytes and the NUL fit, and `s` is this function's own string.
    unsafe {
        core::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    buf
}

/// `-FI_E*` of an engine errno (for the endpoint's posting calls).
pub(crate) fn post_err(e: FiErrno) -> isize {
    neg(e) as isize
}
