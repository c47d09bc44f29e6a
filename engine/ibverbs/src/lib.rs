//! A libibverbs- and librdmacm-compatible library over the softrdma engine: unmodified programs
//! built against rdma-core 44 (Debian 12's `libibverbs1` and `librdmacm1`) run over softrdma's
//! datapaths with no RDMA device and no kernel module. The `rdma_*` functions are in `rdmacm`'s
//! modules (the connection manager runs on QP1 of the same device); what follows is about the
//! verbs.
//!
//! **How a program reaches it.** `softrdma run -- PROGRAM` puts this library in `LD_PRELOAD`. It
//! defines, unversioned, every public `ibv_*` function that takes or returns a device object;
//! a versioned reference of the program (`ibv_open_device@IBVERBS_1.1`) binds to an unversioned
//! definition of a preloaded object, so the program's calls land here, and the stock
//! `libibverbs.so.1` the program links stays loaded but is never asked for a device. The pure
//! helpers that touch no device object (`ibv_wc_status_str` and the other `*_str`,
//! `ibv_rate_to_mult`, the `ibv_copy_*_kern` converters, `ibv_fork_init`) are left to the stock
//! library. The data path of libibverbs is inline functions calling through the context's ops
//! table and `struct verbs_context`: the objects here are laid out as rdma-core 44's
//! ([`abi`], generated from its headers, with compile-time size and offset checks).
//!
//! **What a device is.** `config` reads the environment: one device per interface
//! (`softrdma_<iface>`), over the kernel's UDP sockets or AF_XDP. A context is an
//! [`engine::verbs::Device`]: any verb from any thread, the calling thread driving the engine while
//! it polls, a progress thread when it sleeps or computes. GIDs 0 and 1 are both the
//! interface's IPv4-mapped RoCEv2 GID (rxe's index 1; its index 0, the IPv6 link-local GID, has no
//! datapath here, and UCX refuses a port whose GID 0 is empty). Under `softrdma run` the device
//! also shows in `/dev/infiniband` and `/sys/class/infiniband` ([`sysfs`] describes the files, the
//! tool lays them out in the program's mount namespace), and `ibv_device`'s `dev_path` and
//! `ibdev_path` point there.
//!
//! **What answers "not supported".** Extended verbs the device does not have are absent from its
//! `verbs_context` (so the inline wrappers answer `EOPNOTSUPP`/`ENOSYS` and programs fall back,
//! as with any device without them); exported verbs it does not have (memory windows, multicast,
//! XRC, flows, device memory, ECE, import) answer as rdma-core's
//! defaults do for a provider without them: `EOPNOTSUPP`, or `NULL` with `errno` set.
//!
//! Every function is `unsafe extern "C"`: the caller promises what libibverbs' callers promise
//! (valid pointers to objects of this library, to live attribute structures, to memory it
//! registered). What a misbehaving caller can be checked for (null pointers, bad handles, wrong
//! states, SGEs outside its regions, full queues, objects still in use) is answered with
//! libibverbs' error conventions, never a crash.

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
pub mod cm_abi;
mod config;
mod cq;
mod cq_ex;
mod device;
mod errno;
mod handles;
mod mem;
mod qp;
mod qp_ex;
mod rdmacm;
mod srq_ah;
mod stat;
pub mod sysfs;
mod unsupported;
mod wr;
