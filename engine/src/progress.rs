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
//!   only every park interval).
//!
//! The engine itself is not thread-safe and never moves between threads: the progress thread builds
//! it and calls run on it there.
//!
//! [`Context::progress`]: crate::verbs::Context::progress

use crate::verbs::VerbsError;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fd::AsFd;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Duration;

/// What the progress thread does when a round had no work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Poll again at once (busy polling).
    Spin,
    /// Sleep up to this long, waking at once for a [`ProgressThread::call`].
    Park(Duration),
}

type Job<W> = Box<dyn FnOnce(&mut W) + Send>;

/// A thread that owns an engine world `W` (a [`Context`](crate::verbs::Context), a
/// [`SimPair`](crate::simpair::SimPair), ...) and drives it. See the module documentation.
pub struct ProgressThread<W> {
    jobs: Option<Sender<Job<W>>>,
    thread: Option<JoinHandle<Result<(), VerbsError>>>,
}

impl<W> std::fmt::Debug for ProgressThread<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressThread").field("running", &self.jobs.is_some()).finish()
    }
}

impl<W: 'static> ProgressThread<W> {
    /// Starts the thread: it builds the world with `make`, then loops: run queued calls, then one
    /// round of `drive` (which returns whether it did any work), then `idle` if it did none.
    pub fn spawn(
        make: impl FnOnce() -> Result<W, VerbsError> + Send + 'static,
        drive: fn(&mut W) -> Result<bool, VerbsError>,
        idle: Idle,
    ) -> Result<ProgressThread<W>, VerbsError> {
        let (tx, rx): (Sender<Job<W>>, Receiver<Job<W>>) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
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
                loop {
                    loop {
                        match rx.try_recv() {
                            Ok(job) => job(&mut world),
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => return Ok(()),
                        }
                    }
                    if drive(&mut world)? {
                        continue;
                    }
                    match idle {
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
            Ok(Ok(())) => Ok(ProgressThread { jobs: Some(tx), thread: Some(thread) }),
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
        rx.recv().map_err(|_| VerbsError::Datapath("the progress thread has stopped"))
    }

    /// Stops the thread and returns the error that ended it early, if any.
    pub fn stop(mut self) -> Result<(), VerbsError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), VerbsError> {
        self.jobs = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(VerbsError::Datapath("the progress thread panicked")),
            None => Ok(()),
        }
    }
}

impl<W> Drop for ProgressThread<W> {
    fn drop(&mut self) {
        self.jobs = None;
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
