//! The kernel UDP datapath over loopback (issue 6, in part): two contexts on 127.0.x.1 and 127.0.x.2
//! port 4791 in one process, real sockets, real kernel IP headers. The receive side verifies every
//! ICRC over headers rebuilt with IP ID 0, so this also shows that Linux sends ID 0 on an
//! unconnected don't-fragment socket (roce-wire.md §1.9).

use engine::datapath::udp::{RxIcrc, UdpPort};
use engine::simpair::{PairConfig, connect};
use engine::verbs::{
    Access, AddressVector, Context, Mr, QpInitAttr, QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus,
    WorkCompletion, WrOpcode,
};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

struct Side {
    ctx: Context,
    pd: engine::verbs::Pd,
    cq: engine::verbs::Cq,
    qp: engine::verbs::Qp,
    mr: Mr,
}

fn open(ip: Ipv4Addr, qp_type: QpType) -> Side {
    let port = UdpPort::bind(ip, 4791, RxIcrc::Verify).expect("bind 4791 on a loopback address");
    let mut ctx = Context::open(port);
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(4096).unwrap();
    let qp = ctx.create_qp(pd, &QpInitAttr { qp_type, ..QpInitAttr::rc(cq) }).unwrap();
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = ctx.reg_mr(pd, 1 << 20, all).unwrap();
    Side { ctx, pd, cq, qp, mr }
}

fn pair(net: u8, qp_type: QpType) -> (Side, Side, PairConfig) {
    let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, net, 1), Ipv4Addr::new(127, 0, net, 2));
    let mut a = open(ip_a, qp_type);
    let mut b = open(ip_b, qp_type);
    let cfg = PairConfig { qp_type, timeout: 10, ..PairConfig::default() };
    connect(&mut a.ctx, a.qp, b.qp.qpn(), ip_b.into(), 100, 200, &cfg).unwrap();
    connect(&mut b.ctx, b.qp, a.qp.qpn(), ip_a.into(), 200, 100, &cfg).unwrap();
    (a, b, cfg)
}

/// Drives both sides until `want` completions arrived on each (a, b) or 10 s pass.
fn drive(a: &mut Side, b: &mut Side, want: (usize, usize)) -> (Vec<WorkCompletion>, Vec<WorkCompletion>) {
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(10);
    while (wa.len() < want.0 || wb.len() < want.1) && Instant::now() < end {
        a.ctx.progress().unwrap();
        b.ctx.progress().unwrap();
        a.ctx.poll_cq(a.cq, &mut wa, 256).unwrap();
        b.ctx.poll_cq(b.cq, &mut wb, 256).unwrap();
    }
    (wa, wb)
}

fn sge(mr: &Mr, off: u64, len: u32) -> Sge {
    Sge { addr: mr.addr + off, length: len, lkey: mr.lkey }
}

#[test]
fn rc_send_write_read_atomic_over_kernel_udp() {
    let (mut a, mut b, _) = pair(11, QpType::Rc);
    for (i, x) in a.ctx.mr_bytes_mut(&a.mr).unwrap().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    for (i, x) in b.ctx.mr_bytes_mut(&b.mr).unwrap()[512 << 10..].iter_mut().enumerate() {
        *x = (i % 241) as u8;
    }
    // 20 SENDs of 3000 bytes, a 64 KiB WRITE, a 64 KiB READ, a FETCH_ADD.
    for k in 0..20u64 {
        b.ctx.post_recv(b.qp, &[RecvWr { wr_id: k, sg_list: vec![sge(&b.mr, k * 4096, 4096)] }]).unwrap();
    }
    let mut wrs: Vec<SendWr> =
        (0..20u64).map(|k| SendWr::new(k, WrOpcode::Send, vec![sge(&a.mr, k * 3000, 3000)])).collect();
    let (raddr, rkey) = (b.mr.addr, b.mr.rkey);
    wrs.push(SendWr::new(
        100,
        WrOpcode::RdmaWrite { remote_addr: raddr + (256 << 10), rkey },
        vec![sge(&a.mr, 0, 65536)],
    ));
    wrs.push(SendWr::new(
        101,
        WrOpcode::RdmaRead { remote_addr: raddr + (512 << 10), rkey },
        vec![sge(&a.mr, 256 << 10, 65536)],
    ));
    wrs.push(SendWr::new(
        102,
        WrOpcode::AtomicFetchAndAdd { remote_addr: raddr + (768 << 10), rkey, add: 5 },
        vec![sge(&a.mr, 512 << 10, 8)],
    ));
    a.ctx.post_send(a.qp, &wrs).unwrap();
    let (wa, wb) = drive(&mut a, &mut b, (23, 20));
    assert_eq!(wa.len(), 23, "sender completions: {wa:?}");
    assert!(wa.iter().all(|w| w.status == WcStatus::Success), "{wa:?}");
    assert_eq!(wb.len(), 20);
    let (ma, mb) = (a.ctx.mr_bytes(&a.mr).unwrap().to_vec(), b.ctx.mr_bytes(&b.mr).unwrap());
    for k in 0..20usize {
        assert!(mb[k * 4096..k * 4096 + 3000] == ma[k * 3000..k * 3000 + 3000], "SEND {k}");
    }
    assert!(mb[256 << 10..(256 << 10) + 65536] == ma[..65536], "WRITE");
    assert!(ma[256 << 10..(256 << 10) + 65536] == mb[512 << 10..(512 << 10) + 65536], "READ");
    let word = |m: &[u8], at: usize| u64::from_ne_bytes(m[at..at + 8].try_into().unwrap());
    // b's pattern there was the original value: a got it back, b holds it plus 5.
    let orig: Vec<u8> = (0..8).map(|i| (((256 << 10) + i) % 241) as u8).collect();
    assert_eq!(word(&ma, 512 << 10), word(&orig, 0), "FETCH_ADD returned the original");
    assert_eq!(word(mb, 768 << 10), word(&orig, 0).wrapping_add(5), "FETCH_ADD added 5");
    // Every frame verified its ICRC against the rebuilt headers: none dropped as bad.
    assert_eq!((a.ctx.stats().rx_bad, b.ctx.stats().rx_bad), (0, 0));
}

#[test]
fn uc_and_ud_sends_over_kernel_udp() {
    for (net, qp_type) in [(12u8, QpType::Uc), (13, QpType::Ud)] {
        let (mut a, mut b, cfg) = pair(net, qp_type);
        let gid_b = b.ctx.gid();
        let ah = (qp_type == QpType::Ud).then(|| a.ctx.create_ah(a.pd, &AddressVector::new(gid_b)).unwrap());
        for k in 0..10u64 {
            b.ctx.post_recv(b.qp, &[RecvWr { wr_id: k, sg_list: vec![sge(&b.mr, k * 4096, 4096)] }]).unwrap();
        }
        let wrs: Vec<SendWr> = (0..10u64)
            .map(|k| {
                let mut w =
                    SendWr::new(k, WrOpcode::SendWithImm { imm: k as u32 }, vec![sge(&a.mr, k * 1000, 1000)]);
                w.ud = ah.map(|ah| UdDest { ah, remote_qpn: b.qp.qpn(), remote_qkey: cfg.qkey });
                w
            })
            .collect();
        a.ctx.post_send(a.qp, &wrs).unwrap();
        let (wa, wb) = drive(&mut a, &mut b, (10, 10));
        assert_eq!((wa.len(), wb.len()), (10, 10), "{qp_type:?}");
        let grh = if qp_type == QpType::Ud { 40 } else { 0 };
        for w in &wb {
            assert_eq!((w.status, w.opcode, w.byte_len), (WcStatus::Success, WcOpcode::Recv, 1000 + grh));
            let k = w.imm_data.unwrap() as usize;
            let got = &b.ctx.mr_bytes(&b.mr).unwrap()[w.wr_id as usize * 4096 + grh as usize..][..1000];
            assert!(
                got == &a.ctx.mr_bytes(&a.mr).unwrap()[k * 1000..k * 1000 + 1000],
                "{qp_type:?} message {k}"
            );
        }
    }
}

/// Adaptive waiting (issue 27): an idle context spins for the spin time, then sleeps on its socket
/// until the next QP timer (here none: the sleep's limit), and wakes at once when a frame arrives.
#[test]
fn an_idle_context_sleeps_on_its_socket_until_a_frame_arrives() {
    use engine::progress::{Idle, Waiter};
    let (mut a, mut b, _) = pair(14, QpType::Rc);
    let mut waiter = Waiter::new(Idle::Adaptive(Duration::from_millis(1)));
    // Work resets the spin; the first idle rounds spin and return at once.
    let t = Instant::now();
    assert!(!waiter.after_round(&a.ctx, true, None, Duration::from_secs(1)).unwrap());
    assert!(!waiter.after_round(&a.ctx, false, None, Duration::from_secs(1)).unwrap());
    assert!(t.elapsed() < Duration::from_millis(500));
    std::thread::sleep(Duration::from_millis(2));
    // Spun long enough: nothing comes, so it sleeps the whole 50 ms given.
    let t = Instant::now();
    assert!(waiter.after_round(&a.ctx, false, None, Duration::from_millis(50)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(45), "{:?}", t.elapsed());
    // A SEND from b: a's socket is readable, so a long sleep ends at once.
    b.ctx.post_recv(b.qp, &[RecvWr { wr_id: 0, sg_list: vec![sge(&b.mr, 0, 4096)] }]).unwrap();
    a.ctx.post_recv(a.qp, &[RecvWr { wr_id: 0, sg_list: vec![sge(&a.mr, 0, 4096)] }]).unwrap();
    b.ctx.post_send(b.qp, &[SendWr::new(1, WrOpcode::Send, vec![sge(&b.mr, 0, 100)])]).unwrap();
    b.ctx.progress().unwrap();
    let t = Instant::now();
    assert!(waiter.after_round(&a.ctx, false, None, Duration::from_secs(5)).unwrap());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(a.ctx.progress().unwrap() > 0, "the frame that woke it is there");
    assert_eq!(waiter.sleeps(), 2);
}
