//! The requester under the adaptive send window and the probes, fed ACKs, NAKs and timeouts with
//! explicit times (`window.rs` tests the window's arithmetic alone).

use super::Requester;
use super::tests::{MTU, ack, drain, push, setup};
use crate::mem::MemTable;
use crate::types::{SendWindow, WcStatus, WrOpcode};
use crate::window::WIDE_CAP;
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

/// One packet lost out of a full window of 128, inside a WRITE: the responder's one NAK draws a
/// resend of that packet alone, asking for an ACK, with half the window (nothing is known of the
/// responder yet); duplicate NAKs start nothing. rxe's answer, the ACK of that packet alone, says
/// it dropped what followed: go back N from the next one. No timer runs out.
#[test]
fn one_lost_packet_in_a_full_window_costs_one_resend_and_against_rxe_one_go_back_n() {
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
    assert_eq!(drain(&mut r, us(5)), [(0x07, 10, true)]);
    // The same NAK again (duplicated on the wire): nothing more.
    for _ in 0..3 {
        nak(&mut r, &mut mem, us(6), 10);
        assert!(drain(&mut r, us(6)).is_empty());
    }
    let c = r.counters;
    assert_eq!((c.seq_naks, c.retries, c.timeouts, c.window_cuts), (4, 1, 0, 1));
    // rxe acknowledges 10 alone: it dropped 11..127. They go again, within the window.
    ack(&mut r, &mut mem, us(8), 10, AethRepr::ack(0x1F, 0)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(8))), (11..75).collect::<Vec<_>>());
    assert_eq!((r.peer_places_ahead, r.kept_nothing), (None, 1), "once may be a second loss");
    ack(&mut r, &mut mem, us(10), 63, AethRepr::ack(0x1F, 2)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(10))), (75..128).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(15), 127, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(15))), (128..192).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(20), 191, AethRepr::ack(0x1F, 6)).unwrap();
    assert_eq!(r.done.len(), 6);
    assert!(r.done.iter().all(|wc| wc.status == WcStatus::Success));
    let c = r.counters;
    assert_eq!((c.retries, c.timeouts, c.tail_probes), (1, 0, 0));
    assert_eq!(r.poll_timeout(), None);
}

/// Against a responder that keeps the packets after a gap (softrdma's), a lost packet costs
/// one resend: its ACK covers what followed, and from then on such losses leave the window alone
/// (up to 1/16 of it per round).
#[test]
fn losses_inside_writes_cost_one_packet_each_against_a_responder_that_keeps_the_rest() {
    let (mut r, mut mem, key, addr) = setup(0);
    writes(&mut r, key, addr, 8, 32);
    assert_eq!(drain(&mut r, Duration::ZERO).len(), 128);
    nak(&mut r, &mut mem, us(5), 10);
    assert_eq!(drain(&mut r, us(5)), [(0x07, 10, true)]);
    // The resent 10 filled the gap: the responder had 11..127.
    ack(&mut r, &mut mem, us(10), 127, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(r.peer_places_ahead, Some(true));
    assert_eq!(r.window(), 65, "halved once, before the responder was known; grown by one");
    assert_eq!(psns(&drain(&mut r, us(10))), (128..193).collect::<Vec<_>>());
    // 150 lost (inside the fifth WRITE): one packet again, the window stays, and sending goes on
    // where it was (the first new packet asks for an ACK).
    nak(&mut r, &mut mem, us(15), 150);
    let sent = drain(&mut r, us(15));
    assert_eq!((sent[0], sent[1]), ((0x07, 150, true), (0x07, 193, true)));
    assert_eq!(psns(&sent[1..]), (193..216).collect::<Vec<_>>());
    assert_eq!(r.window(), 66, "not cut; the ACK of 192 grew it by one");
    ack(&mut r, &mut mem, us(20), 215, AethRepr::ack(0x1F, 6)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(20))), (216..256).collect::<Vec<_>>());
    // 224 lost: the first packet of the last WRITE, with more sent after it: alone, too.
    nak(&mut r, &mut mem, us(25), 224);
    assert_eq!(drain(&mut r, us(25)), [(0x06, 224, true)]);
    ack(&mut r, &mut mem, us(30), 255, AethRepr::ack(0x1F, 8)).unwrap();
    assert_eq!(r.done.len(), 8);
    assert!(r.done.iter().all(|wc| wc.status == WcStatus::Success));
    let c = r.counters;
    assert_eq!((c.retries, c.timeouts, c.window_cuts), (3, 0, 1));
}

/// The window limits what is sent: half after a NAK, the floor after a timeout, then doubling
/// per round trip to the threshold and one PSN per round trip back to 128. A fixed window
/// stays at 128 through the same losses.
#[test]
fn the_window_shrinks_on_loss_and_recovers_on_a_clean_path() {
    for window in [SendWindow::Adaptive { min: 4 }, SendWindow::Fixed] {
        let (mut r, mut mem, key, addr) = setup(0);
        r.set_window(window);
        // rxe's responder: it drops what follows a gap.
        r.peer_places_ahead = Some(false);
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
    // Another probe, if nothing comes, after twice the wait.
    assert_eq!(r.poll_timeout(), Some(us(700)));
    // The probe's 64 arrives, 191 shows the gap after it: 65 alone goes again, asking for an ACK
    // (it lies inside a WRITE), with half the window. Its ACK shows nothing after it was kept
    // (it was all lost): go back N from 66.
    nak(&mut r, &mut mem, us(400), 65);
    assert_eq!(drain(&mut r, us(400)), [(0x07, 65, true)]);
    ack(&mut r, &mut mem, us(450), 65, AethRepr::ack(0x1F, 1)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(450))), (66..130).collect::<Vec<_>>());
    // A window of ACKs adds one PSN (congestion avoidance); a repeated ACK adds nothing.
    ack(&mut r, &mut mem, us(500), 128, AethRepr::ack(0x1F, 2)).unwrap();
    ack(&mut r, &mut mem, us(500), 128, AethRepr::ack(0x1F, 2)).unwrap();
    assert_eq!(r.window(), 65);
    assert_eq!(psns(&drain(&mut r, us(500))), (130..194).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(600), 193, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(psns(&drain(&mut r, us(600))), (194..240).collect::<Vec<_>>());
    ack(&mut r, &mut mem, us(700), 239, AethRepr::ack(0x1F, 5)).unwrap();
    assert_eq!(r.done.len(), 5);
    let c = r.counters;
    assert_eq!((c.tail_probes, c.retries, c.timeouts, c.window_cuts), (1, 1, 0, 1));
}

/// Two losses in one window against a responder that keeps what follows a gap: the ACK of the
/// first resend stops at the second hole, which goes alone too; nothing else is sent again.
#[test]
fn a_second_hole_in_the_window_gets_its_own_one_packet_resend() {
    let (mut r, mut mem, key, addr) = setup(0);
    writes(&mut r, key, addr, 4, 32);
    assert_eq!(drain(&mut r, Duration::ZERO).len(), 128);
    // Known to keep what follows a gap (an earlier loss showed it).
    r.peer_places_ahead = Some(true);
    nak(&mut r, &mut mem, us(5), 10);
    assert_eq!(drain(&mut r, us(5)), [(0x07, 10, true)]);
    assert_eq!(r.window(), 128, "a repaired loss");
    // 41 is missing too: the responder's ACK stops before it.
    ack(&mut r, &mut mem, us(10), 40, AethRepr::ack(0x1F, 1)).unwrap();
    assert_eq!(drain(&mut r, us(10)), [(0x07, 41, true)]);
    // Its NAK, from a packet sent after the first resend, changes nothing.
    nak(&mut r, &mut mem, us(11), 41);
    assert!(drain(&mut r, us(11)).is_empty());
    ack(&mut r, &mut mem, us(15), 127, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(r.done.len(), 4);
    let c = r.counters;
    assert_eq!((c.retries, c.timeouts, c.window_cuts, c.packets), (2, 0, 0, 130));
}

/// A lost first packet of a WRITE goes alone too: the responder holds what followed it, RETH-less
/// MIDDLEs included, and handles them once the FIRST is in.
#[test]
fn a_lost_first_packet_goes_alone() {
    let (mut r, mut mem, key, addr) = setup(0);
    writes(&mut r, key, addr, 4, 32);
    assert_eq!(drain(&mut r, Duration::ZERO).len(), 128);
    r.peer_places_ahead = Some(true);
    nak(&mut r, &mut mem, us(5), 32);
    assert_eq!(drain(&mut r, us(5)), [(0x06, 32, true)]);
    ack(&mut r, &mut mem, us(10), 127, AethRepr::ack(0x1F, 4)).unwrap();
    assert_eq!(r.done.len(), 4);
    let c = r.counters;
    assert_eq!((c.retries, c.window_cuts, c.packets), (1, 0, 129));
}

/// Once the responder is seen to keep what follows a gap, the window's cap doubles to 256 and it
/// slow-starts there, so that the PSNs in flight behind the next hole do not hold the sender for
/// the round trip its repair takes. A responder that drops them (rxe) never widens it (the first
/// test), nor does a fixed window.
#[test]
fn a_responder_that_keeps_what_follows_a_gap_widens_the_window_to_the_wide_cap() {
    for window in [SendWindow::Adaptive { min: 4 }, SendWindow::Fixed] {
        let (mut r, mut mem, key, addr) = setup(0);
        r.set_window(window);
        r.peer_places_ahead = Some(true);
        writes(&mut r, key, addr, 48, 32);
        assert_eq!(drain(&mut r, Duration::ZERO).len(), 128);
        // 10 lost: it goes alone, and the NAK acknowledged 0..9, room for 128..137.
        nak(&mut r, &mut mem, us(5), 10);
        let sent = drain(&mut r, us(5));
        assert_eq!(sent[0], (0x07, 10, true));
        assert_eq!(psns(&sent[1..]), (128..138).collect::<Vec<_>>());
        // The resend filled the gap: the responder had 11..137.
        ack(&mut r, &mut mem, us(10), 127, AethRepr::ack(0x1F, 4)).unwrap();
        assert_eq!(r.window(), 128);
        assert_eq!(psns(&drain(&mut r, us(10))), (138..256).collect::<Vec<_>>());
        let cap = if window == SendWindow::Fixed { 128 } else { WIDE_CAP };
        // Slow start: each PSN acknowledged adds one, up to the cap and no further, and each ACK
        // lets the window's worth go.
        let (mut acked, mut next) = (127u32, 256u32);
        for (at, upto) in [(20, 191u32), (30, 319), (40, 383), (50, 511), (60, 639), (70, 767)] {
            let before = r.window();
            ack(&mut r, &mut mem, us(at), upto, AethRepr::ack(0x1F, (upto + 1) / 32)).unwrap();
            assert_eq!(r.window(), (before + upto - acked).min(cap), "acknowledged up to {upto}");
            let end = upto + 1 + r.window();
            assert_eq!(psns(&drain(&mut r, us(at))), (next..end).collect::<Vec<_>>());
            (acked, next) = (upto, end);
        }
        assert_eq!(r.window(), cap, "never above the cap");
        assert_eq!(r.counters.window_cuts, 0);
    }
}
