//! `perf --threads N`: the QPs sharded over N engine threads.
//!
//! **On the simulated network** each thread owns both ends of its share of the QPs, on a simulated
//! cable of its own (its own datapath queue), so no lock, queue or cache line is shared between
//! threads on the data path. The threads connect their QPs, start together at a barrier, and the
//! row adds their bytes over the slowest thread's time; with the baseline, each thread then runs the
//! baseline for its own share of the messages, again all at once, so the ratio compares N threads
//! with N threads.
//!
//! **Between two processes** each client thread runs its share of the QPs as a run of its own: its
//! own exchange on the server's TCP port (the hello names the thread, `shard`), its own context and
//! datapath queue: UDP port + thread, or AF_XDP queue + thread of the interface (a multi-queue
//! interface, where the kernel keeps the queues' frames apart). The server learns the number of
//! threads from the first hello, accepts the others, and serves each on a thread of its own.

use engine::verbs::Stats;
use std::net::TcpListener;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use super::baseline::{self, Baseline};
use super::bench::Bench;
use super::config::{BwRow, PerfConfig, PerfError, Timeline};
use super::remote::{self, Accepted, Link, Outcome, RemoteError, Test, XdpQueue};
use engine::datapath::afxdp::XdpMode;

/// A run over several threads: the summed row, and each thread's two devices' counters.
#[derive(Debug)]
pub struct Sharded {
    /// Bytes, messages and checks of all threads; wall time of the slowest.
    pub row: BwRow,
    /// The counters of each thread's requester and responder devices.
    pub stats: Vec<(Stats, Stats)>,
}

/// QPs of thread `index` of `threads`: `qps` split as evenly as it goes.
pub fn share(qps: usize, threads: usize, index: usize) -> usize {
    qps / threads + usize::from(index < qps % threads)
}

/// One bandwidth row for messages of `size` bytes over `cfg.threads` threads.
pub fn run_bw(cfg: &PerfConfig, size: usize) -> Result<Sharded, PerfError> {
    let n = cfg.threads.max(1);
    if cfg.qps < n {
        return Err(PerfError::Config("--threads N needs at least N QPs (each thread owns some)"));
    }
    let (start, base) = (Barrier::new(n), Barrier::new(n));
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let shard = PerfConfig {
                    qps: share(cfg.qps, n, i),
                    threads: 1,
                    // Each thread's cable draws its own impairments.
                    seed: cfg.seed.wrapping_add(i as u64),
                    baseline: false,
                    ..cfg.clone()
                };
                let (start, base) = (&start, &base);
                s.spawn(move || {
                    // Every thread passes both barriers whatever happened before, so a failed
                    // thread cannot leave the others waiting.
                    let made = Bench::new(&shard, size);
                    start.wait();
                    let ran = made.and_then(|mut b| {
                        b.set_shard(i, n);
                        let row = b.run_bw()?;
                        Ok((row, b.stats()))
                    });
                    base.wait();
                    let messages = shard.iters * shard.qps as u64;
                    let baseline = (cfg.baseline && ran.is_ok())
                        .then(|| baseline::run(size, cfg.mtu.bytes() as usize, messages, 0));
                    ran.map(|(row, stats)| (row, stats, baseline))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(PerfError::Stalled("an engine thread panicked"))))
            .collect()
    });
    let mut rows = Vec::with_capacity(n);
    let mut stats = Vec::with_capacity(n);
    let mut baselines = Vec::with_capacity(n);
    for run in runs {
        let (row, s, b) = run?;
        rows.push(row);
        stats.push(s);
        baselines.extend(b);
    }
    let mut row = merge(&rows);
    row.baseline = (baselines.len() == n).then(|| merge_baselines(&baselines));
    Ok(Sharded { row, stats })
}

/// The threads' rows as one: counts added, times of the slowest thread. The peak is not sampled
/// across threads: it is the run's average, and the timeline is empty.
fn merge(rows: &[BwRow]) -> BwRow {
    let wall = rows.iter().map(|r| r.wall).max().unwrap_or_default();
    let bytes = rows.iter().map(|r| r.bytes).sum::<u64>();
    BwRow {
        size: rows.first().map_or(0, |r| r.size),
        iters: rows.first().map_or(0, |r| r.iters),
        bytes,
        wall,
        virtual_time: rows.iter().map(|r| r.virtual_time).max().unwrap_or_default(),
        peak: bytes as f64 / wall.as_secs_f64().max(1e-9),
        verified: rows.iter().map(|r| r.verified).sum(),
        errors: rows.iter().map(|r| r.errors).sum(),
        lost: rows.iter().map(|r| r.lost).sum(),
        duplicates: rows.iter().map(|r| r.duplicates).sum(),
        check_time: rows.iter().map(|r| r.check_time).max().unwrap_or_default(),
        baseline: None,
        timeline: Timeline::default(),
    }
}

/// The threads' baselines, run at the same time, as one: bytes added over the slowest one's time.
fn merge_baselines(b: &[Baseline]) -> Baseline {
    Baseline {
        bytes: b.iter().map(|b| b.bytes).sum(),
        packets: b.iter().map(|b| b.packets).sum(),
        elapsed: b.iter().map(|b| b.elapsed).max().unwrap_or_default(),
        intact: b.iter().all(|b| b.intact),
        threads: b.len(),
    }
}

/// The link of thread `shard` of a two-process run: UDP port + `shard`, or AF_XDP queue +
/// `shard`; the exchange's TCP port is the same for every thread.
pub fn shard_link(link: &Link, shard: usize) -> Result<Link, RemoteError> {
    let mut l = link.clone();
    match &mut l.xdp {
        None => {
            l.udp_port = u16::try_from(usize::from(link.udp_port) + shard).map_err(|_| {
                RemoteError(format!("UDP port {} + thread {shard} is above 65535", link.udp_port))
            })?;
        }
        Some(XdpQueue { queue, .. }) => {
            *queue = u32::try_from(shard).ok().and_then(|s| queue.checked_add(s)).ok_or_else(|| {
                RemoteError(format!("AF_XDP queue {queue} + thread {shard} is above {}", u32::MAX))
            })?;
        }
    }
    Ok(l)
}

/// Why a run over several threads cannot have what `link` asks for, if it cannot.
fn refused(link: &Link, threads: usize) -> Result<(), RemoteError> {
    if threads > 1 && link.capture.is_some() {
        return Err(RemoteError(format!(
            "a run over {threads} threads has {threads} datapaths: --capture records one (run it with --threads 1)"
        )));
    }
    if let (true, Some(XdpQueue { mode: XdpMode::Generic, .. })) = (threads > 1, &link.xdp) {
        return Err(RemoteError(GENERIC_XDP.into()));
    }
    Ok(())
}

/// Why AF_XDP threads need driver mode.
pub const GENERIC_XDP: &str = "--threads over AF_XDP needs --xdp-driver on both sides: each thread's socket \
     is on its own queue, and in generic mode a veth hands every frame to queue 0 (in driver mode a frame \
     arrives on the queue it was sent from)";

/// Each thread's result in turn; the first error names its thread.
fn joined<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, RemoteError>>>,
) -> Result<Vec<T>, RemoteError> {
    handles
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            h.join()
                .unwrap_or_else(|_| Err(RemoteError("the thread panicked".into())))
                .map_err(|e| RemoteError(format!("thread {i}: {e}")))
        })
        .collect()
}

/// The client side of `t` over `t.threads` threads: each runs its share of the QPs over an
/// exchange, context and datapath queue of its own ([`shard_link`]). One outcome per thread.
pub fn run_client(host: &str, link: &Link, t: &Test) -> Result<Vec<Outcome>, RemoteError> {
    let n = t.threads.max(1);
    refused(link, n)?;
    if n == 1 {
        return remote::run_client(host, link, t).map(|o| vec![o]);
    }
    std::thread::scope(|s| {
        let handles = (0..n)
            .map(|i| {
                let t = Test { qps: share(t.qps, n, i), shard: i, ..t.clone() };
                s.spawn(move || remote::run_client(host, &shard_link(link, i)?, &t))
            })
            .collect();
        joined(handles)
    })
}

/// The server side: waits for a client on `link`'s exchange port and serves its run. A client
/// over several threads connects once per thread; each is served on a thread of this process with
/// its share of the QPs on its own datapath queue. Returns the whole run's test (all its QPs) and
/// one outcome per thread.
pub fn serve(link: &Link) -> Result<(Test, Vec<Outcome>), RemoteError> {
    let listener = remote::listen(link)?;
    let first = remote::accept_hello(&listener)?;
    let n = first.test.threads;
    if n == 1 {
        let (t, o) = remote::serve(link, first)?;
        return Ok((t, vec![o]));
    }
    refused(link, n)?;
    let whole = Test { shard: 0, ..first.test.clone() };
    let mut shards: Vec<Option<Accepted>> = (0..n).map(|_| None).collect();
    let mut next = Some(first);
    let deadline = Instant::now() + crate::oob::exchange_timeout();
    for _ in 0..n {
        let a = match next.take() {
            Some(a) => a,
            None => accept_within(&listener, deadline, n)?,
        };
        let t = &a.test;
        if (Test { qps: whole.qps, shard: 0, ..t.clone() }) != whole {
            return Err(RemoteError(format!(
                "thread {} of the client asks for another test than thread {}: {t:?}",
                t.shard, whole.shard
            )));
        }
        let i = t.shard;
        if shards[i].is_some() {
            return Err(RemoteError(format!("two exchanges of the client say they are thread {i}")));
        }
        shards[i] = Some(a);
    }
    let shards: Vec<Accepted> = shards.into_iter().flatten().collect();
    let qps = shards.iter().map(|a| a.test.qps).sum();
    if qps as u64 > super::hello::MAX_QPS {
        return Err(RemoteError(format!(
            "the client's {n} threads ask for {qps} QPs in all, more than a run carries ({})",
            super::hello::MAX_QPS
        )));
    }
    let outcomes = std::thread::scope(|s| {
        let handles = shards
            .into_iter()
            .enumerate()
            .map(|(i, a)| s.spawn(move || remote::serve(&shard_link(link, i)?, a).map(|(_, o)| o)))
            .collect();
        joined(handles)
    })?;
    Ok((Test { qps, ..whole }, outcomes))
}

/// The next client exchange on `listener`, before `deadline` (a client of `n` threads connects
/// `n` times).
fn accept_within(listener: &TcpListener, deadline: Instant, n: usize) -> Result<Accepted, RemoteError> {
    listener.set_nonblocking(true).map_err(|e| RemoteError(e.to_string()))?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => return remote::hello_of(stream),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(RemoteError(format!(
                    "the client said it runs {n} threads, and not all of them connected within {} s",
                    crate::oob::exchange_timeout().as_secs()
                )));
            }
            Err(e) => return Err(RemoteError(format!("accepting a client: {e}"))),
        }
    }
}

/// The threads' outcomes as one run's: counts, bytes and datapath counters added, the slowest
/// thread's time, the latencies of all; the first thread's verbs counters ([`Outcome::stats`] of
/// each thread is in `outs`) and capture (a run over several threads has none).
pub fn merged(outs: &[Outcome]) -> Outcome {
    let mut o = outs.first().cloned().unwrap_or_default();
    for x in outs.iter().skip(1) {
        o.bytes += x.bytes;
        o.wall = o.wall.max(x.wall);
        o.verified += x.verified;
        o.errors += x.errors;
        o.lost += x.lost;
        o.latencies.extend_from_slice(&x.latencies);
        for &(k, v) in &x.datapath {
            match o.datapath.iter_mut().find(|(name, _)| *name == k) {
                Some((_, total)) => *total += v,
                None => o.datapath.push((k, v)),
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::{AtomicOp, LinkConfig, Mode, PerfOp};
    use engine::verbs::{Mtu, QpType};

    fn cfg(op: PerfOp, qp_type: QpType, qps: usize, threads: usize, link: LinkConfig) -> PerfConfig {
        PerfConfig {
            op,
            qp_type,
            srq: false,
            atomic: AtomicOp::FetchAdd,
            sizes: vec![4096],
            iters: 40,
            qps,
            threads,
            mode: Mode::Bw,
            mtu: Mtu::Mtu1024,
            link,
            seed: 3,
            tx_depth: 16,
            retries: 1000,
            tap: false,
            baseline: true,
            dcqcn: None,
            traffic_class: 0,
        }
    }

    #[test]
    fn qps_are_split_evenly() {
        assert_eq!((0..3).map(|i| share(64, 3, i)).collect::<Vec<_>>(), [22, 21, 21]);
        assert_eq!((0..2).map(|i| share(5, 2, i)).sum::<usize>(), 5);
        assert_eq!(share(2, 2, 1), 1);
    }

    #[test]
    fn every_message_of_every_thread_is_verified() {
        let lossy = LinkConfig { loss: 0.02, reorder: 0.02, ..LinkConfig::default() };
        for (op, t) in [(PerfOp::Write, QpType::Rc), (PerfOp::Read, QpType::Rc), (PerfOp::Send, QpType::Rc)] {
            let r = run_bw(&cfg(op, t, 7, 3, lossy), 4096).unwrap();
            assert_eq!(r.stats.len(), 3);
            assert_eq!((r.row.verified, r.row.errors), (7 * 40, 0), "{op:?}");
            assert_eq!(r.row.bytes, 7 * 40 * 4096);
            let b = r.row.baseline.expect("baseline asked");
            assert!(b.intact && b.bytes == r.row.bytes, "each thread's baseline covers its share");
            // Each thread's devices carried frames: nothing ran on one thread only.
            assert!(r.stats.iter().all(|(a, _)| a.tx_frames > 0));
        }
        let r = run_bw(&cfg(PerfOp::Send, QpType::Uc, 4, 2, LinkConfig::default()), 4096).unwrap();
        assert_eq!((r.row.verified, r.row.errors, r.row.lost), (4 * 40, 0, 0));
    }

    #[test]
    fn a_thread_s_port_or_queue_past_the_top_is_an_error() {
        use crate::perf::remote::Net;
        let udp = Net { udp_port: u16::MAX, ..Net::udp() }.link(std::net::Ipv4Addr::LOCALHOST, 18515);
        assert_eq!(shard_link(&udp, 0).unwrap().udp_port, u16::MAX);
        assert!(shard_link(&udp, 1).unwrap_err().0.contains("above 65535"));
        let queue = XdpQueue { dev: "lo".into(), queue: u32::MAX, mode: XdpMode::Driver, multi_buffer: true };
        let xdp = Link { backend: remote::Backend::AfXdp, xdp: Some(queue), ..udp };
        assert!(matches!(shard_link(&xdp, 0).unwrap().xdp, Some(XdpQueue { queue: u32::MAX, .. })));
        assert!(shard_link(&xdp, 1).unwrap_err().0.contains("above"));
    }

    #[test]
    fn fewer_qps_than_threads_is_refused() {
        let e = run_bw(&cfg(PerfOp::Write, QpType::Rc, 1, 2, LinkConfig::default()), 4096).unwrap_err();
        assert!(e.to_string().contains("at least N QPs"), "{e}");
    }
}
