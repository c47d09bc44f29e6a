//! `softrdma pingpong` against itself over kernel UDP on loopback (the stock tools themselves run
//! in `scripts/interop-rxe.sh`, against rxe in the VM): RC, UC and UD with the `-c` buffer check,
//! sizes across the MTU and page boundaries, both roles in one process.

use engine::verbs::{Mtu, QpType};
use softrdma::perf::remote::Net;
use softrdma::pingpong::{Options, run};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The sides are 127.0.49.2 (server) and 127.0.49.1 (client), a loopback net no other test uses.
const NET: u8 = 49;

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
    }
}

#[test]
fn rc_uc_ud_against_itself_with_the_buffer_check() {
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
