//! One queue pair (RC, UC or UD): the state machine of `modify_qp`, work request checks, and the
//! glue between the requester, completer and responder and the frames on the wire.

use super::dcqcn::{Dcqcn, DcqcnConfig};
use super::desc::{Kind, TxPayload};
use super::error::QpError;
use super::mem::{MemTable, sge_len};
use super::path::{HeaderTemplate, Path, udp_sport};
use super::requester::{ReqConfig, ReqCounters, Requester, SendWqe, UdSend, ack_timeout};
use super::responder::{HoldPool, RecvWqe, RespConfig, RespDrops, Responder, RxMeta};
use super::types::{
    Access, InlineData, MAX_MSG_SIZE, QpAttr, QpCap, QpState, QpType, RecvWr, SendFlags, SendRef, SendWindow,
    SendWr, WcOpcode, WcStatus, WorkCompletion, WrOpcode,
};
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;
use wire::ib::Mtu;
use wire::ib::{BthRepr, Opcode, RoceRepr, Transport, psn};

/// Largest `max_rd_atomic` / `max_dest_rd_atomic` (rxe's device maximum).
const MAX_RD_ATOMIC: u8 = super::types::LIMITS.max_rd_atomic;

/// What a QP is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpConfig {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Receive WQEs come from an SRQ (passed to [`QueuePair::handle_packet`]).
    pub srq: bool,
    /// The port MTU (UD messages must fit one packet of it).
    pub port_mtu: Mtu,
    /// The UDP source port every frame carries when the datapath fixes it (a kernel UDP socket
    /// sends from its bound port); otherwise rxe's per-connection or per-QP port.
    pub fixed_src_port: Option<u16>,
    /// QP number.
    pub qpn: u32,
    /// Protection domain.
    pub pd: u32,
    /// Queue sizes.
    pub cap: QpCap,
    /// Generate a completion for every send request, signaled or not.
    pub sq_sig_all: bool,
    /// The device's MAC.
    pub mac: [u8; 6],
    /// The device's GID.
    pub gid: IpAddr,
    /// DCQCN on this RC QP: its frames are ECN-capable (ECT(0)), it answers CE-marked requests
    /// with CNPs (at most one per interval) and paces its own requests by the CNPs it receives.
    pub dcqcn: Option<DcqcnConfig>,
}

/// Which completion queue a completion belongs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqSide {
    /// The send CQ.
    Send,
    /// The receive CQ.
    Recv,
}

/// True if the IP header (IPv4, or IPv6) carries ECN CE.
fn ce_marked(ip: &[u8]) -> bool {
    match ip.first().map(|b| b >> 4) {
        Some(4) => ip.get(1).is_some_and(|tos| tos & 3 == 3),
        Some(6) => ip.get(1).is_some_and(|b| (b >> 4) & 3 == 3),
        _ => false,
    }
}

/// A queue pair (see the [crate documentation](crate)).
#[derive(Debug)]
pub struct QueuePair {
    cfg: QpConfig,
    /// The QP's own receive queue (unused with an SRQ).
    rq: VecDeque<RecvWqe>,
    state: QpState,
    access: Access,
    attr: Box<QpAttr>,
    path: Option<Path>,
    /// The path's headers, built once at RTR.
    template: Option<HeaderTemplate>,
    req: Requester,
    resp: Responder,
    /// DCQCN reaction point (RC with `QpConfig::dcqcn`).
    dcqcn: Option<Box<Dcqcn>>,
    /// DCQCN notification point: a CNP is due, and when the last one went.
    cnp_pending: bool,
    cnp_last: Option<Duration>,
    /// RC or UC packets (CNPs included) from the connected peer's address.
    peer_packets: u64,
}

fn need<T>(v: Option<T>, name: &'static str) -> Result<T, QpError> {
    v.ok_or(QpError::MissingAttr(name))
}

fn check_attr(a: &QpAttr) -> Result<(), QpError> {
    let bad = |c: bool, name| if c { Err(QpError::InvalidAttr(name)) } else { Ok(()) };
    bad(a.retry_cnt.is_some_and(|v| v > 7), "retry_cnt")?;
    bad(a.rnr_retry.is_some_and(|v| v > 7), "rnr_retry")?;
    bad(a.min_rnr_timer.is_some_and(|v| v > 31), "min_rnr_timer")?;
    bad(a.timeout.is_some_and(|v| v > 31), "timeout")?;
    bad(a.sq_psn.is_some_and(|v| v > psn::MASK), "sq_psn")?;
    bad(a.rq_psn.is_some_and(|v| v > psn::MASK), "rq_psn")?;
    bad(a.dest_qp_num.is_some_and(|v| v > psn::MASK || v == 0), "dest_qp_num")?;
    bad(a.max_rd_atomic.is_some_and(|v| v > MAX_RD_ATOMIC), "max_rd_atomic")?;
    bad(a.max_dest_rd_atomic.is_some_and(|v| v > MAX_RD_ATOMIC), "max_dest_rd_atomic")?;
    bad(a.ah_attr.is_some_and(|av| av.flow_label > 0xF_FFFF), "ah_attr.flow_label")
}

fn transport(t: QpType) -> Transport {
    match t {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud => Transport::Ud,
    }
}

/// rxe's UDP source port of a UD QP: `0xC000 + (hash_32(qpn, 14) & 0x3fff)` (roce-wire.md §1.4).
pub fn ud_sport(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x61C8_8647) >> 18;
    0xC000 + (h & 0x3FFF) as u16
}

impl QueuePair {
    /// A new QP in the RESET state, holding packets after a gap in a pool of its own, as large as
    /// its widest window; a device's QPs share one ([`QueuePair::with_hold_pool`]).
    pub fn new(cfg: QpConfig) -> QueuePair {
        QueuePair::with_hold_pool(cfg, HoldPool::new(super::window::WIDE_CAP as usize - 1))
    }

    /// A new QP in the RESET state whose responder holds packets after a gap in `pool`.
    pub fn with_hold_pool(cfg: QpConfig, pool: HoldPool) -> QueuePair {
        // rxe: path_mtu 256 until modify_qp; UD uses the port MTU.
        let mtu = if cfg.qp_type == QpType::Ud { cfg.port_mtu.bytes() } else { Mtu::Mtu256.bytes() };
        let t = transport(cfg.qp_type);
        let req_cfg = ReqConfig {
            transport: t,
            qkey: 0,
            qpn: cfg.qpn,
            pd: cfg.pd,
            dest_qp: 0,
            mtu,
            timeout: None,
            retry_limit: 0,
            rnr_retry: 0,
            max_rd_atomic: 1,
            sq_sig_all: cfg.sq_sig_all,
            window: SendWindow::Fixed,
        };
        let resp_cfg = RespConfig {
            transport: t,
            qpn: cfg.qpn,
            dest_qp: 0,
            pd: cfg.pd,
            mtu,
            access: Access::NONE,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 0,
            qkey: 0,
            srq: cfg.srq,
        };
        QueuePair {
            rq: VecDeque::new(),
            state: QpState::Reset,
            access: Access::NONE,
            attr: Box::default(),
            path: None,
            template: None,
            req: Requester::new(req_cfg, 0),
            resp: Responder::new(resp_cfg, 0, pool),
            dcqcn: cfg.dcqcn.filter(|_| cfg.qp_type == QpType::Rc).map(|c| Box::new(Dcqcn::new(c))),
            cnp_pending: false,
            cnp_last: None,
            peer_packets: 0,
            cfg,
        }
    }

    /// The DCQCN rate limiter, when DCQCN runs on this QP.
    pub fn dcqcn(&self) -> Option<&Dcqcn> {
        self.dcqcn.as_deref()
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.cfg.qpn
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The attributes set so far (`ibv_query_qp`).
    pub fn attr(&self) -> QpAttr {
        *self.attr
    }

    /// Protection domain.
    pub fn pd(&self) -> u32 {
        self.cfg.pd
    }

    /// Transport service.
    pub fn qp_type(&self) -> QpType {
        self.cfg.qp_type
    }

    /// What the responder dropped or answered specially (Q_Key mismatches, no receive WQE, UC gaps,
    /// NAKs sent, duplicates).
    pub fn drops(&self) -> RespDrops {
        self.resp.drops
    }

    /// RC or UC packets (CNPs included) that came from the connected peer's address and were
    /// handed to the QP: a sign of the peer's life that strangers' frames do not fake.
    pub fn peer_packets(&self) -> u64 {
        self.peer_packets
    }

    /// What the requester sent and received (packets, retries, timeouts, NAKs).
    pub fn req_counters(&self) -> ReqCounters {
        self.req.counters
    }

    /// The requester's limit on unacknowledged PSNs now: 128 with [`SendWindow::Fixed`], the
    /// adaptive window's size with [`SendWindow::Adaptive`].
    pub fn send_window(&self) -> u32 {
        self.req.window()
    }

    /// The requester's smoothed round-trip time, once a response has been timed.
    pub fn srtt(&self) -> Option<Duration> {
        self.req.rtt.srtt()
    }

    /// The path frames take (after RTR).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_ref()
    }

    /// Moves the QP to `target` with the attributes that transition needs (`ibv_modify_qp`).
    /// `ah_attr.dmac` must be resolved before INIT -> RTR. What each transition needs:
    /// RESET -> INIT: `qp_access_flags` (RC, UC; optional) or `qkey` (UD);
    /// INIT -> RTR: `ah_attr`, `path_mtu`, `dest_qp_num`, `rq_psn`, and on RC `max_dest_rd_atomic` and
    /// `min_rnr_timer` (UD: nothing); RTR -> RTS: `sq_psn`, and on RC `timeout`, `retry_cnt`,
    /// `rnr_retry`, `max_rd_atomic`.
    pub fn modify(&mut self, target: QpState, a: &QpAttr) -> Result<(), QpError> {
        use QpState::*;
        check_attr(a)?;
        tracing::debug!(qpn = self.cfg.qpn, from = ?self.state, to = ?target, "modify QP");
        let ty = self.cfg.qp_type;
        match (self.state, target) {
            (_, Reset) => {
                *self = QueuePair::with_hold_pool(self.cfg, self.resp.hold_pool().clone());
            }
            (_, Error) => self.enter_error(None),
            (Reset, Init) | (Init, Init) => {
                if ty == QpType::Ud {
                    let qkey = if self.state == Reset {
                        need(a.qkey, "qkey")?
                    } else {
                        a.qkey.unwrap_or(self.req.cfg.qkey)
                    };
                    self.req.cfg.qkey = qkey;
                    self.resp.cfg.qkey = qkey;
                    self.attr.qkey = Some(qkey);
                } else {
                    self.access = a.qp_access_flags.unwrap_or(self.access);
                    self.attr.qp_access_flags = Some(self.access);
                }
                self.state = Init;
            }
            (Init, Rtr) if ty == QpType::Ud => self.state = Rtr,
            (Init, Rtr) => {
                let av = need(a.ah_attr, "ah_attr")?;
                let mtu = need(a.path_mtu, "path_mtu")?;
                let dest = need(a.dest_qp_num, "dest_qp_num")?;
                let rq_psn = need(a.rq_psn, "rq_psn")?;
                let (max_dest, min_rnr) = if ty == QpType::Rc {
                    (
                        need(a.max_dest_rd_atomic, "max_dest_rd_atomic")?,
                        need(a.min_rnr_timer, "min_rnr_timer")?,
                    )
                } else {
                    (0, 0)
                };
                let dmac = av.dmac.ok_or(QpError::NoDestMac)?;
                if let Some(acc) = a.qp_access_flags {
                    self.access = acc;
                }
                let path = Path {
                    src_mac: self.cfg.mac,
                    dst_mac: dmac,
                    src_ip: self.cfg.gid.to_canonical(),
                    dst_ip: av.dgid.to_canonical(),
                    src_port: self
                        .cfg
                        .fixed_src_port
                        .unwrap_or_else(|| udp_sport(av.flow_label, self.cfg.qpn, dest)),
                    dst_port: av.dst_port(),
                    // ECT(0) in the ECN bits when DCQCN runs (RFC 3168).
                    traffic_class: if self.dcqcn.is_some() {
                        (av.traffic_class & !3) | 2
                    } else {
                        av.traffic_class
                    },
                    hop_limit: av.hop_limit,
                    flow_label: av.flow_label,
                };
                self.template = Some(path.template());
                self.path = Some(path);
                let cfg = RespConfig {
                    dest_qp: dest,
                    mtu: mtu.bytes(),
                    access: self.access,
                    max_dest_rd_atomic: usize::from(max_dest.max(1)),
                    min_rnr_timer: min_rnr,
                    ..self.resp.cfg
                };
                self.resp = Responder::new(cfg, rq_psn, self.resp.hold_pool().clone());
                *self.attr = QpAttr {
                    ah_attr: Some(av),
                    path_mtu: Some(mtu),
                    dest_qp_num: Some(dest),
                    rq_psn: Some(rq_psn),
                    max_dest_rd_atomic: (ty == QpType::Rc).then_some(max_dest),
                    min_rnr_timer: (ty == QpType::Rc).then_some(min_rnr),
                    qp_access_flags: Some(self.access),
                    ..*self.attr
                };
                self.state = Rtr;
            }
            (Rtr, Rts) => {
                let sq_psn = need(a.sq_psn, "sq_psn")?;
                let mut cfg = ReqConfig {
                    dest_qp: self.resp.cfg.dest_qp,
                    mtu: self.resp.cfg.mtu,
                    timeout: None,
                    retry_limit: 0,
                    rnr_retry: 0,
                    max_rd_atomic: 1,
                    ..self.req.cfg
                };
                self.attr.sq_psn = Some(sq_psn);
                if ty == QpType::Rc {
                    let timeout = need(a.timeout, "timeout")?;
                    let retry_cnt = need(a.retry_cnt, "retry_cnt")?;
                    let rnr_retry = need(a.rnr_retry, "rnr_retry")?;
                    let max_rd = need(a.max_rd_atomic, "max_rd_atomic")?;
                    cfg.timeout = ack_timeout(timeout);
                    cfg.retry_limit = a.max_retries.unwrap_or(u32::from(retry_cnt));
                    cfg.rnr_retry = rnr_retry;
                    // rxe rounds up to a power of two (roce-wire.md §1.6).
                    cfg.max_rd_atomic = usize::from(max_rd.max(1)).next_power_of_two();
                    // The adaptive window unless DCQCN paces the QP (engine/README.md, "The RC transport").
                    cfg.window = a.send_window.unwrap_or(if self.dcqcn.is_some() {
                        SendWindow::Fixed
                    } else {
                        SendWindow::Adaptive { min: SendWindow::DEFAULT_MIN }
                    });
                    *self.attr = QpAttr {
                        timeout: Some(timeout),
                        retry_cnt: Some(retry_cnt),
                        rnr_retry: Some(rnr_retry),
                        max_rd_atomic: Some(max_rd),
                        max_retries: a.max_retries,
                        send_window: Some(cfg.window),
                        ..*self.attr
                    };
                }
                let sq = std::mem::take(&mut self.req.sq);
                let spare = std::mem::take(&mut self.req.spare_inline);
                self.req = Requester::new(cfg, sq_psn);
                self.req.sq = sq;
                self.req.spare_inline = spare;
                self.state = Rts;
            }
            (Rts, Rts) => {
                if let Some(t) = a.min_rnr_timer {
                    self.resp.cfg.min_rnr_timer = t;
                    self.attr.min_rnr_timer = Some(t);
                }
                if let Some(acc) = a.qp_access_flags {
                    self.access = acc;
                    self.resp.cfg.access = acc;
                    self.attr.qp_access_flags = Some(acc);
                }
                if let Some(w) = a.send_window.filter(|_| ty == QpType::Rc) {
                    self.req.set_window(w);
                    self.attr.send_window = Some(w);
                }
            }
            (from, to) => return Err(QpError::InvalidTransition(from, to)),
        }
        Ok(())
    }

    /// Moves to the error state: the failing send request (if any) completes with its status and
    /// everything else is flushed.
    fn enter_error(&mut self, failed: Option<(usize, WcStatus)>) {
        let (index, status) = failed.unwrap_or((usize::MAX, WcStatus::WrFlushErr));
        tracing::warn!(qpn = self.cfg.qpn, from = ?self.state, ?status, "QP enters the error state");
        self.req.fail(index, status);
        self.resp.flush(Some(&mut self.rq));
        self.state = QpState::Error;
    }

    /// Queues a send request after checking it (`ibv_post_send`).
    /// `ud_path` is the destination's path (from the address handle) for UD requests.
    pub fn post_send(&mut self, wr: &SendWr, mem: &MemTable, ud_path: Option<&Path>) -> Result<(), QpError> {
        self.post_send_ref(wr.borrowed(), InlineData::Sges, mem, ud_path)
    }

    /// [`post_send`](Self::post_send) of a request whose SGE list is borrowed, the data of an
    /// INLINE request taken from `inline` (ignored for other requests). It allocates nothing once
    /// the queue has held as many requests before: the SGEs are copied into the queue entry
    /// (up to two in place), and inline data once, into a buffer of `max_inline_data` bytes that
    /// a completed request gave back.
    pub fn post_send_ref(
        &mut self,
        wr: SendRef<'_>,
        inline: InlineData<'_>,
        mem: &MemTable,
        ud_path: Option<&Path>,
    ) -> Result<(), QpError> {
        match self.state {
            QpState::Rts | QpState::Error => {}
            s => return Err(QpError::InvalidState(s)),
        }
        let cap = self.cfg.cap;
        let depth = cap.max_send_wr as usize;
        if self.req.sq.len() >= depth {
            return Err(QpError::QueueFull);
        }
        // The queue at its full depth from the first post on, so that no later one grows it.
        if self.req.sq.capacity() < depth {
            self.req.sq.reserve_exact(depth - self.req.sq.len());
        }
        if wr.sg_list.len() > cap.max_send_sge as usize {
            return Err(QpError::TooManySge);
        }
        let is_inline = wr.flags.contains(SendFlags::INLINE);
        let len = match &inline {
            InlineData::Fill { len, .. } if is_inline => *len as u64,
            _ => sge_len(wr.sg_list),
        };
        if len > MAX_MSG_SIZE {
            return Err(QpError::InvalidWr("message longer than the maximum message size"));
        }
        let kind = Kind::of(&wr.opcode);
        let ud = match self.cfg.qp_type {
            QpType::Rc => None,
            QpType::Uc => {
                if !matches!(kind, Kind::Send | Kind::Write)
                    || matches!(wr.opcode, WrOpcode::SendWithInv { .. })
                {
                    return Err(QpError::InvalidWr(
                        "UC carries SEND, SEND_WITH_IMM, WRITE and WRITE_WITH_IMM",
                    ));
                }
                None
            }
            QpType::Ud => {
                if !matches!(wr.opcode, WrOpcode::Send | WrOpcode::SendWithImm { .. }) {
                    return Err(QpError::InvalidWr("UD carries SEND and SEND_WITH_IMM"));
                }
                if len > u64::from(self.cfg.port_mtu.bytes()) {
                    return Err(QpError::InvalidWr("a UD message must fit one packet of the port MTU"));
                }
                let dest = wr.ud.ok_or(QpError::InvalidWr("a UD send needs an address handle"))?;
                let path = ud_path.ok_or(QpError::NoAhPath)?;
                if dest.remote_qpn == 0 || dest.remote_qpn > psn::MASK {
                    return Err(QpError::InvalidWr("remote QPN out of range"));
                }
                let path = Path {
                    src_mac: self.cfg.mac,
                    src_ip: self.cfg.gid.to_canonical(),
                    src_port: self.cfg.fixed_src_port.unwrap_or_else(|| ud_sport(self.cfg.qpn)),
                    ..*path
                };
                // A Q_Key with the top bit set means "use the QP's own" (IBTA).
                let qkey =
                    if dest.remote_qkey & 0x8000_0000 != 0 { self.req.cfg.qkey } else { dest.remote_qkey };
                Some(UdSend { template: path.template(), qpn: dest.remote_qpn, qkey })
            }
        };
        if is_inline && !matches!(kind, Kind::Send | Kind::Write) {
            return Err(QpError::InvalidWr("only SEND and WRITE take inline data"));
        }
        if is_inline && len > u64::from(cap.max_inline_data) {
            return Err(QpError::InvalidWr("inline data longer than max_inline_data"));
        }
        if kind == Kind::Atomic && len != 8 {
            return Err(QpError::InvalidWr("an atomic needs 8 bytes of local buffer"));
        }
        if let WrOpcode::AtomicCmpAndSwp { remote_addr, .. }
        | WrOpcode::AtomicFetchAndAdd { remote_addr, .. } = wr.opcode
        {
            if remote_addr % 8 != 0 {
                return Err(QpError::InvalidWr("atomic remote address not 8-byte aligned"));
            }
        }
        let need = if matches!(kind, Kind::Read | Kind::Atomic) { Access::LOCAL_WRITE } else { Access::NONE };
        let data = if is_inline {
            let mut v = self.req.inline_buf(cap.max_inline_data as usize, depth);
            v.resize(len as usize, 0);
            let copied = match inline {
                InlineData::Fill { fill, .. } => {
                    fill(&mut v);
                    Ok(())
                }
                InlineData::Sges => mem.gather(wr.sg_list, 0, &mut v).map_err(QpError::InvalidSge),
            };
            if let Err(e) = copied {
                self.req.give_back_inline(v);
                return Err(e);
            }
            Some(v)
        } else {
            for sge in wr.sg_list {
                mem.check_local(self.cfg.pd, sge, need).map_err(QpError::InvalidSge)?;
            }
            None
        };
        let wqe = SendWqe::new(wr, data, len as u32, ud);
        if self.state == QpState::Error {
            let wc = self.req.wc(&wqe, WcStatus::WrFlushErr);
            self.req.done.push_back(wc);
            self.req.retire(wqe);
            return Ok(());
        }
        self.req.sq.push_back(wqe);
        Ok(())
    }

    /// Queues a receive request after checking it (`ibv_post_recv`).
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<(), QpError> {
        if self.state == QpState::Reset {
            return Err(QpError::InvalidState(QpState::Reset));
        }
        if self.cfg.srq {
            return Err(QpError::InvalidWr("this QP takes its receives from an SRQ"));
        }
        let cap = self.cfg.cap;
        if self.rq.len() >= cap.max_recv_wr as usize {
            return Err(QpError::QueueFull);
        }
        if wr.sg_list.len() > cap.max_recv_sge as usize {
            return Err(QpError::TooManySge);
        }
        // The keys are checked when a message arrives (`MemTable::scatter`), as rxe does: a
        // receive into a region moved to another PD or deregistered meanwhile completes with a
        // local protection error and the sender gets a remote operational error.
        if sge_len(&wr.sg_list) >= 1 << 31 {
            return Err(QpError::InvalidWr("receive buffers of 2 GiB or more"));
        }
        if self.state == QpState::Error {
            self.resp.done.push_back(WorkCompletion {
                wr_id: wr.wr_id,
                status: WcStatus::WrFlushErr,
                opcode: WcOpcode::Recv,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: self.cfg.qpn,
                src_qp: self.resp.cfg.dest_qp,
                src_gid: None,
                solicited: false,
            });
            return Ok(());
        }
        self.rq.push_back(RecvWqe::new(wr));
        Ok(())
    }

    /// Handles a packet addressed to this QP (its ICRC already checked) at time `now`. Receive WQEs
    /// come from `srq` when the QP has one, else from its own queue. Packets the QP must ignore
    /// (wrong state, transport, source address, P_Key or Q_Key) are dropped silently, as rxe does
    /// (roce-wire.md §1.7 "Silent drops").
    pub fn handle_packet(
        &mut self,
        now: Duration,
        meta: &RxMeta<'_>,
        pkt: &RoceRepr<'_>,
        mem: &mut MemTable,
        srq: Option<&mut VecDeque<RecvWqe>>,
    ) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) || pkt.bth.pkey & 0x7FFF != 0x7FFF {
            return;
        }
        let from_peer = self.path.as_ref().is_some_and(|path| meta.src.to_canonical() == path.dst_ip);
        if pkt.bth.opcode == Opcode::CNP {
            // Only the connected peer's CNPs slow the QP down: anyone can send one.
            if !from_peer {
                self.resp.drops.foreign_source += 1;
                return;
            }
            self.peer_packets += 1;
            if let Some(d) = &mut self.dcqcn {
                d.on_cnp(now);
            }
            return;
        }
        let Some(info) = pkt.bth.opcode.info() else { return };
        let t = transport(self.cfg.qp_type);
        if info.transport != t {
            return;
        }
        let rq = match srq {
            Some(q) if self.cfg.srq => q,
            _ => &mut self.rq,
        };
        if t == Transport::Ud {
            self.resp.handle_ud(info.operation, pkt, meta, mem, rq);
            return;
        }
        if !from_peer {
            self.resp.drops.foreign_source += 1;
            return;
        }
        self.peer_packets += 1;
        if info.operation.is_response() {
            if self.state == QpState::Rts && t == Transport::Rc {
                if let Err(fatal) = self.req.handle_response(now, info.operation, pkt, mem) {
                    self.enter_error(Some(fatal));
                }
            }
        } else {
            if let Some(d) = self.cfg.dcqcn.filter(|_| t == Transport::Rc && ce_marked(meta.ip_header)) {
                if self.cnp_last.is_none_or(|l| now.saturating_sub(l) >= d.cnp_interval) {
                    self.cnp_pending = true;
                    self.cnp_last = Some(now);
                }
            }
            if self.resp.handle_request(info.operation, pkt, mem, rq).is_err() {
                self.enter_error(None);
            }
        }
    }

    /// The next deadline at which [`handle_timeout`](Self::handle_timeout) has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.state != QpState::Rts {
            return None;
        }
        let paced = self.dcqcn.as_ref().and_then(|d| {
            // Pacing is a deadline only for a packet that nothing but the pacing holds back (one
            // the window holds is not, or a past deadline would spin the progress loop).
            let pending = self.req.ready();
            [d.poll_timeout(), d.send_at().filter(|_| pending)].into_iter().flatten().min()
        });
        [self.req.poll_timeout(), paced].into_iter().flatten().min()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.state != QpState::Rts {
            return;
        }
        if let Some(d) = &mut self.dcqcn {
            d.handle_timeout(now);
        }
        if let Err(fatal) = self.req.handle_timeout(now) {
            self.enter_error(Some(fatal));
        }
    }

    /// True once after the responder queued a reply its peer's requester is stalled on (a gap's
    /// NAK, the ACK once the gap is filled): a caller handling a batch of frames sends it first.
    pub fn take_urgent_reply(&mut self) -> bool {
        self.resp.take_urgent()
    }

    /// True if [`poll_transmit`](Self::poll_transmit) may have a frame: a CNP or a reply, or a
    /// request the window, the credits, the READ/atomic limit, a fence and an RNR wait let go (a
    /// requester held back by them has nothing to send until a frame, a timer or a post changes
    /// that, and each of those has the QP visited again; DCQCN's pacing is not looked at here).
    pub fn wants_transmit(&self) -> bool {
        self.cnp_pending || self.resp.has_reply() || (self.state == QpState::Rts && self.req.ready())
    }

    /// Writes the next frame into `buf` (responses first, then requests); returns its length.
    pub fn poll_transmit(&mut self, now: Duration, mem: &MemTable, buf: &mut [u8]) -> Option<usize> {
        let own = self.template;
        if self.cnp_pending && matches!(self.state, QpState::Rtr | QpState::Rts) {
            self.cnp_pending = false;
            // roce-wire.md §3: BTH opcode 0x81, P_Key 0xFFFF, the flow's QP, BECN, PSN 0, 16
            // reserved zero bytes.
            let mut bth = BthRepr::new(Opcode::CNP, self.resp.cfg.dest_qp, 0);
            bth.becn = true;
            let pkt = RoceRepr::new(bth, &[]);
            if let Some(n) = own.and_then(|p| {
                p.emit(buf, &pkt, 16, |d| {
                    d.fill(0);
                    Ok(())
                })
                .ok()
            }) {
                return Some(n);
            }
        }
        loop {
            let (desc, from_responder) = match self.state {
                QpState::Rtr | QpState::Rts | QpState::Error if self.resp.has_reply() => {
                    (self.resp.poll()?, true)
                }
                QpState::Rts if self.dcqcn.as_ref().is_none_or(|d| d.may_send(now)) => {
                    (self.req.poll(now)?, false)
                }
                _ => return None,
            };
            let psn = desc.packet.bth.psn;
            let path = desc.template.or(own)?;
            let built = match desc.payload {
                TxPayload::None => path.emit(buf, &desc.packet, 0, |_| Ok(())),
                TxPayload::Wqe { index, offset, len } => {
                    let w = &self.req.sq[index];
                    path.emit(buf, &desc.packet, len as usize, |dst| match &w.inline {
                        Some(data) => {
                            wire::copy_payload(dst, &data[offset as usize..(offset + len) as usize]);
                            Ok(())
                        }
                        None => mem.gather(w.sg.as_slice(), u64::from(offset), dst),
                    })
                }
                TxPayload::Remote { rkey, va, len } => path.emit(buf, &desc.packet, len as usize, |dst| {
                    wire::copy_payload(
                        dst,
                        mem.remote(self.cfg.pd, rkey, va, len as usize, Access::REMOTE_READ)?,
                    );
                    Ok(())
                }),
            };
            match built {
                Ok(n) => {
                    if desc.completes {
                        self.req.complete_front(WcStatus::Success);
                    }
                    if !from_responder {
                        if let Some(d) = &mut self.dcqcn {
                            d.on_sent(now, n);
                        }
                    }
                    return Some(n);
                }
                Err(_) if from_responder => {
                    // The region went away under a READ response: NAK, then the error state.
                    self.resp.read_failed(psn);
                    self.enter_error(None);
                }
                Err(_) => {
                    let index = match desc.payload {
                        TxPayload::Wqe { index, .. } => index,
                        _ => 0,
                    };
                    self.enter_error(Some((index, WcStatus::LocProtErr)));
                }
            }
        }
    }

    /// The next completion and the CQ it belongs on.
    pub fn poll_completion(&mut self) -> Option<(CqSide, WorkCompletion)> {
        if let Some(wc) = self.req.done.pop_front() {
            return Some((CqSide::Send, wc));
        }
        self.resp.done.pop_front().map(|wc| (CqSide::Recv, wc))
    }

    /// Send requests posted and not yet completed.
    pub fn send_queue_len(&self) -> usize {
        self.req.sq.len()
    }

    /// Receive requests posted to the QP's own queue and not yet consumed.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len()
    }
}
