//! `fi_mr_reg` and its forms, `fi_mr_bind` and `fi_mr_enable`: memory registrations, local or
//! exposed to peers.

use core::ffi::{c_int, c_void};
use std::cell::RefCell;

use engine::provider::{self, DomainKey};

use crate::abi::{self, fi_ops, fid, fid_mr};
use crate::domain::domain_of;
use crate::util::{EINVAL, ENOSYS};

/// A memory registration. Local access needs none (FI_MR_LOCAL is never required; a program that
/// passes descriptors anyway may), so a local registration only names a buffer. Remote access
/// (FI_REMOTE_READ / FI_REMOTE_WRITE) exposes the program's own memory to peers, who then read,
/// write and apply atomics to it in place:
///
/// - **FI_MR_ENDPOINT** (as UET binds regions): the program binds the region to an endpoint
///   (`fi_mr_bind`) and enables it (`fi_mr_enable`), which registers it there under the requested
///   key (an RKEY in bits 0-46 plus the IDEMPOTENT_SAFE and OPTIMIZED flags, `ses::key`); `addr`
///   is an offset into it.
/// - **Otherwise** the region is the domain's: registered at once on every endpoint of the
///   domain, and on those it opens later (`engine::provider::Domain::mr_reg_domain`). Its key is
///   the provider's with FI_MR_PROV_KEY (`fi_mr_key` gives it), else the requested one; `addr` is
///   the buffer's virtual address with FI_MR_VIRT_ADDR, else an offset.
#[repr(C)]
struct Mr {
    fid: fid_mr,
    buf: *mut u8,
    len: usize,
    access: provider::MrAccess,
    /// `fi_mr_regattr`'s `auth_key_size`: 0 exposes the region to any JobID, otherwise to the
    /// endpoint's own (the JobID comes from the control plane, never from the program).
    auth: provider::MrAuth,
    domain: provider::Domain,
    /// The endpoint it is bound to, until the registration is enabled with FI_MR_ENDPOINT (the region then names it
    /// weakly, so a closed endpoint does not live on through an open MR).
    ep: RefCell<Option<provider::Endpoint>>,
    region: RefCell<Option<provider::MemoryRegion>>,
    /// The domain's registration (no FI_MR_ENDPOINT).
    shared: Option<provider::DomainRegion>,
}

static MR_FI_OPS: fi_ops = crate::util::fid_ops(close_mr, Some(bind_mr), Some(control_mr));

/// What `fi_mr_reg*` asks for.
struct MrArgs {
    buf: *mut u8,
    len: usize,
    access: u64,
    key: u64,
    auth_key_size: usize,
    context: *mut c_void,
}

/// Registers `a` on the domain `domain`.
///
/// # Safety
/// libfabric's contract: `domain` a domain of this provider, `mr` valid for a write, `a.buf`
/// holding `a.len` bytes (for remote access, until the registration is closed).
unsafe fn register(domain: *mut fid, a: MrArgs, flags: u64, mr: *mut *mut fid_mr) -> c_int {
    // SAFETY: `domain` is null or a live domain of this provider: the registration calls reach
    // `register` only through the ops table `fi_domain` filled.
    let (Some(d), false) = (unsafe { domain_of(domain.cast()) }, mr.is_null()) else { return EINVAL };
    if (a.buf.is_null() && a.len > 0) || flags != 0 {
        return EINVAL;
    }
    let remote = u64::from(abi::FI_REMOTE_READ | abi::FI_REMOTE_WRITE);
    if a.access & remote != 0 && d.caps & u64::from(abi::FI_RMA | abi::FI_ATOMIC) == 0 {
        // The domain's profile or endpoint type has no RMA (FI_EP_DGRAM).
        return -(abi::FI_EOPNOTSUPP as c_int);
    }
    let prov_key = d.mr_mode & abi::FI_MR_PROV_KEY != 0;
    // Checked here, though with FI_MR_ENDPOINT the key is registered only by `fi_mr_enable`.
    if !prov_key && ses::key::check_user_key(a.key).is_err() {
        return -(abi::FI_EKEYREJECTED as c_int);
    }
    let access = provider::MrAccess {
        remote_read: a.access & u64::from(abi::FI_REMOTE_READ) != 0,
        remote_write: a.access & u64::from(abi::FI_REMOTE_WRITE) != 0,
    };
    let auth = if a.auth_key_size == 0 { provider::MrAuth::Any } else { provider::MrAuth::Endpoint };
    let mut key = a.key;
    let shared = if d.mr_mode & abi::FI_MR_ENDPOINT == 0 && a.access & remote != 0 {
        if auth != provider::MrAuth::Any {
            // A domain region has no endpoint whose JobID it could be bound to.
            return EINVAL;
        }
        let (buf, len) = (a.buf as usize, a.len);
        // SAFETY: fi_mr_reg's contract: the bytes stay valid until the registration is closed,
        // which deregisters every view first; the program does not touch bytes an operation in
        // flight uses.
        let view = move || unsafe { provider::UserBuf::new(buf as *mut u8, len) };
        let base = if d.mr_mode & abi::FI_MR_VIRT_ADDR != 0 { buf as u64 } else { 0 };
        let which = if prov_key { DomainKey::Provider } else { DomainKey::User(a.key) };
        match d.domain.mr_reg_domain(view, access, which, base) {
            Ok(r) => {
                key = r.key();
                Some(r)
            }
            Err(e) if e.errno == provider::FiErrno::EBUSY => return -(abi::FI_ENOKEY as c_int),
            Err(e) => return crate::util::neg(e.errno),
        }
    } else {
        None
    };
    let m = Box::new(Mr {
        fid: fid_mr {
            fid: fid {
                fclass: abi::FI_CLASS_MR as usize,
                context: a.context,
                ops: (&raw const MR_FI_OPS).cast_mut(),
            },
            mem_desc: a.buf.cast(),
            key,
        },
        buf: a.buf,
        len: a.len,
        access,
        auth,
        domain: d.domain.clone(),
        ep: RefCell::new(None),
        region: RefCell::new(None),
        shared,
    });
    // SAFETY: `mr`, not null (checked), is the caller's writable `struct fid_mr **` out parameter
    // (fi_mr_reg(3)).
    unsafe { *mr = &raw mut Box::leak(m).fid };
    0
}

pub(crate) unsafe extern "C" fn mr_reg(
    domain: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    _offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    let a = MrArgs { buf: buf.cast_mut().cast(), len, access, key: requested_key, auth_key_size: 0, context };
    // SAFETY: fi_mr_reg(3): `domain` is this op's, `mr` null or writable, and `a` names the
    // caller's `len` bytes at `buf`, which stay registered until `fi_close`.
    unsafe { register(domain, a, flags, mr) }
}

pub(crate) unsafe extern "C" fn mr_regv(
    domain: *mut fid,
    iov: *const abi::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    if count != 1 || iov.is_null() {
        return EINVAL;
    }
    // SAFETY: the count is 1 and the pointer not null (checked), and the caller's array holds that
    // many iovecs (fi_mr_regv(3), fi_mr_regattr(3)).
    let v = unsafe { &*iov };
    // SAFETY: fi_mr_regv(3)'s arguments, passed on: the one iovec (checked: `count == 1`, not null)
    // names the caller's bytes.
    unsafe { mr_reg(domain, v.iov_base, v.iov_len, access, offset, requested_key, flags, mr, context) }
}

pub(crate) unsafe extern "C" fn mr_regattr(
    domain: *mut fid,
    attr: *const abi::fi_mr_attr,
    flags: u64,
    mr: *mut *mut fid_mr,
) -> c_int {
    // SAFETY: `attr` is null or the caller's `fi_mr_attr` (fi_mr_regattr(3)); `as_ref` answers
    // `None` for null.
    let Some(a) = (unsafe { attr.as_ref() }) else { return EINVAL };
    if a.iov_count != 1 || a.mr_iov.is_null() || a.iface != abi::FI_HMEM_SYSTEM {
        return EINVAL;
    }
    // SAFETY: the count is 1 and the pointer not null (checked), and the caller's array holds that
    // many iovecs (fi_mr_regv(3), fi_mr_regattr(3)).
    let v = unsafe { &*a.mr_iov };
    let args = MrArgs {
        buf: v.iov_base.cast(),
        len: v.iov_len,
        access: a.access,
        key: a.requested_key,
        auth_key_size: a.auth_key_size,
        context: a.context,
    };
    // SAFETY: fi_mr_regattr(3): `domain` is this op's, `mr` null or writable, and `args` names the
    // bytes of the attributes' one iovec (checked).
    unsafe { register(domain, args, flags, mr) }
}

/// The [`Mr`] of a fid of class FI_CLASS_MR of this provider.
///
/// # Safety
/// `f` is null or the fid of an [`Mr`].
unsafe fn mr_of<'a>(f: *mut fid) -> Option<&'a Mr> {
    // SAFETY: `fid` is the first member of `fid_mr`, the first of `Mr`.
    unsafe { f.cast::<Mr>().as_ref() }
}

/// `fi_mr_bind` to an endpoint (before `fi_mr_enable`).
unsafe extern "C" fn bind_mr(f: *mut fid, bfid: *mut fid, _flags: u64) -> c_int {
    // SAFETY: `f` is the fid of a live MR `register` made (libfabric reaches this op only through
    // its ops table); `bfid` is null or an object the program opened (fi_mr_bind(3)), whose `fid`
    // header `as_ref` reads.
    let (Some(m), Some(b)) = (unsafe { mr_of(f) }, unsafe { bfid.as_ref() }) else { return EINVAL };
    if b.fclass as u32 != abi::FI_CLASS_EP || m.region.borrow().is_some() {
        return EINVAL;
    }
    if m.shared.is_some() {
        // The domain's region serves the endpoint already.
        return 0;
    }
    // SAFETY: `bfid`'s class is FI_CLASS_EP (checked), and fi_mr_bind(3) binds objects of the
    // MR's own domain, so it is a live endpoint this provider opened.
    let Some(e) = (unsafe { crate::endpoint::ep_of(bfid.cast()) }) else { return EINVAL };
    *m.ep.borrow_mut() = Some(e.ep.clone());
    0
}

/// `fi_mr_enable` (FI_ENABLE): a region with remote access goes live on its endpoint. A key
/// already registered there answers -FI_ENOKEY, as libfabric documents.
unsafe extern "C" fn control_mr(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: `f` is the fid of a live MR `register` made: libfabric reaches this op only through
    // its ops table.
    let Some(m) = (unsafe { mr_of(f) }) else { return EINVAL };
    if command as u32 != abi::FI_ENABLE {
        return ENOSYS;
    }
    if !m.access.remote_read && !m.access.remote_write {
        // Local access only: nothing for peers to see.
        return 0;
    }
    if m.region.borrow().is_some() || m.shared.is_some() {
        return 0;
    }
    let Some(ep) = m.ep.borrow().clone() else { return EINVAL };
    // SAFETY: fi_mr_reg's contract: the bytes stay valid until the registration is closed,
    // which deregisters them first; the program does not touch bytes an operation in flight uses.
    let Some(mem) = (unsafe { provider::UserBuf::new(m.buf, m.len) }) else { return EINVAL };
    let mem = provider::UserMem(mem);
    // SAFETY: `fid` is the first member of the `fid_mr` this `Mr` starts with.
    let key = unsafe { (*f.cast::<fid_mr>()).key };
    match m.domain.mr_reg(&ep, mem, m.access, key & ses::key::RKEY_MASK, key & !ses::key::RKEY_MASK, m.auth) {
        Ok(r) => {
            *m.region.borrow_mut() = Some(r);
            // The region names its endpoint weakly; holding it on would keep a closed endpoint,
            // its socket and the receives posted on it (the program's buffers) alive for as long
            // as this MR stays open.
            m.ep.borrow_mut().take();
            0
        }
        Err(e) if e.errno == provider::FiErrno::EBUSY => -(abi::FI_ENOKEY as c_int),
        Err(e) => crate::util::neg(e.errno),
    }
}

unsafe extern "C" fn close_mr(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: the fid of an Mr of `register`, closed once.
    let m = unsafe { Box::from_raw(f.cast::<Mr>()) };
    if let Some(r) = m.region.borrow_mut().take() {
        r.close();
    }
    0
}
