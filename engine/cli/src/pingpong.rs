//! `softrdma pingpong {rc|uc|ud}`: wire- and exchange-compatible with rdma-core's `ibv_rc_pingpong`,
//! `ibv_uc_pingpong` and `ibv_ud_pingpong` (libibverbs/examples), so either side can be the stock tool.
//!
//! The exchange: TCP to port 18515; each side sends `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, and the GID as
//! 32 hex digits in byte order) plus a NUL, 52 bytes; the client then sends `"done"` and a NUL. The
//! server connects its QP before it answers, the client after. Then each side keeps `rx_depth` receives
//! posted on one buffer and sends its next message once its previous send completed and a message
//! arrived; the client sends first. With `-c` each side checks what the tools check of every
//! receive: the first byte of each 4 KiB page is the zero the client put there. RC: RTR with
//! max_dest_rd_atomic 1 and min_rnr_timer 12, RTS with timeout 14, retry_cnt 7, rnr_retry 7; UD:
//! Q_Key 0x11111111 and a 40-byte GRH area in receive buffers.

use crate::oob;
use crate::perf::remote::{Net, open_context};
use engine::verbs::{
    Access, AddressVector, Context, Mtu, QpAttr, QpCap, QpInitAttr, QpState, QpType, RecvWr, SendFlags,
    SendWr, Sge, UdDest, WcStatus, WrOpcode,
};
use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

/// The Q_Key the rdma-core UD example uses.
pub const UD_QKEY: u32 = 0x1111_1111;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// Length of the address message (`"%04x:%06x:%06x:%s"` with a 32-digit GID, NUL-ended).
pub const MSG_LEN: usize = 52;
/// How long a side keeps answering after its last completion: eight ACK timeouts of 67 ms, the
/// tools' retry count plus one.
const LINGER: Duration = Duration::from_millis(540);
/// The page size of the tools' `-c` check.
const PAGE: usize = 4096;

/// Options, named as the rdma-core tools name them.
#[derive(Debug, Clone)]
pub struct Options {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Server address (client role), or `None` (server role).
    pub server: Option<String>,
    /// TCP port (`-p`).
    pub port: u16,
    /// This side's address (the client connects from it, the server listens on it); default: any,
    /// and the exchange connection's local address becomes the GID.
    pub local: Option<std::net::Ipv4Addr>,
    /// Message size (`-s`).
    pub size: usize,
    /// Path MTU (`-m`).
    pub mtu: Mtu,
    /// Receives kept posted (`-r`).
    pub rx_depth: u32,
    /// Iterations (`-n`).
    pub iters: u64,
    /// Local ACK timeout exponent of RC (4.096 us x 2^timeout; the tools use 14, 67 ms). A side
    /// whose last message's ACK is lost retransmits after it, and the stock tools tear their QP down
    /// right after their last completion: a shorter timeout lets that retransmission arrive in time.
    pub timeout: u8,
    /// Validate received buffers (`-c`): the client zeroes the first byte of every 4 KiB page of its
    /// buffer before its first send, and every receive must carry those zeros.
    pub chk: bool,
    /// Datapath and egress faults (the UDP backend trusts received ICRCs by default: rxe sends IP
    /// IDs a socket cannot see).
    pub net: Net,
}

/// A peer's address as the tools exchange it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// GID.
    pub gid: Ipv6Addr,
}

impl Dest {
    /// The 52-byte message.
    pub fn to_wire(&self) -> [u8; MSG_LEN] {
        let gid: String = self.gid.octets().iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn, self.psn);
        let mut out = [0u8; MSG_LEN];
        out[..text.len().min(MSG_LEN - 1)].copy_from_slice(&text.as_bytes()[..text.len().min(MSG_LEN - 1)]);
        out
    }

    /// Parses a 52-byte message.
    pub fn from_wire(b: &[u8]) -> Option<Dest> {
        let text = std::str::from_utf8(b.split(|&c| c == 0).next()?).ok()?;
        let mut f = text.split(':');
        let lid = u16::from_str_radix(f.next()?, 16).ok()?;
        let qpn = u32::from_str_radix(f.next()?, 16).ok()?;
        let psn = u32::from_str_radix(f.next()?, 16).ok()?;
        let g = f.next()?;
        if g.len() != 32 || f.next().is_some() || qpn > 0xFF_FFFF || psn > 0xFF_FFFF {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(g.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Dest { lid, qpn, psn, gid: Ipv6Addr::from(bytes) })
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Bytes moved both ways.
    pub bytes: u64,
    /// Iterations.
    pub iters: u64,
    /// Wall-clock time of the ping-pong.
    pub elapsed: Duration,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs one side; returns what it did, or why it failed.
pub fn run(o: &Options) -> Result<Outcome, String> {
    let (mut tcp, local) = oob::meet(o.server.as_deref(), o.port, o.local)?;
    tcp.set_nonblocking(false).map_err(err)?;
    let link = o.net.link(local, o.port);
    let (mut ctx, _) = open_context(&link, o.mtu).map_err(|e| e.0)?;
    let pd = ctx.alloc_pd();
    let grh = if o.qp_type == QpType::Ud { 40 } else { 0 };
    let buf_len = o.size + grh;
    let mr = ctx.reg_mr(pd, buf_len.max(1), Access::LOCAL_WRITE).map_err(err)?;
    // The tools fill their buffer with 0x7b; with -c the client zeroes each page's first byte.
    let buf = ctx.mr_bytes_mut(&mr).map_err(err)?;
    buf.fill(0x7b);
    if o.chk && o.server.is_some() {
        buf[..o.size].iter_mut().step_by(PAGE).for_each(|b| *b = 0);
    }
    let cq = ctx.create_cq(o.rx_depth as usize + 1).map_err(err)?;
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: o.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qp = ctx.create_qp(pd, &QpInitAttr { qp_type: o.qp_type, cap, ..QpInitAttr::rc(cq) }).map_err(err)?;
    let init = match o.qp_type {
        QpType::Ud => QpAttr { qkey: Some(UD_QKEY), ..QpAttr::default() },
        _ => QpAttr { qp_access_flags: Some(Access::NONE), ..QpAttr::default() },
    };
    ctx.modify_qp(qp, QpState::Init, &init).map_err(err)?;
    let me = Dest { lid: 0, qpn: qp.qpn(), psn: oob::random_psn(), gid: local.to_ipv6_mapped() };
    // Receives first, as the tools do, so nothing the peer sends meets an empty queue.
    let recv = |ctx: &mut Context| -> Result<(), String> {
        let sge = Sge { addr: mr.addr, length: buf_len as u32, lkey: mr.lkey };
        ctx.post_recv(qp, &[RecvWr { wr_id: RECV_WRID, sg_list: vec![sge] }]).map_err(|(_, e)| err(e))
    };
    for _ in 0..o.rx_depth {
        recv(&mut ctx)?;
    }
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
        connect(&mut ctx, qp, o, &me, &peer)?;
        peer
    } else {
        oob::read_exact_within(&mut tcp, &mut msg, patience, "the client's address")?;
        let peer = Dest::from_wire(&msg).ok_or_else(|| malformed("client", &msg))?;
        connect(&mut ctx, qp, o, &me, &peer)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_message_matches_rdma_core() {
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xABCDE, gid: "::ffff:10.77.0.2".parse().unwrap() };
        let w = d.to_wire();
        assert_eq!(&w[..51], b"0000:000011:0abcde:00000000000000000000ffff0a4d0002");
        assert_eq!(w[51], 0);
        assert_eq!(Dest::from_wire(&w), Some(d));
        assert_eq!(Dest::from_wire(b"0000:zz0011:0abcde:00000000000000000000ffff0a4d0002\0"), None);
        assert_eq!(Dest::from_wire(b"0000:000011:0abcde:0000\0"), None);
    }
}
