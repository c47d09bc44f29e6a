//! `fi_domain` with its address vectors (memory registrations are in `mr`). A domain is the engine's
//! fabric on one host address and its domain for this process's profile.

use core::ffi::{c_char, c_int, c_void};

use engine::provider::{self, AddressVector, FI_ADDR_UNSPEC, UetAddr};

use crate::abi::{self, fi_av_attr, fi_info, fi_ops, fi_ops_av, fid, fid_av, fid_domain};
use crate::util::{EINVAL, ENOSYS};

/// A domain: `fid_domain` first.
#[repr(C)]
pub(crate) struct Domain {
    pub(crate) fid: fid_domain,
    /// The engine's fabric (kernel UDP on the domain's address).
    pub(crate) fabric: provider::Fabric,
    /// The engine's domain for this process.
    pub(crate) domain: provider::Domain,
    /// The offer the domain was opened for.
    pub(crate) info: provider::Info,
    /// Its libfabric capabilities.
    pub(crate) caps: u64,
    /// Its `mr_mode` (`crate::info::Asked::mr_mode`): FI_MR_ENDPOINT, or regions on the domain
    /// with FI_MR_PROV_KEY and FI_MR_VIRT_ADDR as the program took them.
    pub(crate) mr_mode: u32,
}

pub(crate) unsafe extern "C" fn close_domain(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: the fid of a Domain of `open`, closed once. Objects opened from it hold their own
    // references to the engine's objects.
    drop(unsafe { Box::from_raw(f.cast::<Domain>()) });
    0
}

/// The [`Domain`] of a `fid_domain` of this provider.
///
/// # Safety
/// `d` is null or a `fid_domain` of [`open`].
pub(crate) unsafe fn domain_of<'a>(d: *mut fid_domain) -> Option<&'a Domain> {
    // SAFETY: `fid_domain` is the first member of a `Domain`.
    unsafe { d.cast::<Domain>().as_ref() }
}

pub(crate) unsafe extern "C" fn no_ep(
    _: *mut fid_domain,
    _: *mut fi_info,
    _: *mut *mut abi::fid_ep,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

pub(crate) unsafe extern "C" fn no_poll(
    _: *mut fid_domain,
    _: *mut abi::fi_poll_attr,
    _: *mut *mut abi::fid_poll,
) -> c_int {
    ENOSYS
}

pub(crate) unsafe extern "C" fn no_stx(
    _: *mut fid_domain,
    _: *mut abi::fi_tx_attr,
    _: *mut *mut abi::fid_stx,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

pub(crate) unsafe extern "C" fn no_srx(
    _: *mut fid_domain,
    _: *mut abi::fi_rx_attr,
    _: *mut *mut abi::fid_ep,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

/// An address vector (FI_AV_TABLE): `fid_av` first.
#[repr(C)]
pub(crate) struct Av {
    fid: fid_av,
    pub(crate) av: AddressVector,
}

static AV_FI_OPS: fi_ops = crate::util::fid_ops(close_av, None, None);

static AV_OPS: fi_ops_av = fi_ops_av {
    size: size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: None,
};

pub(crate) unsafe extern "C" fn av_open(
    domain: *mut fid_domain,
    attr: *mut fi_av_attr,
    av: *mut *mut fid_av,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `domain` is null or a live domain of this provider: libfabric reaches this op only
    // through the ops table `fi_domain` filled.
    let (Some(d), false) = (unsafe { domain_of(domain) }, av.is_null()) else { return EINVAL };
    // SAFETY: `attr` is null or the caller's `fi_av_attr` (fi_av_open(3)); `as_ref` answers `None`
    // for null.
    if let Some(a) = unsafe { attr.as_ref() } {
        // TABLE, or UNSPEC / the deprecated MAP, which behave as TABLE (uet-libfabric.md).
        if !matches!(a.type_, abi::FI_AV_UNSPEC | abi::FI_AV_TABLE | abi::FI_AV_MAP) {
            return EINVAL;
        }
    }
    let b = Box::new(Av {
        fid: fid_av {
            fid: fid { fclass: abi::FI_CLASS_AV as usize, context, ops: (&raw const AV_FI_OPS).cast_mut() },
            ops: (&raw const AV_OPS).cast_mut(),
        },
        av: d.domain.av_open(),
    });
    // libfabric 1.17 has no fi_av_insert_auth_key: every JobID the control plane assigned to this
    // process is served by the endpoints bound to the AV (the first is their own, for sends).
    let jobs = d.fabric.control().jobs_of(crate::config::PROCESS).to_vec();
    for j in jobs.into_iter().skip(1) {
        if let Err(e) = b.av.insert_auth_key(j) {
            drop(b);
            return crate::util::neg(e.errno);
        }
    }
    // SAFETY: `av`, not null (checked), is the caller's writable `struct fid_av **` out parameter
    // (fi_av_open(3)).
    unsafe { *av = &raw mut Box::leak(b).fid };
    0
}

unsafe extern "C" fn close_av(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: libfabric calls this close op only through the `fid` of an AV `av_open` leaked from a
    // Box (the `fid_av` and its `fid` first in the `repr(C)` `Av`), once: fi_close(3) ends the
    // object.
    drop(unsafe { Box::from_raw(f.cast::<Av>()) });
    0
}

/// The [`Av`] of a `fid` of this provider's class FI_CLASS_AV.
///
/// # Safety
/// `f` is null or the fid of an [`Av`].
pub(crate) unsafe fn av_of<'a>(f: *mut fid) -> Option<&'a Av> {
    // SAFETY: `fid` is the first member of `fid_av`, the first of `Av`.
    unsafe { f.cast::<Av>().as_ref() }
}

/// `fi_av_insert`: `count` addresses of [`UetAddr::LEN`] bytes each; returns how many were
/// inserted, an address it cannot read getting FI_ADDR_NOTAVAIL in `fi_addr`.
unsafe extern "C" fn av_insert(
    av: *mut fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut abi::fi_addr_t,
    _flags: u64,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: `av` is null or a live AV this provider opened: libfabric reaches this op only
    // through its ops table.
    let Some(a) = (unsafe { av_of(av.cast()) }) else { return EINVAL };
    if addr.is_null() && count > 0 {
        return EINVAL;
    }
    let mut inserted = 0;
    for i in 0..count {
        // SAFETY: `count` addresses of the provider's format at `addr`.
        let b = unsafe { core::slice::from_raw_parts(addr.cast::<u8>().add(i * UetAddr::LEN), UetAddr::LEN) };
        let got = match UetAddr::from_bytes(b) {
            Ok(u) => {
                inserted += 1;
                a.av.insert(&[u])[0]
            }
            Err(_) => FI_ADDR_UNSPEC,
        };
        if !fi_addr.is_null() {
            // SAFETY: `fi_addr`, not null (checked), holds `count` writable entries
            // (fi_av_insert(3)), and `i < count`.
            unsafe { *fi_addr.add(i) = got };
        }
    }
    inserted
}

unsafe extern "C" fn av_insertsvc(
    _: *mut fid_av,
    _: *const c_char,
    _: *const c_char,
    _: *mut abi::fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> c_int {
    // A UET address needs the peer's PIDonFEP and resource index, which only fi_getname gives.
    ENOSYS
}

unsafe extern "C" fn av_insertsym(
    _: *mut fid_av,
    _: *const c_char,
    _: usize,
    _: *const c_char,
    _: usize,
    _: *mut abi::fi_addr_t,
    _: u64,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

/// `fi_av_remove`: the `count` addresses at `fi_addr` name nobody from now on; the other
/// indices keep theirs (`engine::provider::AddressVector::remove`).
unsafe extern "C" fn av_remove(
    av: *mut fid_av,
    fi_addr: *mut abi::fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    // SAFETY: libfabric's contract.
    let Some(a) = (unsafe { av_of(av.cast()) }) else { return EINVAL };
    if flags != 0 || (fi_addr.is_null() && count > 0) {
        return EINVAL;
    }
    let addrs = match count {
        0 => &[][..],
        // SAFETY: `fi_addr`, not null (checked), is the caller's array of `count` addresses
        // (fi_av_remove(3)), read for the call only.
        _ => unsafe { core::slice::from_raw_parts(fi_addr, count) },
    };
    match a.av.remove(addrs) {
        Ok(()) => 0,
        Err(e) => crate::util::neg(e.errno),
    }
}

unsafe extern "C" fn av_lookup(
    av: *mut fid_av,
    fi_addr: abi::fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: `av` is null or a live AV this provider opened: libfabric reaches this op only
    // through its ops table.
    let (Some(a), false) = (unsafe { av_of(av.cast()) }, addrlen.is_null()) else { return EINVAL };
    let Some(u) = a.av.lookup(fi_addr) else { return -(abi::FI_ENOENT as c_int) };
    // SAFETY: `addrlen` valid; `addr` holds `*addrlen` bytes.
    unsafe { crate::util::give_bytes(&u.to_bytes(), addr, addrlen) }
}

unsafe extern "C" fn av_straddr(
    _av: *mut fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    if addr.is_null() || buf.is_null() || len.is_null() {
        return buf;
    }
    // SAFETY: an address of the provider's format at `addr`.
    let b = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), UetAddr::LEN) };
    let s = match UetAddr::from_bytes(b) {
        Ok(u) => format!("uet://{}/{}/{}/{}", u.ip, u.pid_on_fep, u.resource_index, u.initiator),
        Err(_) => "uet://invalid".to_string(),
    };
    // SAFETY: `buf` holds `*len` bytes; the needed length (with the NUL) goes back in `*len`.
    unsafe {
        let room = *len;
        if room > 0 {
            let n = s.len().min(room - 1);
            core::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
        *len = s.len() + 1;
    }
    buf
}
