//! `fi_endpoint` and the endpoint's operations: binding, enabling, `fi_getname`, and the message
//! and tagged data calls. Each posted operation gets an id the engine carries to its completion;
//! the queue the endpoint binds for it remembers the program's context (and a receive's buffer).

use core::ffi::{c_int, c_void};
use std::cell::RefCell;

use engine::provider::{self, EpAttr};

use crate::abi::{
    self, fi_addr_t, fi_info, fi_msg, fi_msg_tagged, fi_ops, fi_ops_cm, fi_ops_ep, fi_ops_msg, fi_ops_tagged,
    fid, fid_domain, fid_ep, fid_t, iovec,
};
use crate::cq::{Op, post_err};
use crate::endpoint::{Ep, TX_MSG_FLAGS, bytes, ep_of, gather, iovs, with};
use crate::util::{EINVAL, ENOSYS, give_bytes};

static EP_FI_OPS: fi_ops = crate::util::fid_ops(close, Some(bind), Some(control));

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(no_ctx),
    rx_ctx: Some(no_ctx),
    rx_size_left: Some(size_left),
    tx_size_left: Some(size_left),
};

static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: size_of::<fi_ops_cm>(),
    setname: Some(setname),
    getname: Some(getname),
    getpeer: Some(getpeer),
    connect: Some(connect),
    listen: Some(listen),
    accept: Some(accept),
    reject: Some(reject),
    shutdown: Some(shutdown),
    join: Some(join),
};

static MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: size_of::<fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    send: Some(send),
    sendv: Some(sendv),
    sendmsg: Some(sendmsg),
    inject: Some(inject),
    senddata: Some(senddata),
    injectdata: Some(injectdata),
};

static TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: size_of::<fi_ops_tagged>(),
    recv: Some(trecv),
    recvv: Some(trecvv),
    recvmsg: Some(trecvmsg),
    send: Some(tsend),
    sendv: Some(tsendv),
    sendmsg: Some(tsendmsg),
    inject: Some(tinject),
    senddata: Some(tsenddata),
    injectdata: Some(tinjectdata),
};

/// `fi_endpoint`: the engine's endpoint on the domain's address (UET's UDP port: one per
/// address; a second answers -FI_EBUSY).
pub(crate) unsafe extern "C" fn open(
    domain: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `domain` is null or a domain of this provider: libfabric reaches this op only through
    // the ops table `fi_domain` filled, and the program does not close the domain while it opens an
    // endpoint on it (FI_THREAD_DOMAIN serializes its calls).
    let (Some(d), false) = (unsafe { crate::domain::domain_of(domain) }, ep.is_null()) else { return EINVAL };
    // What the info asks of the endpoint: its capabilities (receives matched by source with
    // FI_DIRECTED_RECV) and orderings (any of them: ROD); without an info, the domain's.
    let (mut caps, mut orders) = (d.caps, 0);
    // SAFETY: `info` is null or the `fi_info` `fi_getinfo` gave the program (fi_endpoint(3));
    // `as_ref` answers `None` for null.
    if let Some(i) = unsafe { info.as_ref() } {
        // SAFETY: `ep_attr` of a live `fi_info` is null or its endpoint attributes (libfabric's
        // layout).
        let asked = unsafe { i.ep_attr.as_ref() }.map_or(abi::FI_EP_UNSPEC, |a| a.type_);
        let ours = if d.info.ep_type == ses::EpType::Rdm { abi::FI_EP_RDM } else { abi::FI_EP_DGRAM };
        if asked != abi::FI_EP_UNSPEC && asked != ours {
            return EINVAL;
        }
        if i.caps != 0 {
            caps = i.caps & d.caps;
        }
        // SAFETY: `tx_attr` and `rx_attr` of a live `fi_info` are null or its attribute structures
        // (libfabric's layout); `as_ref` answers `None` for null.
        unsafe {
            orders |= i.tx_attr.as_ref().map_or(0, |t| t.msg_order);
            orders |= i.rx_attr.as_ref().map_or(0, |r| r.msg_order);
        }
    }
    let attr = EpAttr { ordered: orders & crate::info::ORDERS != 0, ..EpAttr::default() };
    let engine_ep = match d.domain.endpoint(attr) {
        Ok(e) => e,
        Err(e) => return crate::util::fail(&e, true),
    };
    let tagged = d.caps & u64::from(abi::FI_TAGGED) != 0;
    let rma = d.caps & u64::from(abi::FI_RMA) != 0;
    let e = Box::new(Ep {
        fid: fid_ep {
            fid: fid { fclass: abi::FI_CLASS_EP as usize, context, ops: (&raw const EP_FI_OPS).cast_mut() },
            ops: (&raw const EP_OPS).cast_mut(),
            cm: (&raw const CM_OPS).cast_mut(),
            msg: (&raw const MSG_OPS).cast_mut(),
            rma: if rma {
                (&raw const crate::rma::RMA_OPS).cast_mut()
            } else {
                (&raw const crate::unsupported::RMA_NOSYS).cast_mut()
            },
            tagged: if tagged {
                (&raw const TAGGED_OPS).cast_mut()
            } else {
                (&raw const crate::unsupported::TAGGED_NOSYS).cast_mut()
            },
            atomic: if rma {
                (&raw const crate::atomic::ATOMIC_OPS).cast_mut()
            } else {
                (&raw const crate::unsupported::ATOMIC_NOSYS).cast_mut()
            },
            collective: core::ptr::null_mut(),
        },
        ep: engine_ep,
        info: d.info.clone(),
        tx: RefCell::new(None),
        rx: RefCell::new(None),
        av: RefCell::new(false),
        directed: caps & abi::FI_DIRECTED_RECV != 0,
        min_multi_recv: std::cell::Cell::new(crate::endpoint::MIN_MULTI_RECV),
    });
    // SAFETY: `ep`, not null (checked), is the caller's writable `struct fid_ep **` out parameter
    // (fi_endpoint(3)).
    unsafe { *ep = &raw mut Box::leak(e).fid };
    0
}

unsafe extern "C" fn close(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: the fid of an Ep of `open`, closed once. The engine's endpoint (its socket) goes
    // with the last reference to it.
    drop(unsafe { Box::from_raw(f.cast::<Ep>()) });
    0
}

/// `fi_ep_bind`: a completion queue (FI_TRANSMIT, FI_RECV), a counter (FI_SEND, FI_RECV, FI_READ,
/// FI_WRITE) or the address vector.
unsafe extern "C" fn bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: `f` is the fid of an endpoint `open` made (libfabric reaches this op only through its
    // ops table), live during the call; `bfid` is null or an object the program opened
    // (fi_ep_bind(3)), whose `fid` header `as_ref` reads.
    let (Some(e), Some(b)) = (unsafe { ep_of(f.cast()) }, unsafe { bfid.as_ref() }) else { return EINVAL };
    match b.fclass as u32 {
        abi::FI_CLASS_CQ => {
            // SAFETY: `bfid`'s class is FI_CLASS_CQ (matched), and fi_ep_bind(3) binds objects of the
            // endpoint's own domain, so it is a live CQ this provider opened.
            let Some(cq) = (unsafe { crate::cq::cq_of(bfid) }) else { return EINVAL };
            let (tx, rx) = (flags & u64::from(abi::FI_TRANSMIT) != 0, flags & u64::from(abi::FI_RECV) != 0);
            if !tx && !rx {
                return EINVAL;
            }
            let mut engine_flags = 0;
            if tx {
                engine_flags |= provider::bind::TRANSMIT;
                *e.tx.borrow_mut() = Some(cq.ops.clone());
            }
            if rx {
                engine_flags |= provider::bind::RECV;
                *e.rx.borrow_mut() = Some(cq.ops.clone());
            }
            e.ep.bind_cq(&cq.cq, engine_flags);
            0
        }
        abi::FI_CLASS_AV => {
            // SAFETY: `bfid`'s class is FI_CLASS_AV (matched), and fi_ep_bind(3) binds objects of the
            // endpoint's own domain, so it is a live AV this provider opened.
            let Some(av) = (unsafe { crate::domain::av_of(bfid) }) else { return EINVAL };
            e.ep.bind_av(&av.av);
            *e.av.borrow_mut() = true;
            0
        }
        abi::FI_CLASS_CNTR => {
            // SAFETY: `bfid`'s class is FI_CLASS_CNTR (matched), and fi_ep_bind(3) binds objects of the
            // endpoint's own domain, so it is a live counter this provider opened.
            let Some(c) = (unsafe { crate::cntr::cntr_of(bfid) }) else { return EINVAL };
            // What it counts: local completions only (FI_REMOTE_* would need FI_RMA_EVENT).
            let known = u64::from(abi::FI_SEND | abi::FI_RECV | abi::FI_READ | abi::FI_WRITE);
            if flags & !known != 0 {
                return ENOSYS;
            }
            if flags == 0 {
                return EINVAL;
            }
            e.ep.bind_cntr(&c.cntr, crate::cq::engine_flags(flags));
            0
        }
        // Event queues are not offered.
        _ => ENOSYS,
    }
}

/// `fi_enable` (FI_ENABLE): needs both completion queues and, for an RDM endpoint, the AV.
unsafe extern "C" fn control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: `f` is the fid of a live endpoint `open` made: libfabric reaches this op only through
    // its ops table.
    let Some(e) = (unsafe { ep_of(f.cast()) }) else { return EINVAL };
    if command as u32 != abi::FI_ENABLE {
        return ENOSYS;
    }
    if e.tx.borrow().is_none() || e.rx.borrow().is_none() || !*e.av.borrow() {
        // libfabric's FI_ENOCQ / FI_ENOAV.
        return if *e.av.borrow() { -(abi::FI_ENOCQ as c_int) } else { -(abi::FI_ENOAV as c_int) };
    }
    0
}

/// `fi_cancel`: the receive (tagged or not) posted with `context`, if still waiting for a message,
/// completes at once with FI_ECANCELED in `fi_cq_readerr` (its context and flags; an error on the
/// receive counters). 0 whether or not one was waiting, as libfabric's tcp and rxm providers
/// answer: a receive a message already matched completes as it would have. Transmit operations
/// are not cancelled (the engine has sent them; libfabric's tcp provider cancels receives only).
unsafe extern "C" fn cancel(f: fid_t, context: *mut c_void) -> isize {
    // SAFETY: `f` is the fid of a live endpoint `open` made: libfabric reaches this op only through
    // its ops table.
    let Some(e) = (unsafe { ep_of(f.cast()) }) else { return EINVAL as isize };
    let rx = e.rx.borrow();
    let Some(ops) = rx.as_ref() else { return 0 };
    // The ids posted with that context, oldest first; the engine knows which are receives still
    // waiting (a transmit's id names no receive).
    let ids = ops.borrow().ids_of(context);
    let _cancelled = ids.into_iter().any(|id| e.ep.cancel_recv(id));
    0
}

/// `fi_getopt`: FI_OPT_MIN_MULTI_RECV (a `size_t`); other options -FI_ENOPROTOOPT.
unsafe extern "C" fn getopt(f: fid_t, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: `f` is the fid of a live endpoint `open` made: libfabric reaches this op only through
    // its ops table.
    let Some(e) = (unsafe { ep_of(f.cast()) }) else { return EINVAL };
    if level as u32 != abi::FI_OPT_ENDPOINT || name as u32 != abi::FI_OPT_MIN_MULTI_RECV {
        return -(abi::FI_ENOPROTOOPT as c_int);
    }
    // SAFETY: `len` is null or the caller's `size_t` (fi_getopt(3)); `as_mut` answers `None` for
    // null.
    let Some(len) = (unsafe { len.as_mut() }) else { return EINVAL };
    if val.is_null() || *len < size_of::<usize>() {
        return -(abi::FI_ETOOSMALL as c_int);
    }
    // SAFETY: `val` (not null, checked) holds `*len >= size_of::<usize>()` writable bytes
    // (fi_getopt(3)); `write_unaligned` asks no alignment of them.
    unsafe { val.cast::<usize>().write_unaligned(e.min_multi_recv.get()) };
    *len = size_of::<usize>();
    0
}

/// `fi_setopt`: FI_OPT_MIN_MULTI_RECV (a `size_t`), for multi-receive buffers posted after it;
/// other options -FI_ENOPROTOOPT.
unsafe extern "C" fn setopt(f: fid_t, level: c_int, name: c_int, val: *const c_void, len: usize) -> c_int {
    // SAFETY: `f` is the fid of a live endpoint `open` made: libfabric reaches this op only through
    // its ops table.
    let Some(e) = (unsafe { ep_of(f.cast()) }) else { return EINVAL };
    if level as u32 != abi::FI_OPT_ENDPOINT || name as u32 != abi::FI_OPT_MIN_MULTI_RECV {
        return -(abi::FI_ENOPROTOOPT as c_int);
    }
    if val.is_null() || len != size_of::<usize>() {
        return EINVAL;
    }
    // SAFETY: `val` (not null, checked) holds `len == size_of::<usize>()` readable bytes
    // (fi_setopt(3)); `read_unaligned` asks no alignment of them.
    e.min_multi_recv.set(unsafe { val.cast::<usize>().read_unaligned() });
    0
}

unsafe extern "C" fn no_ctx<A>(
    _: *mut fid_ep,
    _: c_int,
    _: *mut A,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

unsafe extern "C" fn size_left(_: *mut fid_ep) -> isize {
    ENOSYS as isize
}

/// `fi_getname`: the endpoint's UET address as bytes (`engine::provider::UetAddr::to_bytes`).
unsafe extern "C" fn getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: `f` is the fid of a live endpoint `open` made: libfabric reaches this op only through
    // its ops table.
    let (Some(e), false) = (unsafe { ep_of(f.cast()) }, addrlen.is_null()) else { return EINVAL };
    // SAFETY: `addrlen` valid, `addr` holding `*addrlen` bytes.
    unsafe { give_bytes(&e.ep.getname().to_bytes(), addr, addrlen) }
}

unsafe extern "C" fn setname(_: fid_t, _: *mut c_void, _: usize) -> c_int {
    ENOSYS
}
unsafe extern "C" fn getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut usize) -> c_int {
    ENOSYS
}
unsafe extern "C" fn connect(_: *mut fid_ep, _: *const c_void, _: *const c_void, _: usize) -> c_int {
    ENOSYS
}
unsafe extern "C" fn listen(_: *mut abi::fid_pep) -> c_int {
    ENOSYS
}
unsafe extern "C" fn accept(_: *mut fid_ep, _: *const c_void, _: usize) -> c_int {
    ENOSYS
}
unsafe extern "C" fn reject(_: *mut abi::fid_pep, _: fid_t, _: *const c_void, _: usize) -> c_int {
    ENOSYS
}
unsafe extern "C" fn shutdown(_: *mut fid_ep, _: u64) -> c_int {
    ENOSYS
}
unsafe extern "C" fn join(
    _: *mut fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut abi::fid_mc,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

/// What a send carries.
#[derive(Clone, Copy)]
struct SendArgs {
    dest: fi_addr_t,
    tag: Option<u64>,
    data: Option<u64>,
    inject: bool,
}

impl Ep {
    /// Posts a send of `buf` with `args`; `context` comes back in its completion.
    fn send(&self, buf: Option<&[u8]>, args: SendArgs, context: *mut c_void) -> isize {
        let Some(buf) = buf else { return EINVAL as isize };
        let context = (!args.inject).then_some(context);
        self.post(context, (core::ptr::null_mut(), 0), |ep, id| {
            ep.sendmsg(buf, args.dest, args.tag, args.data, id, args.inject)
        })
    }

    /// Posts a receive into `buf` (`len` bytes), tagged or not. With FI_DIRECTED_RECV it takes
    /// messages of the sender `src` names in the AV only (FI_ADDR_UNSPEC: anyone's); without, the
    /// source is ignored, as libfabric has it (programs pass any value there, often 0 before the
    /// AV holds anything).
    fn recv(
        &self,
        buf: *mut c_void,
        len: usize,
        src: fi_addr_t,
        tag: Option<(u64, u64)>,
        context: *mut c_void,
    ) -> isize {
        let src = if self.directed { src } else { engine::provider::FI_ADDR_UNSPEC };
        if buf.is_null() && len > 0 {
            return EINVAL as isize;
        }
        // SAFETY: fi_recv(3): the buffer's `len` writable bytes (not null with bytes, checked
        // above) are the provider's until the receive's completion is read, it is cancelled or the
        // endpoint is closed. Closing drops the engine endpoint, and the `UserBuf` with it, once
        // nothing else holds the endpoint: an MR bound to it holds it only until enabled.
        // `UserBuf::new` refuses an empty or wrapping range.
        let mem = unsafe { engine::provider::UserBuf::new(buf.cast(), len) };
        let op = Op::new(context, buf.cast(), len, mem.is_some());
        self.post_recv(op, mem, src, tag)
    }

    /// [`recv`](Self::recv) into the buffers of an iovec array (`fi_recvv`, `fi_recvmsg`...): one
    /// is the program's buffer as `recv` has it; several get the message in a buffer of the
    /// engine's, scattered over them in order as its completion is read.
    fn recv_iov(
        &self,
        iov: &[iovec],
        src: fi_addr_t,
        tag: Option<(u64, u64)>,
        context: *mut c_void,
    ) -> isize {
        if let Some((b, l)) = crate::endpoint::one_iov(iov) {
            return self.recv(b, l, src, tag, context);
        }
        let Some((first, total, pieces)) = crate::endpoint::scatter(iov) else { return EINVAL as isize };
        let src = if self.directed { src } else { engine::provider::FI_ADDR_UNSPEC };
        let op = Op { scatter: pieces, ..Op::new(context, first, total, false) };
        self.post_recv(op, None, src, tag)
    }

    /// A multi-receive buffer (`fi_recvmsg` with FI_MULTI_RECV): `len` bytes at `buf` (neither
    /// null nor empty) that take message after message, released (the last completion with
    /// FI_MULTI_RECV) once less than FI_OPT_MIN_MULTI_RECV remains.
    fn recv_multi(&self, buf: *mut u8, len: usize, src: fi_addr_t, context: *mut c_void) -> isize {
        let src = if self.directed { src } else { engine::provider::FI_ADDR_UNSPEC };
        let rx = self.rx.borrow();
        let Some(ops) = rx.as_ref() else { return -(abi::FI_ENOCQ as isize) };

        // SAFETY: fi_recvmsg(3) with FI_MULTI_RECV: the buffer's `len` bytes are the provider's
        // until the completion that releases it is read, or it is cancelled, or the endpoint is
        // closed (which drops the engine's receive and this function with it). Each slice is the
        // buffer from `offset` on, and the engine posts one at a time, after the message before
        // it completed: no two alias. `UserBuf::new` refuses an empty range.
        let slice = Box::new(move |offset: usize| unsafe {
            engine::provider::UserBuf::new(buf.wrapping_add(offset), len.saturating_sub(offset))
        });
        let op = Op { multi: true, ..Op::new(context, buf, len, true) };
        let id = ops.borrow_mut().add(op);
        let m = engine::provider::MultiRecv { len, min: self.min_multi_recv.get(), slice };
        match self.ep.recv_multi(src, m, id) {
            Ok(()) => 0,
            Err(e) => {
                ops.borrow_mut().cancel(id);
                post_err(e.errno)
            }
        }
    }

    /// Gives the engine the receive `op` describes: into `mem`, the program's memory, or else a
    /// buffer of its own of `op.len` bytes.
    fn post_recv(
        &self,
        op: Op,
        mem: Option<engine::provider::UserBuf>,
        src: fi_addr_t,
        tag: Option<(u64, u64)>,
    ) -> isize {
        let rx = self.rx.borrow();
        let Some(ops) = rx.as_ref() else { return -(abi::FI_ENOCQ as isize) };
        let len = op.len;
        let id = ops.borrow_mut().add(op);
        let r = match (mem, tag) {
            (Some(mem), tag) => self.ep.recv_into(mem, src, tag, id),
            (None, None) => self.ep.recv(len, src, id),
            (None, Some((t, ignore))) => self.ep.trecv(len, src, t, ignore, id),
        };
        match r {
            Ok(()) => 0,
            Err(e) => {
                ops.borrow_mut().cancel(id);
                post_err(e.errno)
            }
        }
    }
}

unsafe extern "C" fn send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let args = SendArgs { dest, tag: None, data: None, inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_send(3)), as `with` and
    // `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, context)) }
}

unsafe extern "C" fn sendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    let args = SendArgs { dest, tag: None, data: None, inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider), and each iovec's
    // buffer holds its bytes during the call (fi_sendv(3)), as `with` and `gather` require.
    unsafe { with(ep, |e| e.send(gather(iov).as_deref(), args, context)) }
}

unsafe extern "C" fn sendmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg` (fi_sendmsg(3)); `as_ref` answers `None` for
    // null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !TX_MSG_FLAGS != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's `msg_iov` holds `iov_count` iovecs (the `*msg` call's contract), as
    // `iovs` requires.
    let Some(iov) = (unsafe { iovs(m.msg_iov, m.iov_count) }) else { return EINVAL as isize };
    let data = (flags & u64::from(abi::FI_REMOTE_CQ_DATA) != 0).then_some(m.data);
    let args = SendArgs { dest: m.addr, tag: None, data, inject: flags & u64::from(abi::FI_INJECT) != 0 };
    // SAFETY: `ep` is this op's, and each of the message's iovecs holds its bytes during the call,
    // as `with` and `gather` require.
    unsafe { with(ep, |e| e.send(gather(iov).as_deref(), args, m.context)) }
}

unsafe extern "C" fn inject(ep: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    let args = SendArgs { dest, tag: None, data: None, inject: true };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, core::ptr::null_mut())) }
}

unsafe extern "C" fn senddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    context: *mut c_void,
) -> isize {
    let args = SendArgs { dest, tag: None, data: Some(data), inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, context)) }
}

unsafe extern "C" fn injectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
) -> isize {
    let args = SendArgs { dest, tag: None, data: Some(data), inject: true };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, core::ptr::null_mut())) }
}

unsafe extern "C" fn recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: fi_recv(3): `ep` is null or a live endpoint of this provider (this op's), and `buf`
    // holds `len` writable bytes that are the provider's until the receive completes; `Ep::recv`
    // checks a null buffer with bytes.
    unsafe { with(ep, |e| e.recv(buf, len, src, None, context)) }
}

unsafe extern "C" fn recvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_recvv(3): `ep` is this op's (null or a live endpoint of this provider), and the
    // iovecs' buffers are the provider's until the receive completes; `recv_iov` checks null ones.
    unsafe { with(ep, |e| e.recv_iov(iov, src, None, context)) }
}

unsafe extern "C" fn recvmsg(ep: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg` (fi_recvmsg(3)); `as_ref` answers `None` for
    // null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !u64::from(abi::FI_COMPLETION | abi::FI_MULTI_RECV) != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's `msg_iov` holds `iov_count` iovecs (the `*msg` call's contract), as
    // `iovs` requires.
    let Some(iov) = (unsafe { iovs(m.msg_iov, m.iov_count) }) else { return EINVAL as isize };
    if flags & u64::from(abi::FI_MULTI_RECV) != 0 {
        // One buffer, with bytes.
        let Some((b, l)) = crate::endpoint::one_iov(iov).filter(|&(b, l)| !b.is_null() && l > 0) else {
            return EINVAL as isize;
        };
        // SAFETY: fi_recvmsg(3): `ep` is this op's, and the buffer (`l` bytes at `b`, neither null
        // nor empty) is the provider's until its last completion is read.
        return unsafe { with(ep, |e| e.recv_multi(b.cast(), l, m.addr, m.context)) };
    }
    // SAFETY: fi_recvmsg(3): `ep` is this op's, and the message's buffers are the provider's until
    // the receive completes; `recv_iov` checks null ones.
    unsafe { with(ep, |e| e.recv_iov(iov, m.addr, None, m.context)) }
}

unsafe extern "C" fn tsend(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let args = SendArgs { dest, tag: Some(tag), data: None, inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, context)) }
}

unsafe extern "C" fn tsendv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    let args = SendArgs { dest, tag: Some(tag), data: None, inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider), and each iovec's
    // buffer holds its bytes during the call (fi_tsendv(3)), as `with` and `gather` require.
    unsafe { with(ep, |e| e.send(gather(iov).as_deref(), args, context)) }
}

unsafe extern "C" fn tsendmsg(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_tagged` (fi_tsendmsg(3)); `as_ref` answers
    // `None` for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !TX_MSG_FLAGS != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's `msg_iov` holds `iov_count` iovecs (the `*msg` call's contract), as
    // `iovs` requires.
    let Some(iov) = (unsafe { iovs(m.msg_iov, m.iov_count) }) else { return EINVAL as isize };
    let data = (flags & u64::from(abi::FI_REMOTE_CQ_DATA) != 0).then_some(m.data);
    let args =
        SendArgs { dest: m.addr, tag: Some(m.tag), data, inject: flags & u64::from(abi::FI_INJECT) != 0 };
    // SAFETY: `ep` is this op's, and each of the message's iovecs holds its bytes during the call,
    // as `with` and `gather` require.
    unsafe { with(ep, |e| e.send(gather(iov).as_deref(), args, m.context)) }
}

unsafe extern "C" fn tinject(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    let args = SendArgs { dest, tag: Some(tag), data: None, inject: true };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, core::ptr::null_mut())) }
}

unsafe extern "C" fn tsenddata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let args = SendArgs { dest, tag: Some(tag), data: Some(data), inject: false };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, context)) }
}

unsafe extern "C" fn tinjectdata(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    let args = SendArgs { dest, tag: Some(tag), data: Some(data), inject: true };
    // SAFETY: `ep` is this op's (null or a live endpoint of this provider, reached through its ops
    // table), and `buf` holds `len` readable bytes during the call (fi_msg(3), fi_tagged(3)), as
    // `with` and `bytes` require.
    unsafe { with(ep, |e| e.send(bytes(buf, len), args, core::ptr::null_mut())) }
}

unsafe extern "C" fn trecv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: fi_trecv(3): `ep` is null or a live endpoint of this provider (this op's), and `buf`
    // holds `len` writable bytes that are the provider's until the receive completes; `Ep::recv`
    // checks a null buffer with bytes.
    unsafe { with(ep, |e| e.recv(buf, len, src, Some((tag, ignore)), context)) }
}

unsafe extern "C" fn trecvv(
    ep: *mut fid_ep,
    iov: *const iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: `iov` holds `count` iovecs (the vector call's contract), as `iovs` requires.
    let Some(iov) = (unsafe { iovs(iov, count) }) else { return EINVAL as isize };
    // SAFETY: fi_trecvv(3): `ep` is this op's (null or a live endpoint of this provider), and the
    // iovecs' buffers are the provider's until the receive completes; `recv_iov` checks null ones.
    unsafe { with(ep, |e| e.recv_iov(iov, src, Some((tag, ignore)), context)) }
}

unsafe extern "C" fn trecvmsg(ep: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: `msg` is null or the caller's `fi_msg_tagged` (fi_trecvmsg(3)); `as_ref` answers
    // `None` for null.
    let Some(m) = (unsafe { msg.as_ref() }) else { return EINVAL as isize };
    if flags & !u64::from(abi::FI_COMPLETION) != 0 {
        return -(abi::FI_EBADFLAGS as isize);
    }
    // SAFETY: the message's `msg_iov` holds `iov_count` iovecs (the `*msg` call's contract), as
    // `iovs` requires.
    let Some(iov) = (unsafe { iovs(m.msg_iov, m.iov_count) }) else { return EINVAL as isize };
    // SAFETY: fi_trecvmsg(3): `ep` is this op's, and the message's buffers are the provider's until
    // the receive completes; `recv_iov` checks null ones.
    unsafe { with(ep, |e| e.recv_iov(iov, m.addr, Some((m.tag, m.ignore)), m.context)) }
}
