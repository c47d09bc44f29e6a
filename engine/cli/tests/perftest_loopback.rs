//! `softrdma perf --perftest` against itself over kernel UDP on loopback: every perftest tool's
//! exchange and traffic pattern with both roles in one process (the stock tools themselves run in
//! `scripts/interop-rxe.sh`, against rxe in the VM). Also: a peer that breaks the exchange gets a
//! clear error.

use softrdma::perf::remote::Net;
use softrdma::perf::{AtomicOp, Mode, PerfOp};
use softrdma::perftest::{Options, Outcome, messages, run};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::Duration;

/// Each test's sides are 127.0.NET.2 (server) and 127.0.NET.1 (client), a loopback net of their own,
/// so other tests' port-4791 sockets never collide with them.
const NET: u8 = 47;
const BAD_PEER_NET: u8 = 48;

fn options(op: PerfOp, mode: Mode, atomic: AtomicOp, tcp_port: u16, net: u8, client: bool) -> Options {
    let size = match (op, mode) {
        (PerfOp::Atomic, _) => 8,
        (_, Mode::Bw) => 65536,
        (_, Mode::Lat) => 2,
    };
    Options {
        op,
        atomic,
        mode,
        server: client.then(|| format!("127.0.{net}.2")),
        tcp_port,
        local: Some(Ipv4Addr::new(127, 0, net, if client { 1 } else { 2 })),
        size,
        iters: 200,
        mtu: Some(engine::verbs::Mtu::Mtu1024),
        timeout: 14,
        tx_depth: 128,
        rx_depth: 512,
        traffic_class: 0,
        net: Net::udp(),
    }
}

/// Runs the server on a thread and the client here.
fn pair(op: PerfOp, mode: Mode, atomic: AtomicOp, tcp_port: u16) -> (Outcome, Outcome) {
    let server = std::thread::spawn(move || run(&options(op, mode, atomic, tcp_port, NET, false)));
    std::thread::sleep(Duration::from_millis(100));
    let client = run(&options(op, mode, atomic, tcp_port, NET, true));
    let server = server.join().expect("server thread");
    match (client, server) {
        (Ok(c), Ok(s)) => (c, s),
        (c, s) => panic!("{op:?} {mode:?}: client {:?}, server {:?}", c.err(), s.err()),
    }
}

#[test]
fn every_perftest_tool_against_itself() {
    let tools = [
        (PerfOp::Write, Mode::Bw, AtomicOp::FetchAdd),
        (PerfOp::Read, Mode::Bw, AtomicOp::FetchAdd),
        (PerfOp::Send, Mode::Bw, AtomicOp::FetchAdd),
        (PerfOp::Atomic, Mode::Bw, AtomicOp::FetchAdd),
        (PerfOp::Atomic, Mode::Bw, AtomicOp::CmpSwap),
        (PerfOp::Write, Mode::Lat, AtomicOp::FetchAdd),
        (PerfOp::Read, Mode::Lat, AtomicOp::FetchAdd),
        (PerfOp::Send, Mode::Lat, AtomicOp::FetchAdd),
    ];
    for (i, (op, mode, atomic)) in tools.into_iter().enumerate() {
        let (c, s) = pair(op, mode, atomic, 28515 + i as u16);
        let what = format!("{op:?} {mode:?} {atomic:?}");
        assert!(c.client && !s.client, "{what}");
        assert_eq!(c.mtu, 1024, "{what}");
        // Each side learned the other's handshake.
        assert_eq!(c.peer, s.me, "{what}");
        assert_eq!(s.peer, c.me, "{what}");
        let out_reads = if matches!(op, PerfOp::Read | PerfOp::Atomic) { 128 } else { 1 };
        assert_eq!(c.me.unwrap().out_reads, out_reads, "{what}");
        match mode {
            Mode::Bw => {
                let r = c.report.expect("client report");
                assert_eq!((r.iters, r.size), (200, if op == PerfOp::Atomic { 8 } else { 65536 }), "{what}");
                assert!(r.bw_avg > 0.0 && r.msg_rate > 0.0 && r.bw_peak >= r.bw_avg * 0.5, "{what}: {r:?}");
                if op == PerfOp::Send {
                    // No report crosses the wire after SEND: the server measured its receives.
                    assert_eq!(s.received.expect("server's receive report").iters, 200, "{what}");
                    assert!(s.report.is_none(), "{what}");
                } else {
                    // The report crossed the exchange intact.
                    assert_eq!(s.report, Some(r), "{what}");
                }
            }
            Mode::Lat => {
                // WRITE: the server writes first, so the client times 199 round trips.
                let n = if op == PerfOp::Write { 199 } else { 200 };
                assert_eq!(c.latencies_ns.len(), n, "{what}");
                assert!(c.latencies_ns.iter().all(|&ns| ns > 0), "{what}");
                assert!(s.latencies_ns.is_empty(), "{what}");
            }
        }
        assert_eq!(
            (c.stats.rx_bad, s.stats.rx_bad),
            (0, 0),
            "{what}: frames dropped as malformed or with a bad ICRC"
        );
    }
}

#[test]
fn a_malformed_handshake_is_a_clear_error() {
    let port = 28600;
    let server = std::thread::spawn(move || {
        run(&options(PerfOp::Write, Mode::Bw, AtomicOp::FetchAdd, port, BAD_PEER_NET, false))
            .map(|_| ())
            .unwrap_err()
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut peer = TcpStream::connect(("127.0.48.2", port)).unwrap();
    let mut scratch = [0u8; 16];
    peer.write_all(&messages::version_msg()).unwrap();
    peer.read_exact(&mut scratch).unwrap();
    peer.write_all(&4096u32.to_be_bytes()).unwrap();
    peer.read_exact(&mut scratch[..4]).unwrap();
    peer.write_all(&64u32.to_be_bytes()).unwrap();
    peer.read_exact(&mut scratch[..4]).unwrap();
    peer.write_all(b"3\0").unwrap();
    peer.read_exact(&mut scratch[..2]).unwrap();
    peer.write_all(&[b'z'; messages::DEST_LEN]).unwrap();
    let e = server.join().unwrap();
    assert!(e.contains("malformed handshake"), "{e}");

    // An MTU message that is not one.
    let server = std::thread::spawn(move || {
        run(&options(PerfOp::Write, Mode::Bw, AtomicOp::FetchAdd, port + 1, BAD_PEER_NET, false))
            .map(|_| ())
            .unwrap_err()
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut peer = TcpStream::connect(("127.0.48.2", port + 1)).unwrap();
    peer.write_all(&messages::version_msg()).unwrap();
    peer.read_exact(&mut scratch).unwrap();
    peer.write_all(&[0u8; 8]).unwrap();
    peer.read_exact(&mut scratch[..8]).unwrap();
    peer.write_all(b"x\0").unwrap();
    let e = server.join().unwrap();
    assert!(e.contains("malformed MTU"), "{e}");
}
