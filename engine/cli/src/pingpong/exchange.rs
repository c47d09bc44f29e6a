//! The tools' TCP exchange: addresses both ways, then the QP connected to the peer's.

use super::side::{Dest, MSG_LEN, Options, Side, UD_QKEY, err};
use crate::oob;
use engine::verbs::{Access, AddressVector, Context, QpAttr, QpState, QpType};
use std::io::Write;
use std::net::IpAddr;

/// The TCP exchange of the tools: addresses both ways, then the QP connected to the peer's.
pub(super) fn exchange(o: &Options) -> Result<(Side, Dest, Dest), String> {
    let (mut tcp, local) = oob::meet(o.server.as_deref(), o.port, o.local)?;
    tcp.set_nonblocking(false).map_err(err)?;
    let mut side = Side::open(o, local)?;
    let (ctx, qp) = (&mut side.ctx, side.qp);
    let init = match o.qp_type {
        QpType::Ud => QpAttr { qkey: Some(UD_QKEY), ..QpAttr::default() },
        _ => QpAttr { qp_access_flags: Some(Access::NONE), ..QpAttr::default() },
    };
    ctx.modify_qp(qp, QpState::Init, &init).map_err(err)?;
    let me = Dest { lid: 0, qpn: qp.qpn(), psn: oob::random_psn(), gid: local.to_ipv6_mapped() };
    // Receives first, as the tools do, so nothing the peer sends meets an empty queue.
    for _ in 0..o.rx_depth {
        side.recv()?;
    }
    let (ctx, qp) = (&mut side.ctx, side.qp);
    // Fixed-size messages (no unbounded read), each within the exchange timeout: a silent peer
    // gets a clear error, not a hang.
    let patience = oob::exchange_timeout();
    tcp.set_write_timeout(Some(patience)).map_err(err)?;
    let mut msg = [0u8; MSG_LEN];
    let malformed =
        |who: &str, m: &[u8]| format!("the {who} sent a malformed address {:?}", String::from_utf8_lossy(m));
    let peer = if o.server.is_some() {
        tcp.write_all(&me.to_wire()).map_err(err)?;
        oob::read_exact_within(&mut tcp, &mut msg, patience, "the server's address")?;
        tcp.write_all(b"done\0").map_err(err)?;
        let peer = Dest::from_wire(&msg).ok_or_else(|| malformed("server", &msg))?;
        connect(ctx, qp, o, &me, &peer)?;
        peer
    } else {
        oob::read_exact_within(&mut tcp, &mut msg, patience, "the client's address")?;
        let peer = Dest::from_wire(&msg).ok_or_else(|| malformed("client", &msg))?;
        connect(ctx, qp, o, &me, &peer)?;
        tcp.write_all(&me.to_wire()).map_err(err)?;
        let mut done = [0u8; 5];
        oob::read_exact_within(&mut tcp, &mut done, patience, "the client's done")?;
        if !is_done(&done) {
            return Err(format!(
                "the client sent {:?} where \"done\" was expected",
                String::from_utf8_lossy(&done)
            ));
        }
        peer
    };
    Ok((side, me, peer))
}

fn connect(
    ctx: &mut Context,
    qp: engine::verbs::Qp,
    o: &Options,
    me: &Dest,
    peer: &Dest,
) -> Result<(), String> {
    if o.qp_type == QpType::Ud {
        ctx.modify_qp(qp, QpState::Rtr, &QpAttr::default()).map_err(err)?;
        return ctx
            .modify_qp(qp, QpState::Rts, &QpAttr { sq_psn: Some(me.psn), ..QpAttr::default() })
            .map_err(err);
    }
    let mut av = AddressVector::new(IpAddr::V6(peer.gid));
    av.hop_limit = 1;
    let rc = o.qp_type == QpType::Rc;
    let rtr = QpAttr {
        ah_attr: Some(av),
        path_mtu: Some(o.mtu),
        dest_qp_num: Some(peer.qpn),
        rq_psn: Some(peer.psn),
        max_dest_rd_atomic: rc.then_some(1),
        min_rnr_timer: rc.then_some(12),
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rtr, &rtr).map_err(err)?;
    let rts = QpAttr {
        sq_psn: Some(me.psn),
        timeout: rc.then_some(o.timeout),
        retry_cnt: rc.then_some(7),
        rnr_retry: rc.then_some(7),
        max_rd_atomic: rc.then_some(1),
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rts, &rts).map_err(err)
}

/// Whether `m` is the client's closing `"done"` (NUL-ended as `sizeof "done"` sends it).
pub fn is_done(m: &[u8]) -> bool {
    m.starts_with(b"done") && m[4..].iter().all(|&b| b == 0)
}
