//! rdma_cm over the simulated network: two devices connect RC QPs through REQ/REP/RTU on QP1, send
//! over them and disconnect; a UD service is found with SIDR; refusals and an unanswered REQ come
//! back as the events rdma_cm programs expect. Clean and lossy cables.

use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{
    Access, CmChannel, CmEventKind, CmId, CmIdEvent, ConnParam, Context, Cq, Mr, PortSpace, QpInitAttr,
    QpState, QpType, RecvWr, SendWr, Sge, UdDest, WcStatus, WorkCompletion, WrOpcode,
};
use nicsim::LinkConfig;
use std::net::SocketAddr;
use std::time::Duration;

const PORT: u16 = 7174;

struct Side {
    ch: CmChannel,
    cq: Cq,
    mr: Mr,
    pd: engine::verbs::Pd,
    events: Vec<CmIdEvent>,
}

fn side(ctx: &mut Context) -> Side {
    let ch = ctx.cm_create_channel().unwrap();
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(256).unwrap();
    let mr =
        ctx.reg_mr(pd, 1 << 16, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    Side { ch, cq, mr, pd, events: Vec::new() }
}

fn pair(loss: f64, seed: u64) -> SimPair {
    let link = LinkConfig { loss, ..LinkConfig::default() };
    SimPair::new(&PairConfig { qps: 0, link, seed, ..PairConfig::default() }).unwrap()
}

fn addr(ctx: &Context, port: u16) -> SocketAddr {
    SocketAddr::new(ctx.gid(), port)
}

fn drain(ctx: &mut Context, s: &mut Side) {
    while let Some(ev) = ctx.cm_get_event(s.ch).unwrap() {
        s.events.push(ev);
    }
}

fn kinds(s: &Side) -> Vec<CmEventKind> {
    s.events.iter().map(|e| e.kind).collect()
}

/// The client's (a) and server's (b) consumers, as rping's: the server accepts every request with
/// a QP of its own; the client resolves, attaches a QP and connects.
fn connect_rc(p: &mut SimPair, a: &mut Side, b: &mut Side, limit: Duration) -> (CmId, CmId) {
    let listen = p.b.cm_create_id(b.ch, PortSpace::Tcp).unwrap();
    p.b.cm_bind(listen, addr(&p.b, PORT)).unwrap();
    p.b.cm_listen(listen, 8).unwrap();
    let id = p.a.cm_create_id(a.ch, PortSpace::Tcp).unwrap();
    let dst = addr(&p.b, PORT);
    p.a.cm_resolve_addr(id, None, dst).unwrap();
    drain(&mut p.a, a);
    assert_eq!(kinds(a), [CmEventKind::AddrResolved]);
    p.a.cm_resolve_route(id).unwrap();
    drain(&mut p.a, a);
    let qp = p.a.create_qp(a.pd, &QpInitAttr::rc(a.cq)).unwrap();
    p.a.cm_attach_qp(id, qp).unwrap();
    let param = ConnParam {
        private_data: b"client hello".to_vec(),
        responder_resources: 4,
        initiator_depth: 3,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    p.a.cm_connect(id, &param).unwrap();
    let mut child = None;
    let (pd_b, cq_b) = (b.pd, b.cq);
    let up = p
        .run_until(limit, |p| {
            drain(&mut p.a, a);
            drain(&mut p.b, b);
            if child.is_none() {
                if let Some(req) = b.events.iter().find(|e| e.kind == CmEventKind::ConnectRequest) {
                    assert_eq!(req.listen_id, Some(listen));
                    assert!(req.param.private_data.starts_with(b"client hello"));
                    // Seen from the server: it may send 3 READs at once and take 4.
                    assert_eq!((req.param.responder_resources, req.param.initiator_depth), (3, 4));
                    let qp = p.b.create_qp(pd_b, &QpInitAttr::rc(cq_b)).unwrap();
                    p.b.cm_attach_qp(req.id, qp).unwrap();
                    let acc = ConnParam {
                        private_data: b"server hello".to_vec(),
                        responder_resources: 2,
                        initiator_depth: 2,
                        rnr_retry_count: 7,
                        ..ConnParam::default()
                    };
                    p.b.cm_accept(req.id, &acc).unwrap();
                    child = Some(req.id);
                }
            }
            a.events.iter().any(|e| e.kind == CmEventKind::Established)
                && b.events.iter().any(|e| e.kind == CmEventKind::Established)
        })
        .unwrap();
    assert!(up, "not connected: a {:?}\nb {:?}", kinds(a), kinds(b));
    let est = a.events.iter().find(|e| e.kind == CmEventKind::Established).unwrap();
    assert!(est.param.private_data.starts_with(b"server hello"));
    (id, child.unwrap())
}

/// Sends `msg` from a's QP to b's and checks it arrived.
fn send_over(p: &mut SimPair, a: &Side, b: &Side, id_a: CmId, id_b: CmId) {
    let qa = p.a.cm_qp(id_a).unwrap().unwrap();
    let qb = p.b.cm_qp(id_b).unwrap().unwrap();
    let sge_b = Sge { addr: b.mr.addr, length: 64, lkey: b.mr.lkey };
    p.b.post_recv(qb, &[RecvWr { wr_id: 9, sg_list: vec![sge_b] }]).unwrap();
    p.a.mr_bytes_mut(&a.mr).unwrap()[..5].copy_from_slice(b"hello");
    let sge_a = Sge { addr: a.mr.addr, length: 5, lkey: a.mr.lkey };
    p.a.post_send(qa, &[SendWr::new(1, WrOpcode::Send, vec![sge_a])]).unwrap();
    let (mut wa, mut wb): (Vec<WorkCompletion>, Vec<WorkCompletion>) = (Vec::new(), Vec::new());
    let (cq_a, cq_b) = (a.cq, b.cq);
    let done = p
        .run_until(Duration::from_secs(60), |p| {
            p.a.poll_cq(cq_a, &mut wa, 16).unwrap();
            p.b.poll_cq(cq_b, &mut wb, 16).unwrap();
            !wa.is_empty() && !wb.is_empty()
        })
        .unwrap();
    assert!(done);
    assert_eq!((wa[0].status, wb[0].status, wb[0].byte_len), (WcStatus::Success, WcStatus::Success, 5));
    assert_eq!(&p.b.mr_bytes(&b.mr).unwrap()[..5], b"hello");
}

fn disconnect(p: &mut SimPair, a: &mut Side, b: &mut Side, id_a: CmId, id_b: CmId) {
    p.a.cm_disconnect(id_a).unwrap();
    let down = p
        .run_until(p.net.now() + Duration::from_secs(60), |p| {
            drain(&mut p.a, a);
            drain(&mut p.b, b);
            if b.events.last().is_some_and(|e| e.kind == CmEventKind::Disconnected && e.id == id_b) {
                // The passive side answers (the DREP), as rping does.
                let _ = p.b.cm_disconnect(id_b);
            }
            a.events.iter().any(|e| e.kind == CmEventKind::Disconnected)
        })
        .unwrap();
    assert!(down, "a {:?}\nb {:?}", kinds(a), kinds(b));
    assert_eq!(b.events.iter().filter(|e| e.kind == CmEventKind::Disconnected).count(), 1);
    let qb = p.b.cm_qp(id_b).unwrap().unwrap();
    assert_eq!(p.b.query_qp(qb).unwrap().0, QpState::Error);
}

#[test]
fn rc_connect_send_disconnect_clean() {
    let mut p = pair(0.0, 1);
    let (mut a, mut b) = (side(&mut p.a), side(&mut p.b));
    let (ia, ib) = connect_rc(&mut p, &mut a, &mut b, Duration::from_secs(1));
    let (qa, qb) = (p.a.cm_qp(ia).unwrap().unwrap(), p.b.cm_qp(ib).unwrap().unwrap());
    // The exchange set both QPs up against each other with the negotiated limits.
    let (sa, attr_a) = p.a.query_qp(qa).unwrap();
    let (sb, attr_b) = p.b.query_qp(qb).unwrap();
    assert_eq!((sa, sb), (QpState::Rts, QpState::Rts));
    assert_eq!((attr_a.dest_qp_num, attr_b.dest_qp_num), (Some(qb.qpn()), Some(qa.qpn())));
    assert_eq!(attr_a.sq_psn, attr_b.rq_psn);
    assert_eq!(attr_b.sq_psn, attr_a.rq_psn);
    assert_eq!(attr_b.max_dest_rd_atomic, Some(2));
    let (la, ra) = p.a.cm_addrs(ia).unwrap();
    let (lb, rb) = p.b.cm_addrs(ib).unwrap();
    assert_eq!((la, rb), (rb, la), "the passive side sees the client's address and port");
    assert_eq!((ra, lb), (Some(addr(&p.b, PORT)), Some(addr(&p.b, PORT))));
    send_over(&mut p, &a, &b, ia, ib);
    disconnect(&mut p, &mut a, &mut b, ia, ib);
    p.a.cm_destroy_id(ia).unwrap();
    p.b.cm_destroy_id(ib).unwrap();
}

#[test]
fn rc_connects_over_a_lossy_cable() {
    for seed in 1..6 {
        let mut p = pair(0.2, seed);
        let (mut a, mut b) = (side(&mut p.a), side(&mut p.b));
        let (ia, ib) = connect_rc(&mut p, &mut a, &mut b, Duration::from_secs(120));
        assert_eq!(a.events.iter().filter(|e| e.kind == CmEventKind::Established).count(), 1);
        assert_eq!(b.events.iter().filter(|e| e.kind == CmEventKind::Established).count(), 1);
        send_over(&mut p, &a, &b, ia, ib);
        disconnect(&mut p, &mut a, &mut b, ia, ib);
    }
}

#[test]
fn a_port_nobody_listens_on_is_rejected() {
    let mut p = pair(0.0, 2);
    let (mut a, _b) = (side(&mut p.a), side(&mut p.b));
    let id = p.a.cm_create_id(a.ch, PortSpace::Tcp).unwrap();
    p.a.cm_resolve_addr(id, None, addr(&p.b, 9999)).unwrap();
    p.a.cm_resolve_route(id).unwrap();
    p.a.cm_connect(id, &ConnParam { qp_num: 0x99, ..ConnParam::default() }).unwrap();
    let ch = a.ch;
    p.run_until(Duration::from_secs(3), |p| {
        while let Some(e) = p.a.cm_get_event(ch).unwrap() {
            a.events.push(e);
        }
        a.events.iter().any(|e| e.kind == CmEventKind::Rejected)
    })
    .unwrap();
    let rej = a.events.iter().find(|e| e.kind == CmEventKind::Rejected).expect("a REJ");
    assert_eq!(rej.status, 8, "IBTA reason 8: invalid service ID");
}

#[test]
fn the_server_may_refuse() {
    let mut p = pair(0.0, 3);
    let (mut a, mut b) = (side(&mut p.a), side(&mut p.b));
    let listen = p.b.cm_create_id(b.ch, PortSpace::Tcp).unwrap();
    p.b.cm_bind(listen, addr(&p.b, PORT)).unwrap();
    p.b.cm_listen(listen, 8).unwrap();
    assert_eq!(
        p.b.cm_create_id(b.ch, PortSpace::Tcp).and_then(|i| p.b.cm_bind(i, addr(&p.b, PORT))),
        Err(engine::verbs::VerbsError::AddrInUse)
    );
    let id = p.a.cm_create_id(a.ch, PortSpace::Tcp).unwrap();
    p.a.cm_resolve_addr(id, None, addr(&p.b, PORT)).unwrap();
    p.a.cm_resolve_route(id).unwrap();
    p.a.cm_connect(id, &ConnParam { qp_num: 0x99, ..ConnParam::default() }).unwrap();
    let (cha, chb) = (a.ch, b.ch);
    p.run_until(Duration::from_secs(1), |p| {
        while let Some(e) = p.b.cm_get_event(chb).unwrap() {
            if e.kind == CmEventKind::ConnectRequest {
                p.b.cm_reject(e.id, b"go away").unwrap();
            }
            b.events.push(e);
        }
        while let Some(e) = p.a.cm_get_event(cha).unwrap() {
            a.events.push(e);
        }
        a.events.iter().any(|e| e.kind == CmEventKind::Rejected)
    })
    .unwrap();
    let rej = a.events.iter().find(|e| e.kind == CmEventKind::Rejected).expect("a REJ");
    assert_eq!(rej.status, 28, "IBTA reason 28: consumer reject");
    assert!(rej.param.private_data.starts_with(b"go away"));
}

#[test]
fn ud_service_found_with_sidr_and_used() {
    let mut p = pair(0.1, 4);
    let (mut a, mut b) = (side(&mut p.a), side(&mut p.b));
    let listen = p.b.cm_create_id(b.ch, PortSpace::Udp).unwrap();
    p.b.cm_bind(listen, addr(&p.b, PORT)).unwrap();
    p.b.cm_listen(listen, 8).unwrap();
    let id = p.a.cm_create_id(a.ch, PortSpace::Udp).unwrap();
    p.a.cm_resolve_addr(id, None, addr(&p.b, PORT)).unwrap();
    p.a.cm_resolve_route(id).unwrap();
    let qa = p.a.create_qp(a.pd, &QpInitAttr { qp_type: QpType::Ud, ..QpInitAttr::rc(a.cq) }).unwrap();
    p.a.cm_attach_qp(id, qa).unwrap();
    assert_eq!(p.a.query_qp(qa).unwrap().0, QpState::Rts, "a UD QP is ready once attached");
    p.a.cm_connect(id, &ConnParam { private_data: b"udp?".to_vec(), ..ConnParam::default() }).unwrap();
    let (pd_b, cq_b, cha, chb) = (b.pd, b.cq, a.ch, b.ch);
    let mut qb = None;
    let ok = p
        .run_until(Duration::from_secs(120), |p| {
            while let Some(e) = p.b.cm_get_event(chb).unwrap() {
                if e.kind == CmEventKind::ConnectRequest {
                    assert!(e.param.private_data.starts_with(b"udp?"));
                    let q =
                        p.b.create_qp(pd_b, &QpInitAttr { qp_type: QpType::Ud, ..QpInitAttr::rc(cq_b) })
                            .unwrap();
                    p.b.cm_attach_qp(e.id, q).unwrap();
                    p.b.cm_accept(e.id, &ConnParam::default()).unwrap();
                    qb = Some(q);
                }
                b.events.push(e);
            }
            while let Some(e) = p.a.cm_get_event(cha).unwrap() {
                a.events.push(e);
            }
            a.events.iter().any(|e| e.kind == CmEventKind::Established)
        })
        .unwrap();
    assert!(ok, "{:?}", kinds(&a));
    let est = a.events.iter().find(|e| e.kind == CmEventKind::Established).unwrap();
    let ud = est.ud.expect("UD parameters");
    assert_eq!((ud.qp_num, ud.qkey), (qb.unwrap().qpn(), engine::verbs::RDMA_UDP_QKEY));
    // Send a datagram to the service with what the lookup returned.
    let ah = p.a.create_ah(a.pd, &ud.ah).unwrap();
    let qb = qb.unwrap();
    let sge_b = Sge { addr: b.mr.addr, length: 128, lkey: b.mr.lkey };
    p.b.post_recv(qb, &[RecvWr { wr_id: 1, sg_list: vec![sge_b] }]).unwrap();
    let sge_a = Sge { addr: a.mr.addr, length: 8, lkey: a.mr.lkey };
    let mut wr = SendWr::new(2, WrOpcode::Send, vec![sge_a]);
    wr.ud = Some(UdDest { ah, remote_qpn: ud.qp_num, remote_qkey: ud.qkey });
    // The datagram may be lost on this cable: send until one arrives.
    let mut wb = Vec::new();
    for _ in 0..50 {
        p.a.post_send(qa, std::slice::from_ref(&wr)).unwrap();
        let mut wa = Vec::new();
        p.run_until(p.net.now() + Duration::from_millis(50), |p| {
            p.a.poll_cq(a.cq, &mut wa, 16).unwrap();
            p.b.poll_cq(b.cq, &mut wb, 16).unwrap();
            !wb.is_empty()
        })
        .unwrap();
        if !wb.is_empty() {
            break;
        }
    }
    assert_eq!(wb.first().map(|w| w.byte_len), Some(8 + 40), "a GRH and the 8 bytes");
}

#[test]
fn an_unanswered_request_ends_unreachable() {
    // Nothing gets through: every REQ retry is lost.
    let mut p = pair(1.0, 5);
    let mut a = side(&mut p.a);
    let id = p.a.cm_create_id(a.ch, PortSpace::Tcp).unwrap();
    p.a.cm_resolve_addr(id, None, addr(&p.b, PORT)).unwrap();
    p.a.cm_resolve_route(id).unwrap();
    p.a.cm_connect(id, &ConnParam { qp_num: 0x99, ..ConnParam::default() }).unwrap();
    let ch = a.ch;
    let done = p
        .run_until(Duration::from_secs(60), |p| {
            while let Some(e) = p.a.cm_get_event(ch).unwrap() {
                a.events.push(e);
            }
            a.events.iter().any(|e| e.kind == CmEventKind::Unreachable)
        })
        .unwrap();
    assert!(done, "{:?}", kinds(&a));
    assert!(p.a.stats().tx_frames >= 16, "the REQ and its 15 retries");
}

#[test]
fn a_process_that_goes_closes_its_connections() {
    let mut p = pair(0.0, 6);
    let (mut a, mut b) = (side(&mut p.a), side(&mut p.b));
    let (_, ib) = connect_rc(&mut p, &mut a, &mut b, Duration::from_secs(1));
    // The client's process exits without disconnecting: its library closes what is left.
    p.a.cm_shutdown();
    assert!(!p.a.cm_settled());
    let down = p
        .run_until(p.net.now() + Duration::from_secs(5), |p| {
            drain(&mut p.b, &mut b);
            b.events.iter().any(|e| e.kind == CmEventKind::Disconnected && e.id == ib) && p.a.cm_settled()
        })
        .unwrap();
    assert!(down, "b {:?}", kinds(&b));
}
