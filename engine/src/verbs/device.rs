//! A device several threads can use at once (libibverbs' promise: any verb from any thread).
//!
//! A [`Device`] is a [`Context`] behind a mutex plus a progress thread. Application threads lock
//! it for each verb and drive the engine themselves while they poll (`ibv_poll_cq` in a busy loop
//! runs a progress round under the lock, with no hand-off to another thread: the native engine's
//! speed). The progress thread answers for the engine whenever no application thread has used it
//! for [`HANDOVER`] (50 us), or one says it is about to block ([`Device::release`], before waiting
//! in `ibv_get_cq_event`): it sleeps in poll(2) on the datapath's descriptor, so a frame wakes it
//! (not a timer) and an incoming READ, WRITE or atomic is answered, and an ACK or NAK taken, at
//! once while the program computes, sleeps or polls rarely, as a NIC's responder does.
//!
//! **Keeping out of a polling program's way without a wake-up per frame or per interval.** While
//! an application thread uses the engine, the progress thread must not sleep on the datapath (each
//! frame would wake it: on a machine with two cores that costs the peer process and the kernel's
//! network work their core) and must not wake on a clock every few microseconds to see whether the
//! program still polls. So it sleeps on a timerfd that the application's own verbs keep pushing
//! out: [`Device::lock`] records the time and, at most once per [`HANDOVER`], re-arms the timer to
//! fire 2 x [`HANDOVER`] later (one `timerfd_settime` per 50 us of busy polling). The timer fires
//! only once the program has left the engine alone for between one and two [`HANDOVER`]s; then the
//! thread takes over and sleeps on the datapath (and on the same timer, which the program's next
//! verb arms, and the engine's own next timer) until a frame, a timer or the program's next verbs.
//! Invariant: whenever the thread sleeps because a program thread drives the engine, the timer is
//! armed (the thread arms it itself if it finds it idle), so no hand-over is lost to a race between
//! the two; every sleep is bounded anyway by [`MAX_IDLE_SLEEP`].
//!
//! Each device has its own lock and thread: devices (and, later, shards of QPs) run in parallel.

use super::Context;
use crate::progress::{Sleep, sleep_on};
use rustix::fd::{AsFd, OwnedFd};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create, timerfd_gettime,
    timerfd_settime,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long after an application thread last used the engine the progress thread may take over
/// (it does between one and two of these later).
pub const HANDOVER: Duration = Duration::from_micros(50);

/// The longest the progress thread sleeps in one go: a bound on how late anything it was not woken
/// for (a timer armed by an application thread after the thread computed its sleep) is noticed.
const MAX_IDLE_SLEEP: Duration = Duration::from_millis(5);

struct Inner {
    ctx: Mutex<Context>,
    /// The datapath's descriptor, duplicated so the progress thread sleeps on it without the lock.
    dp_fd: Option<OwnedFd>,
    /// The hand-over timer (a timerfd): fires when application threads have left the engine alone
    /// for a while, or at once to wake the thread ([`Device::release`], drop).
    timer: OwnedFd,
    stop: AtomicBool,
    /// When an application thread last used the engine, in ns since `epoch` (0: released).
    driven_at: AtomicU64,
    /// When an application thread last armed `timer`, in ns since `epoch` (0: not since release).
    armed_at: AtomicU64,
    epoch: Instant,
}

/// `d` as a relative timerfd expiry (never zero, which would disarm it).
fn once_in(d: Duration) -> Itimerspec {
    let d = d.max(Duration::from_nanos(1));
    Itimerspec {
        it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: Timespec { tv_sec: d.as_secs() as i64, tv_nsec: i64::from(d.subsec_nanos()) },
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Context> {
        // A panic under the lock (a bug) leaves the context as the last round left it.
        self.ctx.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos().max(1) as u64
    }

    /// Whether an application thread used the engine within the last [`HANDOVER`].
    fn app_active(&self) -> bool {
        !self.idle_for(HANDOVER)
    }

    /// Whether no application thread has used the engine for `d` (or one released it).
    fn idle_for(&self, d: Duration) -> bool {
        let at = self.driven_at.load(Ordering::Relaxed);
        at == 0 || self.now_ns().saturating_sub(at) >= d.as_nanos() as u64
    }

    /// Sets the timer to fire after `d` (replacing any expiry set before).
    fn arm(&self, d: Duration) {
        // timerfd_settime fails only for a bad descriptor or value, neither possible here.
        let _ = timerfd_settime(&self.timer, TimerfdTimerFlags::empty(), &once_in(d));
    }

    /// An application thread uses the engine now: the progress thread keeps out until it has
    /// left the engine alone for [`HANDOVER`] (see the module documentation).
    fn driven(&self) {
        let now = self.now_ns();
        self.driven_at.store(now, Ordering::Relaxed);
        let armed = self.armed_at.load(Ordering::Relaxed);
        if (armed == 0 || now.saturating_sub(armed) >= HANDOVER.as_nanos() as u64)
            && self.armed_at.compare_exchange(armed, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.arm(2 * HANDOVER);
        }
    }

    /// The progress thread is about to sleep while an application thread drives: make sure the
    /// timer will end the sleep once it stops.
    fn ensure_armed(&self) {
        let idle =
            timerfd_gettime(&self.timer).map_or(true, |t| t.it_value.tv_sec == 0 && t.it_value.tv_nsec == 0);
        if idle {
            self.arm(2 * HANDOVER);
        }
    }

    /// Takes what the timer counted (after a wake-up), so it stops reading as ready.
    fn drain_timer(&self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.timer, &mut count);
    }

    fn wake(&self) {
        self.arm(Duration::from_nanos(1));
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
        let timer =
            timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
        let inner = Arc::new(Inner {
            ctx: Mutex::new(ctx),
            dp_fd,
            timer,
            stop: AtomicBool::new(false),
            driven_at: AtomicU64::new(0),
            armed_at: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let thread = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new().name("softrdma-progress".into()).spawn(move || run(&inner))?
        };
        Ok(Device { inner, thread: Some(thread) })
    }

    /// The context, for one verb: the calling thread holds the engine until the guard drops, and
    /// counts as driving it (the progress thread stays out of its way until it has left the engine
    /// alone for [`HANDOVER`]).
    pub fn lock(&self) -> MutexGuard<'_, Context> {
        self.inner.driven();
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
        self.inner.armed_at.store(0, Ordering::Relaxed);
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
/// the datapath in between, and on the hand-over timer alone while one does.
fn run(inner: &Inner) {
    let timer = inner.timer.as_fd();
    while !inner.stop.load(Ordering::Relaxed) {
        if inner.app_active() {
            inner.ensure_armed();
            let _ = sleep_on(None, false, Some(timer), MAX_IDLE_SLEEP);
            inner.drain_timer();
            continue;
        }
        let mut ctx = match inner.ctx.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // An application thread is inside a verb (on a loaded machine it may be off its core
            // for longer than HANDOVER, lock held), or a side thread reads counters: wait for the
            // lock without spinning or waking on a clock, then look again (an application thread
            // that just let go counts as driving).
            Err(TryLockError::WouldBlock) => {
                drop(inner.lock());
                continue;
            }
        };
        // A datapath error is the application's to see on its next verb; the thread keeps
        // running timers.
        let worked = ctx.progress().map_or(true, |n| n > 0);
        let (next, tx_blocked) = (ctx.next_work_in(), ctx.tx_blocked());
        drop(ctx);
        if worked {
            continue;
        }
        // No spinning between rounds: sched_yield on a loaded machine gives the core away for
        // milliseconds, and poll(2) on the datapath wakes for the next frame at once.
        let timeout = next.map_or(MAX_IDLE_SLEEP, |t| t.min(MAX_IDLE_SLEEP));
        if timeout.is_zero() {
            continue;
        }
        let dp = inner.dp_fd.as_ref().map(AsFd::as_fd);
        let _ = sleep_on(dp, tx_blocked, Some(timer), timeout);
        inner.drain_timer();
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
