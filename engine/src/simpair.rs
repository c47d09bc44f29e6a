//! Two devices on a simulated cable with connected RC QP pairs, driven on virtual time as a
//! [`nicsim::System`] ([`SimPair::step`], [`SimPair::run_until`]). `softrdma perf` and the
//! simulation tests use it.

use crate::datapath::sim::SimNet;
use crate::verbs::{
    Access, AddressVector, Ah, Context, Cq, Mtu, Pd, Qp, QpAttr, QpCap, QpInitAttr, QpState, QpType, Srq,
    SrqAttr, VerbsError,
};
use nicsim::LinkConfig;
use std::time::Duration;

/// How to build a [`SimPair`].
#[derive(Debug, Clone, Copy)]
pub struct PairConfig {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Give every QP on both sides one shared receive queue per side (RC and UD).
    pub srq: bool,
    /// Q_Key of UD QPs.
    pub qkey: u32,
    /// Seed of the network's impairments (and of the initial PSNs).
    pub seed: u64,
    /// Both directions of the cable.
    pub link: LinkConfig,
    /// Path MTU.
    pub mtu: Mtu,
    /// QP pairs.
    pub qps: usize,
    /// Queue sizes of every QP.
    pub cap: QpCap,
    /// Local ACK timeout code.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// The `max_retries` extension (None: `retry_cnt` as verbs defines it).
    pub max_retries: Option<u32>,
    /// RNR retries (7: forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Outstanding READs/atomics each way.
    pub max_rd_atomic: u8,
    /// Remote access the responders allow.
    pub access: Access,
    /// CQ depth on each side.
    pub cq_depth: usize,
    /// Complete every send request, signaled or not.
    pub sq_sig_all: bool,
    /// DCQCN on both sides' RC QPs (`None`: off).
    pub dcqcn: Option<crate::roce::dcqcn::DcqcnConfig>,
    /// The RC requesters' send window (`None`: the QP's default, see `QpAttr::send_window`).
    pub send_window: Option<crate::roce::SendWindow>,
    /// The UDP port the peer of [`connect`] receives RoCEv2 on (`None`: 4791).
    pub udp_dport: Option<u16>,
    /// The traffic class of every QP's path and UD address handle (`ah_attr.grh.traffic_class`):
    /// the IP header's DSCP (high six bits) and ECN (low two; DCQCN sets ECT(0) itself).
    pub traffic_class: u8,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            qp_type: QpType::Rc,
            srq: false,
            qkey: 0x1111_2222,
            seed: 1,
            link: LinkConfig::default(),
            mtu: Mtu::Mtu1024,
            qps: 1,
            cap: QpCap::default(),
            // 4.096 us x 2^8 = 1 ms: many round trips of the 1 us default link.
            timeout: 8,
            retry_cnt: 7,
            max_retries: None,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            cq_depth: 4096,
            dcqcn: None,
            sq_sig_all: false,
            send_window: None,
            udp_dport: None,
            traffic_class: 0,
        }
    }
}

/// Two contexts, `a` (requester side of the tests) and `b`, with `qps[i] = (qp on a, qp on b)`.
#[derive(Debug)]
pub struct SimPair {
    /// The network.
    pub net: SimNet,
    /// First device.
    pub a: Context,
    /// Second device.
    pub b: Context,
    /// PD on `a`.
    pub pd_a: Pd,
    /// PD on `b`.
    pub pd_b: Pd,
    /// CQ on `a` (send and receive).
    pub cq_a: Cq,
    /// CQ on `b` (send and receive).
    pub cq_b: Cq,
    /// Connected QP pairs (for UD: `qps[i].0` sends to `qps[i].1` and back through the AHs).
    pub qps: Vec<(Qp, Qp)>,
    /// The SRQs of `a` and `b` when the pair has them.
    pub srqs: Option<(Srq, Srq)>,
    /// UD address handles: on `a` pointing at `b`, and on `b` pointing at `a`.
    pub ahs: Option<(Ah, Ah)>,
}

/// A PSN derived from the seed, often near the 24-bit wrap so wrapping is exercised.
fn initial_psn(seed: u64, salt: u64) -> u32 {
    let x = (seed ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let r = (x >> 40) as u32 & 0xFF_FFFF;
    if seed % 2 == 0 { 0xFF_FFFF - (r & 0x3FF) } else { r }
}

impl SimPair {
    /// Builds the pair and connects the QPs (RESET -> INIT -> RTR -> RTS on both sides).
    pub fn new(cfg: &PairConfig) -> Result<SimPair, VerbsError> {
        let (net, pa, pb) = SimNet::pair(cfg.seed, cfg.link, cfg.link);
        let mut a = Context::open(pa);
        let mut b = Context::open(pb);
        // Keys and addresses from the seed: a seeded run repeats byte for byte
        // (scripts/same-bytes.sh compares two builds' captures).
        a.seed_memory(cfg.seed)?;
        b.seed_memory(!cfg.seed)?;
        a.set_dcqcn(cfg.dcqcn);
        b.set_dcqcn(cfg.dcqcn);
        let pd_a = a.alloc_pd();
        let pd_b = b.alloc_pd();
        let cq_a = a.create_cq(cfg.cq_depth)?;
        let cq_b = b.create_cq(cfg.cq_depth)?;
        let srqs = if cfg.srq {
            let attr =
                SrqAttr { max_wr: cfg.cap.max_recv_wr.max(1), max_sge: cfg.cap.max_recv_sge, srq_limit: 0 };
            Some((a.create_srq(pd_a, &attr)?, b.create_srq(pd_b, &attr)?))
        } else {
            None
        };
        let ahs = if cfg.qp_type == QpType::Ud {
            Some((
                a.create_ah(
                    pd_a,
                    &AddressVector { traffic_class: cfg.traffic_class, ..AddressVector::new(b.gid()) },
                )?,
                b.create_ah(
                    pd_b,
                    &AddressVector { traffic_class: cfg.traffic_class, ..AddressVector::new(a.gid()) },
                )?,
            ))
        } else {
            None
        };
        let mut pair = SimPair { net, a, b, pd_a, pd_b, cq_a, cq_b, qps: Vec::new(), srqs, ahs };
        for _ in 0..cfg.qps {
            let qp = pair.add_qp_pair(cfg, cq_a, cq_b)?;
            pair.qps.push(qp);
        }
        Ok(pair)
    }

    /// Creates and connects one more QP pair of `cfg`'s type, completing on `cq_a` and `cq_b` (the
    /// pair's SRQs when it has them). The pair's `qps` list is left as it is.
    pub fn add_qp_pair(&mut self, cfg: &PairConfig, cq_a: Cq, cq_b: Cq) -> Result<(Qp, Qp), VerbsError> {
        let init = |cq: Cq, srq: Option<Srq>| QpInitAttr {
            qp_type: cfg.qp_type,
            send_cq: cq,
            recv_cq: cq,
            srq,
            cap: cfg.cap,
            sq_sig_all: cfg.sq_sig_all,
        };
        let qa = self.a.create_qp(self.pd_a, &init(cq_a, self.srqs.map(|s| s.0)))?;
        let qb = self.b.create_qp(self.pd_b, &init(cq_b, self.srqs.map(|s| s.1)))?;
        // Initial PSNs from the seed and the QP numbers, so every pair differs.
        let psn_a = initial_psn(cfg.seed, 2 * u64::from(qa.qpn()));
        let psn_b = initial_psn(cfg.seed, 2 * u64::from(qb.qpn()) + 1);
        let (gid_a, gid_b) = (self.a.gid(), self.b.gid());
        connect(&mut self.a, qa, qb.qpn(), gid_b, psn_a, psn_b, cfg)?;
        connect(&mut self.b, qb, qa.qpn(), gid_a, psn_b, psn_a, cfg)?;
        Ok((qa, qb))
    }

    /// One step ([`nicsim::step`]): both contexts make progress; if neither had anything to do,
    /// virtual time jumps to the next frame arrival or timer. Returns false when nothing is pending
    /// at all.
    pub fn step(&mut self) -> Result<bool, VerbsError> {
        nicsim::step(self)
    }

    /// Runs the pair until `done` holds, or until nothing is pending by `limit`
    /// ([`nicsim::run_until`]: `done` is asked whenever nothing moves any more at the current
    /// instant, and what it posts runs before time moves on). Returns whether `done` held.
    pub fn run_until(
        &mut self,
        limit: Duration,
        done: impl FnMut(&mut SimPair) -> bool,
    ) -> Result<bool, VerbsError> {
        nicsim::run_until(self, limit, done)
    }
}

impl nicsim::System for SimPair {
    type Error = VerbsError;

    fn pass(&mut self) -> Result<bool, VerbsError> {
        Ok(self.a.progress()? + self.b.progress()? > 0)
    }

    fn next_event(&self) -> Option<Duration> {
        [self.net.next_event(), self.a.next_deadline(), self.b.next_deadline()].into_iter().flatten().min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

/// On virtual time there is no descriptor to sleep on: a progress thread with [`Idle::Adaptive`]
/// driving a pair sleeps only when [`SimPair::step`] says nothing is pending at all, until a call.
///
/// [`Idle::Adaptive`]: crate::progress::Idle::Adaptive
impl crate::progress::Sleep for SimPair {
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    fn tx_blocked(&self) -> bool {
        false
    }

    fn next_work_in(&self) -> Option<Duration> {
        None
    }
}

/// Takes one QP of a pair through INIT, RTR and RTS towards `remote` at `remote_gid` (UD: INIT
/// with the Q_Key, RTR, RTS), with `cfg`'s attributes. Any datapath.
pub fn connect(
    ctx: &mut Context,
    qp: Qp,
    remote_qpn: u32,
    remote_gid: std::net::IpAddr,
    sq_psn: u32,
    rq_psn: u32,
    cfg: &PairConfig,
) -> Result<(), VerbsError> {
    if cfg.qp_type == QpType::Ud {
        ctx.modify_qp(qp, QpState::Init, &QpAttr { qkey: Some(cfg.qkey), ..QpAttr::default() })?;
        ctx.modify_qp(qp, QpState::Rtr, &QpAttr::default())?;
        return ctx.modify_qp(qp, QpState::Rts, &QpAttr { sq_psn: Some(sq_psn), ..QpAttr::default() });
    }
    ctx.modify_qp(qp, QpState::Init, &QpAttr { qp_access_flags: Some(cfg.access), ..QpAttr::default() })?;
    let rtr = QpAttr {
        ah_attr: Some(AddressVector {
            udp_dport: cfg.udp_dport,
            traffic_class: cfg.traffic_class,
            ..AddressVector::new(remote_gid)
        }),
        path_mtu: Some(cfg.mtu),
        dest_qp_num: Some(remote_qpn),
        rq_psn: Some(rq_psn),
        max_dest_rd_atomic: Some(cfg.max_rd_atomic),
        min_rnr_timer: Some(cfg.min_rnr_timer),
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rtr, &rtr)?;
    let rts = QpAttr {
        sq_psn: Some(sq_psn),
        timeout: Some(cfg.timeout),
        retry_cnt: Some(cfg.retry_cnt),
        rnr_retry: Some(cfg.rnr_retry),
        max_rd_atomic: Some(cfg.max_rd_atomic),
        max_retries: cfg.max_retries,
        send_window: cfg.send_window,
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rts, &rts)
}
