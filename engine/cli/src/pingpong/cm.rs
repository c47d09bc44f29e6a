//! `--cm`: the QP is connected by the connection manager instead of the TCP exchange: the client
//! resolves the server, connects (REQ), and the server accepts (REP, RTU) on rdma_cm's TCP port
//! space and the same port number. The exchange sets every QP attribute (PSNs, MTU, READ limits,
//! retries), as librdmacm does for `rping`.

use super::side::{Dest, Options, Side, err};
use crate::cm::wait;
use crate::oob;
use engine::verbs::{CmEventKind, CmId, ConnParam, Context, PortSpace, QpType};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Connects this side's QP through the CM; returns the side and both addresses.
pub(super) fn connect(o: &Options) -> Result<(Side, Dest, Dest), String> {
    if o.qp_type == QpType::Ud {
        return Err("--cm connects RC and UC QPs (a UD ping-pong needs the tools' exchange)".into());
    }
    let server = match &o.server {
        Some(host) => Some(
            (host.as_str(), o.port)
                .to_socket_addrs()
                .map_err(|e| format!("resolving {host}: {e}"))?
                .find(SocketAddr::is_ipv4)
                .ok_or_else(|| format!("{host} has no IPv4 address"))?,
        ),
        None => None,
    };
    let local = match (o.local, server) {
        (Some(ip), _) => ip,
        (None, Some(s)) => match s.ip() {
            IpAddr::V4(ip) => oob::route_source(ip)?,
            IpAddr::V6(_) => return Err(format!("{s} is not IPv4")),
        },
        (None, None) => {
            return Err("--cm: the server needs --local (there is no exchange to learn it from)".into());
        }
    };
    let mut side = Side::open(o, local)?;
    let qp = side.qp;
    let ch = side.ctx.cm_create_channel().map_err(err)?;
    let param = ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    let id = match server {
        Some(s) => {
            let id = side.ctx.cm_create_id(ch, PortSpace::Tcp).map_err(err)?;
            let src = SocketAddr::new(IpAddr::V4(local), 0);
            side.ctx.cm_resolve_addr(id, Some(src), s).map_err(err)?;
            wait(&mut side.ctx, ch, CmEventKind::AddrResolved)?;
            side.ctx.cm_resolve_route(id).map_err(err)?;
            wait(&mut side.ctx, ch, CmEventKind::RouteResolved)?;
            side.ctx.cm_attach_qp(id, qp).map_err(err)?;
            post_receives(&mut side, o)?;
            side.ctx.cm_connect(id, &param).map_err(err)?;
            wait(&mut side.ctx, ch, CmEventKind::Established)?;
            id
        }
        None => {
            let listen = side.ctx.cm_create_id(ch, PortSpace::Tcp).map_err(err)?;
            side.ctx.cm_bind(listen, SocketAddr::new(IpAddr::V4(local), o.port)).map_err(err)?;
            side.ctx.cm_listen(listen, 1).map_err(err)?;
            let req = wait(&mut side.ctx, ch, CmEventKind::ConnectRequest)?;
            side.ctx.cm_attach_qp(req.id, qp).map_err(err)?;
            post_receives(&mut side, o)?;
            side.ctx.cm_accept(req.id, &param).map_err(err)?;
            wait(&mut side.ctx, ch, CmEventKind::Established)?;
            side.ctx.cm_destroy_id(listen).map_err(err)?;
            req.id
        }
    };
    let (me, peer) = addresses(&mut side.ctx, id, local)?;
    Ok((side, me, peer))
}

fn post_receives(side: &mut Side, o: &Options) -> Result<(), String> {
    for _ in 0..o.rx_depth {
        side.recv()?;
    }
    Ok(())
}

/// Both sides' addresses as the tools print them, from the connected QP.
fn addresses(ctx: &mut Context, id: CmId, local: Ipv4Addr) -> Result<(Dest, Dest), String> {
    let qp = ctx.cm_qp(id).map_err(err)?.ok_or("the connection has no QP")?;
    let (_, a) = ctx.query_qp(qp).map_err(err)?;
    let peer_ip = ctx.cm_addrs(id).map_err(err)?.1.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |s| s.ip());
    let v6 = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let me = Dest { lid: 0, qpn: qp.qpn(), psn: a.sq_psn.unwrap_or(0), gid: local.to_ipv6_mapped() };
    let peer = Dest { lid: 0, qpn: a.dest_qp_num.unwrap_or(0), psn: a.rq_psn.unwrap_or(0), gid: v6(peer_ip) };
    Ok((me, peer))
}
