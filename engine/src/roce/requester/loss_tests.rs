//! The requester under the adaptive send window and the probes, fed ACKs, NAKs and timeouts with
//! explicit times (`window.rs` tests the window's arithmetic alone).

use super::Requester;
use super::tests::{MTU, ack, drain, push, setup};
use crate::roce::mem::MemTable;
use crate::roce::types::{SendWindow, WcStatus, WrOpcode};
use std::time::Duration;
use wire::ib::{AethRepr, NakCode};

/// Queues `n` RDMA WRITEs of `pkts` packets each.
fn writes(r: &mut Requester, key: u32, addr: u64, n: u64, pkts: u32) {
    for i in 0..n {
        push(r, i, WrOpcode::RdmaWrite { remote_addr: 0x1000, rkey: 9 }, key, addr, pkts * MTU);
    }
}

fn psns(pkts: &[(u8, u32, bool)]) -> Vec<u32> {
    pkts.iter().map(|p| p.1).collect()
}

fn nak(r: &mut Requester, mem: &mut MemTable, now: Duration, expected: u32) {
    ack(r, mem, now, expected, AethRepr::nak(NakCode::PsnSequenceError, 0)).unwrap();
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// One packet lost out of a full window of 128: the responder's one NAK starts one go-back-N
/// from the lost PSN at once, with half the window; duplicate NAKs start nothing; no timer
/// runs out.
#[test]
fn one_lost_packet_in_a_full_window_costs_one_go_back_n_and_no_timeout() {
    let (mut r, mut mem, key, addr) = setup(0);
    writes(&mut r, key, addr, 6, 32);
    let first = drain(&mut r, Duration::ZERO);
    assert_eq!(first.len(), 128, "the window starts at rxe's 128");
    let asks: Vec<u32> = first.iter().filter(|p| p.2).map(|p| p.1).collect();
    // Four messages follow each other without a pause: AckReq every half window (64 PSNs), not
    // at every message's end as rxe asks.
    assert_eq!(asks, [63, 127]);
    // PSN 10 is lost: the responder NAKs at PSN 11, expecting 10.
    nak(&mut r, &mut mem, us(5), 10);
    assert_eq!(r.window(), 64);
    assert_eq!(psns(&drain(&mut r, us(5))), (10..74).collect::<Vec<_>>());
    // The same NAK again (duplicated on the wire): nothing more.
    for _ in 0..3 {
        nak(&mut r, &mut mem, us(6), 10);
        assert!(drain(&mut r, us(6)).is_empty());
    }
    let c = r.counters;
    assert_eq!((c.seq_naks, c.retries, c.timeouts, c.window_cuts), (4, 1, 0, 1));
    // The retransmissions arrive in order: the rest follows within the window.
    ack(&mut r, &mut mem, us(10), 63, AethRepr::ack(0x1F, 2)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(10))), (74..128).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(15), 127, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(15))), (128..192).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(20), 191, AethRepr::ack(0x1F, 6)).unwrap();
    assert_eq!(r.done.len(), 6);
    assert!(r.done.iter().all(|wc| wc.status == WcStatus::Success));
    let c = r.counters;
    assert_eq!((c.retries, c.timeouts, c.tail_probes), (1, 0, 0));
    assert_eq!(r.poll_timeout(), None);
}

/// The window limits what is sent: half after a NAK, the floor after a timeout, then doubling
/// per round trip to the threshold and one PSN per round trip back to 128. A fixed window
/// stays at 128 through the same losses.
#[test]
fn the_window_shrinks_on_loss_and_recovers_on_a_clean_path() {
    for window in [SendWindow::Adaptive { min: 4 }, SendWindow::Fixed] {
        let (mut r, mut mem, key, addr) = setup(0);
        r.set_window(window);
        for i in 0..20_000 {
            push(&mut r, i, WrOpcode::Send, key, addr, 8);
        }
        let mut now = Duration::ZERO;
        // A round trip: everything the window lets go, and its ACK.
        let mut round = |r: &mut Requester, now: &mut Duration| {
            let sent = drain(r, *now);
            *now += us(10);
            let last = sent.last().unwrap().1;
            ack(r, &mut mem, *now, last, AethRepr::ack(0x1F, 0)).unwrap();
            sent.len()
        };
        assert_eq!(round(&mut r, &mut now), 128);
        // 128 more go; PSN 130 is lost (NAK), then the retransmissions are lost too (timeout).
        assert_eq!(drain(&mut r, now).len(), 128);
        nak(&mut r, &mut Default::default(), now, 130);
        let after_nak = drain(&mut r, now).len();
        let timeout = r.retrans_at.unwrap();
        r.handle_timeout(timeout).unwrap();
        now = timeout;
        let sizes: Vec<usize> = (0..80).map(|_| round(&mut r, &mut now)).collect();
        assert_eq!(r.counters.timeouts, 1);
        if window == SendWindow::Fixed {
            assert_eq!(after_nak, 128);
            assert!(sizes.iter().all(|&n| n == 128), "{sizes:?}");
            assert_eq!(r.counters.window_cuts, 0);
            continue;
        }
        assert_eq!(after_nak, 64);
        assert_eq!(r.counters.window_cuts, 2);
        // Slow start from the floor to the threshold the NAK set (64), then one PSN a round.
        assert_eq!(sizes[..6], [4, 8, 16, 32, 64, 65]);
        for w in sizes[5..].windows(2) {
            assert!(w[1] == w[0] + 1 || w[1] == 128, "{sizes:?}");
        }
        assert_eq!(sizes[69..], [128; 11], "back to the cap: {sizes:?}");
    }
}

/// A full window whose tail was lost (a burst that overflowed a queue; nothing after it
/// arrives, so no NAK comes): a probe, twice the smoothed round trip after the window filled,
/// sends the oldest unacknowledged packet and the last one again, asking for ACKs - here a
/// WRITE_MIDDLE and a WRITE_LAST - and the NAK the second draws starts the go-back-N, long
/// before the retransmission timer.
#[test]
fn a_lost_tail_of_a_full_window_is_probed_not_timed_out() {
    let (mut r, mut mem, key, addr) = setup(0);
    writes(&mut r, key, addr, 5, 48);
    let first = drain(&mut r, Duration::ZERO);
    // Messages follow each other without a pause: AckReq every half window only.
    let asks: Vec<u32> = first.iter().filter(|p| p.2).map(|p| p.1).collect();
    assert_eq!((first.len(), asks), (128, vec![63, 127]));
    // The ACK of PSN 63 comes back after 100 us (the round trip is timed); the window moves by
    // 64 and everything sent after PSN 63 is lost.
    ack(&mut r, &mut mem, us(100), 63, AethRepr::ack(0x1F, 1)).unwrap();
    assert_eq!(r.rtt.srtt(), Some(us(100)));
    assert_eq!(psns(&drain(&mut r, us(100))), (128..192).collect::<Vec<_>>());
    // Held back by the window: the probe is due at 2 x SRTT, well before the timeout.
    assert_eq!(r.poll_timeout(), Some(us(300)));
    assert!(r.retrans_at.unwrap() > us(1000));
    r.handle_timeout(us(300)).unwrap();
    assert_eq!(drain(&mut r, us(300)), [(0x07, 64, true), (0x08, 191, true)]);
    // One probe per stall.
    assert_eq!(r.poll_timeout(), r.retrans_at);
    // The probe's 64 arrives, 191 shows the gap after it: go back N from 65, half the window.
    nak(&mut r, &mut mem, us(400), 65);
    assert_eq!(psns(&drain(&mut r, us(400))), (65..129).collect::<Vec<_>>());
    // A window of ACKs adds one PSN (congestion avoidance); a repeated ACK adds nothing.
    ack(&mut r, &mut mem, us(500), 128, AethRepr::ack(0x1F, 2)).unwrap();
    ack(&mut r, &mut mem, us(500), 128, AethRepr::ack(0x1F, 2)).unwrap();
    assert_eq!(r.window(), 65);
    assert_eq!(psns(&drain(&mut r, us(500))), (129..194).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(600), 193, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(600))), (194..240).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(700), 239, AethRepr::ack(0x1F, 5)).unwrap();
    assert_eq!(r.done.len(), 5);
    let c = r.counters;
    assert_eq!((c.tail_probes, c.retries, c.timeouts, c.window_cuts), (1, 1, 0, 1));
}
