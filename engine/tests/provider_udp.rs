//! The provider over kernel UDP (issue 32, "the provider on real datapaths"): two fabrics that
//! share nothing but the network, each on its own thread with its own control plane, as two
//! processes would be, exchange addresses as bytes (`fi_getname` -> `fi_av_insert`) and run
//! messages, a wildcard tagged receive, a 1 MiB rendezvous send, RMA write and read, fetching and
//! compare atomics, and wrong-JobID accesses answered with FI_EACCES, over loopback sockets on
//! UET's port 4793, in the clear and sealed by TSS (the control plane's security binding); a clear
//! sender reaches nothing in a secure domain. Needs no privileges.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use engine::provider::{
    CompletionQueue, ControlPlane, CqEntry, CqErrEntry, EpAttr, Fabric, FiErrno, Hints, MrAccess, MrAuth,
    ProviderConfig, SecurityBinding, UetAddr, bind, getinfo,
};
use ses::{Profile, ReturnCode};
use std::net::Ipv4Addr;
use wire::uet::ses::{AmoDatatype, AmoOpcode};

const WAIT: Duration = Duration::from_secs(10);
const BIG: usize = 1 << 20;

fn info() -> engine::provider::Info {
    let hints = Hints { profile: Some(Profile::Hpc), ep_type: Some(ses::EpType::Rdm), ..Hints::default() };
    getinfo(&hints, &ProviderConfig::default()).unwrap().remove(0)
}

fn next(cq: &CompletionQueue) -> Result<CqEntry, CqErrEntry> {
    cq.sread(WAIT).expect("a completion within 10 s")
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// What the two sides tell each other besides the network.
enum Msg {
    Addr(Vec<u8>),
    /// The target is ready for the next phase.
    Ready,
    /// The initiator is done with the target's regions.
    Done,
}

/// Progresses `cq`'s fabric until the peer says something.
fn serve_until(cq: &CompletionQueue, rx: &Receiver<Msg>) -> Msg {
    let end = Instant::now() + WAIT;
    loop {
        if let Ok(m) = rx.try_recv() {
            return m;
        }
        assert!(Instant::now() < end, "the peer went quiet");
        let _ = cq.sread(Duration::from_millis(1));
    }
}

/// Process 2 (JobID 20; 10 too, which it authorizes only in phase 2): receives and serves RMA.
fn target(ip: Ipv4Addr, security: Option<SecurityBinding>, tx: Sender<Msg>, rx: Receiver<Msg>) {
    let mut cp = ControlPlane::new();
    cp.assign_job(2, 20).unwrap();
    cp.assign_job(2, 10).unwrap();
    cp.bind_security(security);
    let fabric = Fabric::open_udp(ip, cp);
    let dom = fabric.domain(&info(), 2);
    let ep = dom.endpoint(EpAttr { rank: Some(1), ..EpAttr::default() }).unwrap();
    assert_eq!(ep.getname().ip, ip);
    assert_eq!(
        dom.endpoint(EpAttr::default()).unwrap_err().errno,
        FiErrno::EBUSY,
        "one endpoint per address: UET's port is taken"
    );
    let (cq, av) = (dom.cq_open(), dom.av_open());
    ep.bind_cq(&cq, bind::TRANSMIT | bind::RECV);
    ep.bind_av(&av);
    let any = dom.mr_reg(&ep, vec![0; 64], MrAccess::ALL, 0x55, 0, MrAuth::Any).unwrap();
    let own = dom.mr_reg(&ep, vec![0; 8], MrAccess::ALL, 0x77, 0, MrAuth::Endpoint).unwrap();
    tx.send(Msg::Addr(ep.getname().to_bytes().to_vec())).unwrap();
    let Msg::Addr(peer) = serve_until(&cq, &rx) else { panic!("an address first") };
    assert_eq!(av.insert(&[UetAddr::from_bytes(&peer).unwrap()]), vec![0]);
    // Phase 1: JobID 10 is not authorized here: the initiator's send is refused, nothing lands.
    ep.recv(100, u64::MAX, 1).unwrap();
    tx.send(Msg::Ready).unwrap();
    assert!(matches!(serve_until(&cq, &rx), Msg::Ready));
    assert!(matches!(cq.read(), Ok(None)), "a refused send completes nothing here");
    // Phase 2: JobID 10 authorized; a wildcard tagged receive and a 1 MiB receive.
    av.insert_auth_key(10).unwrap();
    ep.trecv(64, u64::MAX, 0x1200, 0xFF, 2).unwrap();
    ep.recv(BIG, 0, 3).unwrap();
    tx.send(Msg::Ready).unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(next(&cq).expect("receives complete"));
    }
    got.sort_by_key(|e| e.op_context);
    assert_eq!((got[0].op_context, got[0].buf.as_slice(), got[0].src), (1, &b"y"[..], 0));
    assert_eq!((got[1].op_context, got[1].buf.as_slice(), got[1].tag), (2, &b"wild"[..], Some(0x1234)));
    assert_eq!(got[2].op_context, 3);
    assert!(got[2].buf == pattern(BIG), "1 MiB arrived byte for byte");
    // Phase 3: the initiator's RMA and atomics; then the regions are checked.
    assert!(matches!(serve_until(&cq, &rx), Msg::Done));
    let data = any.data();
    assert_eq!(&data[8..12], &[1, 2, 3, 4]);
    assert_eq!(u64::from_le_bytes(data[16..24].try_into().unwrap()), 9);
    assert_eq!(own.data(), vec![0; 8], "the region bound to JobID 20 refused JobID 10");
}

/// Process 1 (JobID 10): sends and accesses the target's regions.
fn initiator(ip: Ipv4Addr, security: Option<SecurityBinding>, tx: Sender<Msg>, rx: Receiver<Msg>) {
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 10).unwrap();
    cp.bind_security(security);
    let fabric = Fabric::open_udp(ip, cp);
    let dom = fabric.domain(&info(), 1);
    let ep = dom.endpoint(EpAttr { rank: Some(0), ..EpAttr::default() }).unwrap();
    let (cq, av) = (dom.cq_open(), dom.av_open());
    ep.bind_cq(&cq, bind::TRANSMIT | bind::RECV);
    ep.bind_av(&av);
    tx.send(Msg::Addr(ep.getname().to_bytes().to_vec())).unwrap();
    let Msg::Addr(peer) = serve_until(&cq, &rx) else { panic!("an address first") };
    let b = av.insert(&[UetAddr::from_bytes(&peer).unwrap()])[0];
    assert!(matches!(serve_until(&cq, &rx), Msg::Ready));
    ep.send(b"x", b, 9).unwrap();
    let e = next(&cq).unwrap_err();
    assert_eq!((e.op_context, e.err, e.prov_errno), (9, FiErrno::EACCES, u8::from(ReturnCode::BadJobId)));
    tx.send(Msg::Ready).unwrap();
    assert!(matches!(serve_until(&cq, &rx), Msg::Ready));
    ep.send(b"y", b, 10).unwrap();
    ep.tsend(b"wild", b, 0x1234, 11).unwrap();
    ep.send(&pattern(BIG), b, 12).unwrap();
    let mut done: Vec<u64> = (0..3).map(|_| next(&cq).expect("sends complete").op_context).collect();
    done.sort();
    assert_eq!(done, vec![10, 11, 12]);
    ep.write(&[1, 2, 3, 4], b, 0x55, 8, 20).unwrap();
    assert_eq!(next(&cq).unwrap().op_context, 20);
    ep.read(4, b, 0x55, 8, 21).unwrap();
    assert_eq!(next(&cq).unwrap().buf, [1, 2, 3, 4]);
    ep.fetch_atomic(&5u64.to_le_bytes(), b, 0x55, 16, AmoDatatype::Uint64, AmoOpcode::Sum, 22).unwrap();
    assert_eq!(next(&cq).unwrap().buf, 0u64.to_le_bytes());
    ep.compare_atomic(
        &5u64.to_le_bytes(),
        &9u64.to_le_bytes(),
        b,
        0x55,
        16,
        AmoDatatype::Uint64,
        AmoOpcode::Cswap,
        23,
    )
    .unwrap();
    assert_eq!(next(&cq).unwrap().buf, 5u64.to_le_bytes());
    ep.write(b"zz", b, 0x77, 0, 24).unwrap();
    let e = next(&cq).unwrap_err();
    assert_eq!((e.op_context, e.err, e.prov_errno), (24, FiErrno::EACCES, u8::from(ReturnCode::BadJobId)));
    tx.send(Msg::Done).unwrap();
}

/// Runs [`target`] and [`initiator`] on two threads, at `127.88.<net>.2` and `.1`.
fn run_pair(net: u8, security: Option<SecurityBinding>) {
    let (a_ip, b_ip) = (Ipv4Addr::new(127, 88, net, 1), Ipv4Addr::new(127, 88, net, 2));
    let (to_b, from_a) = channel();
    let (to_a, from_b) = channel();
    let sb = security.clone();
    let b = std::thread::spawn(move || target(b_ip, sb, to_a, from_a));
    let a = std::thread::spawn(move || initiator(a_ip, security, to_b, from_b));
    let (ra, rb) = (a.join(), b.join());
    if let Err(e) = ra.and(rb) {
        std::panic::resume_unwind(e);
    }
}

fn binding() -> SecurityBinding {
    let config = tss::Config { sdi: 7, mode: tss::KeyMode::Cluster, ..tss::Config::default() };
    SecurityBinding { config, key: tss::kdf::random(), epoch: 0 }
}

#[test]
fn two_fabrics_over_kernel_udp_exchange_addresses_messages_rma_and_atomics() {
    run_pair(32, None);
}

#[test]
fn the_same_sealed_by_tss() {
    run_pair(33, Some(binding()));
}

/// A clear sender and a sealed one, both JobID 10, send to a sealed target: only the sealed
/// message lands. One thread drives the three fabrics in turn.
#[test]
fn a_clear_sender_reaches_nothing_in_a_secure_domain() {
    let sec = binding();
    let fabric = |host: u8, process: u32, security: Option<SecurityBinding>| {
        let mut cp = ControlPlane::new();
        cp.assign_job(process, 10).unwrap();
        cp.bind_security(security);
        let f = Fabric::open_udp(Ipv4Addr::new(127, 88, 34, host), cp);
        let dom = f.domain(&info(), process);
        let ep = dom.endpoint(EpAttr::default()).unwrap();
        let (cq, av) = (dom.cq_open(), dom.av_open());
        ep.bind_cq(&cq, bind::TRANSMIT | bind::RECV);
        ep.bind_av(&av);
        (f, ep, cq, av)
    };
    let (_ft, target, cq_t, _) = fabric(1, 2, Some(sec.clone()));
    let (_fc, clear, cq_c, av_c) = fabric(2, 1, None);
    let (_fs, sealed, cq_s, av_s) = fabric(3, 3, Some(sec));
    let to_c = av_c.insert(&[target.getname()])[0];
    let to_s = av_s.insert(&[target.getname()])[0];
    target.recv(64, u64::MAX, 1).unwrap();
    target.recv(64, u64::MAX, 2).unwrap();
    clear.send(b"clear", to_c, 3).unwrap();
    sealed.send(b"sealed", to_s, 4).unwrap();
    let (mut landed, mut sent) = (Vec::new(), None);
    let end = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < end {
        if let Ok(Some(e)) = cq_t.read() {
            landed.push(e.buf);
        }
        if let Ok(Some(e)) = cq_s.read() {
            sent = Some(e.op_context);
        }
        let _ = cq_c.read();
    }
    assert_eq!(sent, Some(4), "the sealed send completed");
    assert_eq!(landed, vec![b"sealed".to_vec()], "only the sealed message landed");
}
