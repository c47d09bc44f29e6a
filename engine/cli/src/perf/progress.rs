//! The progress line of a long `perf` run: after two seconds, twice a second, on stderr, when stderr
//! is a terminal (`SOFTRDMA_PROGRESS=always` shows it anyway, `never` never): messages done of all,
//! the share, the average rate so far and the time spent; erased when the row is printed.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// After how long a run shows its progress.
const AFTER: Duration = Duration::from_secs(2);
/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(500);
/// Updates between two looks at the clock.
const CHECK_EVERY: u32 = 256;

/// Whether progress lines are shown: `SOFTRDMA_PROGRESS` (always, never, auto) or a terminal.
fn wanted() -> bool {
    match std::env::var("SOFTRDMA_PROGRESS").as_deref() {
        Ok("always") => true,
        Ok("never") => false,
        _ => std::io::stderr().is_terminal(),
    }
}

/// One run's progress line.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    label: String,
    total: u64,
    size: usize,
    start: Instant,
    next: Instant,
    calls: u32,
    shown: bool,
}

impl Progress {
    /// A run of `total` messages of `size` bytes, named `label` (e.g. "size 65536").
    pub fn new(label: String, total: u64, size: usize) -> Progress {
        let start = Instant::now();
        Progress { enabled: wanted(), label, total, size, start, next: start + AFTER, calls: 0, shown: false }
    }

    /// Shows nothing (one of several threads whose first one shows its line).
    pub fn hide(&mut self) {
        self.enabled = false;
    }

    /// `done` messages have completed.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        self.calls += 1;
        if self.calls < CHECK_EVERY {
            return;
        }
        self.calls = 0;
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + EVERY;
        let secs = (now - self.start).as_secs_f64();
        let rate = done as f64 * self.size as f64 / secs.max(1e-9) / (1u64 << 20) as f64;
        let share = 100.0 * done as f64 / self.total.max(1) as f64;
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r {}: {done}/{} messages ({share:.0} %), {rate:.2} MB/s, {secs:.0} s\x1b[K",
            self.label, self.total
        );
        let _ = e.flush();
        self.shown = true;
    }

    /// The run is over: the line goes.
    pub fn finish(&mut self) {
        if self.shown {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
