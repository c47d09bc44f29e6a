//! `perf --threads N` on the simulated network: the QPs sharded over N engine threads. Each thread
//! owns both ends of its share of the QPs, on a simulated cable of its own (its own datapath
//! queue), so no lock, queue or cache line is shared between threads on the data path. The threads
//! connect their QPs, start together at a barrier, and the row adds their bytes over the slowest
//! thread's time; with the baseline, each thread then runs the baseline for its own share of the
//! messages, again all at once, so the ratio compares N threads with N threads.

use engine::verbs::Stats;
use std::sync::Barrier;

use super::baseline::{self, Baseline};
use super::bench::Bench;
use super::config::{BwRow, PerfConfig, PerfError, Timeline};

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
        return Err(PerfError::Stalled("--threads N needs at least N QPs (each thread owns some)"));
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
    fn fewer_qps_than_threads_is_refused() {
        let e = run_bw(&cfg(PerfOp::Write, QpType::Rc, 1, 2, LinkConfig::default()), 4096).unwrap_err();
        assert!(e.to_string().contains("at least N QPs"), "{e}");
    }
}
