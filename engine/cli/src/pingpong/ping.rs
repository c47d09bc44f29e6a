//! The ping-pong, on a connected side: as the tools run it.

use super::side::{
    Dest, LINGER, Options, Outcome, PAGE, RECV_WRID, SEND_WRID, Side, UD_QKEY, err, post_recv,
};
use engine::verbs::{AddressVector, Context, QpType, SendFlags, SendWr, Sge, UdDest, WcStatus, WrOpcode};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The ping-pong itself, on a connected side.
pub(super) fn ping(o: &Options, side: Side, me: Dest, peer: Dest) -> Result<Outcome, String> {
    let Side { mut ctx, pd, cq, qp, mr, buf_len, grh } = side;
    let recv = |ctx: &mut Context| post_recv(ctx, qp, &mr, buf_len);
    let ah = if o.qp_type == QpType::Ud {
        Some(ctx.create_ah(pd, &AddressVector::new(IpAddr::V6(peer.gid))).map_err(err)?)
    } else {
        None
    };
    let send = |ctx: &mut Context| -> Result<(), String> {
        let sge = Sge { addr: mr.addr + grh as u64, length: o.size as u32, lkey: mr.lkey };
        let mut wr = SendWr::new(SEND_WRID, WrOpcode::Send, vec![sge]);
        wr.flags = SendFlags::SIGNALED;
        wr.ud = ah.map(|ah| UdDest { ah, remote_qpn: peer.qpn, remote_qkey: UD_QKEY });
        ctx.post_send(qp, &[wr]).map_err(|(_, e)| err(e))
    };
    let start = Instant::now();
    const STALL: Duration = Duration::from_secs(60);
    let mut pending = RECV_WRID;
    if o.server.is_some() {
        send(&mut ctx)?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt, mut routs) = (0u64, 0u64, u64::from(o.rx_depth));
    let mut wcs = Vec::new();
    // Give up when nothing completes and nothing arrives for STALL: a lossy link can take long
    // between completions while the peer retransmits, a dead peer sends nothing.
    let (mut last_progress, mut rx_seen) = (Instant::now(), 0u64);
    while rcnt < o.iters || scnt < o.iters {
        ctx.progress().map_err(err)?;
        wcs.clear();
        ctx.poll_cq(cq, &mut wcs, 16).map_err(err)?;
        let rx = ctx.stats().rx_frames;
        if !wcs.is_empty() || rx != rx_seen {
            (last_progress, rx_seen) = (Instant::now(), rx);
        } else if last_progress.elapsed() > STALL {
            return Err(format!(
                "nothing completed and nothing received for {} s ({rcnt} receives and {scnt} sends done)",
                STALL.as_secs()
            ));
        }
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                return Err(format!("failed status {:?} for wr_id {}", wc.status, wc.wr_id));
            }
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    if o.chk {
                        let buf = ctx.mr_bytes(&mr).map_err(err)?;
                        if let Some(page) = (0..o.size).step_by(PAGE).find(|&i| buf[i] != 0) {
                            return Err(format!(
                                "invalid data in page {} of receive {}",
                                page / PAGE,
                                rcnt + 1
                            ));
                        }
                    }
                    routs -= 1;
                    if routs <= 1 {
                        for _ in routs..u64::from(o.rx_depth) {
                            recv(&mut ctx)?;
                        }
                        routs = u64::from(o.rx_depth);
                    }
                    rcnt += 1;
                }
                id => return Err(format!("completion for unknown wr_id {id}")),
            }
            pending &= !wc.wr_id;
            if scnt < o.iters && pending == 0 {
                send(&mut ctx)?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let elapsed = start.elapsed();
    // Linger, answering the peer: on a lossy link our ACK of its last message may have been lost,
    // and the peer retransmits after its ACK timeout (67 ms at the tools' 14) until it gets one.
    let linger = Instant::now() + LINGER;
    while Instant::now() < linger {
        if ctx.progress().map_err(err)? == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    println!(
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        me.lid, me.qpn, me.psn, me.gid
    );
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        peer.lid, peer.qpn, peer.psn, peer.gid
    );
    Ok(Outcome { bytes: 2 * o.size as u64 * o.iters, iters: o.iters, elapsed })
}
