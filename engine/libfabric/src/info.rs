//! `fi_getinfo`: the provider's offers (one per UET profile and endpoint type) narrowed by the
//! application's hints, as `fi_info` lists libfabric frees with `fi_freeinfo` (every part from
//! `calloc`/`malloc`/`strdup`).
//!
//! **One interface, one NIC.** Each profile is a fabric of its own (`fabric_attr->name`
//! `uet_hpc`, `uet_ai_full`, `uet_ai_base`, most capable first), and every offer's domain
//! (`domain_attr->name`) is the interface the provider runs on (`veth0`): a consumer that counts
//! the offers of one provider and fabric as its NICs (Open MPI's `mtl ofi` and `btl ofi`, which
//! spread ranks over "alike" offers) sees one NIC and takes HPC, on every rank. A program picks
//! another profile by naming its fabric in the hints (`hints->fabric_attr->name = "uet_ai_full"`,
//! `fi_info -f uet_ai_full`), or, when it cannot set hints (Open MPI), with `SOFTRDMA_PROFILE`
//! (`hpc`, `ai_full`, `ai_base`), which narrows every listing to that profile.

use core::ffi::{c_char, c_int};
use std::net::Ipv4Addr;

use engine::provider::{self, FiErrno, FiError, Hints, ProviderConfig, UetAddr};
use ses::{EpType, Profile};

use crate::abi::{self, fi_info};
use crate::util::{calloc, cstr, fail, memdup, neg, strdup};

/// The RMA and atomic capabilities (libfabric bits).
pub const RMA_CAPS: u64 = (abi::FI_RMA
    | abi::FI_ATOMIC
    | abi::FI_READ
    | abi::FI_WRITE
    | abi::FI_REMOTE_READ
    | abi::FI_REMOTE_WRITE) as u64;

/// The message orderings an ordered endpoint gives (UET's ROD: one PDC per peer, delivered and
/// executed in order, so every order between sends, reads, writes and atomics holds).
pub const ORDERS: u64 = abi::FI_ORDER_STRICT as u64
    | abi::FI_ORDER_RMA_RAR
    | abi::FI_ORDER_RMA_RAW
    | abi::FI_ORDER_RMA_WAR
    | abi::FI_ORDER_RMA_WAW
    | abi::FI_ORDER_ATOMIC_RAR
    | abi::FI_ORDER_ATOMIC_RAW
    | abi::FI_ORDER_ATOMIC_WAR
    | abi::FI_ORDER_ATOMIC_WAW;

/// Capabilities this library implements, by profile and endpoint type (libfabric bits).
pub fn caps_of(profile: Profile, ep_type: EpType) -> u64 {
    let msg = u64::from(abi::FI_MSG | abi::FI_SEND | abi::FI_RECV | abi::FI_MULTI_RECV)
        | abi::FI_LOCAL_COMM
        | abi::FI_REMOTE_COMM;
    let tagged = u64::from(abi::FI_TAGGED);
    let rdm = RMA_CAPS | abi::FI_DIRECTED_RECV;
    match (profile, ep_type) {
        (_, EpType::Dgram) => msg,
        (Profile::AiBase, EpType::Rdm) => msg | rdm,
        (Profile::AiFull | Profile::Hpc, EpType::Rdm) => msg | tagged | rdm,
    }
}

/// The fabric name of a profile (`fabric_attr->name`), which hints may ask for.
pub fn fabric_name(profile: Profile) -> &'static str {
    match profile {
        Profile::Hpc => "uet_hpc",
        Profile::AiFull => "uet_ai_full",
        Profile::AiBase => "uet_ai_base",
    }
}

/// The profile of a fabric name.
pub fn profile_named(name: &str) -> Option<Profile> {
    [Profile::Hpc, Profile::AiFull, Profile::AiBase].into_iter().find(|&p| fabric_name(p) == name)
}

/// The profile `SOFTRDMA_PROFILE` (`get`'s value) narrows the offers to, if any.
fn profile_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<Profile>, FiError> {
    match get("SOFTRDMA_PROFILE").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => profile_named(&format!("uet_{v}")).map(Some).ok_or_else(|| {
            FiError::new(FiErrno::ENODATA, format!("SOFTRDMA_PROFILE={v}: expected hpc, ai_full or ai_base"))
        }),
    }
}

/// What the hints ask for, read from the C structure.
#[derive(Debug, Default, Clone)]
pub struct Asked {
    /// Capabilities (libfabric bits).
    pub caps: u64,
    /// FI_EP_UNSPEC, FI_EP_RDM, ...
    pub ep_type: u32,
    /// A domain name (the interface).
    pub domain: Option<String>,
    /// A fabric name (a profile).
    pub fabric: Option<String>,
    /// Whether there were hints at all (without, every capability and order is listed).
    pub hinted: bool,
    /// The orderings asked for (`tx_attr->msg_order | rx_attr->msg_order`).
    pub msg_order: u64,
    /// An address format other than FI_FORMAT_UNSPEC.
    pub addr_format: u32,
    /// The memory registration modes the program supports (`domain_attr->mr_mode`), `None`
    /// without hints (any).
    pub mr_mode: Option<u32>,
    /// The traffic class asked for (`domain_attr->tclass`, else `tx_attr->tclass`; 0
    /// FI_TC_UNSPEC), as a DSCP by `engine::provider::tclass`.
    pub tclass: u32,
}

impl Asked {
    /// The registration modes the offer requires: FI_MR_ENDPOINT (the program's keys, offsets)
    /// when the program binds regions to endpoints, as UET binds them (and with no hints); else
    /// regions on the domain, with provider keys and virtual addresses if the program takes them.
    pub fn mr_mode(&self) -> u32 {
        match self.mr_mode {
            None => abi::FI_MR_ENDPOINT,
            Some(m) if m & abi::FI_MR_ENDPOINT != 0 => abi::FI_MR_ENDPOINT,
            Some(m) => m & (abi::FI_MR_PROV_KEY | abi::FI_MR_VIRT_ADDR),
        }
    }

    /// The orderings the offer gives: what was asked of [`ORDERS`], all of them without hints.
    pub fn orders(&self) -> u64 {
        if self.hinted { self.msg_order & ORDERS } else { ORDERS }
    }
}

/// One offer: the engine's [`provider::Info`] and the libfabric capabilities of it.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The engine's offer.
    pub info: provider::Info,
    /// libfabric capability bits.
    pub caps: u64,
    /// `domain_attr->mr_mode` ([`Asked::mr_mode`]) with RMA, else 0.
    pub mr_mode: u32,
    /// `msg_order` of the transmit and receive attributes ([`Asked::orders`]).
    pub msg_order: u64,
}

/// The offers matching `asked` under `config`, most capable first; FI_ENODATA when none.
pub fn offers(asked: &Asked, config: &ProviderConfig) -> Result<Vec<Offer>, FiError> {
    let none = |why: &str| Err(FiError::new(FiErrno::ENODATA, why.to_string()));
    let ep_type = match asked.ep_type {
        abi::FI_EP_UNSPEC => None,
        abi::FI_EP_RDM => Some(EpType::Rdm),
        abi::FI_EP_DGRAM => Some(EpType::Dgram),
        _ => return none("only FI_EP_RDM and FI_EP_DGRAM endpoints"),
    };
    if asked.addr_format != abi::FI_FORMAT_UNSPEC {
        return none("the address format is the provider's own (FI_FORMAT_UNSPEC)");
    }
    let profile = match asked.fabric.as_deref() {
        None => None,
        Some(f) => Some(profile_named(f).ok_or_else(|| FiError::new(FiErrno::ENODATA, "no such fabric"))?),
    };
    let only = profile_from(|k| std::env::var(k).ok())?;
    if profile.zip(only).is_some_and(|(p, o)| p != o) {
        return none("SOFTRDMA_PROFILE names another profile than the hints' fabric");
    }
    let hints = Hints { profile: profile.or(only), ep_type, ..Hints::default() };
    let tclass = provider::tclass::to_dscp(asked.tclass, config.def_data_tc)?;
    let out: Vec<Offer> = provider::getinfo(&hints, config)?
        .into_iter()
        .map(|info| {
            let info = provider::Info { tclass, ..info };
            let mut caps = caps_of(info.profile, info.ep_type);
            // A primary capability is listed only when asked for (or with no hints): a program
            // that did not ask for FI_DIRECTED_RECV may pass any source address to a receive.
            if asked.hinted && asked.caps & abi::FI_DIRECTED_RECV == 0 {
                caps &= !abi::FI_DIRECTED_RECV;
            }
            let mr_mode = if caps & RMA_CAPS != 0 { asked.mr_mode() } else { 0 };
            Offer { caps, mr_mode, msg_order: asked.orders(), info }
        })
        .filter(|o| o.caps & asked.caps == asked.caps)
        .collect();
    if out.is_empty() {
        return none("no profile offers the capabilities asked for");
    }
    Ok(out)
}

/// Reads the hints libfabric passes (null: none).
///
/// # Safety
/// `hints` is null or a valid `fi_info` whose attribute pointers are null or valid.
pub(crate) unsafe fn asked(hints: *const fi_info) -> Asked {
    // SAFETY: this function's contract: `hints` is null or a valid `fi_info`; `as_ref` answers
    // `None` for null.
    let Some(h) = (unsafe { hints.as_ref() }) else { return Asked::default() };
    let mut a = Asked { caps: h.caps, addr_format: h.addr_format, hinted: true, ..Asked::default() };
    // SAFETY: this function's contract: a valid `fi_info`'s attribute pointers are null or point at
    // their attribute structures; `as_ref` answers `None` for null.
    unsafe {
        if let Some(ep) = h.ep_attr.as_ref() {
            a.ep_type = ep.type_;
        }
        if let Some(tx) = h.tx_attr.as_ref() {
            a.tclass = tx.tclass;
            a.msg_order |= tx.msg_order;
        }
        if let Some(rx) = h.rx_attr.as_ref() {
            a.msg_order |= rx.msg_order;
        }
        if let Some(d) = h.domain_attr.as_ref() {
            a.domain = cstr(d.name).map(str::to_string);
            a.mr_mode = Some(d.mr_mode as u32);
            if d.tclass != 0 {
                a.tclass = d.tclass;
            }
        }
        if let Some(f) = h.fabric_attr.as_ref() {
            a.fabric = cstr(f.name).map(str::to_string);
        }
    }
    a
}

/// A source address naming only `ip` (what FI_SOURCE with a node asks for): the endpoint's full
/// address comes from `fi_getname` once it is open.
pub fn source_addr(ip: Ipv4Addr) -> [u8; UetAddr::LEN] {
    UetAddr { ip, pid_on_fep: 0, resource_index: 0, initiator: 0, profiles: 0b111 }.to_bytes()
}

/// One `fi_info` for `offer`, `src` its source address, `nic` the interface (the domain's name),
/// `payload` the bytes a packet carries on its link (`engine::provider::udp_max_payload`): the
/// largest inject, and the largest datagram message; null when out of memory.
fn build(offer: &Offer, src: Option<&[u8]>, nic: &str, payload: usize) -> *mut fi_info {
    let fi: *mut fi_info = calloc();
    if fi.is_null() {
        return fi;
    }
    // SAFETY: `fi` is a fresh zeroed allocation; so is every attribute structure checked below.
    unsafe {
        let f = &mut *fi;
        f.tx_attr = calloc();
        f.rx_attr = calloc();
        f.ep_attr = calloc();
        f.domain_attr = calloc();
        f.fabric_attr = calloc();
        if f.tx_attr.is_null()
            || f.rx_attr.is_null()
            || f.ep_attr.is_null()
            || f.domain_attr.is_null()
            || f.fabric_attr.is_null()
        {
            free_list(fi);
            return core::ptr::null_mut();
        }
        let (i, caps) = (&offer.info, offer.caps);
        let ordered = offer.msg_order;
        f.caps = caps;
        f.addr_format = abi::FI_FORMAT_UNSPEC;
        if let Some(src) = src {
            f.src_addr = memdup(src);
            f.src_addrlen = if f.src_addr.is_null() { 0 } else { src.len() };
        }
        let tx = &mut *f.tx_attr;
        tx.caps = caps;
        tx.msg_order = ordered;
        tx.inject_size = payload.min(i.limits.inject_size);
        tx.size = 1024;
        // Vector calls take this many buffers (atomics one `fi_ioc`: see `atomic`).
        tx.iov_limit = crate::endpoint::IOV_LIMIT;
        tx.rma_iov_limit = 1;
        tx.tclass = provider::tclass::of_dscp(i.tclass);
        let rx = &mut *f.rx_attr;
        rx.caps = caps;
        rx.msg_order = ordered;
        rx.size = 1024;
        rx.iov_limit = crate::endpoint::IOV_LIMIT;
        let ep = &mut *f.ep_attr;
        ep.type_ = if i.ep_type == EpType::Rdm { abi::FI_EP_RDM } else { abi::FI_EP_DGRAM };
        ep.protocol = abi::FI_PROTO_UNSPEC;
        ep.protocol_version = 1;
        // A datagram is one packet (UUD).
        ep.max_msg_size = if i.ep_type == EpType::Dgram { payload } else { i.limits.max_msg_size };
        ep.mem_tag_format = if caps & u64::from(abi::FI_TAGGED) != 0 { u64::MAX >> 1 } else { 0 };
        ep.tx_ctx_cnt = 1;
        ep.rx_ctx_cnt = 1;
        let d = &mut *f.domain_attr;
        d.name = strdup(nic);
        d.threading = abi::FI_THREAD_DOMAIN;
        d.control_progress = abi::FI_PROGRESS_MANUAL;
        d.data_progress = abi::FI_PROGRESS_MANUAL;
        d.resource_mgmt = abi::FI_RM_ENABLED;
        d.av_type = abi::FI_AV_TABLE;
        d.mr_mode = offer.mr_mode as i32;
        d.mr_key_size = 8;
        d.cq_data_size = 8;
        d.cq_cnt = 64;
        d.cntr_cnt = 64;
        // One endpoint per host address: UET's UDP port.
        d.ep_cnt = 1;
        d.tx_ctx_cnt = 1;
        d.rx_ctx_cnt = 1;
        d.max_ep_tx_ctx = 1;
        d.max_ep_rx_ctx = 1;
        d.mr_iov_limit = 1;
        d.caps = abi::FI_LOCAL_COMM | abi::FI_REMOTE_COMM;
        d.max_err_data = 0;
        d.tclass = provider::tclass::of_dscp(i.tclass);
        let fab = &mut *f.fabric_attr;
        fab.name = strdup(fabric_name(i.profile));
        // libfabric names the provider itself (it appends to a name given here).
        fab.prov_version = crate::util::PROVIDER_VERSION;
        fab.api_version = crate::util::API_VERSION;
        if d.name.is_null() || fab.name.is_null() {
            free_list(fi);
            return core::ptr::null_mut();
        }
    }
    fi
}

/// Frees a list built here (before libfabric took it).
///
/// # Safety
/// `fi` is null or a list of [`build`].
unsafe fn free_list(mut fi: *mut fi_info) {
    while !fi.is_null() {
        // SAFETY: every pointer is null or from calloc/malloc/strdup; free(NULL) is a no-op.
        unsafe {
            let f = &*fi;
            let next = f.next;
            if let Some(d) = f.domain_attr.as_ref() {
                libc::free(d.name.cast());
            }
            if let Some(fa) = f.fabric_attr.as_ref() {
                libc::free(fa.name.cast());
                libc::free(fa.prov_name.cast());
            }
            for p in [
                f.src_addr,
                f.dest_addr,
                f.tx_attr.cast(),
                f.rx_attr.cast(),
                f.ep_attr.cast(),
                f.domain_attr.cast(),
                f.fabric_attr.cast(),
            ] {
                libc::free(p);
            }
            libc::free(fi.cast());
            fi = next;
        }
    }
}

/// The `getinfo` of the provider: every offer matching `hints`, chained, in `*info`.
///
/// # Safety
/// libfabric's contract: `node` and `service` null or strings, `hints` null or a valid `fi_info`,
/// `info` valid for a write.
pub(crate) unsafe extern "C" fn getinfo(
    _version: u32,
    node: *const c_char,
    _service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    if info.is_null() {
        return neg(FiErrno::EINVAL);
    }
    // A configuration that cannot be read (a malformed variable, an unreadable service file) is
    // said on standard error: the program only sees that this provider offers nothing.
    let config = match ProviderConfig::from_env() {
        Ok(c) => c,
        Err(e) => return fail(&FiError::new(FiErrno::ENODATA, format!("configuration refused: {e}")), true),
    };
    // SAFETY: `hints` is null or the program's `fi_info` hints (fi_getinfo(3)), whose attribute
    // pointers are null or valid, as `asked` requires.
    let asked = unsafe { asked(hints) };
    let offers = match offers(&asked, &config) {
        Ok(o) => o,
        Err(e) => return fail(&e, false),
    };
    // A node with FI_SOURCE is this side's address.
    // SAFETY: `node` is null or a NUL-terminated string (fi_getinfo(3)), as `cstr` requires.
    let src = match (unsafe { cstr(node) }, flags & abi::FI_SOURCE != 0) {
        (Some(n), true) => match n.parse::<Ipv4Addr>() {
            Ok(ip) => Some(source_addr(ip)),
            Err(_) => {
                let e = FiError::new(FiErrno::ENODATA, format!("source node {n:?} is not an IPv4 address"));
                return fail(&e, false);
            }
        },
        _ => None,
    };
    // The link the offers will run on: the source node's, else the environment's address.
    let ip = src
        .as_ref()
        .and_then(|s| UetAddr::from_bytes(s).ok())
        .map(|a| a.ip)
        .or(crate::config::local_ip().ok());
    let payload = ip.map_or(provider::MAX_PAYLOAD, provider::udp_max_payload);
    // The domain is the interface (one NIC), which hints may name.
    let nic = ip.map_or_else(|| "none".to_string(), crate::config::interface_of);
    if asked.domain.as_deref().is_some_and(|d| d != nic) {
        return fail(&FiError::new(FiErrno::ENODATA, format!("no such domain (this one is {nic})")), false);
    }
    let mut head: *mut fi_info = core::ptr::null_mut();
    let mut tail: *mut *mut fi_info = &mut head;
    for o in &offers {
        let fi = build(o, src.as_ref().map(|s| &s[..]), &nic, payload);
        if fi.is_null() {
            // SAFETY: `head` is null or a list `build` made and linked here, not yet handed to the
            // caller, as `free_list` requires.
            unsafe { free_list(head) };
            return -(libc::ENOMEM);
        }
        // SAFETY: `tail` points at the last `next` (or `head`).
        unsafe {
            *tail = fi;
            tail = &mut (*fi).next;
        }
    }
    // SAFETY: `info`, not null (checked at the top), is the caller's writable `struct fi_info **`
    // out parameter (fi_getinfo(3)); the list becomes the caller's, freed by `fi_freeinfo`.
    unsafe { *info = head };
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tclass_asked_for_is_the_offers_dscp() {
        let c = ProviderConfig { def_data_tc: 12, ..ProviderConfig::default() };
        let dscp = |tclass| offers(&Asked { tclass, ..Asked::default() }, &c).map(|o| o[0].info.tclass);
        assert_eq!(dscp(abi::FI_TC_UNSPEC).unwrap(), 12);
        assert_eq!(dscp(abi::FI_TC_DSCP | 46).unwrap(), 46);
        assert_eq!(dscp(abi::FI_TC_BULK_DATA).unwrap(), 10);
        assert_eq!(dscp(abi::FI_TC_NETWORK_CTRL + 1).unwrap_err().errno, FiErrno::EINVAL);
        assert_eq!(provider::tclass::of_dscp(46), abi::FI_TC_DSCP | 46);
    }

    #[test]
    fn offers_by_profile_endpoint_type_and_caps() {
        let c = ProviderConfig::default();
        let all = offers(&Asked::default(), &c).unwrap();
        let names: Vec<_> = all.iter().map(|o| (fabric_name(o.info.profile), o.info.ep_type)).collect();
        assert_eq!(names.len(), 6);
        assert_eq!(names[0], ("uet_hpc", EpType::Rdm));
        let rdm = offers(&Asked { ep_type: abi::FI_EP_RDM, ..Asked::default() }, &c).unwrap();
        assert_eq!(rdm.len(), 3);
        let tagged = offers(&Asked { caps: u64::from(abi::FI_TAGGED), ..Asked::default() }, &c).unwrap();
        assert_eq!(
            tagged.iter().map(|o| o.info.profile).collect::<Vec<_>>(),
            [Profile::Hpc, Profile::AiFull]
        );
        let e = |a: Asked| offers(&a, &c).unwrap_err().errno;
        assert_eq!(e(Asked { ep_type: abi::FI_EP_MSG, ..Asked::default() }), FiErrno::ENODATA);
        assert_eq!(e(Asked { fabric: Some("uet_x".into()), ..Asked::default() }), FiErrno::ENODATA);
        let base =
            Asked { fabric: Some("uet_ai_base".into()), caps: u64::from(abi::FI_TAGGED), ..Asked::default() };
        assert_eq!(e(base), FiErrno::ENODATA);
        let full = offers(&Asked { fabric: Some("uet_ai_full".into()), ..Asked::default() }, &c).unwrap();
        assert!(full.iter().all(|o| o.info.profile == Profile::AiFull), "the fabric names the profile");
    }

    #[test]
    fn rma_with_or_without_regions_bound_to_endpoints() {
        let c = ProviderConfig::default();
        let rma = |mr_mode| Asked {
            caps: u64::from(abi::FI_RMA | abi::FI_ATOMIC),
            mr_mode,
            hinted: true,
            ..Asked::default()
        };
        let modes = |m| offers(&rma(Some(m)), &c).unwrap().iter().map(|o| o.mr_mode).collect::<Vec<_>>();
        let (prov, virt, alloc, local) =
            (abi::FI_MR_PROV_KEY, abi::FI_MR_VIRT_ADDR, abi::FI_MR_ALLOCATED, abi::FI_MR_LOCAL);
        assert_eq!(modes(abi::FI_MR_ENDPOINT | local), [abi::FI_MR_ENDPOINT; 3], "every RDM profile");
        // Open MPI's btl ofi: regions on the domain, provider keys, virtual addresses; ALLOCATED and
        // LOCAL are accepted, never required (the BTL refuses an offer that requires more).
        assert_eq!(modes(alloc | prov | virt), [prov | virt; 3]);
        assert_eq!(modes(local | alloc), [0; 3], "the program's keys, offsets");
        assert_eq!(modes(0), [0; 3]);
        let none = offers(&Asked { mr_mode: Some(0), ..Asked::default() }, &c).unwrap();
        assert!(none.iter().filter(|o| o.info.ep_type == EpType::Dgram).all(|o| o.caps & RMA_CAPS == 0));
    }

    #[test]
    fn directed_receives_and_orders_only_when_asked() {
        let c = ProviderConfig::default();
        let mpi = Asked {
            caps: u64::from(abi::FI_TAGGED) | abi::FI_DIRECTED_RECV,
            msg_order: u64::from(abi::FI_ORDER_SAS),
            hinted: true,
            ..Asked::default()
        };
        let o = offers(&mpi, &c).unwrap();
        assert!(o.iter().all(|o| o.caps & abi::FI_DIRECTED_RECV != 0 && o.msg_order == mpi.msg_order));
        let plain = Asked { caps: u64::from(abi::FI_MSG), hinted: true, ..Asked::default() };
        let o = offers(&plain, &c).unwrap();
        assert!(o.iter().all(|o| o.caps & abi::FI_DIRECTED_RECV == 0 && o.msg_order == 0), "unordered: RUD");
        let listed = offers(&Asked::default(), &c).unwrap();
        assert!(listed[0].caps & abi::FI_DIRECTED_RECV != 0 && listed[0].msg_order == ORDERS);
        let dgram = listed.iter().find(|o| o.info.ep_type == EpType::Dgram).unwrap();
        assert_eq!(dgram.caps & abi::FI_DIRECTED_RECV, 0, "UUD has no source matching here");
        assert_eq!(profile_from(|_| Some("ai_full".into())).unwrap(), Some(Profile::AiFull));
        assert_eq!(profile_from(|_| None).unwrap(), None);
        assert_eq!(profile_from(|_| Some("fast".into())).unwrap_err().errno, FiErrno::ENODATA);
    }

    #[test]
    fn built_lists_carry_every_attribute() {
        let c = ProviderConfig::default();
        let o = &offers(&Asked::default(), &c).unwrap()[0];
        let src = source_addr(Ipv4Addr::new(10, 1, 2, 3));
        let fi = build(o, Some(&src), "veth0", 1024);
        assert!(!fi.is_null());
        // SAFETY: `fi` is the non-null list `build` just made, whose attribute pointers are its own
        // allocations; it is read, then freed once by `free_list`.
        unsafe {
            let f = &*fi;
            assert_eq!((*f.ep_attr).type_, abi::FI_EP_RDM);
            assert_eq!(cstr((*f.domain_attr).name), Some("veth0"), "the domain is the interface");
            assert_eq!(cstr((*f.fabric_attr).name), Some("uet_hpc"), "the fabric is the profile");
            assert_eq!(f.src_addrlen, UetAddr::LEN);
            assert_eq!((*f.tx_attr).inject_size, 1024);
            let got = core::slice::from_raw_parts(f.src_addr.cast::<u8>(), f.src_addrlen);
            assert_eq!(UetAddr::from_bytes(got).unwrap().ip, Ipv4Addr::new(10, 1, 2, 3));
            free_list(fi);
        }
    }
}
