//! rdma_cm programs over softrdma (issue 31, acceptance 1): Debian's `rdmacm-utils` (`rping`,
//! `udaddy`, `ucmatose`, `rdma_server`/`rdma_client`) and perftest's rdma_cm mode (`-R`) under
//! `softrdma run`, between two network namespaces joined by a veth (MTU 9000), over kernel UDP and
//! over AF_XDP. The connections are made by softrdma's connection manager (MADs on QP1); every pair
//! must exit 0 within its timeout and print what shows the run went through. Each server runs in
//! namespace a, its client in b. Needs root, iproute2 and the Debian tools (`scripts/setup.sh`):
//! without them the test says so and skips, except under CI (CI=true), where it fails. The type of
//! service `ucmatose -t` sets is read back from the wire (issue 58).

mod common;

use common::netns::Netns;
use common::proc::{Running, assert_all_passed, record, run_in};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One pair at a time (the veth and the two cores are shared).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The namespaces' network: the server (namespace a) is `.1`, the client (b) `.2`.
const NET: &str = "10.97.0";

const TOOLS: [&str; 7] =
    ["rping", "udaddy", "ucmatose", "rdma_server", "rdma_client", "ib_write_bw", "ib_send_lat"];

/// How long a server gets to bind and listen before its client starts: an rdma_cm server has no
/// TCP port to watch, and a REQ that comes first is rejected (no listener), as with the kernel's.
const SERVER_START: Duration = Duration::from_millis(1500);

/// One row: the server's and the client's command, what the client must print, the time allowed.
struct Pair {
    name: &'static str,
    server: Vec<String>,
    client: Vec<String>,
    client_prints: &'static str,
    timeout: Duration,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// The pairs of the acceptance; `ip` is the server's address, `dev` the devices (a, b).
fn pairs(ip: &str, dev: (&str, &str), port: u16) -> Vec<Pair> {
    let (da, db) = dev;
    vec![
        Pair {
            name: "rping -C 100 -v",
            server: words(&format!("rping -s -a {ip} -p {port} -C 100")),
            client: words(&format!("rping -c -a {ip} -p {port} -C 100 -v")),
            client_prints: "ping data: rdma-ping-99: ",
            timeout: Duration::from_secs(60),
        },
        Pair {
            // udaddy has no port option (its -p is the port space): 7174.
            name: "udaddy",
            server: words("udaddy"),
            client: words(&format!("udaddy -s {ip}")),
            client_prints: "test complete",
            timeout: Duration::from_secs(60),
        },
        Pair {
            name: "ucmatose -c 8",
            server: words(&format!("ucmatose -p {} -c 8", port + 2)),
            client: words(&format!("ucmatose -s {ip} -p {} -c 8", port + 2)),
            client_prints: "test complete",
            timeout: Duration::from_secs(60),
        },
        Pair {
            name: "rdma_server/rdma_client",
            server: words(&format!("rdma_server -p {}", port + 3)),
            client: words(&format!("rdma_client -s {ip} -p {}", port + 3)),
            client_prints: "rdma_client: end 0",
            timeout: Duration::from_secs(60),
        },
        Pair {
            name: "ib_write_bw -R",
            server: words(&format!("ib_write_bw -R -x 1 -d {da} -p {} -n 200", port + 4)),
            client: words(&format!("ib_write_bw -R -x 1 -d {db} -p {} -n 200 {ip}", port + 4)),
            client_prints: " 65536      200 ",
            timeout: Duration::from_secs(120),
        },
        Pair {
            name: "ib_send_lat -R",
            server: words(&format!("ib_send_lat -R -x 1 -d {da} -p {} -n 200", port + 5)),
            client: words(&format!("ib_send_lat -R -x 1 -d {db} -p {} -n 200 {ip}", port + 5)),
            client_prints: " 2       200 ",
            timeout: Duration::from_secs(120),
        },
    ]
}

fn can_run(name: &str) -> bool {
    common::proc::can_run_tools(name, &TOOLS, "rdmacm-utils and perftest")
}

/// Runs one pair: the server first, the client once the server had time to listen.
fn run_pair(n: &Netns, backend: &str, p: &Pair) -> Result<(), String> {
    let start = Instant::now();
    let mut server: Running = run_in(n, 'a', backend, &p.server);
    std::thread::sleep(SERVER_START);
    if server.exited() {
        let s = server.finish(Instant::now());
        return Err(format!(
            "{}: the server ended before its client started\n{}",
            p.name,
            s.describe("server")
        ));
    }
    let c = run_in(n, 'b', backend, &p.client).finish(start + p.timeout);
    let s = server.finish(Instant::now() + Duration::from_secs(10));
    let wrong = if !(s.ok() && c.ok()) {
        Some("a side failed".to_string())
    } else if !c.stdout().contains(p.client_prints) {
        Some(format!("the client did not print {:?}", p.client_prints))
    } else {
        None
    };
    match wrong {
        None => {
            eprintln!("{} ok in {:.1} s", p.name, start.elapsed().as_secs_f64());
            Ok(())
        }
        Some(w) => Err(format!(
            "{}: server {:?}, client {:?}: {w}\n{}\n{}",
            p.name,
            p.server,
            p.client,
            s.describe("server"),
            c.describe("client")
        )),
    }
}

/// [`run_pair`] over UDP while dumpcap (with `dumpcap_args` more, e.g. `-P` for pcap) writes what
/// crosses the first namespace's veth, RoCEv2 only, to `file`.
fn run_pair_captured(n: &Netns, dumpcap_args: &[&str], file: &str, p: &Pair) -> Result<(), String> {
    let mut dumpcap = Command::new("ip")
        .args(["netns", "exec", &n.a, "dumpcap", "-q"])
        .args(dumpcap_args)
        .args(["-i", &n.va, "-f", "udp port 4791", "-w", file])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run dumpcap");
    // dumpcap writes the file's header once it captures: wait for it (a loaded machine is slow).
    let started = Instant::now();
    while std::fs::metadata(file).map_or(0, |m| m.len()) < 24 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let r = run_pair(n, "udp", p);
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").args(["-INT", &dumpcap.id().to_string()]).status();
    let _ = dumpcap.wait();
    r
}

fn cm_tools_over(backend: &'static str, tag: char, port: u16) {
    let name = format!("netns_cm ({backend})");
    if !can_run(&name) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = Netns::new(tag, NET);
    let (da, db) = (format!("softrdma_{}", n.va), format!("softrdma_{}", n.vb));
    let (mut passed, mut failed) = (Vec::new(), Vec::new());
    for p in pairs(&format!("{NET}.1"), (&da, &db), port) {
        let r = run_pair(&n, backend, &p);
        record(&mut passed, &mut failed, p.name.to_string(), r);
    }
    assert_all_passed(&name, &passed, &failed);
}

#[test]
fn cm_tools_between_namespaces_over_kernel_udp() {
    cm_tools_over("udp", 'c', 20000);
}

#[test]
fn cm_tools_between_namespaces_over_afxdp() {
    cm_tools_over("afxdp", 'd', 20100);
}

/// The CM fields of every MAD in capture `file`, one line per MAD: attribute ID, then the fields a
/// peer checks (tshark's InfiniBand CM dissector; empty where a message has no such field).
fn cm_fields(file: &str) -> Vec<Vec<String>> {
    const FIELDS: [&str; 17] = [
        "infiniband.mad.attributeid",
        "infiniband.cm.req.serviceid.protocol",
        "infiniband.cm.req.serviceid.dport",
        "infiniband.cm.req.transpsvctype",
        "infiniband.cm.req.responderres",
        "infiniband.cm.req.initdepth",
        "infiniband.cm.req.retrcount",
        "infiniband.cm.req.rnrretrcount",
        "infiniband.cm.req.maxcmretr",
        "infiniband.cm.req.pkey",
        "infiniband.cm.req.srq",
        "infiniband.cm.req.ip_cm.ipv",
        "infiniband.cm.rep.respres",
        "infiniband.cm.rep.initdepth",
        "infiniband.cm.rep.rnrretrcount",
        "infiniband.cm.rep.srq",
        "infiniband.cm.req.pppmtu",
    ];
    let mut args =
        vec!["-r", file, "-d", "udp.port==4791,infiniband", "-Y", "infiniband.mad", "-T", "fields"];
    for f in FIELDS {
        args.extend(["-e", f]);
    }
    let o = Command::new("tshark").args(&args).output().expect("run tshark");
    assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

/// tshark's expert messages of warning level and above for a capture (none for a clean one).
fn expert(file: &str) -> String {
    let o = Command::new("tshark")
        // RPC-over-RDMA's heuristic claims small RC SENDs (roce-wire.md: also on rxe's own captures).
        .args([
            "-r",
            file,
            "-d",
            "udp.port==4791,infiniband",
            "--disable-protocol",
            "rpcordma",
            "-q",
            "-z",
            "expert,warn",
        ])
        .output()
        .expect("run tshark");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Acceptance 3: the MADs softrdma sends for an `rping` connection decode in tshark's InfiniBand CM
/// dissector with no malformed or warning-level expert message, in rxe's order (REQ, REP, RTU,
/// DREQ, DREP), and with the values a peer checks equal to those of rxe's own rping in
/// `captures/roce/linlinw5/rping.pcap`, except the path MTU, which follows the link (4096 on the
/// veth, 1024 there).
#[test]
fn cm_mads_decode_in_tshark_as_rxe_s_do() {
    let name = "netns_cm (tshark)";
    if !can_run(name) || !common::netns::can_run(name, &["tshark"]) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = Netns::new('e', "10.98.0");
    let file = std::env::temp_dir().join(format!("softrdma-cm-{}.pcap", std::process::id()));
    let file = file.to_str().expect("utf-8 path").to_string();
    let p = Pair {
        name: "rping -C 10",
        server: words("rping -s -a 10.98.0.1 -C 10"),
        client: words("rping -c -a 10.98.0.1 -C 10 -v"),
        client_prints: "ping data: rdma-ping-9: ",
        timeout: Duration::from_secs(60),
    };
    run_pair_captured(&n, &[], &file, &p).unwrap_or_else(|e| panic!("{name}: {e}"));
    let ours = cm_fields(&file);
    let ex = expert(&file);
    let rxe_file = common::shared().join("captures/roce/linlinw5/rping.pcap").to_string_lossy().into_owned();
    let rxe = cm_fields(&rxe_file);
    let order = |v: &[Vec<String>]| v.iter().map(|f| f[0].clone()).collect::<Vec<_>>();
    assert_eq!(order(&ours), ["0x0010", "0x0013", "0x0014", "0x0015", "0x0016"], "{ours:?}");
    assert_eq!(order(&ours), order(&rxe));
    for (i, (a, b)) in ours.iter().zip(&rxe).enumerate() {
        // Field 2 is the port (ours: the one rping was given, 7174 there too); 16 the path MTU.
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            if j == 16 {
                assert!(x.is_empty() == y.is_empty(), "MAD {i}: path MTU present in one only");
                continue;
            }
            assert_eq!(x, y, "MAD {i} ({}), field {j}: ours {a:?}, rxe's {b:?}", a[0]);
        }
    }
    assert_eq!(ours[0][16], "0x05", "a 4096-byte path MTU on the MTU-9000 veth");
    // A REQ's or REP's starting PSN is the one its sender expects to receive (as rxe reads it):
    // the server's first request carries the REQ's, the client's first request the REP's.
    for (f, side) in [(&file, "ours"), (&rxe_file, "rxe's")] {
        let (req, rep, server_first, client_first) = first_psns(f);
        assert_eq!(server_first, req, "{side}: the server's first request PSN is the REQ's starting PSN");
        assert_eq!(client_first, rep, "{side}: the client's first request PSN is the REP's starting PSN");
    }
    assert!(ex.trim().is_empty(), "tshark's expert messages: {ex}");
    let _ = std::fs::remove_file(&file);
}

/// In capture `file` of one rping connection: the REQ's and the REP's starting PSN, and the PSN of
/// the first request (not an ACK or READ response) each side sent, server (REP sender) first.
fn first_psns(file: &str) -> (u32, u32, u32, u32) {
    let o = Command::new("tshark")
        .args(["-r", file, "-d", "udp.port==4791,infiniband", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "ip.src", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn"])
        .args(["-e", "infiniband.cm.req.startpsn", "-e", "infiniband.cm.rep.startpsn"])
        .output()
        .expect("run tshark");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let num = |v: &str| {
        let v = v.trim();
        v.strip_prefix("0x").map_or_else(|| v.parse().ok(), |h| u32::from_str_radix(h, 16).ok())
    };
    let (mut req, mut rep, mut client, mut server) = (None, None, None, None);
    let (mut first_client, mut first_server) = (None, None);
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        let field = |i: usize| f.get(i).copied().unwrap_or("");
        let (src, Some(op), psn) = (field(0).to_string(), num(field(1)), num(field(2))) else { continue };
        if let Some(p) = f.get(3).and_then(|v| num(v)) {
            req = Some(p);
            client = Some(src.clone());
        }
        if let Some(p) = f.get(4).and_then(|v| num(v)) {
            rep = Some(p);
            server = Some(src.clone());
        }
        // RC requests: opcodes 0..=12 (SEND, WRITE, READ request); 13..=17 are responses and ACKs.
        if op > 12 || op == 100 {
            continue;
        }
        if Some(&src) == client.as_ref() && first_client.is_none() {
            first_client = psn;
        } else if Some(&src) == server.as_ref() && first_server.is_none() {
            first_server = psn;
        }
    }
    let get = |v: Option<u32>, what: &str| v.unwrap_or_else(|| panic!("{file}: no {what}\n{text}"));
    (
        get(req, "REQ"),
        get(rep, "REP"),
        get(first_server, "request from the server"),
        get(first_client, "request from the client"),
    )
}

/// The type of service an rdma_cm program sets (`ucmatose -t`: `rdma_set_option(RDMA_OPTION_ID_TOS)`
/// on the active side) is on the wire (issue 58, acceptance 3): every packet of the client's QPs,
/// and of the server's, which take it from the REQ's path as rdma_cm's passive side does, carries
/// TOS 0x68 (DSCP 26), captured on the veth over kernel UDP, the connection manager's MADs included
/// (as Linux's CM sends them with the path's class).
#[test]
fn rdma_set_option_tos_is_the_tos_of_both_sides_packets() {
    let name = "netns_cm (tos)";
    if !can_run(name) || !common::netns::can_run(name, &["dumpcap", "ethtool"]) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = Netns::new('o', "10.96.0");
    // GSO sends cut into datagrams before the veth, so the capture holds them as a wire would.
    for (ns, dev) in [(&n.a, &n.va), (&n.b, &n.vb)] {
        let set = Command::new("ip").args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"]).output();
        assert!(set.is_ok_and(|o| o.status.success()), "ethtool -K {dev} tx off");
    }
    let file = std::env::temp_dir().join(format!("softrdma-cm-tos-{}.pcap", std::process::id()));
    let file = file.to_str().expect("utf-8 path").to_string();
    let p = Pair {
        name: "ucmatose -t 104 -c 2",
        server: words("ucmatose -p 20210 -c 2"),
        client: words("ucmatose -s 10.96.0.1 -p 20210 -c 2 -t 104"),
        client_prints: "test complete",
        timeout: Duration::from_secs(60),
    };
    run_pair_captured(&n, &["-P"], &file, &p).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (mut server, mut client) = (0, 0);
    for f in softrdma::capture::read_file(std::path::Path::new(&file)).unwrap() {
        let Ok(frame) = wire::FrameRepr::parse(&f.data) else { continue };
        let Some(roce) = frame.roce() else { continue };
        let wire::IpRepr::V4(ip) = frame.ip else { panic!("IPv4 frames") };
        assert_eq!(ip.dscp_ecn, 104, "{:?} from {}", roce.bth.opcode, ip.src_addr);
        if ip.src_addr == std::net::Ipv4Addr::new(10, 96, 0, 1) { server += 1 } else { client += 1 }
    }
    assert!(server > 0 && client > 0, "packets of both sides: server {server}, client {client}");
    let _ = std::fs::remove_file(&file);
}
