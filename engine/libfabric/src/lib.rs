#![doc = include_str!("../README.md")]
//!
//! # The library
//!
//! A libfabric external provider over softrdma's UET provider (`engine::provider`): stock
//! libfabric 1.17 (Debian 12's `libfabric1`) loads it as `libsoftrdma-fi.so` from
//! `FI_PROVIDER_PATH` (which `softrdma run` sets) and calls [`fi_prov_ini`]; from there programs
//! reach it through `fi_getinfo` and the ops tables of the objects it returns, as with any
//! provider. The provider is named `softrdma`.
//!
//! **What it offers.** `fi_getinfo` lists the three UET profiles, most capable first, each as a
//! fabric of its own (`uet_hpc`, `uet_ai_full`, `uet_ai_base`) whose one domain is the interface
//! the provider runs on (one interface, one NIC: see [`info`] for why, and how a program picks
//! another profile: hints' fabric name, or `SOFTRDMA_PROFILE`), on FI_EP_RDM and FI_EP_DGRAM,
//! with the capabilities this library implements: messages (FI_MSG) on every profile, tagged
//! messages (FI_TAGGED) on AI Full and HPC (wildcard receives on HPC only), and on RDM endpoints
//! receives matched by source (FI_DIRECTED_RECV, listed when asked for: a receive's `src_addr`
//! names the sender, FI_ADDR_UNSPEC anyone), RMA and atomics (FI_RMA, FI_ATOMIC) over the
//! program's own memory (regions bound to endpoints with FI_MR_ENDPOINT, as UET has them, or else
//! registered on the domain for all its endpoints, with FI_MR_PROV_KEY and FI_MR_VIRT_ADDR if the
//! program takes them: `mr`), the orderings of UET's ROD (any of FI_ORDER_SAS, RAR, RAW, WAR, WAW,
//! SAR, SAW, RAS, WAS and their RMA and atomic forms asked for in `msg_order` makes the endpoint
//! ordered: one ROD PDC per peer; none asked for, RUD), and `fi_av_remove` (the index names nobody
//! from then on; the others keep theirs). The fabric runs on one of the host's IPv4 addresses
//! ([`config`]) over kernel UDP (an endpoint is a socket on UET's port 4793) or AF_XDP (queue 0 of
//! the interface, UET's port steered to it).
//!
//! **What answers "not supported".** Operations a profile does not offer answer `-FI_ENOSYS`, as
//! libfabric's own `fi_no_*` defaults do for providers without them, and `fi_getinfo` does not
//! claim them; the objects a program cannot open here (passive endpoints, wait sets, poll sets,
//! scalable and shared contexts) likewise. What UET's mapping (`../shared/spec/uet-libfabric.md`)
//! excludes stays refused: FI_EP_MSG (UET has RDM over RUD/ROD/RUDI and DGRAM over UUD only);
//! ignore bits on AI Full's tagged receives (exact-match tags only, FI_EINVAL); RMA, atomics and
//! tagged messages on DGRAM endpoints (UUD carries DATAGRAM_SEND only); fetching atomics on more
//! than one element and compare operands above 16 bytes; RMA beyond 4 GiB - 1; JobIDs a program
//! names itself (they come from the control plane, `softrdma run`). One endpoint per host address
//! (`domain_attr->ep_cnt` 1): UET's port 4793 is one socket, so a second `fi_endpoint` on the
//! address answers -FI_EBUSY.
//!
//! **Threads.** FI_THREAD_DOMAIN: a program serializes its calls per domain (libfabric's
//! contract for that level); progress is manual (FI_PROGRESS_MANUAL): reading a completion queue
//! drives the endpoint, and `fi_cq_sread` sleeps on its socket between rounds.
//!
//! Every function is `unsafe extern "C"`: the caller promises what libfabric's callers promise
//! (pointers to objects of this provider, live attribute structures, buffers as long as they say).
//! What can be checked (null pointers, bad flags and sizes, unknown addresses) is answered with
//! libfabric's negative `FI_E*` returns, never a crash.

#![allow(unsafe_code)]
// The exported `extern "C"` functions are `pub` for the dynamic linker, not for Rust callers.
#![allow(unreachable_pub)]

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    unsafe_op_in_unsafe_fn
)]
pub mod abi;
mod atomic;
mod cntr;
pub mod config;
mod cq;
mod domain;
mod endpoint;
mod ep;
mod eq;
mod fabric;
pub mod info;
mod mr;
mod rma;
pub mod security;
mod unsupported;
mod util;

use abi::fi_provider;

use util::PROVIDER_VERSION;
pub use util::{API_VERSION, PROVIDER_NAME, fi_version};

/// The entry point libfabric calls after loading the library: the provider's description, in
/// memory that lives as long as the process (libfabric keeps its own state in `context`).
///
/// # Safety
/// Called by libfabric, no arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fi_prov_ini() -> *mut fi_provider {
    let p = Box::leak(Box::new(fi_provider {
        version: PROVIDER_VERSION,
        fi_version: API_VERSION,
        context: abi::fi_context { internal: [core::ptr::null_mut(); 4] },
        name: PROVIDER_NAME.as_ptr(),
        getinfo: Some(info::getinfo),
        fabric: Some(fabric::open),
        cleanup: Some(cleanup),
    }));
    // libfabric keeps `struct ofi_prov_context { enum type; bool disable_logging; bool
    // disable_layering; }` in `context` (include/ofi.h, the same from 1.17 to today) and sets
    // `disable_layering` itself for sockets, shm, efa and psm3: utility providers (ofi_rxd,
    // ofi_rxm) then do not stack on them unless a program names the pair. The same here: our
    // FI_EP_RDM is native, and `-p softrdma` must not get ofi_rxd over our FI_EP_DGRAM first.
    // SAFETY: `context` is 32 bytes of this allocation; byte 5 is `disable_layering`.
    unsafe { (&raw mut p.context).cast::<u8>().add(5).write(1) };
    p
}

/// Nothing is global: every object is freed by its own `fi_close`.
unsafe extern "C" fn cleanup() {}
