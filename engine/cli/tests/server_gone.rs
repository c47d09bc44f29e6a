//! A `perf` client whose server dies in the middle of a run ends at once, with a clear error and
//! exit code 2, over RoCE RC and UET (kernel UDP on loopback, no root). The server says nothing on
//! the exchange connection during these runs; the client looks at it now and then and sees it
//! closed, rather than retrying into the void (RC: 1,000 retries, about 280 s; UET: 60 s without a
//! completion).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn the_client_ends_when_its_server_dies(transport: &str, tcp_port: u16, net: u8) {
    let bin = env!("CARGO_BIN_EXE_softrdma");
    let (tcp, server_ip, client_ip) =
        (tcp_port.to_string(), format!("127.0.{net}.2"), format!("127.0.{net}.1"));
    let common = ["--transport", transport, "--backend", "udp", "--tcp-port", &tcp];
    let mut server = Command::new(bin)
        .args(["perf", "write"])
        .args(common)
        .args(["--server", "--local", &server_ip])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut client = Command::new(bin)
        .args(["perf", "write", "--iters", "100000000"])
        .args(common)
        .args(["--connect", &server_ip, "--local", &client_ip])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Well into the run (the exchange takes milliseconds on loopback).
    std::thread::sleep(Duration::from_secs(1));
    assert!(client.try_wait().unwrap().is_none(), "{transport}: the client ended before its server died");
    server.kill().unwrap();
    let _ = server.wait();
    let died = Instant::now();
    let status = loop {
        if let Some(status) = client.try_wait().unwrap() {
            break status;
        }
        if died.elapsed() > Duration::from_secs(30) {
            let _ = client.kill();
            panic!("{transport}: the client still ran 30 s after its server died");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    client.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    eprintln!("{transport}: the client ended {:?} after its server died: {}", died.elapsed(), stderr.trim());
    assert_eq!(status.code(), Some(2), "{transport}: {stderr}");
    assert!(stderr.contains("closed the connection"), "{transport}: {stderr}");
}

#[test]
fn an_rc_client_ends_when_its_server_dies() {
    the_client_ends_when_its_server_dies("rc", 18690, 58);
}

#[test]
fn a_uet_client_ends_when_its_server_dies() {
    the_client_ends_when_its_server_dies("rud", 18691, 59);
}
