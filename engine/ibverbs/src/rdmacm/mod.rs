//! librdmacm's ABI (rdma-core 44, Debian 12's `librdmacm1`): the `rdma_*` functions, over the
//! engine's connection manager ([`engine::verbs::Context`]'s `cm_*` calls; the CM protocol runs on
//! QP1 of the same device as the QPs).
//!
//! Programs reach it as they reach the verbs (`softrdma run` preloads this library, whose
//! unversioned `rdma_*` definitions take the place of librdmacm's). IDs use the process's first
//! device ([`crate::device::open_first`]); the context is shared with the program's own
//! `ibv_open_device` of it, so `id->verbs`, `id->pd` and the program's objects all belong to one
//! context. Every object here starts with rdma-core's structure (`struct rdma_cm_id`,
//! `struct rdma_event_channel`, `struct rdma_cm_event`), so the pointers programs hold are these
//! objects.
//!
//! Any thread may call on any ID, as with librdmacm: each ID has a lock that every call on it
//! holds (a synchronous call lets it go while it waits for its event), and a table of the live
//! IDs shares each with the calls and the events using it, so a call racing `rdma_destroy_id`
//! answers `EINVAL` instead of touching freed memory. `rdma_destroy_id` returns once the program
//! has acknowledged the ID's events (a connect request counts against its listener), as
//! librdmacm's does.
//!
//! Not supported, answered as librdmacm answers for a device without them: multicast
//! (`rdma_join_multicast*`: `ENOSYS`), IB-native addressing (`AF_IB`), alternate paths, ECE (a
//! local ECE is taken and not sent; the remote one reads as none).

pub(crate) mod addrinfo;
mod channel;
mod conn;
mod id;
mod objects;
mod sockaddr;
mod srq_ece;
