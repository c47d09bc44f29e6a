//! `fi_fabric` and `fi_domain` with the domain's operation tables: the fabric object only names
//! the UDP fabric; a domain (`domain.rs`) opens the engine's fabric on the host address of the
//! offer (its source address, else [`crate::config`]), publishing its counters for `softrdma
//! stat`, and holds the profile the program chose.

use core::ffi::{c_int, c_void};
use std::net::Ipv4Addr;

use engine::provider::{self, ControlPlane, FiErrno, FiError, ProviderConfig, UetAddr};

use crate::abi::{
    self, fi_fabric_attr, fi_info, fi_ops, fi_ops_domain, fi_ops_fabric, fi_ops_mr, fid, fid_domain,
    fid_fabric,
};
use crate::domain;
use crate::info::{Asked, asked, offers};
use crate::util::{EINVAL, ENOSYS, cstr, fail, neg};

/// A fabric: `fid_fabric` first, as libfabric sees it.
#[repr(C)]
pub(crate) struct Fabric {
    fid: fid_fabric,
}

static FABRIC_FI_OPS: fi_ops = crate::util::fid_ops(close, None, None);

static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: size_of::<fi_ops_fabric>(),
    domain: Some(open_domain),
    passive_ep: Some(no_passive_ep),
    eq_open: Some(crate::eq::open),
    wait_open: Some(no_wait),
    trywait: Some(no_trywait),
    domain2: None,
};

/// The provider's `fabric`: a fabric object for the fabric `attr` names (one per profile:
/// [`crate::info::fabric_name`]).
///
/// # Safety
/// libfabric's contract: `attr` valid, `fabric` valid for a write.
pub(crate) unsafe extern "C" fn open(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` is null or the `fi_fabric_attr` of an `fi_info` this provider gave out
    // (fi_fabric(3)); `as_ref` answers `None` for null.
    let Some(attr) = (unsafe { attr.as_ref() }) else { return EINVAL };
    if fabric.is_null() {
        return EINVAL;
    }
    // SAFETY: `attr.name` is null or the NUL-terminated fabric name of the caller's attributes
    // (fi_fabric(3)), as `cstr` requires.
    if unsafe { cstr(attr.name) }.is_some_and(|n| crate::info::profile_named(n).is_none()) {
        return neg(FiErrno::ENODATA);
    }
    let f = Box::new(Fabric {
        fid: fid_fabric {
            fid: fid {
                fclass: abi::FI_CLASS_FABRIC as usize,
                context,
                ops: (&raw const FABRIC_FI_OPS).cast_mut(),
            },
            ops: (&raw const FABRIC_OPS).cast_mut(),
            api_version: crate::util::API_VERSION,
        },
    });
    // SAFETY: `fabric`, not null (checked), is the caller's writable `struct fid_fabric **` out
    // parameter.
    unsafe { *fabric = &raw mut Box::leak(f).fid };
    0
}

unsafe extern "C" fn close(f: *mut fid) -> c_int {
    if f.is_null() {
        return EINVAL;
    }
    // SAFETY: `f` is the fid of a Fabric of `open` (first member of it), closed once.
    drop(unsafe { Box::from_raw(f.cast::<Fabric>()) });
    0
}

unsafe extern "C" fn no_passive_ep(
    _: *mut fid_fabric,
    _: *mut fi_info,
    _: *mut *mut abi::fid_pep,
    _: *mut c_void,
) -> c_int {
    ENOSYS
}

unsafe extern "C" fn no_wait(
    _: *mut fid_fabric,
    _: *mut abi::fi_wait_attr,
    _: *mut *mut abi::fid_wait,
) -> c_int {
    ENOSYS
}

unsafe extern "C" fn no_trywait(_: *mut fid_fabric, _: *mut *mut fid, _: c_int) -> c_int {
    ENOSYS
}

/// What a domain opens from `info`: the engine offer for its profile and endpoint type, and the
/// host address (the source address of the offer, else the environment's).
///
/// # Safety
/// `info` valid, its attribute pointers null or valid.
unsafe fn domain_setup(info: &fi_info) -> Result<(crate::info::Offer, Ipv4Addr, ControlPlane), c_int> {
    let config = ProviderConfig::from_env()
        .map_err(|e| fail(&FiError::new(FiErrno::EINVAL, format!("configuration refused: {e}")), true))?;
    // The offer this info describes, as its hints would ask for it; its fabric and address format
    // were checked when `fi_getinfo` gave it out.
    // SAFETY: `info` valid with its attribute pointers null or valid, per the contract.
    // The domain name is the interface, checked when `fi_getinfo` gave it out.
    let asked = Asked { domain: None, addr_format: abi::FI_FORMAT_UNSPEC, ..unsafe { asked(info) } };
    let offer = offers(&asked, &config).map_err(|e| fail(&e, false))?.remove(0);
    let ip = if info.src_addr.is_null() {
        crate::config::local_ip().map_err(|why| fail(&FiError::new(FiErrno::EADDRNOTAVAIL, why), true))?
    } else {
        // SAFETY: `src_addrlen` bytes at `src_addr`, per the contract.
        let b = unsafe { core::slice::from_raw_parts(info.src_addr.cast::<u8>(), info.src_addrlen) };
        UetAddr::from_bytes(b).map_err(|e| fail(&e, false))?.ip
    };
    let control =
        crate::config::control_plane().map_err(|why| fail(&FiError::new(FiErrno::EINVAL, why), true))?;
    Ok((offer, ip, control))
}

static DOMAIN_FI_OPS: fi_ops = crate::util::fid_ops(domain::close_domain, None, None);

static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: size_of::<fi_ops_domain>(),
    av_open: Some(domain::av_open),
    cq_open: Some(crate::cq::open),
    endpoint: Some(crate::ep::open),
    scalable_ep: Some(domain::no_ep),
    cntr_open: Some(crate::cntr::open),
    poll_open: Some(domain::no_poll),
    stx_ctx: Some(domain::no_stx),
    srx_ctx: Some(domain::no_srx),
    query_atomic: Some(crate::atomic::query_atomic),
    query_collective: None,
    endpoint2: None,
};

static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: size_of::<fi_ops_mr>(),
    reg: Some(crate::mr::mr_reg),
    regv: Some(crate::mr::mr_regv),
    regattr: Some(crate::mr::mr_regattr),
};

/// `fi_domain`: the engine's fabric on the offer's host address.
///
/// # Safety
/// libfabric's contract: `fabric` an object of this provider, `info` valid, `domain` valid for a
/// write.
unsafe extern "C" fn open_domain(
    fabric: *mut fid_fabric,
    info: *mut fi_info,
    domain: *mut *mut fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `info` is null or an `fi_info` this provider gave out (fi_domain(3)); `as_ref`
    // answers `None` for null.
    let Some(info) = (unsafe { info.as_ref() }) else { return EINVAL };
    if fabric.is_null() || domain.is_null() {
        return EINVAL;
    }
    // SAFETY: `info` is an `fi_info` this provider gave out, whose attribute pointers are null or
    // point at the attributes `build` made (or the program edited, as fi_domain(3) allows), as
    // `domain_setup` requires.
    let (offer, ip, control) = match unsafe { domain_setup(info) } {
        Ok(s) => s,
        Err(e) => return e,
    };
    let engine_fabric = match crate::config::backend(ip) {
        Ok(None) => provider::Fabric::open_udp(ip, control),
        Ok(Some(dev)) => provider::Fabric::open_afxdp(&dev, ip, control),
        Err(why) => return fail(&FiError::new(FiErrno::EINVAL, why), true),
    };
    // `softrdma stat` shows the domain's endpoints (softrdma-stat's publisher).
    engine_fabric.set_stat_sink(softrdma_stat::provider::sink());
    let engine_domain = engine_fabric.domain(&offer.info, crate::config::PROCESS);
    let d = Box::new(domain::Domain {
        fid: fid_domain {
            fid: fid {
                fclass: abi::FI_CLASS_DOMAIN as usize,
                context,
                ops: (&raw const DOMAIN_FI_OPS).cast_mut(),
            },
            ops: (&raw const DOMAIN_OPS).cast_mut(),
            mr: (&raw const MR_OPS).cast_mut(),
        },
        fabric: engine_fabric,
        domain: engine_domain,
        info: offer.info,
        caps: offer.caps,
        mr_mode: offer.mr_mode,
    });
    // SAFETY: `domain`, not null (checked), is the caller's writable `struct fid_domain **` out
    // parameter.
    unsafe { *domain = &raw mut Box::leak(d).fid };
    0
}
