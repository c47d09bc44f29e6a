//! `wire::copy_payload` against `copy_from_slice` by the distance `(dst - src) mod 4096`: payloads of
//! 4000 bytes copied out of page-aligned frames (at the 110-byte offset of a sealed UET payload) into
//! a 1.2 MiB page-aligned region, as a receiver does. Inside the memcpy cliff's window
//! (`../shared/notes/performance.md`) glibc's `rep movsb` is an order of magnitude slower; the helper
//! should be as fast there as anywhere, and no slower than `copy_from_slice` elsewhere. Interleaved
//! rounds, median and best window (GB/s) of each, and their ratio.
//!
//! `cargo bench -p benches --bench payload_copy` (ROUNDS=n to change the number of rounds).
//!
//! Measured on the development machine: glibc's `rep movsb` took ~1,180 ns for 4000 bytes at a
//! distance of 1-15 (the notes say 1-31 on Zen 3) against 90-115 ns elsewhere; `wire::copy_payload` was
//! 10.7-10.9x faster than `copy_from_slice` inside the window and 0.98-1.03x outside it. End to end, RC
//! `perf write --size 69642` went from 3,346 to 4,526 MB/s (4,544 with rep movsb turned off by
//! `GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=2097152`; 4,699 at 69,632 bytes) and `--size
//! 65552` from 3,556 to 4,172 MB/s (4,792 with rep movsb off; the rest of that gap is not traced yet).

use benches::summarize;
use std::time::Instant;

const LEN: usize = 4000;
const PAGE: usize = 4096;
const FRAMES: usize = 64;
/// Region pages: more than this core's L2 holds, as a region with many writes in flight.
const REGION_PAGES: usize = 300;
/// Where a sealed UET payload starts in its frame (Ethernet, IPv4, UDP, TSS, PDS, SES headers).
const SRC_OFFSET: usize = 110;
const DISTANCES: [usize; 9] = [0, 1, 10, 15, 16, 31, 32, 64, 3986];
const COPIES: usize = 20_000;

/// `pages` pages of memory starting on a page boundary, inside a vector (safe code: the start is
/// found by address).
struct Pages {
    buf: Vec<u8>,
    start: usize,
}

impl Pages {
    fn new(pages: usize, fill: u8) -> Pages {
        let buf = vec![fill; (pages + 1) * PAGE];
        let start = (PAGE - buf.as_ptr() as usize % PAGE) % PAGE;
        Pages { buf, start }
    }

    /// Frame `i` of two pages (as a nicsim frame).
    fn frame(&self, i: usize) -> &[u8] {
        &self.buf[self.start + 2 * i * PAGE..self.start + 2 * (i + 1) * PAGE]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let s = self.start;
        &mut self.buf[s..]
    }
}

/// GB/s of `COPIES` copies at `distance`, with `wire::copy_payload` or `copy_from_slice`.
fn round(frames: &Pages, region: &mut Pages, distance: usize, helper: bool) -> f64 {
    let at = (SRC_OFFSET + distance) % PAGE;
    let t = Instant::now();
    for i in 0..COPIES {
        let src = &frames.frame(i % FRAMES)[SRC_OFFSET..SRC_OFFSET + LEN];
        let d = (i % (REGION_PAGES - 2)) * PAGE + at;
        let dst = &mut region.bytes_mut()[d..d + LEN];
        if helper {
            wire::copy_payload(dst, src);
        } else {
            dst.copy_from_slice(src);
        }
        std::hint::black_box(&*dst);
    }
    (COPIES * LEN) as f64 / t.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    let frames = Pages::new(2 * FRAMES, 0x5A);
    let mut region = Pages::new(REGION_PAGES, 0);
    println!(
        "{LEN}-byte copies from frame offset {SRC_OFFSET} into a {REGION_PAGES}-page region, {rounds} rounds"
    );
    println!(
        " (dst-src) mod 4096   copy_from_slice GB/s (p50 / best)   wire::copy_payload GB/s (p50 / best)   ratio"
    );
    for distance in DISTANCES {
        let (mut plain, mut helper) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            plain.push(round(&frames, &mut region, distance, false));
            helper.push(round(&frames, &mut region, distance, true));
        }
        let (p, h) = (summarize(&plain).expect("rounds"), summarize(&helper).expect("rounds"));
        println!(
            " {distance:>18}   {:>14.2} / {:<12.2}          {:>14.2} / {:<12.2}           {:.2}x",
            p.p50,
            p.best,
            h.p50,
            h.best,
            h.p50 / p.p50
        );
    }
}
