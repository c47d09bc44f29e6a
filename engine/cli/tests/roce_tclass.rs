//! The traffic class of RoCE QPs in the IP header of their packets (issue 58, acceptance 3), as
//! rdma_rxe writes it: `perf --tclass DSCP` gives every QP `ah_attr.grh.traffic_class` DSCP << 2
//! (the IPv4 TOS byte: DSCP in the high six bits, ECN in the low two), and each side's packets
//! carry its own QPs' class: requests, and the ACKs and READ responses of the responder. Read back
//! from a `--pcap` of the simulated network, and from a `--capture` of two processes over kernel
//! UDP on loopback (127.0.51.1 and .2, a loopback net of their own), where the received frames'
//! TOS is what the peer's kernel put on the wire (`IP_TOS` on send, `IP_RECVTOS` on receive).

mod common;

use common::{scratch_dir, softrdma};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::Duration;
use wire::{FrameRepr, IpRepr};

/// Per RoCE frame of a pcap: (IPv4 source, is a response or ACK, TOS byte). A connection
/// manager's MADs (to QP1) count as requests.
fn roce_tos(bytes: &[u8]) -> Vec<(Ipv4Addr, bool, u8)> {
    let mut r = pcap_file::pcap::PcapReader::new(bytes).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let f = FrameRepr::parse(&p.data).unwrap();
        let IpRepr::V4(ip) = f.ip else { panic!("IPv4 frames") };
        let Some(roce) = f.roce() else { continue };
        let response = roce.bth.opcode.info().is_some_and(|i| i.operation.is_response());
        out.push((ip.src_addr, response, ip.dscp_ecn));
    }
    out
}

/// Runs `perf ARGS --pcap` on the simulated network; the capture's RoCE frames.
fn sim_run(args: &[&str]) -> Vec<(Ipv4Addr, bool, u8)> {
    let dir = scratch_dir("roce-tclass");
    let cap = dir.join("run.pcap");
    let mut all = vec!["perf"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--no-baseline", "--pcap", cap.to_str().unwrap()]);
    let out = softrdma(&all);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{args:?}: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(" 0 errors"), "{text}");
    let frames = roce_tos(&std::fs::read(&cap).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
    frames
}

/// Every frame has TOS `want`, and there are requests and (unless `requests_only`) responses.
fn all_have(frames: &[(Ipv4Addr, bool, u8)], want: u8, requests_only: bool, what: &str) {
    let bad: Vec<_> = frames.iter().filter(|f| f.2 != want).take(5).collect();
    assert!(bad.is_empty(), "{what}: frames with another TOS than {want:#04x}: {bad:?}");
    let responses = frames.iter().filter(|f| f.1).count();
    assert!(frames.len() > responses, "{what}: requests");
    assert!(requests_only || responses > 0, "{what}: responses");
}

#[test]
fn the_qps_traffic_class_is_the_tos_of_requests_acks_and_responses() {
    // AF31 (26): 0x68 in WRITE requests and their ACKs, READ requests and responses, atomics.
    for op in [&["write", "--size", "9000"][..], &["read", "--size", "9000"], &["atomic"]] {
        let args = [op, &["--tclass", "26", "--iters", "30", "--mtu", "1024"]].concat();
        all_have(&sim_run(&args), 26 << 2, false, &format!("{op:?}"));
    }
    // UD: the address handle's traffic class.
    let ud = sim_run(&["send", "--transport", "ud", "--size", "512", "--iters", "20", "--tclass", "10"]);
    all_have(&ud, 10 << 2, true, "UD send");
    // DCQCN marks its frames ECT(0) in the ECN bits beside the DSCP.
    let dcqcn = sim_run(&["write", "--size", "4096", "--iters", "20", "--tclass", "46", "--cc", "dcqcn"]);
    all_have(&dcqcn, 46 << 2 | 2, false, "DCQCN");
    // Without the option: 0, as before.
    all_have(&sim_run(&["write", "--size", "4096", "--iters", "10"]), 0, false, "no --tclass");
}

/// A server on 127.0.51.2 and a client on 127.0.51.1 over kernel UDP, the client with `args` and a
/// `--capture`; the captured RoCE frames.
fn udp_pair(tcp_port: u16, args: &[&str]) -> Vec<(Ipv4Addr, bool, u8)> {
    let dir = scratch_dir("roce-tclass-udp");
    let cap = dir.join("client.pcap");
    let tcp = tcp_port.to_string();
    let net = ["--backend", "udp", "--tcp-port", &tcp];
    let bin = env!("CARGO_BIN_EXE_softrdma");
    let server = Command::new(bin)
        .args(&args[..2])
        .args(net)
        .args(["--server", "--local", "127.0.51.2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    std::thread::sleep(Duration::from_millis(200));
    let client = Command::new(bin)
        .args(args)
        .args(net)
        .args(["--connect", "127.0.51.2", "--local", "127.0.51.1", "--capture", cap.to_str().unwrap()])
        .output()
        .expect("run the client");
    let server = server.wait_with_output().expect("the server");
    let detail = format!(
        "{args:?}\nclient:\n{}{}\nserver:\n{}{}",
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr),
        String::from_utf8_lossy(&server.stdout),
        String::from_utf8_lossy(&server.stderr)
    );
    assert!(client.status.success() && server.status.success(), "{detail}");
    let frames = roce_tos(&std::fs::read(&cap).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
    frames
}

#[test]
fn over_kernel_udp_the_traffic_class_reaches_the_wire_both_ways() {
    let client = Ipv4Addr::new(127, 0, 51, 1);
    // The exchange gives the server the test's class; with --cm the server's QP takes it from the
    // REQ's path, as rdma_cm's passive side does.
    for (port, cm) in [(18670, false), (18671, true)] {
        let mut args = vec!["perf", "write", "--size", "8192", "--iters", "200", "--tclass", "26"];
        if cm {
            args.push("--cm");
        }
        let frames = udp_pair(port, &args);
        let (sent, received): (Vec<_>, Vec<_>) = frames.into_iter().partition(|f| f.0 == client);
        all_have(&sent, 26 << 2, true, &format!("sent, cm {cm}"));
        // The server's ACKs, as its kernel sent them and this one received them.
        // (And with --cm the server's MADs, REP and DREP, whose class it took from the REQ.)
        let requests = received.iter().filter(|f| !f.1).count();
        assert_eq!(requests > 0, cm, "cm {cm}: ACKs come back, and MADs with --cm: {requests}");
        assert!(received.len() > requests, "cm {cm}: ACKs");
        let bad: Vec<_> = received.iter().filter(|f| f.2 != 26 << 2).take(5).collect();
        assert!(bad.is_empty(), "cm {cm}: received with another TOS: {bad:?}");
    }
}
