//! The whole receive path of a `Context` (security review §6, issue 30): frame bytes -> ICRC and
//! header checks -> QP dispatch by QPN -> the QP cores -> completions, with five QPs in two PDs
//! (RC in PD 0, RC in PD 1, UC, UD, RC on an SRQ) that all have receives posted and the RC and UC
//! ones requests outstanding, a path MTU of 1024 and payloads up to it so multi-packet messages are
//! reached. Frames are built from fuzzed descriptions with a valid ICRC (so they get past the
//! checks), from the peer or from a stranger, or taken raw.
//!
//! Checks: no panic; every frame the context sends verifies; regions without remote write access
//! never change; a packet to a QP of one PD never changes the other PD's regions; a packet from a
//! stranger changes nothing (except through the UD QP, which takes datagrams from anyone holding
//! its Q_Key).
//!
//! Input: records of a 16-byte description (see `roce_desc.rs`), a selector byte (bits 0-2:
//! destination QP 0x11 + n, 5-7 an unknown QPN; bit 3: from a stranger; bit 4: raw frame bytes;
//! bit 5: ECN CE), two bytes of payload length (at most 1024) and the payload.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::datapath::{Datapath, TxError};
use engine::verbs::{
    Access, AddressVector, Context, Cq, Mr, Mtu, Pd, Qp, QpAttr, QpInitAttr, QpState, QpType, RecvWr, SendWr,
    Sge, SrqAttr, UdDest, WorkCompletion, WrOpcode,
};
use frame::Frame;
use wire::ethernet::EthernetAddress;
use wire::ipv4::{DONT_FRAGMENT, PROTO_UDP};
use wire::{EthernetRepr, FrameRepr, IpRepr, Ipv4Repr, L4Repr, UdpChecksum, UdpRepr};

use crate::roce_desc;

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const STRANGER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 66);
const QKEY: u32 = 0x1234;
/// The peer's QPNs: QP 0x11 + n is connected to 0x41 + n.
const PEER_QPN: u32 = 0x41;

/// A datapath the fuzzer feeds: frames in from `rx`, frames out checked and dropped.
struct FuzzPort {
    now: Arc<Mutex<Duration>>,
    rx: Arc<Mutex<VecDeque<Vec<u8>>>>,
    sent: Arc<AtomicU64>,
}

impl Datapath for FuzzPort {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap()
    }
    fn mac(&self) -> [u8; 6] {
        MAC
    }
    fn gid(&self) -> IpAddr {
        IpAddr::V4(LOCAL)
    }
    fn resolve(&self, _ip: IpAddr) -> Option<[u8; 6]> {
        Some(PEER_MAC)
    }
    fn alloc(&mut self) -> Frame {
        Frame::new()
    }
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        let f = FrameRepr::parse_verified(frame.as_slice(), &Default::default());
        assert!(f.is_ok_and(|f| f.roce().is_some()), "the context sent a frame that does not verify");
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn receive(&mut self) -> Option<Frame> {
        self.rx.lock().unwrap().pop_front().map(|b| Frame::from_bytes(&b))
    }
    fn recycle(&mut self, _frame: Frame) {}
}

struct World {
    ctx: Context,
    cqs: Vec<Cq>,
    /// Each QP, its type and whether it is in PD 1.
    qps: Vec<(Qp, QpType, bool)>,
    /// Regions: read-only, local-only, PD 0 target, PD 0 receive, PD 1 target, PD 1 receive.
    ro: Mr,
    local: Mr,
    pd0: [Mr; 2],
    pd1: [Mr; 2],
    now: Arc<Mutex<Duration>>,
    rx: Arc<Mutex<VecDeque<Vec<u8>>>>,
}

fn connect(ctx: &mut Context, qp: Qp, qp_type: QpType, n: u32) {
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let init = QpAttr { qp_access_flags: Some(access), qkey: Some(QKEY), ..QpAttr::default() };
    ctx.modify_qp(qp, QpState::Init, &init).unwrap();
    let mut av = AddressVector::new(IpAddr::V4(PEER));
    av.dmac = Some(PEER_MAC);
    let rtr = QpAttr {
        ah_attr: (qp_type != QpType::Ud).then_some(av),
        path_mtu: Some(Mtu::Mtu1024),
        dest_qp_num: (qp_type != QpType::Ud).then_some(PEER_QPN + n),
        rq_psn: Some(0),
        max_dest_rd_atomic: Some(4),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rtr, &rtr).unwrap();
    let rts = QpAttr {
        sq_psn: Some(0),
        timeout: Some(1),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(4),
        ..QpAttr::default()
    };
    ctx.modify_qp(qp, QpState::Rts, &rts).unwrap();
}

fn setup() -> World {
    let now = Arc::new(Mutex::new(Duration::ZERO));
    let rx = Arc::new(Mutex::new(VecDeque::new()));
    let port = FuzzPort { now: now.clone(), rx: rx.clone(), sent: Arc::new(AtomicU64::new(0)) };
    let mut ctx = Context::open(port);
    let (p0, p1): (Pd, Pd) = (ctx.alloc_pd(), ctx.alloc_pd());
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let ro = ctx.reg_mr(p0, 4096, Access::REMOTE_READ).unwrap();
    let local = ctx.reg_mr(p0, 4096, Access::LOCAL_WRITE).unwrap();
    let pd0 = [ctx.reg_mr(p0, 8192, all).unwrap(), ctx.reg_mr(p0, 16384, Access::LOCAL_WRITE).unwrap()];
    let pd1 = [ctx.reg_mr(p1, 8192, all).unwrap(), ctx.reg_mr(p1, 16384, Access::LOCAL_WRITE).unwrap()];
    for mr in [&ro, &local, &pd0[0], &pd1[0]] {
        ctx.mr_bytes_mut(mr).unwrap().fill(0x5a);
    }
    let cq = ctx.create_cq(256).unwrap();
    let srq = ctx.create_srq(p0, &SrqAttr { max_wr: 16, max_sge: 1, srq_limit: 0 }).unwrap();
    let kinds = [
        (p0, QpType::Rc, None),
        (p1, QpType::Rc, None),
        (p0, QpType::Uc, None),
        (p0, QpType::Ud, None),
        (p0, QpType::Rc, Some(srq)),
    ];
    let mut qps = Vec::new();
    for (n, (pd, qp_type, srq)) in kinds.into_iter().enumerate() {
        let init = QpInitAttr { qp_type, srq, ..QpInitAttr::rc(cq) };
        let qp = ctx.create_qp(pd, &init).unwrap();
        connect(&mut ctx, qp, qp_type, n as u32);
        let recv = if pd == p1 { pd1[1] } else { pd0[1] };
        let wrs: Vec<RecvWr> = (0..4u64)
            .map(|i| RecvWr {
                wr_id: 100 * n as u64 + i,
                sg_list: vec![Sge { addr: recv.addr + (i % 2) * 4096, length: 4096, lkey: recv.lkey }],
            })
            .collect();
        match srq {
            Some(s) => ctx.post_srq_recv(s, &wrs).unwrap(),
            None => ctx.post_recv(qp, &wrs).unwrap(),
        }
        qps.push((qp, qp_type, pd == p1));
    }
    // Requests outstanding on the connected QPs, from the receive regions' second halves.
    let ah = ctx.create_ah(p0, &AddressVector::new(IpAddr::V4(PEER))).unwrap();
    for (n, &(qp, qp_type, in_pd1)) in qps.iter().enumerate() {
        let src = if in_pd1 { pd1[1] } else { pd0[1] };
        let sge = |len| vec![Sge { addr: src.addr + 8192, length: len, lkey: src.lkey }];
        let ops = match qp_type {
            QpType::Rc => vec![
                WrOpcode::Send,
                WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 7 },
                WrOpcode::RdmaRead { remote_addr: 0x1000, rkey: 7 },
                WrOpcode::AtomicFetchAndAdd { remote_addr: 0x1000, rkey: 7, add: 1 },
            ],
            QpType::Uc => vec![WrOpcode::Send],
            QpType::Ud => vec![WrOpcode::Send],
        };
        for (i, op) in ops.into_iter().enumerate() {
            let len = if matches!(op, WrOpcode::AtomicFetchAndAdd { .. }) { 8 } else { 1500 };
            let mut wr =
                SendWr::new((n * 10 + i) as u64, op, sge(if qp_type == QpType::Ud { 512 } else { len }));
            if qp_type == QpType::Ud {
                wr.ud = Some(UdDest { ah, remote_qpn: PEER_QPN + n as u32, remote_qkey: QKEY });
            }
            ctx.post_send(qp, &[wr]).unwrap();
        }
    }
    World { ctx, cqs: vec![cq], qps, ro, local, pd0, pd1, now, rx }
}

/// The Ethernet frame carrying `pkt` from `src` to the context, with a valid ICRC (`None`: the
/// description does not make a packet the codec emits, e.g. a payload length its opcode forbids).
fn frame(pkt: wire::ib::RoceRepr<'_>, src: Ipv4Addr, ce: bool) -> Option<Vec<u8>> {
    let ip = IpRepr::V4(Ipv4Repr {
        dscp_ecn: if ce { 3 } else { 0 },
        ident: 0,
        flags_frag: DONT_FRAGMENT,
        ttl: 64,
        protocol: PROTO_UDP,
        src_addr: src,
        dst_addr: LOCAL,
        options: &[],
        payload_len: 0,
    });
    let ethernet = EthernetRepr {
        dst_addr: EthernetAddress(MAC),
        src_addr: EthernetAddress(PEER_MAC),
        vlan_tags: [None; 2],
        ethertype: ip.ethertype(),
    };
    let udp = UdpRepr { src_port: 0xC000, dst_port: wire::ROCEV2_UDP_PORT, checksum: UdpChecksum::Zero };
    let f = FrameRepr { ethernet, ip, l4: L4Repr::Roce { udp, packet: pkt }, trailer: &[] };
    let mut out = vec![0u8; f.buffer_len()];
    f.emit(&mut out).ok()?;
    Some(out)
}

fn snapshot(w: &World, mrs: &[Mr]) -> Vec<Vec<u8>> {
    mrs.iter().map(|m| w.ctx.mr_bytes(m).unwrap().to_vec()).collect()
}

pub fn run(data: &[u8]) {
    let mut w = setup();
    let fixed = [w.ro, w.local];
    let fixed_before = snapshot(&w, &fixed);
    let mut rest = data;
    let mut wcs: Vec<WorkCompletion> = Vec::new();
    while rest.len() >= roce_desc::DESC + 3 {
        let (d, tail) = rest.split_at(roce_desc::DESC);
        let sel = tail[0];
        let plen = usize::from(u16::from_be_bytes([tail[1], tail[2]]) % 1025).min(tail.len() - 3);
        let payload = &tail[3..3 + plen];
        rest = &tail[3 + plen..];
        let slot = usize::from(sel & 7);
        let dest_qp = 0x11 + slot as u32;
        let stranger = sel & 8 != 0;
        let bytes = if sel & 0x10 != 0 {
            payload.to_vec()
        } else {
            let regions = [
                (w.pd0[0].rkey, w.pd0[0].addr),
                (w.ro.rkey, w.ro.addr),
                (w.pd1[0].rkey, w.pd1[0].addr),
                (w.local.rkey, w.local.addr),
            ];
            let src_qp = PEER_QPN + slot as u32;
            let Some(pkt) = roce_desc::packet(d, payload, &regions, dest_qp, QKEY, src_qp) else { continue };
            let Some(f) = frame(pkt, if stranger { STRANGER } else { PEER }, sel & 0x20 != 0) else {
                continue;
            };
            f
        };
        let target = w.qps.get(slot).copied();
        let pd0_before = snapshot(&w, &w.pd0);
        let pd1_before = snapshot(&w, &w.pd1);
        w.rx.lock().unwrap().push_back(bytes);
        for _ in 0..3 {
            *w.now.lock().unwrap() += Duration::from_micros(5);
            let _ = w.ctx.progress();
        }
        for &cq in &w.cqs {
            wcs.clear();
            while w.ctx.poll_cq(cq, &mut wcs, 64).unwrap() > 0 {
                wcs.clear();
            }
        }
        assert_eq!(snapshot(&w, &fixed), fixed_before, "a region without remote write access changed");
        let (pd0_now, pd1_now) = (snapshot(&w, &w.pd0), snapshot(&w, &w.pd1));
        match target {
            // A raw frame may reach any QP; an unknown QPN reaches none.
            _ if sel & 0x10 != 0 => {}
            None => {
                assert_eq!(pd0_now, pd0_before, "a packet to an unknown QPN changed memory");
                assert_eq!(pd1_now, pd1_before, "a packet to an unknown QPN changed memory");
            }
            Some((_, qp_type, in_pd1)) => {
                if stranger && qp_type != QpType::Ud {
                    assert_eq!((&pd0_now, &pd1_now), (&pd0_before, &pd1_before), "a stranger changed memory");
                }
                if in_pd1 {
                    assert_eq!(pd0_now, pd0_before, "a QP of PD 1 changed a region of PD 0");
                } else {
                    assert_eq!(pd1_now, pd1_before, "a QP of PD 0 changed a region of PD 1");
                }
            }
        }
    }
}
