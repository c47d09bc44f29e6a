//! Replays each target's committed seeds (`fuzz/seeds/TARGET/`) through the function the target
//! runs: a seed that panics or fails a check fails the test, naming the file. A target without
//! seeds fails too, so that the corpus cannot silently go missing.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no seeds", dir.display());
    let failed: Vec<_> = files
        .iter()
        .filter(|f| {
            let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            catch_unwind(AssertUnwindSafe(|| run(&data))).is_err()
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target}: {} of {} seeds fail: {failed:?}", failed.len(), files.len());
}

macro_rules! replay {
    ($($target:ident),* $(,)?) => {
        $(
            #[test]
            fn $target() {
                replay(stringify!($target), softrdma_fuzz::$target::run);
            }
        )*
    };
}

replay!(
    capture_reader,
    cm_mad,
    cm_qp1,
    context_rx,
    ethernet_frame,
    pds_pair,
    perf_hello,
    perftest_exchange,
    pingpong_msg,
    provider_config,
    qp_packets,
    tss_domain,
    uet_endpoint,
    uet_frame,
);
