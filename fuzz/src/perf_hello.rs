//! The JSON lines of `softrdma perf --backend udp|afxdp`'s exchange (security review M1): the
//! client's hello, the server's hello, the run's messages and the UET perf hello, as a peer could
//! send them. The first input byte is the number of lanes the receiving side has (1 to 256), the
//! rest is the line. Nothing may panic, and whatever is accepted is within the engine's limits.

use softrdma::perf::hello::{
    MAX_DEPTH, MAX_ITERS, MAX_QPS, MAX_SIZE, PeerQps, RunMsg, parse_client_hello, parse_run_msg,
    parse_server_hello,
};
use softrdma::perf::uet::UetPerfConfig;

fn check_peer(p: &PeerQps, lanes: usize) {
    assert!(
        p.qpns.len() == lanes && p.psns.len() == lanes && p.rkeys.len() == lanes && p.addrs.len() == lanes
    );
    assert!(p.qpns.iter().chain(&p.psns).all(|&n| n <= 0xFF_FFFF));
    assert!(p.udp_port != Some(0));
}

pub fn run(data: &[u8]) {
    let [lanes, line @ ..] = data else { return };
    let lanes = usize::from(*lanes) + 1;
    if let Ok((t, p)) = parse_client_hello(line) {
        assert!((1..=MAX_SIZE as usize).contains(&t.size));
        assert!((1..=MAX_QPS as usize).contains(&t.qps));
        assert!((1..=MAX_DEPTH as usize).contains(&t.depth));
        assert!((1..=MAX_ITERS).contains(&t.iters));
        // What the run multiplies stays within a u64.
        assert!(t.iters.checked_mul(t.qps as u64).and_then(|n| n.checked_mul(t.size as u64)).is_some());
        check_peer(&p, t.qps);
    }
    if let Ok(p) = parse_server_hello(line, lanes) {
        check_peer(&p, lanes);
    }
    match parse_run_msg(line, lanes) {
        Ok(RunMsg::Done(v) | RunMsg::Rx(v)) => assert!(v.len() == lanes && v.iter().all(|&n| n <= MAX_ITERS)),
        Ok(RunMsg::Report { .. }) | Err(_) => {}
    }
    if let Ok(c) = UetPerfConfig::from_line(line) {
        assert!(c.check().is_ok() && c.size >= 1 && c.iters >= 1 && c.depth() >= 1);
    }
}
