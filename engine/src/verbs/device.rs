//! A device several threads can use at once (libibverbs' promise: any verb from any thread).
//!
//! A [`Device`] is a [`Context`] behind a mutex plus a progress thread. Application threads lock
//! it for each verb and drive the engine themselves while they poll (`ibv_poll_cq` in a busy loop
//! runs a progress round under the lock, with no hand-off to another thread: the native engine's
//! speed). When no application thread has driven the engine for [`HANDOVER`], or one says it is
//! about to block ([`Device::release`], before waiting in `ibv_get_cq_event`), the progress thread
//! takes over: it sleeps in poll(2) on the datapath's descriptor until a frame arrives or the
//! engine's next timer is due, and runs a round. So receiving, ACKs, retransmissions and RNR timers
//! go on while the application sleeps or computes, and a busy-polling application does not share
//! the engine's work with a second busy thread (on a machine with two cores, the peer process and
//! the kernel's network work need the other one).
//!
//! Each device has its own lock and thread: devices (and, later, shards of QPs) run in parallel.

use super::Context;
use crate::progress::{Sleep, sleep_on};
use rustix::event::{EventfdFlags, eventfd};
use rustix::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long after an application thread last drove the engine the progress thread takes over.
pub const HANDOVER: Duration = Duration::from_millis(1);

/// How long the progress thread keeps polling after a round with work before it sleeps: a frame
/// that follows within a round trip of a LAN or veth is caught without a wake-up.
const SPIN: Duration = Duration::from_micros(50);

/// The longest the progress thread sleeps while the engine has no timer: a bound on how late a
/// timer armed by an application thread in the meantime can fire.
const MAX_IDLE_SLEEP: Duration = Duration::from_millis(5);

struct Inner {
    ctx: Mutex<Context>,
    /// The datapath's descriptor, duplicated so the progress thread sleeps on it without the lock.
    dp_fd: Option<OwnedFd>,
    /// Wakes the progress thread (an eventfd).
    wake: OwnedFd,
    stop: AtomicBool,
    /// When an application thread last drove the engine, in ns since `epoch` (0: released).
    driven_at: AtomicU64,
    epoch: Instant,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Context> {
        // A panic under the lock (a bug) leaves the context as the last round left it.
        self.ctx.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn since_driven(&self) -> Option<Duration> {
        let at = self.driven_at.load(Ordering::Relaxed);
        (at != 0).then(|| self.epoch.elapsed().saturating_sub(Duration::from_nanos(at)))
    }

    fn wake(&self) {
        // An eventfd only refuses 1 more at u64::MAX - 1: it is readable then anyway.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }
}

/// A [`Context`] any thread can use. See the module documentation.
pub struct Device {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").finish_non_exhaustive()
    }
}

impl Device {
    /// Shares `ctx` and starts its progress thread.
    pub fn new(ctx: Context) -> std::io::Result<Device> {
        let dp_fd = match ctx.wait_fd() {
            Some(fd) => Some(rustix::io::fcntl_dupfd_cloexec(fd, 0)?),
            None => None,
        };
        let wake = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        let inner = Arc::new(Inner {
            ctx: Mutex::new(ctx),
            dp_fd,
            wake,
            stop: AtomicBool::new(false),
            driven_at: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let thread = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new().name("softrdma-progress".into()).spawn(move || run(&inner))?
        };
        Ok(Device { inner, thread: Some(thread) })
    }

    /// The context, for one verb: the calling thread holds the engine until the guard drops, and
    /// counts as driving it (the progress thread stays out of its way for [`HANDOVER`]).
    pub fn lock(&self) -> MutexGuard<'_, Context> {
        let ns = self.inner.epoch.elapsed().as_nanos().max(1) as u64;
        self.inner.driven_at.store(ns, Ordering::Relaxed);
        self.inner.lock()
    }

    /// Runs `f` on the context without counting as an application thread that drives it (for
    /// reading counters from a side thread: the progress thread keeps its turn).
    pub fn inspect<R>(&self, f: impl FnOnce(&Context) -> R) -> R {
        f(&self.inner.lock())
    }

    /// The calling thread stops driving the engine (it is about to block): the progress thread
    /// takes over at once.
    pub fn release(&self) {
        self.inner.driven_at.store(0, Ordering::Relaxed);
        self.inner.wake();
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
        self.inner.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The progress thread: a round whenever no application thread drives the engine, sleeping on
/// the datapath in between.
fn run(inner: &Inner) {
    let mut drain = [0u8; 8];
    let mut last_work = Instant::now();
    while !inner.stop.load(Ordering::Relaxed) {
        if let Some(since) = inner.since_driven().filter(|&d| d < HANDOVER) {
            let _ = sleep_on(None, false, Some(inner.wake.as_fd()), HANDOVER - since);
            let _ = rustix::io::read(&inner.wake, &mut drain);
            continue;
        }
        let (worked, next, tx_blocked) = {
            let mut ctx = inner.lock();
            // A datapath error is the application's to see on its next verb; the thread keeps
            // running timers.
            let worked = ctx.progress().map_or(true, |n| n > 0);
            (worked, ctx.next_work_in(), ctx.tx_blocked())
        };
        if worked {
            last_work = Instant::now();
            continue;
        }
        if last_work.elapsed() < SPIN {
            std::thread::yield_now();
            continue;
        }
        let timeout = next.map_or(MAX_IDLE_SLEEP, |t| t.min(MAX_IDLE_SLEEP));
        if timeout.is_zero() {
            std::thread::yield_now();
            continue;
        }
        let dp = inner.dp_fd.as_ref().map(AsFd::as_fd);
        let _ = sleep_on(dp, tx_blocked, Some(inner.wake.as_fd()), timeout);
        let _ = rustix::io::read(&inner.wake, &mut drain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::sim::SimNet;
    use crate::verbs::{Access, QpInitAttr, RecvWr, Sge};
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn verbs_from_several_threads() {
        let net = SimNet::new(1);
        let a = net.add_port("a", IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))).unwrap();
        let dev = Arc::new(Device::new(Context::open(a)).unwrap());
        let (pd, cq) = {
            let mut c = dev.lock();
            let pd = c.alloc_pd();
            (pd, c.create_cq(64).unwrap())
        };
        let qp = dev.lock().create_qp(pd, &QpInitAttr::rc(cq)).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let dev = Arc::clone(&dev);
                std::thread::spawn(move || {
                    let mr = dev.lock().reg_mr(pd, 4096, Access::LOCAL_WRITE).unwrap();
                    let wr =
                        RecvWr { wr_id: 1, sg_list: vec![Sge { addr: mr.addr, length: 64, lkey: mr.lkey }] };
                    // RESET refuses receives: every thread gets the same typed answer.
                    assert!(dev.lock().post_recv(qp, &[wr]).is_err());
                    dev.release();
                    dev.lock().dereg_mr(&mr).unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
