//! Two ways to drive the engine, as rdma_comm_core-style libraries offer them:
//!
//! - **Poll-driven** (the default): the application calls [`Context::progress`] (or
//!   [`SimPair::step`](crate::simpair::SimPair::step)) itself, typically right before `poll_cq`. No
//!   thread, no locks, the lowest latency and the most predictable timing, and the engine only runs
//!   when the application lets it: retransmission timers fire late if the application is busy.
//! - **Progress thread** ([`ProgressThread`]): one thread owns the engine and drives it in a loop;
//!   the application hands it work with [`ProgressThread::call`] and can block on a completion
//!   channel's file descriptor ([`wait_readable`]) instead of spinning. Timers fire on time whatever
//!   the application does, at the price of a thread: [`Idle::Spin`] keeps it busy-polling (a core at
//!   100%, wake-up in well under a microsecond), [`Idle::Park`] sleeps when there is nothing to do
//!   (no CPU when idle, a few microseconds to wake for a call, and a quiet engine polls its datapath
//!   only every park interval), [`Idle::Adaptive`] spins briefly and then sleeps on the datapath's
//!   descriptor (see below).
//!
//! **Waiting on a real datapath.** Busy polling on a machine with few cores starves the kernel
//! work that moves the packets (softirqs, the peer process). A [`Waiter`] decides, round after
//! round of any driver loop (the progress thread's, or an application's own `progress` loop), what
//! an idle round does: with [`Idle::Adaptive`] it spins for a while after the last round with work,
//! then sleeps in poll(2) on the datapath's descriptor ([`Datapath::wait_fd`]: the UDP socket, the
//! XDP socket) until a frame arrives, a frame the datapath handed back fits (writable), the
//! engine's next timer is due, or another descriptor the loop cares about turns readable. The
//! simulated datapath has no descriptor: it never sleeps there (virtual time).
//!
//! The engine itself is not thread-safe and never moves between threads: the progress thread builds
//! it and calls run on it there.
//!
//! [`Context::progress`]: crate::verbs::Context::progress
//! [`Datapath::wait_fd`]: crate::datapath::Datapath::wait_fd

use crate::verbs::VerbsError;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the progress thread does when a round had no work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Poll again at once (busy polling).
    Spin,
    /// Sleep up to this long, waking at once for a [`ProgressThread::call`].
    Park(Duration),
    /// Spin for this long after the last round with work, then sleep on the datapath's descriptor
    /// until there is work or a timer is due (see [`Waiter`]).
    Adaptive(Duration),
}

impl Idle {
    /// [`Idle::Adaptive`] with 50 us of spinning: a reply within a round trip of a LAN or veth is
    /// caught without a sleep, a longer wait gives the core away.
    pub const ADAPTIVE: Idle = Idle::Adaptive(Duration::from_micros(50));
}

/// An engine a driver loop can sleep on instead of polling it: a device
/// ([`Context`](crate::verbs::Context)) or a UET node ([`UetNode`](crate::uet::UetNode)).
pub trait Sleep {
    /// The datapath's descriptor ([`Datapath::wait_fd`]); `None`: nothing to sleep on.
    ///
    /// [`Datapath::wait_fd`]: crate::datapath::Datapath::wait_fd
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Whether a frame waits for room in the datapath, handed back to the engine or queued in the
    /// datapath ([`Datapath::tx_waiting`]): then a sleep also ends when the descriptor turns
    /// writable.
    ///
    /// [`Datapath::tx_waiting`]: crate::datapath::Datapath::tx_waiting
    fn tx_blocked(&self) -> bool;
    /// How long until the engine has something to do with no frame arriving (a timer, a frame
    /// ready to go): zero if now, `None` if nothing.
    fn next_work_in(&self) -> Option<Duration>;
}

/// The longest a [`Waiter`] sleeps in one go, whatever the engine says: a bound on how late
/// anything the engine cannot see (a link going down) is noticed.
pub const MAX_SLEEP: Duration = Duration::from_millis(100);

/// How one driver loop waits when a round had no work, by an [`Idle`] policy: it remembers how
/// long the engine has been idle and counts its sleeps.
#[derive(Debug, Clone)]
pub struct Waiter {
    idle: Idle,
    idle_since: Option<Instant>,
    sleeps: u64,
}

impl Waiter {
    /// A waiter with this policy.
    pub fn new(idle: Idle) -> Waiter {
        Waiter { idle, idle_since: None, sleeps: 0 }
    }

    /// The policy.
    pub fn idle(&self) -> Idle {
        self.idle
    }

    /// Sleeps so far.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Call after every round of the loop, with whether the round did anything (frames or timers
    /// handled, completions taken, work posted). An idle round spins ([`Idle::Spin`], and
    /// [`Idle::Adaptive`] until its spin time has passed since the last round with work) or sleeps
    /// on `engine`'s descriptor, and on `also` (a control connection, an eventfd), until one is
    /// ready, the engine's next work is due, or `max` (at most [`MAX_SLEEP`]) has passed.
    /// Returns whether it slept.
    pub fn after_round(
        &mut self,
        engine: &impl Sleep,
        worked: bool,
        also: Option<BorrowedFd<'_>>,
        max: Duration,
    ) -> Result<bool, VerbsError> {
        if worked {
            self.idle_since = None;
            return Ok(false);
        }
        let limit = match self.idle {
            Idle::Spin => None,
            Idle::Park(d) => Some(d),
            Idle::Adaptive(spin) => {
                let since = *self.idle_since.get_or_insert_with(Instant::now);
                (since.elapsed() >= spin).then_some(MAX_SLEEP)
            }
        };
        let Some(limit) = limit else {
            if self.idle == Idle::Spin {
                std::hint::spin_loop();
            } else {
                // Adaptive spinning gives the core away to anything else runnable on it (the
                // peer process, the kernel's network work on a one-core machine): sched_yield
                // returns at once when nothing else wants the core.
                std::thread::yield_now();
            }
            return Ok(false);
        };
        let timeout = engine.next_work_in().map_or(limit, |t| t.min(limit)).min(max).min(MAX_SLEEP);
        if timeout.is_zero() {
            return Ok(false);
        }
        let slept = sleep_on(engine.wait_fd(), engine.tx_blocked(), also, timeout)?;
        self.sleeps += u64::from(slept);
        Ok(slept)
    }
}

/// Sleeps in poll(2) until `fd` is readable (or writable, with `write`), `also` is readable, or
/// `timeout` passes; false, at once, if there is no descriptor at all.
pub(crate) fn sleep_on(
    fd: Option<BorrowedFd<'_>>,
    write: bool,
    also: Option<BorrowedFd<'_>>,
    timeout: Duration,
) -> Result<bool, VerbsError> {
    let dp_flags = if write { PollFlags::IN | PollFlags::OUT } else { PollFlags::IN };
    let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
    fds.extend(fd.as_ref().map(|fd| PollFd::new(fd, dp_flags)));
    fds.extend(also.as_ref().map(|fd| PollFd::new(fd, PollFlags::IN)));
    if fds.is_empty() {
        return Ok(false);
    }
    let ts = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
    match poll(&mut fds, Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(true),
        Err(_) => Err(VerbsError::Datapath("poll on the datapath failed")),
    }
}

type Job<W> = Box<dyn FnOnce(&mut W) + Send>;

/// A thread that owns an engine world `W` (a [`Context`](crate::verbs::Context), a
/// [`SimPair`](crate::simpair::SimPair), ...) and drives it. See the module documentation.
pub struct ProgressThread<W> {
    jobs: Option<Sender<Job<W>>>,
    /// With [`Idle::Adaptive`]: an eventfd that ends the thread's sleep when a call comes.
    wake: Option<Arc<OwnedFd>>,
    thread: Option<JoinHandle<Result<(), VerbsError>>>,
}

impl<W> std::fmt::Debug for ProgressThread<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressThread").field("running", &self.jobs.is_some()).finish()
    }
}

impl<W: Sleep + 'static> ProgressThread<W> {
    /// Starts the thread: it builds the world with `make`, then loops: run queued calls, then one
    /// round of `drive` (which returns whether it did any work), then `idle` if it did none.
    pub fn spawn(
        make: impl FnOnce() -> Result<W, VerbsError> + Send + 'static,
        drive: fn(&mut W) -> Result<bool, VerbsError>,
        idle: Idle,
    ) -> Result<ProgressThread<W>, VerbsError> {
        let (tx, rx): (Sender<Job<W>>, Receiver<Job<W>>) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let wake = match idle {
            Idle::Adaptive(_) => Some(Arc::new(
                eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
                    .map_err(|_| VerbsError::OutOfResources)?,
            )),
            _ => None,
        };
        let woken = wake.clone();
        let thread = std::thread::Builder::new()
            .name("softrdma-progress".into())
            .spawn(move || {
                let mut world = match make() {
                    Ok(w) => {
                        let _ = ready_tx.send(Ok(()));
                        w
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Err(e);
                    }
                };
                let mut waiter = Waiter::new(idle);
                loop {
                    loop {
                        match rx.try_recv() {
                            Ok(job) => job(&mut world),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => return Ok(()),
                        }
                    }
                    let worked = drive(&mut world)?;
                    match idle {
                        Idle::Adaptive(_) => {
                            // A call ends the sleep through the eventfd, drained after it.
                            let wake = woken.as_deref().map(AsFd::as_fd);
                            if waiter.after_round(&world, worked, wake, MAX_SLEEP)? {
                                if let Some(fd) = wake {
                                    let _ = rustix::io::read(fd, &mut [0u8; 8]);
                                }
                            }
                        }
                        _ if worked => {}
                        Idle::Spin => std::hint::spin_loop(),
                        Idle::Park(d) => match rx.recv_timeout(d) {
                            Ok(job) => job(&mut world),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return Ok(()),
                        },
                    }
                }
            })
            .map_err(|_| VerbsError::OutOfResources)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ProgressThread { jobs: Some(tx), wake, thread: Some(thread) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(VerbsError::Datapath("the progress thread ended while starting")),
        }
    }

    /// Runs `f` on the progress thread, between two rounds, and returns its result.
    pub fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut W) -> R + Send + 'static,
    ) -> Result<R, VerbsError> {
        let (tx, rx) = mpsc::channel();
        let jobs = self.jobs.as_ref().ok_or(VerbsError::Datapath("the progress thread has stopped"))?;
        jobs.send(Box::new(move |w: &mut W| {
            let _ = tx.send(f(w));
        }))
        .map_err(|_| VerbsError::Datapath("the progress thread has stopped"))?;
        self.wake_up();
        rx.recv().map_err(|_| VerbsError::Datapath("the progress thread has stopped"))
    }

    /// Stops the thread and returns the error that ended it early, if any.
    pub fn stop(mut self) -> Result<(), VerbsError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), VerbsError> {
        self.jobs = None;
        self.wake_up();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(VerbsError::Datapath("the progress thread panicked")),
            None => Ok(()),
        }
    }
}

impl<W> ProgressThread<W> {
    /// Ends a sleep of the thread (with [`Idle::Adaptive`]).
    fn wake_up(&self) {
        if let Some(fd) = &self.wake {
            // An eventfd counter only fails to take 1 at u64::MAX - 1: then it is readable anyway.
            let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
        }
    }
}

impl<W> Drop for ProgressThread<W> {
    fn drop(&mut self) {
        self.jobs = None;
        self.wake_up();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Blocks until `fd` is readable or `timeout` passes (`None`: no limit); returns whether it is
/// readable. For a completion channel's descriptor: the blocking wait of verbs'
/// `ibv_get_cq_event`.
pub fn wait_readable(fd: impl AsFd, timeout: Option<Duration>) -> Result<bool, VerbsError> {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let ts = timeout.map(|d| Timespec { tv_sec: d.as_secs() as i64, tv_nsec: i64::from(d.subsec_nanos()) });
    loop {
        match poll(&mut fds, ts.as_ref()) {
            Ok(n) => return Ok(n > 0 && fds[0].revents().contains(PollFlags::IN)),
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return Err(VerbsError::Datapath("poll on the completion channel failed")),
        }
    }
}
