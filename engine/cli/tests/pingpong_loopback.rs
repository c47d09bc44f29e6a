//! `softrdma pingpong` against itself over kernel UDP on loopback (the stock tools themselves run
//! in `scripts/interop-rxe.sh`, against rxe in the VM): RC, UC and UD with the `-c` buffer check,
//! sizes across the MTU and page boundaries, both roles in one process; RC and UC also connected by
//! the connection manager (`--cm`) instead of the TCP exchange.

use engine::verbs::{Mtu, QpType};
use softrdma::perf::remote::Net;
use softrdma::pingpong::{Options, run};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The sides are 127.0.49.2 (server) and 127.0.49.1 (client), a loopback net no other test uses.
const NET: u8 = 49;

/// One test at a time: both bind UDP port 4791 on the same two addresses.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn options(qp_type: QpType, size: usize, tcp_port: u16, client: bool) -> Options {
    Options {
        qp_type,
        server: client.then(|| format!("127.0.{NET}.2")),
        port: tcp_port,
        local: Some(Ipv4Addr::new(127, 0, NET, if client { 1 } else { 2 })),
        size,
        mtu: Mtu::Mtu1024,
        rx_depth: 500,
        iters: 100,
        chk: true,
        timeout: 14,
        net: Net::udp(),
        cm: false,
    }
}

#[test]
fn rc_uc_ud_against_itself_with_the_buffer_check() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = [
        (QpType::Rc, 1),
        (QpType::Rc, 4096),
        (QpType::Rc, 65536),
        (QpType::Uc, 64),
        (QpType::Uc, 10000),
        (QpType::Ud, 1),
        (QpType::Ud, 1024),
    ];
    for (i, (t, size)) in cases.into_iter().enumerate() {
        let port = 28700 + i as u16;
        let server = std::thread::spawn(move || run(&options(t, size, port, false)));
        std::thread::sleep(Duration::from_millis(100));
        let client = run(&options(t, size, port, true));
        let server = server.join().expect("server thread");
        let (c, s) = match (client, server) {
            (Ok(c), Ok(s)) => (c, s),
            (c, s) => panic!("{t:?} {size}: client {:?}, server {:?}", c.err(), s.err()),
        };
        assert_eq!((c.iters, s.iters), (100, 100), "{t:?} {size}");
        assert_eq!(c.bytes, 2 * 100 * size as u64, "{t:?} {size}");
    }
}

#[test]
fn rc_and_uc_connected_by_the_connection_manager() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (i, (t, size)) in
        [(QpType::Rc, 4096), (QpType::Rc, 65536), (QpType::Uc, 1000)].into_iter().enumerate()
    {
        let port = 28720 + i as u16;
        let cm = move |client| Options { cm: true, ..options(t, size, port, client) };
        let server = std::thread::spawn(move || run(&cm(false)));
        std::thread::sleep(Duration::from_millis(100));
        let client = run(&cm(true));
        let server = server.join().expect("server thread");
        match (client, server) {
            (Ok(c), Ok(s)) => assert_eq!((c.iters, s.iters, c.bytes), (100, 100, 2 * 100 * size as u64)),
            (c, s) => panic!("--cm {t:?} {size}: client {:?}, server {:?}", c.err(), s.err()),
        }
    }
    // UD has no CM connection to make; a client with no server is told so, not left waiting.
    let ud = Options { cm: true, ..options(QpType::Ud, 64, 28730, true) };
    assert!(run(&ud).is_err_and(|e| e.contains("RC and UC")));
}
