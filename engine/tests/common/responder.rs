//! One-sided operations against a target that is a [`Device`] (the engine behind a lock, with its
//! progress thread, as `libsoftrdma_ibverbs` runs it) while the target's program polls busily, polls
//! now and then, or not at all: the initiator, a plain context polled by the calling thread, times
//! each READ, WRITE and FETCH_ADD from post to completion and checks what each one moved.
//! `tests/responder_progress.rs` runs it over kernel UDP on loopback; `examples/idle_target.rs`
//! between two network namespaces.

use engine::datapath::udp::UdpPort;
use engine::simpair::{PairConfig, connect};
use engine::verbs::{
    Access, Context, Cq, Device, Mr, Qp, QpInitAttr, SendWr, Sge, WcStatus, WorkCompletion, WrOpcode,
};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the target's program does while the initiator runs its operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Polls its CQ in a loop (drives the engine itself all the time).
    Busy,
    /// Polls its CQ once, then sleeps this long, and again.
    Every(Duration),
    /// Never calls a verb.
    Asleep,
}

/// The latencies of each kind of operation, post to completion, in the order they ran.
#[derive(Debug, Default)]
pub struct Latencies {
    pub read: Vec<Duration>,
    pub write: Vec<Duration>,
    pub atomic: Vec<Duration>,
}

/// The median of `v`.
pub fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

/// Bytes the target's region holds and the operations use.
const REGION: usize = 1 << 16;

struct Side {
    pd_qp: Qp,
    cq: Cq,
    mr: Mr,
}

fn side(ctx: &mut Context) -> Side {
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(256).unwrap();
    let qp = ctx.create_qp(pd, &QpInitAttr::rc(cq)).unwrap();
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = ctx.reg_mr(pd, REGION, all).unwrap();
    Side { pd_qp: qp, cq, mr }
}

/// Posts `wr` on the initiator and polls until it completes (10 s at most): its latency.
fn one(ctx: &mut Context, a: &Side, wr: SendWr) -> Duration {
    let start = Instant::now();
    ctx.post_send(a.pd_qp, &[wr]).unwrap();
    let mut wc: Vec<WorkCompletion> = Vec::new();
    while wc.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "an operation did not complete in 10 s");
        ctx.progress().unwrap();
        ctx.poll_cq(a.cq, &mut wc, 1).unwrap();
    }
    assert_eq!(wc[0].status, WcStatus::Success, "{:?}", wc[0]);
    start.elapsed()
}

/// Runs `n` READs, WRITEs and FETCH_ADDs of 8 bytes each (interleaved, `gap` apart, so each lands
/// at a different moment of a target's polling period) from `a` (the initiator's port at `ip_a`)
/// to the target at `ip_b` on port `b`, while the target's program does as `target` says. Panics
/// if an operation fails or moves the wrong bytes.
pub fn run(
    a: UdpPort,
    ip_a: Ipv4Addr,
    b: UdpPort,
    ip_b: Ipv4Addr,
    target: Target,
    n: usize,
    gap: Duration,
) -> Latencies {
    let mut actx = Context::open(a);
    let dev = Arc::new(Device::new(Context::open(b)).unwrap());
    let sa = side(&mut actx);
    let sb = side(&mut dev.lock());
    let cfg = PairConfig { timeout: 14, ..PairConfig::default() };
    connect(&mut actx, sa.pd_qp, sb.pd_qp.qpn(), ip_b.into(), 100, 200, &cfg).unwrap();
    connect(&mut dev.lock(), sb.pd_qp, sa.pd_qp.qpn(), ip_a.into(), 200, 100, &cfg).unwrap();
    for (i, x) in dev.lock().mr_bytes_mut(&sb.mr).unwrap().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let program = (target != Target::Asleep).then(|| {
        let (dev, stop, cq) = (Arc::clone(&dev), Arc::clone(&stop), sb.cq);
        std::thread::spawn(move || {
            let mut wc = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                {
                    let mut c = dev.lock();
                    c.progress().unwrap();
                    c.poll_cq(cq, &mut wc, 16).unwrap();
                }
                if let Target::Every(d) = target {
                    std::thread::sleep(d);
                }
            }
        })
    });
    if target == Target::Asleep {
        // The target's program has made its last verb call (above).
        dev.release();
    }
    let (raddr, rkey) = (sb.mr.addr, sb.mr.rkey);
    let sge = |off: u64| vec![Sge { addr: sa.mr.addr + off, length: 8, lkey: sa.mr.lkey }];
    let mut lat = Latencies::default();
    let word = |m: &[u8], at: usize| u64::from_ne_bytes(m[at..at + 8].try_into().unwrap());
    let original_word = word(&dev.inspect(|c| c.mr_bytes(&sb.mr).unwrap().to_vec()), 0);
    for k in 0..n as u64 {
        // READ 8 bytes at a different offset each time; the target's pattern comes back.
        let off = 8 + (k % 512) * 8;
        lat.read.push(one(
            &mut actx,
            &sa,
            SendWr::new(k, WrOpcode::RdmaRead { remote_addr: raddr + off, rkey }, sge(0)),
        ));
        let want: Vec<u8> = (0..8).map(|i| ((off + i) % 251) as u8).collect();
        assert_eq!(&actx.mr_bytes(&sa.mr).unwrap()[..8], &want[..], "READ {k}");
        std::thread::sleep(gap);
        // WRITE k to the upper half of the region.
        actx.mr_bytes_mut(&sa.mr).unwrap()[64..72].copy_from_slice(&k.to_ne_bytes());
        let dst = raddr + (REGION as u64 / 2) + (k % 512) * 8;
        lat.write.push(one(
            &mut actx,
            &sa,
            SendWr::new(k, WrOpcode::RdmaWrite { remote_addr: dst, rkey }, sge(64)),
        ));
        std::thread::sleep(gap);
        // FETCH_ADD 1 to the target's first word: it returns how many came before.
        let fa = WrOpcode::AtomicFetchAndAdd { remote_addr: raddr, rkey, add: 1 };
        lat.atomic.push(one(&mut actx, &sa, SendWr::new(k, fa, sge(128))));
        assert_eq!(word(actx.mr_bytes(&sa.mr).unwrap(), 128), original_word.wrapping_add(k), "FETCH_ADD {k}");
        std::thread::sleep(gap);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = program {
        t.join().unwrap();
    }
    let mb = dev.inspect(|c| c.mr_bytes(&sb.mr).unwrap().to_vec());
    for k in n.saturating_sub(512) as u64..n as u64 {
        let at = REGION / 2 + (k % 512) as usize * 8;
        assert_eq!(word(&mb, at), k, "WRITE {k}");
    }
    assert_eq!(word(&mb, 0), original_word.wrapping_add(n as u64), "every FETCH_ADD added 1");
    lat
}
