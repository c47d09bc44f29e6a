//! Back-pressure (issue 27): a datapath that has no room for a frame hands it back
//! ([`TxError::Full`]) and the engine keeps it, makes nothing more, and sends it first when there
//! is room. Over a test datapath that refuses some transmits in a fixed pattern (twice in a row
//! every seventh call), a verified RC WRITE run and a UET RUD run finish with no retransmission, no
//! timeout and no frame lost: every frame the engine made crossed the link once. A datapath that
//! takes frames and sends them later (AF_XDP in copy mode with the driver's queue full) is flushed
//! again when it asks to be, not only when the next frame or timer wakes the loop.

use std::net::Ipv4Addr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use engine::datapath::sim::{SimNet, SimPort};
use engine::datapath::{Datapath, TxError};
use engine::simpair::{PairConfig, connect};
use engine::uet::UetNode;
use engine::verbs::{
    Access, Context, Cq, Mtu, Pd, Qp, QpInitAttr, SendWr, Sge, VerbsError, WcStatus, WrOpcode,
};
use frame::Frame;
use nicsim::LinkConfig;

/// The methods the test datapaths pass to their simulated port as they are (no descriptor: the
/// simulator runs on virtual time).
macro_rules! delegate_to_inner {
    () => {
        fn now(&self) -> Duration {
            self.inner.now()
        }
        fn mac(&self) -> [u8; 6] {
            self.inner.mac()
        }
        fn gid(&self) -> std::net::IpAddr {
            self.inner.gid()
        }
        fn resolve(&self, ip: std::net::IpAddr) -> Option<[u8; 6]> {
            self.inner.resolve(ip)
        }
        fn alloc(&mut self) -> Frame {
            self.inner.alloc()
        }
        fn receive(&mut self) -> Option<Frame> {
            self.inner.receive()
        }
        fn recycle(&mut self, frame: Frame) {
            self.inner.recycle(frame);
        }
        fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
            None
        }
    };
}

/// Refuses transmit calls `k` with `k % EVERY < IN_A_ROW` (so a refused frame is refused again when
/// offered next), passes the rest to the simulated port.
struct Refusing {
    inner: SimPort,
    calls: u64,
    refused: u64,
    taken: u64,
}

const EVERY: u64 = 7;
const IN_A_ROW: u64 = 2;

impl Refusing {
    fn new(inner: SimPort) -> Refusing {
        Refusing { inner, calls: 0, refused: 0, taken: 0 }
    }
}

impl Datapath for Refusing {
    delegate_to_inner!();
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        self.calls += 1;
        if self.calls % EVERY < IN_A_ROW {
            self.refused += 1;
            return Err(TxError::Full(frame));
        }
        self.taken += 1;
        self.inner.transmit(frame)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("refused", self.refused), ("taken", self.taken)]
    }
}

fn counter(c: &[(&'static str, u64)], name: &str) -> u64 {
    c.iter().find(|(k, _)| *k == name).map_or(0, |(_, v)| *v)
}

/// Two contexts on a simulated link. With `waking`, the loops wake as
/// [`engine::progress::Waiter`] makes a real one wake: at the next frame, or when
/// [`Sleep::next_work_in`](engine::progress::Sleep::next_work_in) says (a QP's timer, a
/// datapath's retry); without, at the next frame or QP deadline.
struct RcPair {
    net: SimNet,
    a: Context,
    b: Context,
    waking: bool,
}

impl nicsim::System for RcPair {
    type Error = VerbsError;
    fn pass(&mut self) -> Result<bool, VerbsError> {
        Ok(self.a.progress()? + self.b.progress()? > 0)
    }
    fn next_event(&self) -> Option<Duration> {
        use engine::progress::Sleep;
        if self.waking {
            let now = self.net.now();
            let wake = |c: &Context| c.next_work_in().map(|d| now + d);
            return [self.net.next_event(), wake(&self.a), wake(&self.b)].into_iter().flatten().min();
        }
        [self.net.next_event(), self.a.next_deadline(), self.b.next_deadline()].into_iter().flatten().min()
    }
    fn now(&self) -> Duration {
        self.net.now()
    }
    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

/// An RC QP pair between `a` and `b` at path MTU `mtu`: the PDs, a's CQ and a's QP.
fn rc_between(a: &mut Context, b: &mut Context, mtu: Mtu) -> (Pd, Pd, Cq, Qp) {
    let (pd_a, pd_b) = (a.alloc_pd(), b.alloc_pd());
    let (cq_a, cq_b) = (a.create_cq(1024).unwrap(), b.create_cq(1024).unwrap());
    let qa = a.create_qp(pd_a, &QpInitAttr::rc(cq_a)).unwrap();
    let qb = b.create_qp(pd_b, &QpInitAttr::rc(cq_b)).unwrap();
    let cfg = PairConfig { mtu, ..PairConfig::default() };
    connect(a, qa, qb.qpn(), b.gid(), 100, 200, &cfg).unwrap();
    connect(b, qb, qa.qpn(), a.gid(), 200, 100, &cfg).unwrap();
    (pd_a, pd_b, cq_a, qa)
}

#[test]
fn rc_write_through_a_refusing_datapath_loses_nothing_and_never_retransmits() {
    const SIZE: usize = 65536;
    const MSGS: u64 = 200;
    const DEPTH: u64 = 16;
    let (net, pa, pb) = SimNet::pair(3, LinkConfig::default(), LinkConfig::default());
    let (mut a, mut b) = (Context::open(Refusing::new(pa)), Context::open(Refusing::new(pb)));
    let (pd_a, pd_b, cq_a, qa) = rc_between(&mut a, &mut b, Mtu::Mtu4096);
    let slots = DEPTH as usize;
    let src = a.reg_mr(pd_a, SIZE * slots, Access::LOCAL_WRITE).unwrap();
    let dst = b.reg_mr(pd_b, SIZE * slots, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    let mut pair = RcPair { net, a, b, waking: false };
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wcs = Vec::new();
    let finished = nicsim::run_until(&mut pair, Duration::from_secs(10), |p| {
        wcs.clear();
        p.a.poll_cq(cq_a, &mut wcs, 64).unwrap();
        for wc in &wcs {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done += 1;
        }
        while posted < MSGS && posted - done < DEPTH {
            // Message n fills its slot with n's bytes.
            let slot = (posted % DEPTH) as usize;
            p.a.mr_bytes_mut(&src).unwrap()[slot * SIZE..(slot + 1) * SIZE].fill(posted as u8 ^ 0x5A);
            let sge = Sge { addr: src.addr + (slot * SIZE) as u64, length: SIZE as u32, lkey: src.lkey };
            let op = WrOpcode::RdmaWrite { remote_addr: dst.addr + (slot * SIZE) as u64, rkey: dst.rkey };
            p.a.post_send(qa, &[SendWr::new(posted, op, vec![sge])]).unwrap();
            posted += 1;
        }
        done == MSGS
    })
    .unwrap();
    assert!(finished, "{done} of {MSGS} writes completed");
    // Every slot holds the last message written to it.
    let got = pair.b.mr_bytes(&dst).unwrap();
    for slot in 0..slots {
        let last = slot as u64 + (MSGS - 1 - slot as u64) / DEPTH * DEPTH;
        assert!(got[slot * SIZE..(slot + 1) * SIZE].iter().all(|&x| x == last as u8 ^ 0x5A), "slot {slot}");
    }
    let (sa, sb) = (pair.a.stats(), pair.b.stats());
    let (ca, cb) = (pair.a.datapath_counters(), pair.b.datapath_counters());
    assert!(sa.tx_stalls > 0 && sb.tx_stalls > 0, "{sa:?} {sb:?}");
    assert!(counter(&ca, "refused") >= sa.tx_stalls, "{ca:?}");
    assert_eq!((sa.requests.retries, sa.requests.timeouts, sa.requests.seq_naks), (0, 0, 0), "{sa:?}");
    assert_eq!((sb.drops.duplicates, sb.drops.seq_naks_sent), (0, 0), "{sb:?}");
    assert_eq!((sa.tx_failed, sb.tx_failed), (0, 0));
    // Not a frame lost: what each side's engine made, its datapath took, and the other received.
    assert_eq!(sa.tx_frames, counter(&ca, "taken"));
    assert_eq!(sb.tx_frames, counter(&cb, "taken"));
    assert_eq!((sb.rx_frames, sa.rx_frames), (sa.tx_frames, sb.tx_frames));
    assert_eq!(sa.requests.packets, MSGS * (SIZE as u64 / 4096));
}

struct UetPair {
    net: SimNet,
    a: UetNode<Refusing>,
    b: UetNode<Refusing>,
}

impl nicsim::System for UetPair {
    type Error = std::convert::Infallible;
    fn pass(&mut self) -> Result<bool, Self::Error> {
        Ok(self.a.progress() | self.b.progress())
    }
    fn next_event(&self) -> Option<Duration> {
        [self.net.next_event(), self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min()
    }
    fn now(&self) -> Duration {
        self.net.now()
    }
    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

#[test]
fn uet_sends_through_a_refusing_datapath_lose_nothing_and_never_retransmit() {
    use ses::{Addr, Config, Opts, RecvSpec, Status};
    const MSGS: u64 = 100;
    const LEN: usize = 20_000;
    let (net, pa, pb) = SimNet::pair(5, LinkConfig::default(), LinkConfig::default());
    let cfg = Config { max_payload: 2048, ..Config::default() };
    let a = UetNode::new(Refusing::new(pa), ses::Endpoint::new(cfg, 1), true).unwrap();
    let mut b = UetNode::new(Refusing::new(pb), ses::Endpoint::new(cfg, 2), true).unwrap();
    let dst = Addr { fep: Ipv4Addr::new(10, 0, 0, 2), pid_on_fep: 0, resource_index: 0 };
    for i in 0..MSGS {
        b.ses().post_recv(RecvSpec::any(), LEN, i);
    }
    let msg = |i: u64| (0..LEN).map(|k| (k as u64 * 13 + i) as u8).collect::<Vec<u8>>();
    let mut pair = UetPair { net, a, b };
    for i in 0..MSGS {
        pair.a.ses().send(dst, &msg(i), None, Opts { context: i, ..Opts::default() }).unwrap();
    }
    let (mut sent, mut got) = (0u64, Vec::new());
    let Ok(finished) = nicsim::run_until(&mut pair, Duration::from_secs(10), |p| {
        while let Some(c) = p.a.ses().poll_completion() {
            assert_eq!(c.status, Status::Ok);
            sent += 1;
        }
        while let Some(c) = p.b.ses().poll_completion() {
            assert_eq!(c.status, Status::Ok);
            got.push(c.data);
        }
        sent == MSGS && got.len() as u64 == MSGS
    });
    assert!(finished, "{sent} sent, {} received of {MSGS}", got.len());
    // Let the last ACKs land.
    let limit = pair.net.now() + Duration::from_millis(10);
    let Ok(_) = nicsim::run_until(&mut pair, limit, |_| false);
    // RUD delivers in any order: every message arrived once, intact.
    got.sort_by_key(|d| d[0]);
    let mut want: Vec<Vec<u8>> = (0..MSGS).map(msg).collect();
    want.sort_by_key(|d| d[0]);
    assert!(got == want, "delivered data differs");
    let (na, nb) = (pair.a.stats(), pair.b.stats());
    assert!(na.tx_stalls > 0 && nb.tx_stalls > 0, "{na:?} {nb:?}");
    for n in [&mut pair.a, &mut pair.b] {
        let p = *n.ses().pds().stats();
        assert_eq!(
            (p.tx_retransmits, p.fast_retransmits, p.timeouts, p.rx_duplicates),
            (0, 0, 0, 0),
            "{p:?}"
        );
        let st = n.stats();
        assert_eq!(st.tx_frames, counter(&n.datapath().counters(), "taken"));
        assert_eq!((st.tx_failed, st.rx_bad), (0, 0));
    }
    assert_eq!((nb.rx_frames, na.rx_frames), (na.tx_frames, nb.tx_frames), "{na:?} {nb:?}");
}

/// The fault injector passes back-pressure through: a refused frame comes back to the caller, a
/// frame it holds back (reordering) stays held while the datapath is full, and a frame offered
/// again after a refusal does not draw its faults twice. With reordering only, every frame
/// arrives exactly once.
#[test]
fn the_fault_injector_keeps_frames_through_refusals() {
    use engine::datapath::wrap::{Faulty, TxFaults};
    let (net, pa, mut pb) = SimNet::pair(9, LinkConfig::default(), LinkConfig::default());
    let faults = TxFaults { reorder: 0.3, ..TxFaults::default() };
    let mut tx = Faulty::new(Refusing::new(pa), faults, 11);
    let mut refused = 0;
    for i in 0..1000u32 {
        let mut f = tx.alloc();
        f.buffer_mut()[..64].fill(0);
        f.buffer_mut()[60..64].copy_from_slice(&i.to_be_bytes());
        f.set_len(64);
        loop {
            match tx.transmit(f) {
                Ok(()) => break,
                Err(TxError::Full(back)) => {
                    refused += 1;
                    f = back;
                }
                Err(TxError::Failed(why)) => panic!("{why}"),
            }
        }
    }
    // A frame still held goes out with the next receive call.
    while tx.receive().is_some() {}
    let _ = tx.receive();
    net.advance_to(Duration::from_millis(1));
    let mut got = Vec::new();
    while let Some(f) = pb.receive() {
        got.push(u32::from_be_bytes(f.as_slice()[60..64].try_into().unwrap()));
    }
    assert!(refused > 100, "{refused}");
    assert!(got.windows(2).any(|w| w[0] > w[1]), "some frames were reordered");
    got.sort_unstable();
    assert_eq!(got, (0..1000).collect::<Vec<_>>(), "every frame once");
    assert_eq!(counter(&Datapath::counters(&tx), "taken"), 1000);
}

/// Takes every frame, but its "driver queue" takes at most [`PER_FLUSH`] of those it holds per
/// [`DRAIN`] of time, at a flush (as AF_XDP in copy mode leaves descriptors in its TX ring while
/// the driver's queue is full, and sends them only in a later system call); while it holds any, it
/// asks to be flushed again [`RETRY`] later.
struct Holding {
    inner: SimPort,
    held: std::collections::VecDeque<Frame>,
    next: Duration,
    retry: bool,
}

const PER_FLUSH: usize = 32;
const DRAIN: Duration = Duration::from_micros(25);
const RETRY: Duration = Duration::from_micros(100);

impl Datapath for Holding {
    delegate_to_inner!();
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        self.held.push_back(frame);
        Ok(())
    }
    fn flush(&mut self) {
        let now = self.inner.now();
        if self.held.is_empty() || now < self.next {
            return;
        }
        for f in self.held.drain(..PER_FLUSH.min(self.held.len())) {
            self.inner.transmit(f).unwrap();
        }
        self.next = now + DRAIN;
    }
    fn flush_retry_in(&self) -> Option<Duration> {
        (self.retry && !self.held.is_empty()).then_some(RETRY)
    }
}

/// 20 RC WRITEs of 64 KiB at path MTU 1024 through [`Holding`] datapaths; returns the virtual time
/// they took and the requester's timeouts.
fn writes_through_holding_datapaths(retry: bool) -> (Duration, u64) {
    const SIZE: usize = 65536;
    const MSGS: u64 = 20;
    let (net, pa, pb) = SimNet::pair(7, LinkConfig::default(), LinkConfig::default());
    let hold = |inner| Holding { inner, held: Default::default(), next: Duration::ZERO, retry };
    let (mut a, mut b) = (Context::open(hold(pa)), Context::open(hold(pb)));
    let (pd_a, pd_b, cq_a, qa) = rc_between(&mut a, &mut b, Mtu::Mtu1024);
    let src = a.reg_mr(pd_a, SIZE, Access::LOCAL_WRITE).unwrap();
    let dst = b.reg_mr(pd_b, SIZE, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    for i in 0..MSGS {
        let sge = Sge { addr: src.addr, length: SIZE as u32, lkey: src.lkey };
        let op = WrOpcode::RdmaWrite { remote_addr: dst.addr, rkey: dst.rkey };
        a.post_send(qa, &[SendWr::new(i, op, vec![sge])]).unwrap();
    }
    let start = net.now();
    let mut pair = RcPair { net, a, b, waking: true };
    let (mut done, mut wcs) = (0u64, Vec::new());
    let finished = nicsim::run_until(&mut pair, Duration::from_secs(30), |p| {
        wcs.clear();
        p.a.poll_cq(cq_a, &mut wcs, 64).unwrap();
        assert!(wcs.iter().all(|wc| wc.status == WcStatus::Success), "{wcs:?}");
        done += wcs.len() as u64;
        done == MSGS
    })
    .unwrap();
    assert!(finished, "{done} of {MSGS} writes completed");
    (pair.net.now() - start, pair.a.stats().requests.timeouts)
}

#[test]
fn a_datapath_holding_frames_it_took_is_flushed_again_when_it_asks() {
    let (took, timeouts) = writes_through_holding_datapaths(true);
    assert_eq!(timeouts, 0);
    // 1,280 frames, 32 per flush and a flush at least every 100 us (and at every ACK): 2.5 ms of
    // virtual time.
    assert!(took < Duration::from_millis(3), "{took:?}");
    // Without the retry the held frames wait for the next ACK or timer to wake the loop (4.2 ms).
    let (slow, _) = writes_through_holding_datapaths(false);
    assert!(slow > took * 3 / 2, "{slow:?} against {took:?}");
}
