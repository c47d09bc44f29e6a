//! `softrdma stat` for programs under `softrdma run`: a thread publishes the counters of the
//! process's open devices every half second ([`softrdma_stat`]), as `softrdma perf` does,
//! described as the program's name.

use crate::handles::Ctx;
use softrdma_stat::{EVERY, Publisher, device};
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

/// The open contexts (addresses of live `Ctx`s): a context leaves before it is freed, under this
/// lock, so the publisher never reads a freed one.
static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn open() -> MutexGuard<'static, Vec<usize>> {
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A context was opened: publish it (the thread starts with the first).
pub(crate) fn opened(ctx: &Ctx) {
    open().push(std::ptr::from_ref(ctx) as usize);
    static START: Once = Once::new();
    START.call_once(|| {
        let what = std::fs::read_to_string("/proc/self/comm")
            .map_or_else(|_| "program".into(), |s| s.trim().to_string());
        let _ = std::thread::Builder::new().name("softrdma-stat".into()).spawn(move || run(&what));
    });
}

/// A context is about to be freed.
pub(crate) fn closing(ctx: &Ctx) {
    let at = std::ptr::from_ref(ctx) as usize;
    open().retain(|&c| c != at);
}

fn run(what: &str) {
    let mut p = Publisher::new(&format!("{what} (softrdma run)"));
    loop {
        std::thread::sleep(EVERY);
        let devices = open()
            .iter()
            .map(|&c| {
                // SAFETY: the address is of a live context: `closing` removes it, under the lock
                // held here, before the context is freed.
                let ctx = unsafe { &*(c as *const Ctx) };
                ctx.dev.inspect(|e| device(&ctx.info.name, e))
            })
            .collect();
        p.publish(devices);
    }
}
