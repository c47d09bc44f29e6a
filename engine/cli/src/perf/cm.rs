//! `perf --cm`: the lanes' QPs are connected by the connection manager (REQ / REP / RTU on QP1, in
//! rdma_cm's TCP port space on the exchange's port number, as `perftest -R` does) instead of by
//! the QP numbers and PSNs of the JSON exchange, which still carries the test and each lane's
//! R_Key and address. The client connects the lanes one after another, each once the last is
//! established, so the server accepts them in lane order. The connection manager sets every QP
//! attribute: PSNs, path MTU (the smaller of the two ports'), READ and atomic limits, retries.

use super::hello::RemoteError;
use crate::cm::{wait, wait_for};
use engine::verbs::{CmChannel, CmEventKind, CmId, ConnParam, Context, Mtu, PortSpace, Qp};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// What both sides ask for: perftest's READ/atomic depth, and every retry.
fn param() -> ConnParam {
    ConnParam {
        responder_resources: 16,
        initiator_depth: 16,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

fn err(e: impl std::fmt::Display) -> RemoteError {
    RemoteError(format!("connection manager: {e}"))
}

/// The server's listening ID, created before it answers the client's hello so that the client's
/// first REQ finds it.
pub(super) struct Listener {
    ch: CmChannel,
    id: CmId,
    /// Connections established so far (their RTU arrived).
    established: usize,
}

/// Listens on `local`:`port` for `lanes` connections.
pub(super) fn listen(
    ctx: &mut Context,
    local: Ipv4Addr,
    port: u16,
    lanes: usize,
) -> Result<Listener, RemoteError> {
    let ch = ctx.cm_create_channel().map_err(err)?;
    let id = ctx.cm_create_id(ch, PortSpace::Tcp).map_err(err)?;
    ctx.cm_bind(id, SocketAddr::new(IpAddr::V4(local), port)).map_err(err)?;
    ctx.cm_listen(id, lanes).map_err(err)?;
    Ok(Listener { ch, id, established: 0 })
}

/// Server: the next lane's connection request; `qp` is attached to it (in INIT, so its receives
/// can be posted before [`accept`]).
pub(super) fn request(ctx: &mut Context, l: &mut Listener, qp: Qp) -> Result<CmId, RemoteError> {
    let mut established = 0;
    let req =
        wait_for(ctx, l.ch, CmEventKind::ConnectRequest, &[CmEventKind::Established], |_| established += 1)
            .map_err(err)?;
    l.established += established;
    ctx.cm_attach_qp(req.id, qp).map_err(err)?;
    Ok(req.id)
}

/// Server: accepts a request (REP).
pub(super) fn accept(ctx: &mut Context, id: CmId) -> Result<(), RemoteError> {
    ctx.cm_accept(id, &param()).map_err(err)
}

/// Server: waits until the connections of all `qps` are established, stops listening, and checks
/// their path MTU is the test's `mtu`.
pub(super) fn established(
    ctx: &mut Context,
    mut l: Listener,
    qps: &[Qp],
    mtu: Mtu,
) -> Result<(), RemoteError> {
    while l.established < qps.len() {
        wait(ctx, l.ch, CmEventKind::Established).map_err(err)?;
        l.established += 1;
    }
    ctx.cm_destroy_id(l.id).map_err(err)?;
    qps.iter().try_for_each(|&qp| check_mtu(ctx, qp, mtu))
}

/// Client: connects each of `qps` to the server at `server`, one after another, from `local`, with
/// type of service `tos` (the server's QPs take it from the REQ, as rdma_cm's do), and checks their
/// path MTU is the test's `mtu`.
pub(super) fn connect(
    ctx: &mut Context,
    local: Ipv4Addr,
    server: SocketAddr,
    qps: &[Qp],
    mtu: Mtu,
    tos: u8,
) -> Result<(), RemoteError> {
    let ch = ctx.cm_create_channel().map_err(err)?;
    for &qp in qps {
        let id = ctx.cm_create_id(ch, PortSpace::Tcp).map_err(err)?;
        ctx.cm_set_tos(id, tos).map_err(err)?;
        ctx.cm_resolve_addr(id, Some(SocketAddr::new(IpAddr::V4(local), 0)), server).map_err(err)?;
        wait(ctx, ch, CmEventKind::AddrResolved).map_err(err)?;
        ctx.cm_resolve_route(id).map_err(err)?;
        wait(ctx, ch, CmEventKind::RouteResolved).map_err(err)?;
        ctx.cm_attach_qp(id, qp).map_err(err)?;
        ctx.cm_connect(id, &param()).map_err(err)?;
        wait(ctx, ch, CmEventKind::Established).map_err(err)?;
        check_mtu(ctx, qp, mtu)?;
    }
    Ok(())
}

/// The path MTU the connection manager gave `qp` is the test's (it is the smaller port MTU of the
/// two sides: a peer whose port carries less than `--mtu` gives less).
fn check_mtu(ctx: &mut Context, qp: Qp, want: Mtu) -> Result<(), RemoteError> {
    let (_, a) = ctx.query_qp(qp).map_err(err)?;
    match a.path_mtu {
        Some(m) if m != want => Err(RemoteError(format!(
            "--cm: the connection manager chose path MTU {} (the smaller port MTU of the two sides) and the \
             test asks for {}: run with --mtu {}",
            m.bytes(),
            want.bytes(),
            m.bytes()
        ))),
        _ => Ok(()),
    }
}
