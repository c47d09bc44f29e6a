//! The kernel UDP datapath over loopback (issue 6, in part): two contexts on 127.0.x.1 and 127.0.x.2
//! port 4791 in one process, real sockets, real kernel IP headers. The receive side verifies every
//! ICRC over headers rebuilt with IP ID 0, so this also shows that Linux sends ID 0 on an
//! unconnected don't-fragment socket (roce-wire.md §1.9).

use engine::datapath::udp::{RxIcrc, UdpPort};
use engine::datapath::{Datapath, TxError};
use engine::simpair::{PairConfig, connect};
use engine::verbs::{
    Access, AddressVector, Context, Mr, QpInitAttr, QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus,
    WorkCompletion, WrOpcode,
};
use frame::Frame;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};
use wire::frame::ETH_IPV4_UDP_LEN as HEADERS;

struct Side {
    ctx: Context,
    pd: engine::verbs::Pd,
    cq: engine::verbs::Cq,
    qp: engine::verbs::Qp,
    mr: Mr,
}

fn open(ip: Ipv4Addr, qp_type: QpType) -> Side {
    open_port(UdpPort::bind(ip, 4791, RxIcrc::Verify).expect("bind 4791 on a loopback address"), qp_type)
}

fn open_port(port: UdpPort, qp_type: QpType) -> Side {
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

/// A frame as the engine builds one: Ethernet, IPv4 (ID 0, DF) and UDP headers to `to`, then
/// `len` bytes of payload that start with `seq`.
fn datagram(port: &mut UdpPort, to: SocketAddrV4, seq: u32, len: usize) -> Frame {
    use wire::ethernet::{EthernetAddress, ethertype};
    use wire::{EthernetRepr, Ipv4Repr, UdpChecksum, UdpRepr};
    let mut f = port.alloc();
    let b = f.buffer_mut();
    let mac = EthernetAddress([2, 0, 0, 0, 0, 0]);
    let eth = EthernetRepr { dst_addr: mac, src_addr: mac, vlan_tags: [None; 2], ethertype: ethertype::IPV4 };
    let ip = Ipv4Repr {
        dscp_ecn: 0,
        ident: 0,
        flags_frag: wire::ipv4::DONT_FRAGMENT,
        ttl: 64,
        protocol: wire::ipv4::PROTO_UDP,
        src_addr: Ipv4Addr::LOCALHOST,
        dst_addr: *to.ip(),
        options: &[],
        payload_len: wire::udp::HEADER_LEN + len,
    };
    let udp = UdpRepr { src_port: 4791, dst_port: to.port(), checksum: UdpChecksum::Zero };
    let at = eth.emit(b).unwrap();
    let at = at + ip.emit(&mut b[at..]).unwrap();
    udp.emit(&mut b[at..], len).unwrap();
    let payload = &mut b[HEADERS..HEADERS + len];
    for (k, x) in payload.iter_mut().enumerate() {
        *x = (k as u32).wrapping_mul(7).wrapping_add(seq) as u8;
    }
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    f.set_len(HEADERS + len);
    f
}

/// The size of datagram `seq` in the tests below: 100 to 1300 bytes.
fn size(seq: u32) -> usize {
    100 + (seq as usize * 37) % 1200
}

/// Receives everything waiting at `port`: checks each datagram came whole from `from` and pushes
/// its sequence number.
fn drain(port: &mut UdpPort, from: SocketAddrV4, got: &mut Vec<u32>) {
    while let Some(f) = port.receive() {
        let b = f.as_slice();
        let seq = u32::from_be_bytes(b[HEADERS..HEADERS + 4].try_into().unwrap());
        assert_eq!(b.len(), HEADERS + size(seq), "datagram {seq}");
        let ip = wire::ipv4::Packet::new_checked(&b[14..]).unwrap();
        let u = wire::udp::Packet::new_checked(&b[34..]).unwrap();
        assert_eq!((ip.src_addr(), u.src_port()), (*from.ip(), from.port()), "datagram {seq}");
        let want = (4..size(seq)).map(|k| (k as u32).wrapping_mul(7).wrapping_add(seq) as u8);
        assert!(b[HEADERS + 4..].iter().copied().eq(want), "datagram {seq}: payload differs");
        got.push(seq);
        port.recycle(f);
    }
}

fn v4(port: &UdpPort) -> SocketAddrV4 {
    match port.local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        a => panic!("{a}"),
    }
}

/// Whether `fd` turns writable within `timeout`.
fn writable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let ts = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
    let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
    poll(&mut fds, Some(&ts)).unwrap() > 0 && fds[0].revents().contains(PollFlags::OUT)
}

/// Batching (`sendmmsg`/`recvmmsg`): a burst of many batches arrives whole, once each and in
/// order, with a system call per batch rather than per datagram.
#[test]
fn a_burst_larger_than_a_batch_arrives_complete_and_in_order() {
    const N: u32 = 250;
    let mut a = UdpPort::bind(Ipv4Addr::new(127, 0, 15, 1), 0, RxIcrc::Absent).unwrap();
    let mut b = UdpPort::bind(Ipv4Addr::new(127, 0, 15, 2), 0, RxIcrc::Absent).unwrap();
    let (from, to) = (v4(&a), v4(&b));
    let mut got = Vec::new();
    for i in 0..N {
        let f = datagram(&mut a, to, i, size(i));
        a.transmit(f).unwrap_or_else(|e| panic!("datagram {i}: {e}"));
        // The receiver takes what came now and then (a socket buffer capped at the default
        // net.core.rmem_max holds some 180 of these).
        if i % 100 == 99 {
            drain(&mut b, from, &mut got);
        }
    }
    a.flush();
    assert!(!a.tx_waiting());
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < N as usize && Instant::now() < end {
        drain(&mut b, from, &mut got);
    }
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!((ca.tx, ca.tx_full, ca.tx_failed, cb.rx, cb.rx_oversized), (250, 0, 0, 250, 0));
    // 250 datagrams: 3 full batches of 64 and the rest at the flush.
    assert_eq!((ca.sendmmsg_calls, ca.sendto_calls), (4, 0), "{ca:?}");
    // The receiver found a backlog each time: a couple of polls, then batches.
    assert!(cb.recvmmsg_datagrams >= 200 && cb.recvmmsg_calls < 20, "{cb:?}");
}

/// A datagram the kernel refuses for good (here: to the broadcast address, without
/// SO_BROADCAST) is counted and dropped, first, in the middle or last of a batch, and the
/// datagrams after it go on in order. The next `transmit` says why (`TxError::Failed`, that frame
/// dropped too), so a run stops with the reason rather than retransmitting.
#[test]
fn a_datagram_refused_for_good_is_counted_and_the_rest_go_on() {
    let mut a = UdpPort::bind(Ipv4Addr::new(127, 0, 16, 1), 0, RxIcrc::Absent).unwrap();
    let mut b = UdpPort::bind(Ipv4Addr::new(127, 0, 16, 2), 0, RxIcrc::Absent).unwrap();
    let (from, to) = (v4(&a), v4(&b));
    let nowhere = SocketAddrV4::new(Ipv4Addr::BROADCAST, to.port());
    let bad = |i: u32| [0, 5, 6, 79, 80, 139].contains(&i);
    let mut reported = Vec::new();
    for i in 0..140 {
        let f = datagram(&mut a, if bad(i) { nowhere } else { to }, i, size(i));
        match a.transmit(f) {
            Ok(()) => {}
            Err(TxError::Failed(why)) => {
                assert_eq!(why, "sendto: refused by the host (firewall?)");
                reported.push(i);
            }
            Err(e) => panic!("datagram {i}: {e}"),
        }
    }
    a.flush();
    // Batches of 64: 0, 5 and 6 fail with the first batch, which the 64th frame fills, and the
    // 65th transmit (64) reports it; 79 and 80 fail with the second (65..=128), reported by 129.
    assert_eq!(reported, [64, 129]);
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < 132 && Instant::now() < end {
        drain(&mut b, from, &mut got);
    }
    assert_eq!(got, (0..140).filter(|&i| !bad(i) && !reported.contains(&i)).collect::<Vec<_>>());
    let c = a.counters();
    assert_eq!((c.tx, c.tx_failed, c.tx_full, c.tx_last_errno), (132, 8, 0, libc::EACCES), "{c:?}");
    assert!(!a.tx_waiting());
}

/// A network namespace of its own whose loopback sends through a token bucket (20 Mbit/s), so
/// that datagrams wait in the queue discipline, charged to the socket that sent them, and a small
/// socket send buffer fills (loopback alone hands a datagram over inside the send call: its socket
/// buffer never fills). Needs root and iproute2; deleted on drop.
struct ShapedLoopback {
    name: String,
}

impl ShapedLoopback {
    /// `None` (the test is skipped) without root or iproute2's `ip` and `tc`.
    fn new(tag: &str) -> Option<ShapedLoopback> {
        let run = |cmd: &str, args: &[&str]| {
            std::process::Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success())
        };
        if !rustix::process::geteuid().is_root() || !run("ip", &["-V"]) || !run("tc", &["-V"]) {
            assert!(std::env::var_os("CI").is_none(), "{tag}: needs root, ip and tc under CI");
            eprintln!("{tag}: skipped: needs root (a network namespace) and iproute2 (ip, tc)");
            return None;
        }
        let ns = ShapedLoopback { name: format!("sr-{tag}-{}", std::process::id()) };
        let n = ns.name.as_str();
        for (cmd, args) in [
            ("ip", &["netns", "add", n][..]),
            ("ip", &["-n", n, "link", "set", "lo", "up"]),
            (
                "tc",
                &[
                    "-n", n, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "20mbit", "burst", "16kb",
                    "latency", "200ms",
                ],
            ),
        ] {
            assert!(run(cmd, args), "{cmd} {args:?} failed");
        }
        Some(ns)
    }

    /// Runs `f` on a thread inside the namespace (sockets belong to the namespace of the thread
    /// that makes them).
    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
        let file = std::fs::File::open(format!("/var/run/netns/{}", self.name)).unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network)).unwrap();
                f()
            });
            t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
        })
    }
}

impl Drop for ShapedLoopback {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Back-pressure through the batch (issue 27): with a small socket send buffer, what the kernel
/// has no room for stays queued in order (the socket's descriptor turns writable when it may go)
/// or, when the batch is full too, comes back to the caller as `TxError::Full`; nothing is
/// dropped.
#[test]
fn a_full_socket_buffer_hands_frames_back_and_loses_none() {
    let Some(ns) = ShapedLoopback::new("udp-bp") else { return };
    ns.run(|| {
        const N: u32 = 600;
        let mut a = UdpPort::bind(Ipv4Addr::new(127, 0, 0, 1), 0, RxIcrc::Absent).unwrap();
        let mut b = UdpPort::bind(Ipv4Addr::new(127, 0, 0, 2), 0, RxIcrc::Absent).unwrap();
        rustix::net::sockopt::set_socket_send_buffer_size(a.wait_fd().unwrap(), 4096).unwrap();
        let (from, to) = (v4(&a), v4(&b));
        let (mut got, mut full, mut queued_after_flush) = (Vec::new(), 0u64, 0u64);
        for i in 0..N {
            let mut f = datagram(&mut a, to, i, size(i));
            loop {
                match a.transmit(f) {
                    Ok(()) => break,
                    Err(TxError::Full(back)) => {
                        full += 1;
                        f = back;
                        assert!(a.tx_waiting());
                        assert!(writable(a.wait_fd().unwrap(), Duration::from_secs(2)), "never writable");
                        drain(&mut b, from, &mut got);
                    }
                    Err(TxError::Failed(why)) => panic!("datagram {i}: {why}"),
                }
            }
            // A progress round of 8 frames ends with a flush; what the kernel refused waits.
            if i % 8 == 7 {
                a.flush();
                queued_after_flush += u64::from(a.tx_waiting());
                drain(&mut b, from, &mut got);
            }
        }
        let end = Instant::now() + Duration::from_secs(10);
        while (a.tx_waiting() || got.len() < N as usize) && Instant::now() < end {
            a.flush();
            if a.tx_waiting() {
                assert!(writable(a.wait_fd().unwrap(), Duration::from_secs(2)), "never writable");
            }
            std::thread::sleep(Duration::from_micros(200));
            drain(&mut b, from, &mut got);
        }
        assert_eq!(got, (0..N).collect::<Vec<_>>(), "every datagram once, in order");
        let c = a.counters();
        assert!(full > 0 && queued_after_flush > 0, "no back-pressure: {full} {queued_after_flush} {c:?}");
        assert_eq!((c.tx, c.tx_full, c.tx_failed), (u64::from(N), full, 0), "{c:?}");
        assert_eq!((b.counters().rx, b.counters().rx_oversized), (u64::from(N), 0));
    });
}

/// The engine over a full socket send buffer: RC WRITEs with an adaptive idle loop (which sleeps
/// on the socket) finish intact and without a timeout: while frames wait in the datapath's batch
/// the loop wakes when the socket turns writable, not at the next retransmission timer.
#[test]
fn rc_writes_through_a_full_socket_buffer_finish_without_timeouts() {
    use engine::progress::{Idle, Sleep, Waiter};
    let Some(ns) = ShapedLoopback::new("udp-rc") else { return };
    ns.run(|| {
        const MSGS: u64 = 16;
        const SIZE: u64 = 65536;
        let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
        let port = UdpPort::bind(ip_a, 4791, RxIcrc::Verify).unwrap();
        rustix::net::sockopt::set_socket_send_buffer_size(port.wait_fd().unwrap(), 4096).unwrap();
        let mut a = open_port(port, QpType::Rc);
        let mut b = open(ip_b, QpType::Rc);
        // 67 ms: well above the queueing delay of a full 8 KiB send buffer at 20 Mbit/s.
        let cfg = PairConfig { qp_type: QpType::Rc, timeout: 14, ..PairConfig::default() };
        connect(&mut a.ctx, a.qp, b.qp.qpn(), ip_b.into(), 100, 200, &cfg).unwrap();
        connect(&mut b.ctx, b.qp, a.qp.qpn(), ip_a.into(), 200, 100, &cfg).unwrap();
        for (i, x) in a.ctx.mr_bytes_mut(&a.mr).unwrap().iter_mut().enumerate() {
            *x = (i % 253) as u8;
        }
        let (raddr, rkey) = (b.mr.addr, b.mr.rkey);
        let wrs: Vec<SendWr> = (0..MSGS)
            .map(|k| {
                let op = WrOpcode::RdmaWrite { remote_addr: raddr + k * SIZE, rkey };
                SendWr::new(k, op, vec![sge(&a.mr, k * SIZE, SIZE as u32)])
            })
            .collect();
        a.ctx.post_send(a.qp, &wrs).unwrap();
        let mut waiter = Waiter::new(Idle::Adaptive(Duration::from_micros(50)));
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        let end = Instant::now() + Duration::from_secs(30);
        while wa.len() < MSGS as usize && Instant::now() < end {
            let worked = a.ctx.progress().unwrap() + b.ctx.progress().unwrap() > 0;
            a.ctx.poll_cq(a.cq, &mut wa, 64).unwrap();
            b.ctx.poll_cq(b.cq, &mut wb, 64).unwrap();
            waiter.after_round(&a.ctx, worked, Sleep::wait_fd(&b.ctx), Duration::from_millis(100)).unwrap();
        }
        assert_eq!(wa.len(), MSGS as usize, "{wa:?}");
        assert!(wa.iter().all(|w| w.status == WcStatus::Success), "{wa:?}");
        assert!(a.ctx.mr_bytes(&a.mr).unwrap() == b.ctx.mr_bytes(&b.mr).unwrap(), "written data differs");
        let s = a.ctx.stats();
        let deferred = a.ctx.datapath_counters().iter().find(|c| c.0.contains("deferred")).map_or(0, |c| c.1);
        assert!(s.tx_stalls > 0 && deferred > 0, "no back-pressure: {s:?}");
        assert_eq!((s.requests.timeouts, s.requests.retries), (0, 0), "{s:?}");
        assert!(waiter.sleeps() > 0, "the loop never slept");
    });
}

/// The frames of a message the kernel had no room for wait in the datapath's batch, not in the
/// engine (fewer than a batch: the datapath took them all): the engine must say it waits for room
/// (`Sleep::tx_blocked`), so that an idle loop sleeping on the socket also wakes when it turns
/// writable. UC SENDs of 24 packets, each after the last arrived: no ACK, no timer.
#[test]
fn frames_waiting_in_the_batch_wake_the_idle_loop_when_the_socket_has_room() {
    use engine::progress::{Idle, Sleep, Waiter};
    let Some(ns) = ShapedLoopback::new("udp-wake") else { return };
    ns.run(|| {
        const MSGS: u64 = 12;
        const SIZE: u64 = 24 << 10;
        let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
        // Without GSO: one segmented send of a whole message would go past a small buffer at once.
        let port = UdpPort::bind(ip_a, 4791, RxIcrc::Verify).unwrap().without_gso().unwrap();
        rustix::net::sockopt::set_socket_send_buffer_size(port.wait_fd().unwrap(), 4096).unwrap();
        let mut a = open_port(port, QpType::Uc);
        let mut b = open(ip_b, QpType::Uc);
        let cfg =
            PairConfig { qp_type: QpType::Uc, mtu: engine::verbs::Mtu::Mtu1024, ..PairConfig::default() };
        connect(&mut a.ctx, a.qp, b.qp.qpn(), ip_b.into(), 100, 200, &cfg).unwrap();
        connect(&mut b.ctx, b.qp, a.qp.qpn(), ip_a.into(), 200, 100, &cfg).unwrap();
        let mut waiter = Waiter::new(Idle::Adaptive(Duration::from_micros(50)));
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        let counter = |ctx: &Context, name: &str| {
            ctx.datapath_counters().iter().find(|c| c.0 == name).map_or(0, |c| c.1)
        };
        let mut rounds_waiting = 0;
        for k in 0..MSGS {
            let recv = RecvWr { wr_id: k, sg_list: vec![sge(&b.mr, 0, SIZE as u32)] };
            b.ctx.post_recv(b.qp, &[recv]).unwrap();
            let send = SendWr::new(k, WrOpcode::Send, vec![sge(&a.mr, 0, SIZE as u32)]);
            a.ctx.post_send(a.qp, &[send]).unwrap();
            while wb.len() <= k as usize {
                let worked = a.ctx.progress().unwrap() > 0;
                // Frames the engine handed over that the kernel has not taken wait in the batch.
                let dp = counter(&a.ctx, "udp datagrams sent") + counter(&a.ctx, "udp sends failed");
                if a.ctx.stats().tx_frames > dp {
                    rounds_waiting += 1;
                    assert!(
                        Sleep::tx_blocked(&a.ctx),
                        "frames wait in the datapath, and the engine says not"
                    );
                }
                let worked = b.ctx.progress().unwrap() > 0 || worked;
                a.ctx.poll_cq(a.cq, &mut wa, 64).unwrap();
                b.ctx.poll_cq(b.cq, &mut wb, 64).unwrap();
                let t = Instant::now();
                waiter.after_round(&a.ctx, worked, Sleep::wait_fd(&b.ctx), Duration::from_secs(2)).unwrap();
                assert!(t.elapsed() < Duration::from_secs(1), "message {k}: slept {:?}", t.elapsed());
            }
        }
        assert!(wb.iter().all(|w| w.status == WcStatus::Success && w.byte_len == SIZE as u32), "{wb:?}");
        let deferred = counter(&a.ctx, "udp sends deferred (socket buffer full)");
        assert_eq!((a.ctx.stats().tx_stalls, deferred), (0, 0), "the engine never held a frame");
        assert!(rounds_waiting > 0, "frames never waited in the batch");
        assert!(waiter.sleeps() > 0, "the loop never slept");
    });
}
