//! The CRC-32 implementation the ICRC runs on, chosen once per process by timing: crc32fast's
//! detected one (carry-less multiplication, PCLMULQDQ, on x86-64) or its table-driven one
//! ([`wire::ib::icrc::use_table_crc`]). Natively the detected one is about 4x faster; in a VM in
//! software emulation (the one-vCPU VMs of `scripts/vm-bench.sh`), where carry-less multiplication
//! is itself emulated, the table is (2.8-3.3 against 4.1-4.6 us per 1,060-byte packet), and the ICRC
//! was a fifth of a receiving server's time there. The result is the same CRC either way.

use std::hint::black_box;
use std::sync::Once;
use std::time::{Duration, Instant};

use wire::ib::icrc;

/// Packets each implementation computes per try.
const PACKETS: u32 = 64;
/// Tries per implementation, alternating; the fastest of each counts (the first run of code an
/// emulator has not translated yet, a preemption).
const TRIES: usize = 3;

/// Times both implementations over a 1,060-byte RoCE packet (path MTU 1024) and keeps the faster,
/// once per process: real datapaths call it when they open (under 1 ms in software emulation,
/// about 50 us natively).
pub(crate) fn pick() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut p = [0u8; 1060];
        p[0] = 0x45;
        let mut best = [Duration::MAX; 2];
        for _ in 0..TRIES {
            for (i, table) in [false, true].into_iter().enumerate() {
                icrc::use_table_crc(table);
                let start = Instant::now();
                for k in 0..PACKETS {
                    p[40] = k as u8;
                    let _ = black_box(icrc::compute(black_box(&p)));
                }
                best[i] = best[i].min(start.elapsed());
            }
        }
        let table = table_wins(best[0], best[1]);
        icrc::use_table_crc(table);
        tracing::debug!(
            detected = ?best[0] / PACKETS,
            table_driven = ?best[1] / PACKETS,
            chose_table = table,
            "ICRC: CRC-32 implementation timed"
        );
    });
}

/// Whether the table-driven CRC is clearly (a quarter) faster than the detected one: a near tie
/// keeps the detected one, which is what every other process uses.
fn table_wins(detected: Duration, table: Duration) -> bool {
    table * 4 < detected * 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_chosen_only_when_clearly_faster() {
        let us = Duration::from_micros;
        assert!(table_wins(us(3400), us(2000)), "software emulation");
        assert!(!table_wins(us(50), us(220)), "natively");
        assert!(!table_wins(us(1000), us(800)), "a near tie keeps the detected one");
    }

    #[test]
    fn picking_leaves_the_icrc_unchanged() {
        let mut p = [7u8; 300];
        p[0] = 0x45;
        let before = icrc::compute(&p);
        pick();
        assert_eq!(icrc::compute(&p), before);
    }
}
