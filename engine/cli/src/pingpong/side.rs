//! What both ways of connecting and the ping-pong share: options, addresses, one side's objects.

use crate::perf::remote::{Net, open_context};
use engine::verbs::{Access, Context, Mr, Mtu, Qp, QpCap, QpInitAttr, QpType, RecvWr, Sge};
use std::net::Ipv6Addr;
use std::time::Duration;

/// The Q_Key the rdma-core UD example uses.
pub const UD_QKEY: u32 = 0x1111_1111;
pub(super) const RECV_WRID: u64 = 1;
pub(super) const SEND_WRID: u64 = 2;
/// Length of the address message (`"%04x:%06x:%06x:%s"` with a 32-digit GID, NUL-ended).
pub const MSG_LEN: usize = 52;
/// How long a side keeps answering after its last completion: eight ACK timeouts of 67 ms, the
/// tools' retry count plus one.
pub(super) const LINGER: Duration = Duration::from_millis(540);
/// The page size of the tools' `-c` check.
pub(super) const PAGE: usize = 4096;

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
    /// Connect with the connection manager (REQ/REP/RTU on QP1, rdma_cm's port space TCP and
    /// `port`) instead of the TCP exchange: RC and UC.
    pub cm: bool,
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

pub(super) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One side's objects: the context, its QP, the buffer it sends from and receives into.
pub(super) struct Side {
    pub(super) ctx: Context,
    pub(super) pd: engine::verbs::Pd,
    pub(super) cq: engine::verbs::Cq,
    pub(super) qp: Qp,
    pub(super) mr: Mr,
    /// The buffer's length (the message, after the GRH area for UD).
    pub(super) buf_len: usize,
    pub(super) grh: usize,
}

impl Side {
    /// The context on `local`, a PD, the buffer (filled as the tools fill it), a CQ and the QP.
    pub(super) fn open(o: &Options, local: std::net::Ipv4Addr) -> Result<Side, String> {
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
        let qp =
            ctx.create_qp(pd, &QpInitAttr { qp_type: o.qp_type, cap, ..QpInitAttr::rc(cq) }).map_err(err)?;
        Ok(Side { ctx, pd, cq, qp, mr, buf_len, grh })
    }

    /// One receive of the whole buffer.
    pub(super) fn recv(&mut self) -> Result<(), String> {
        post_recv(&mut self.ctx, self.qp, &self.mr, self.buf_len)
    }
}

/// One receive of `len` bytes of `mr` on `qp`.
pub(super) fn post_recv(ctx: &mut Context, qp: Qp, mr: &Mr, len: usize) -> Result<(), String> {
    let sge = Sge { addr: mr.addr, length: len as u32, lkey: mr.lkey };
    ctx.post_recv(qp, &[RecvWr { wr_id: RECV_WRID, sg_list: vec![sge] }]).map_err(|(_, e)| err(e))
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
