//! Feeds arbitrary packet sequences into a connected RC, UC or UD QP (with or without an SRQ) that
//! has work outstanding both ways, running its timers and transmissions in between. Packets are
//! well-formed headers (the opcode table decides which) with fuzzed opcodes, PSNs, keys, addresses,
//! lengths and payloads. Checks: no panic; a region without write access never changes; every frame
//! the QP sends verifies; the QP ends in RTS (and still sends) or in the error state.
//!
//! Input: byte 0 picks the QP type, SRQ and DCQCN (bit 0x20: CNPs in and out, paced requests); then
//! 16-byte packet descriptions followed by their payload bytes.

use engine::roce::{QpConfig, QueuePair, RecvWqe, RxMeta};
use engine::verbs::{
    Access, AddressVector, MemTable, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendWr, Sge, UdDest,
    WrOpcode,
};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use wire::FrameRepr;

use crate::roce_desc;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const QKEY: u32 = 0x1234;

struct World {
    qp: QueuePair,
    mem: MemTable,
    srq: Option<VecDeque<RecvWqe>>,
    /// (key, base address) of: a read-only region, a local-write-only region no request uses, a
    /// receive region, a remote-writable target.
    ro: (u32, u64),
    local: (u32, u64),
    recv: (u32, u64),
    target: (u32, u64),
}

fn setup(sel: u8) -> World {
    let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud][usize::from(sel % 3)];
    let use_srq = sel & 0x10 != 0 && qp_type != QpType::Uc;
    let mut mem = MemTable::default();
    let ro = mem.register(0, 4096, Access::REMOTE_READ).unwrap();
    let local = mem.register(0, 4096, Access::LOCAL_WRITE).unwrap();
    let recv = mem.register(0, 16384, Access::LOCAL_WRITE).unwrap();
    let target = mem.register(0, 8192, Access::ALL).unwrap();
    let cfg = QpConfig {
        qp_type,
        srq: use_srq,
        port_mtu: Mtu::Mtu1024,
        fixed_src_port: None,
        qpn: 0x11,
        pd: 0,
        cap: QpCap::default(),
        sq_sig_all: true,
        mac: [2, 0, 0, 0, 0, 1],
        gid: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dcqcn: (sel & 0x20 != 0).then(|| engine::roce::dcqcn::DcqcnConfig::new(10_000_000_000)),
    };
    let mut qp = QueuePair::new(cfg);
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    qp.modify(
        QpState::Init,
        &QpAttr { qp_access_flags: Some(access), qkey: Some(QKEY), ..QpAttr::default() },
    )
    .unwrap();
    let mut av = AddressVector::new(PEER);
    av.dmac = Some([2, 0, 0, 0, 0, 2]);
    let rtr = QpAttr {
        ah_attr: Some(av),
        path_mtu: Some(Mtu::Mtu256),
        dest_qp_num: Some(0x12),
        rq_psn: Some(0),
        max_dest_rd_atomic: Some(4),
        min_rnr_timer: Some(1),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rtr, &rtr).unwrap();
    let rts = QpAttr {
        sq_psn: Some(0),
        timeout: Some(1),
        retry_cnt: Some(7),
        rnr_retry: Some(7),
        max_rd_atomic: Some(4),
        ..QpAttr::default()
    };
    qp.modify(QpState::Rts, &rts).unwrap();
    let sge = |off: u64, len: u32| Sge { addr: recv.1 + off, length: len, lkey: recv.0 };
    let mut srq = use_srq.then(VecDeque::new);
    for i in 0..4u64 {
        let wr = RecvWr { wr_id: 100 + i, sg_list: vec![sge(i * 2048, 2048)] };
        match &mut srq {
            Some(q) => q.push_back(RecvWqe::new(&wr)),
            None => qp.post_recv(&wr).unwrap(),
        }
    }
    let path = engine::roce::Path {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst_ip: PEER,
        src_port: 0,
        dst_port: wire::ROCEV2_UDP_PORT,
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    };
    let ops: Vec<WrOpcode> = match qp_type {
        QpType::Rc => vec![
            WrOpcode::Send,
            WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 7 },
            WrOpcode::RdmaRead { remote_addr: 0x1000, rkey: 7 },
            WrOpcode::AtomicFetchAndAdd { remote_addr: 0x1000, rkey: 7, add: 1 },
        ],
        QpType::Uc => {
            vec![WrOpcode::Send, WrOpcode::RdmaWriteWithImm { remote_addr: 0x1000, rkey: 7, imm: 1 }]
        }
        QpType::Ud => vec![WrOpcode::Send, WrOpcode::SendWithImm { imm: 3 }],
    };
    for (i, op) in ops.into_iter().enumerate() {
        let len = if matches!(op, WrOpcode::AtomicFetchAndAdd { .. }) { 8 } else { 600 };
        let mut wr = SendWr::new(i as u64, op, vec![sge(10240 + i as u64 * 1024, len)]);
        if qp_type == QpType::Ud {
            wr.ud = Some(UdDest { ah: dummy_ah(), remote_qpn: 0x12, remote_qkey: QKEY });
        }
        qp.post_send(&wr, &mem, (qp_type == QpType::Ud).then_some(&path)).unwrap();
    }
    World { qp, mem, srq, ro, local, recv, target }
}

/// An address handle value for UD requests: the QP core takes the path beside the request and
/// only reads the QPN and Q_Key, but a request names a handle, and handles come from a Context.
fn dummy_ah() -> engine::verbs::Ah {
    static AH: std::sync::OnceLock<engine::verbs::Ah> = std::sync::OnceLock::new();
    *AH.get_or_init(|| {
        let (_net, port, _) = engine::datapath::sim::SimNet::pair(0, Default::default(), Default::default());
        let mut ctx = engine::verbs::Context::open(port);
        let pd = ctx.alloc_pd();
        ctx.create_ah(pd, &AddressVector::new(PEER)).unwrap()
    })
}

pub fn run(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else { return };
    let mut w = setup(sel);
    let ro_before = w.mem.bytes(w.ro.0).unwrap().to_vec();
    let local_before = w.mem.bytes(w.local.0).unwrap().to_vec();
    let ip_header = [0x45u8, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
    let meta = RxMeta { src: PEER, ip_header: &ip_header };
    // The same header marked ECN CE (answered with a CNP when DCQCN runs).
    let ce_header = [0x45u8, 3, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
    let ce_meta = RxMeta { src: PEER, ip_header: &ce_header };
    let mut buf = vec![0u8; 8192];
    let mut now = Duration::ZERO;
    loop {
        while let Some(n) = w.qp.poll_transmit(now, &w.mem, &mut buf) {
            let f =
                FrameRepr::parse_verified(&buf[..n], &Default::default()).expect("the QP sends valid frames");
            assert!(f.roce().is_some());
        }
        while w.qp.poll_completion().is_some() {}
        if rest.len() < roce_desc::DESC {
            break;
        }
        let (d, tail) = rest.split_at(roce_desc::DESC);
        let plen = usize::from(d[15]).min(tail.len());
        let (payload, tail) = tail.split_at(plen);
        rest = tail;
        let regions = [w.target, w.ro, w.recv, w.local];
        if let Some(pkt) = roce_desc::packet(d, payload, &regions, 0x11, QKEY, 0x12) {
            let m = if d[5] & 4 != 0 { &ce_meta } else { &meta };
            w.qp.handle_packet(now, m, &pkt, &mut w.mem, w.srq.as_mut());
        }
        // Remote requests may write only where REMOTE_WRITE/REMOTE_ATOMIC allow, receives only into
        // posted buffers: the read-only region and the unused local-write region never change.
        assert_eq!(w.mem.bytes(w.ro.0).unwrap(), &ro_before[..], "a region without write access changed");
        assert_eq!(
            w.mem.bytes(w.local.0).unwrap(),
            &local_before[..],
            "a region without remote access changed"
        );
        now += Duration::from_micros(3);
        if w.qp.poll_timeout().is_some_and(|t| t <= now) {
            w.qp.handle_timeout(now);
        }
    }
    // The QP either keeps working (RTS, and every frame it sent above verified) or failed into
    // the error state; nothing else.
    assert!(matches!(w.qp.state(), QpState::Rts | QpState::Error), "the QP ended in {:?}", w.qp.state());
}
