//! Unit tests of the [`Endpoint`](super::Endpoint): establishment (plain and secure), NACKs,
//! trimmed packets, ACK contents and the split transmit.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::request::{FLAG_AR, FLAG_RETX, FLAG_SYN};
use wire::uet::pds::{Mode, NackCode, NackRepr, NextHeader, PdsRepr, RequestRepr};

use super::{CLOSED_LINGER, DeliveryKind, Endpoint, Establishment, SendError};
use crate::Urgency;
use crate::body::Body;
use crate::config::{Config, RX_WINDOW};
use crate::event::{Event, PdcError};
use crate::pdc::Role;
use crate::psn::diff;

const NOW: Duration = Duration::ZERO;

pub(super) fn request(mode: Mode, flags: u8, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    let r = RequestRepr {
        mode,
        next_hdr: NextHeader::ReqStd,
        flags,
        clear_psn_offset: 0,
        psn,
        spdcid,
        dpdcid,
        cc: None,
    };
    let mut b = vec![0; 16];
    let n = r.emit(&mut b).unwrap();
    b.truncate(n);
    b.extend_from_slice(b"payload");
    b
}

fn syn(mode: Mode, start: u32, offset: u16, spdcid: u16) -> Vec<u8> {
    request(
        mode,
        FLAG_SYN,
        start.wrapping_add(u32::from(offset)),
        spdcid,
        RequestRepr::syn_word(false, offset),
    )
}

fn sent(ep: &mut Endpoint<u8>) -> Vec<(u8, PdsRepr)> {
    let mut buf = [0u8; 2048];
    std::iter::from_fn(|| {
        ep.poll_transmit(NOW, &mut buf).map(|t| (t.dst, PdsRepr::parse(&buf[..t.len]).unwrap()))
    })
    .collect()
}

fn nacks(ep: &mut Endpoint<u8>) -> Vec<(u8, NackCode, u32, u16)> {
    sent(ep)
        .into_iter()
        .filter_map(|(dst, p)| match p {
            PdsRepr::Nack(n) => Some((dst, n.nack_code, n.nack_psn, n.dpdcid)),
            _ => None,
        })
        .collect()
}

#[test]
fn trimmed_requests_are_nacked_trimmed_and_not_taken() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    // A trimmed SYN (header only) opens the PDC; the packet is not received.
    let first = syn(Mode::Rud, 100, 0, 3);
    ep.handle_trimmed(NOW, 5, &first[..12]).unwrap();
    assert_eq!(nacks(&mut ep), [(5, NackCode::Trimmed, 100, 3)]);
    let pdc = match ep.poll_event() {
        Some(Event::Accepted { pdc, .. }) => pdc,
        e => panic!("{e:?}"),
    };
    assert_eq!(ep.pdc_info(pdc).unwrap().expected_psn, 100, "nothing taken");
    // The resent SYN is delivered; a later trimmed packet is NACKed by PSN.
    assert!(ep.handle_packet(NOW, 5, &first).unwrap().is_some());
    ep.handle_trimmed(NOW, 5, &request(Mode::Rud, 0, 101, 3, pdc)).unwrap();
    assert_eq!(nacks(&mut ep), [(5, NackCode::Trimmed, 101, 3)]);
    // Trimmed packets of no PDC, and trimmed non-requests: counted, not answered.
    ep.handle_trimmed(NOW, 6, &request(Mode::Rud, 0, 7, 3, 99)).unwrap();
    assert!(nacks(&mut ep).is_empty());
    assert_eq!(ep.handle_trimmed(NOW, 6, &[0xFF; 3]).map_err(|_| ()), Err(()));
    // The unreadable one is the caller's to count (the node's rx_trimmed_dropped).
    assert_eq!((ep.stats().rx_trimmed, ep.stats().rx_malformed), (3, 0));
}

/// The split transmit writes what the whole one writes, less the payload it hands back, and
/// takes a packet only when the whole of it fits the buffer.
#[test]
fn a_split_transmit_is_the_whole_transmit_less_the_payload() {
    let body = |n: u8| Body::new(b"ses-head", Bytes::from((0..n).collect::<Vec<u8>>()));
    let (mut whole, mut split) =
        (Endpoint::<u8>::new(Config::default(), 1), Endpoint::<u8>::new(Config::default(), 1));
    for e in [&mut whole, &mut split] {
        for n in [0u8, 1, 200] {
            e.send(2, Mode::Rud, NextHeader::ReqStd, body(n), u64::from(n)).unwrap();
        }
        e.uud_send(3, NextHeader::ReqStd, body(9));
    }
    let (mut a, mut b) = ([0u8; 512], [0u8; 512]);
    let mut n = 0;
    while let Some(t) = whole.poll_transmit(NOW, &mut a) {
        let (s, tail) = split.poll_transmit_split(NOW, &mut b).unwrap();
        assert_eq!((s.dst, [&b[..s.len], &tail[..]].concat()), (t.dst, a[..t.len].to_vec()));
        n += 1;
    }
    assert_eq!((n, split.poll_transmit_split(NOW, &mut b)), (4, None));
    // Room for the headers but not the payload: nothing is taken.
    split.send(2, Mode::Rud, NextHeader::ReqStd, body(200), 9).unwrap();
    assert!(split.poll_transmit_split(NOW, &mut b[..100]).is_none());
    let (t, tail) = split.poll_transmit_split(NOW, &mut b).unwrap();
    assert_eq!(t.len + tail.len(), 12 + 8 + 200);
}

#[test]
fn sender_resends_a_trimmed_packet_at_once() {
    let mut a = Endpoint::<u8>::new(Config::default(), 1);
    let mut b = Endpoint::<u8>::new(Config::default(), 2);
    a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 1).unwrap();
    let mut buf = [0u8; 256];
    let t = a.poll_transmit(NOW, &mut buf).unwrap();
    b.handle_trimmed(NOW, 1, &buf[..12]).unwrap();
    let n = b.poll_transmit(NOW, &mut buf).unwrap();
    a.handle_packet(NOW, 2, &buf[..n.len]).unwrap();
    let again = a.poll_transmit(NOW, &mut buf).unwrap();
    assert_eq!(again.len, t.len);
    assert!(matches!(PdsRepr::parse(&buf[..again.len]), Ok(PdsRepr::Request(r)) if r.flags & FLAG_RETX != 0));
    assert_eq!(a.stats().timeouts, 0);
}

#[test]
fn acknowledged_packets_are_reported_unless_turned_off() {
    for on in [true, false] {
        let mut a = Endpoint::<u8>::new(Config { ack_every: 1, ..Config::default() }, 1);
        let mut b = Endpoint::<u8>::new(Config::default(), 2);
        a.set_ack_events(on);
        let mut pdc = 0;
        for cookie in [7, 8] {
            pdc = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), cookie).unwrap().0;
        }
        let (sent, got) = shuttle(&mut a, &mut b, NOW);
        assert_eq!((sent.len(), got.len()), (2, 2));
        assert_eq!(a.pdc_info(pdc).map(|i| i.unacked), Some(0), "both acknowledged either way");
        let mut cookies = Vec::new();
        while let Some(e) = a.poll_event() {
            if let Event::Acked { cookie, .. } = e {
                cookies.push(cookie);
            }
        }
        assert_eq!(cookies, if on { vec![7, 8] } else { vec![] }, "ack events {on}");
    }
}

/// Moves packets between `a` (address 1) and `b` (address 2) at `now` until both are quiet;
/// returns what `a` sent and the bodies `b` delivered.
fn shuttle(a: &mut Endpoint<u8>, b: &mut Endpoint<u8>, now: Duration) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut from_a, mut got) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 2048];
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            moved = true;
            from_a.push(buf[..t.len].to_vec());
            if let Some(d) = b.handle_packet(now, 1, &buf[..t.len]).unwrap() {
                got.push(d.body.to_vec());
            }
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            moved = true;
            a.handle_packet(now, 2, &buf[..t.len]).unwrap();
        }
        if !moved {
            return (from_a, got);
        }
    }
}

fn secure(seed: u64) -> Endpoint<u8> {
    let mut e = Endpoint::new(Config { ack_every: 1, ..Config::default() }, seed);
    e.set_secure(Establishment::ZeroRtt);
    e
}

#[test]
fn secure_establishment_refuses_a_replayed_syn_of_a_closed_pdc() {
    for on in [false, true] {
        let (mut a, mut b) = (secure(1), secure(2));
        let mode = if on { Establishment::ZeroRtt } else { Establishment::Open };
        a.set_secure(mode);
        b.set_secure(mode);
        let (pdc, _) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"first"), 1).unwrap();
        let (sent, got) = shuttle(&mut a, &mut b, NOW);
        assert_eq!(got, [b"first".to_vec()]);
        let syn = sent[0].clone();
        a.close(NOW, pdc).unwrap();
        shuttle(&mut a, &mut b, NOW);
        assert_eq!((a.pdc_count(), b.pdc_count()), (0, 0));
        // Long after the close (past the closed-PDC linger), an attacker replays the first SYN.
        let later = NOW + CLOSED_LINGER * 2;
        let d = b.handle_packet(later, 1, &syn).unwrap().map(|d| d.body.to_vec());
        if !on {
            assert_eq!(d, Some(b"first".to_vec()), "without secure establishment the replay is taken");
            continue;
        }
        assert_eq!(d, None, "the replay is not delivered");
        assert_eq!((b.pdc_count(), b.stats().rx_stale_syns), (0, 1));
        let n = nacks(&mut b);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].1, NackCode::NewStartPsn);
        // The initiator's next PDC starts where the last one ended: accepted at once.
        a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"second"), 2).unwrap();
        let (_, got) = shuttle(&mut a, &mut b, later);
        assert_eq!(got, [b"second".to_vec()]);
        assert_eq!(b.stats().rx_stale_syns, 1, "no NACK needed");
    }
}

#[test]
fn a_target_closing_towards_a_forgetful_initiator_ignores_a_delayed_syn() {
    let (mut a, mut b) = (secure(1), secure(2));
    a.set_secure(Establishment::Open);
    b.set_secure(Establishment::Open);
    a.send(2, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"first"), 1).unwrap();
    let (sent, got) = shuttle(&mut a, &mut b, NOW);
    assert_eq!(got, [b"first".to_vec()]);
    let target = b.pdcs().map(|(id, _)| id).next().unwrap();
    while b.poll_event().is_some() {}
    // The initiator forgets the PDC (its endpoint restarted) before the target closes it: the
    // target's CLOSE_REQ gets NACK INV_DPDCID, which ends the close.
    let mut a2 = secure(3);
    a2.set_secure(Establishment::Open);
    b.close(NOW, target).unwrap();
    shuttle(&mut a2, &mut b, NOW);
    assert_eq!(b.pdc_count(), 0);
    let events: Vec<_> = std::iter::from_fn(|| b.poll_event()).collect();
    assert!(matches!(events[..], [Event::Closed { pdc, peer: 1 }] if pdc == target), "{events:?}");
    // A delayed duplicate of the first SYN, within the closed-PDC linger, opens nothing.
    let d = b.handle_packet(NOW + CLOSED_LINGER / 2, 1, &sent[0]).unwrap();
    assert!(d.is_none(), "delivered again");
    assert_eq!(b.pdc_count(), 0);
}

#[test]
fn secure_establishment_moves_a_forgetful_initiator_to_a_fresh_start_psn() {
    let (mut a, mut b) = (secure(1), secure(2));
    let (pdc, _) = a.send(2, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"one"), 1).unwrap();
    shuttle(&mut a, &mut b, NOW);
    a.close(NOW, pdc).unwrap();
    shuttle(&mut a, &mut b, NOW);
    let min = b.min_start[&(1, Mode::Rod)];
    // A restarted initiator (no memory of its PDCs) whose random Start_PSN is below the minimum.
    let (mut a2, pdc2) = (3..)
        .map(|seed| {
            let mut e = secure(seed);
            let pdc = e.connect(2, Mode::Rod).unwrap();
            (e, pdc)
        })
        .find(|(e, pdc)| diff(e.pdc_info(*pdc).unwrap().start_psn, min) < 0)
        .unwrap();
    for (i, m) in [&b"two"[..], b"three", b"four"].into_iter().enumerate() {
        a2.send_on(pdc2, NextHeader::ReqStd, Bytes::from_static(m), i as u64).unwrap();
    }
    let (_, got) = shuttle(&mut a2, &mut b, NOW);
    assert_eq!(got, [b"two".to_vec(), b"three".to_vec(), b"four".to_vec()], "in order, once each");
    assert_eq!(a2.pdc_info(pdc2).unwrap().start_psn, min, "restarted from the target's minimum");
    assert!(b.stats().rx_stale_syns >= 1);
}

#[test]
fn one_rtt_establishment_uses_only_start_psns_the_target_minted() {
    let (mut a, mut b) = (secure(1), secure(2));
    b.set_secure(Establishment::OneRtt);
    let (pdc, _) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"one"), 1).unwrap();
    let chosen = a.pdc_info(pdc).unwrap().start_psn;
    let (sent, got) = shuttle(&mut a, &mut b, NOW);
    assert_eq!(got, [b"one".to_vec()], "delivered once, after the restart");
    let minted = a.pdc_info(pdc).unwrap().start_psn;
    assert_ne!(minted, chosen, "the initiator moved to the minted Start_PSN");
    assert_eq!(b.stats().rx_stale_syns, 1);
    let first_syn = sent[0].clone();
    let accepted_syn = sent
        .iter()
        .rev()
        .find(|f| matches!(PdsRepr::parse(f), Ok(PdsRepr::Request(r)) if r.syn()))
        .unwrap()
        .clone();
    // The first attempt's SYN arriving late (established PDC): refused INVALID_SYN, and the
    // initiator takes that as stale, not as the end of its PDC.
    b.handle_packet(NOW, 1, &first_syn).unwrap();
    let n = nacks(&mut b);
    assert_eq!(n.first().map(|n| n.1), Some(NackCode::InvalidSyn));
    let mut buf = [0u8; 64];
    let repr = NackRepr {
        next_hdr: NextHeader::None,
        flags: 0,
        nack_code: NackCode::InvalidSyn,
        vendor_code: 0,
        nack_psn: n[0].2,
        spdcid: 0,
        dpdcid: pdc,
        payload: 0,
        ccx: None,
    };
    let len = repr.emit(&mut buf).unwrap();
    a.handle_packet(NOW, 2, &buf[..len]).unwrap();
    assert_eq!(a.pdc_count(), 1, "still open");
    a.close(NOW, pdc).unwrap();
    shuttle(&mut a, &mut b, NOW);
    // The SYN that was accepted, replayed after the close and the linger: its Start_PSN was
    // used once; a new one is minted and the replay refused.
    let later = NOW + CLOSED_LINGER * 2;
    assert_eq!(b.handle_packet(later, 1, &accepted_syn).unwrap().map(|d| d.body.to_vec()), None);
    assert_eq!((b.pdc_count(), b.stats().rx_stale_syns), (0, 2));
    assert_eq!(nacks(&mut b).first().map(|n| n.1), Some(NackCode::NewStartPsn));
}

#[test]
fn request_for_no_pdc_is_nacked_inv_dpdcid() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    assert_eq!(ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, 42, 3, 9)), Ok(None));
    assert_eq!(nacks(&mut ep), [(5, NackCode::InvDpdcid, 42, 3)]);
    assert_eq!(ep.pdc_count(), 0);
}

#[test]
fn syn_opens_a_target_pdc_and_the_checks_that_follow() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    let start = u32::MAX - 1;
    let first = syn(Mode::Rud, start, 0, 3);
    let d = ep.handle_packet(NOW, 5, &first).unwrap().unwrap();
    let DeliveryKind::Pdc { pdc, psn, mode: Mode::Rud, .. } = d.kind else { panic!("{d:?}") };
    assert_eq!((psn, d.body, d.next_hdr), (start, &b"payload"[..], NextHeader::ReqStd));
    assert_eq!(ep.poll_event(), Some(Event::Accepted { pdc, peer: 5, mode: Mode::Rud }));
    let info = ep.pdc_info(pdc).unwrap();
    assert_eq!(
        (info.peer_id, info.role, info.start_psn, info.expected_psn),
        (Some(3), Role::Target, start, start.wrapping_add(1))
    );
    // Same SYN again: a duplicate, no second PDC.
    assert_eq!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, start, 0, 3)), Ok(None));
    assert_eq!((ep.pdc_count(), ep.stats().rx_duplicates), (1, 1));
    // A SYN of the same PDC naming another Start_PSN.
    ep.handle_packet(NOW, 5, &syn(Mode::Rud, start.wrapping_add(7), 0, 3)).unwrap();
    // The same PDC in the other mode.
    ep.handle_packet(NOW, 5, &request(Mode::Rod, 0, start.wrapping_add(1), 3, pdc)).unwrap();
    // Far beyond the window (psn_offset is 12 bits, so use the non-SYN form).
    let far = start.wrapping_add(1 + RX_WINDOW);
    ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, far, 3, pdc)).unwrap();
    // The right PDCID from the wrong peer, and from the right peer with the wrong SPDCID.
    ep.handle_packet(NOW, 6, &request(Mode::Rud, 0, start, 3, pdc)).unwrap();
    ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start, 4, pdc)).unwrap();
    assert_eq!(
        nacks(&mut ep),
        [
            (5, NackCode::InvalidSyn, start.wrapping_add(7), 3),
            (5, NackCode::PdcModeMismatch, start.wrapping_add(1), 3),
            (6, NackCode::InvDpdcid, start, 3),
            (5, NackCode::InvDpdcid, start, 4),
            (5, NackCode::PsnOorWindow, far, 3),
        ]
    );
    assert_eq!(ep.stats().rx_out_of_window, 1);
}

#[test]
fn pdc_limit_answers_no_pdc_avail() {
    let mut ep = Endpoint::<u8>::new(Config { max_pdcs: 1, ..Config::default() }, 1);
    assert!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, 100, 0, 3)).unwrap().is_some());
    assert_eq!(ep.handle_packet(NOW, 6, &syn(Mode::Rud, 100, 0, 3)), Ok(None));
    assert_eq!(nacks(&mut ep), [(6, NackCode::NoPdcAvail, 100, 3)]);
    assert_eq!(ep.connect(9, Mode::Rod), Err(SendError::NoPdcAvailable));
}

#[test]
fn malformed_packets_are_errors_and_change_nothing() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    assert_eq!(ep.handle_packet(NOW, 5, &[0x10]), Err(wire::Error::Truncated("PDS prologue")));
    assert!(ep.handle_packet(NOW, 5, &[0x00, 0x00, 0, 0]).is_err(), "reserved type 0");
    assert!(ep.handle_packet(NOW, 5, &syn(Mode::Rud, 1, 0, 3)[..11]).is_err(), "truncated request");
    assert_eq!((ep.stats().rx_malformed, ep.pdc_count()), (3, 0));
    assert!(sent(&mut ep).is_empty());
}

#[test]
fn acks_carry_cumulative_and_selective_state() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    let start = 1000;
    ep.handle_packet(NOW, 5, &syn(Mode::Rud, start, 0, 3)).unwrap();
    let pdc = ep.pdc_info(1).map(|_| 1).unwrap();
    // 1001 lost; 1002 and 1004 arrive out of order: each is acknowledged at once.
    ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 2, 3, pdc)).unwrap();
    ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 4, 3, pdc)).unwrap();
    let acks: Vec<_> = sent(&mut ep)
        .into_iter()
        .filter_map(|(_, p)| if let PdsRepr::Ack(a) = p { Some(a) } else { None })
        .collect();
    assert_eq!(acks.len(), 1, "coalesced into one ACK by the time it is polled");
    let a = acks[0];
    assert_eq!((a.cack_psn, a.ack_psn(), a.spdcid, a.dpdcid), (start, start + 4, pdc, 3));
    assert_eq!(a.sack_base_psn(), Some(start + 1));
    assert_eq!(
        [1, 2, 3, 4].map(|i| a.sack_received(start + i)),
        [Some(false), Some(true), Some(false), Some(true)]
    );
    // In order with AR: acknowledged at once; without, after ack_delay.
    ep.handle_packet(NOW, 5, &request(Mode::Rud, 0, start + 1, 3, pdc)).unwrap();
    assert!(sent(&mut ep).is_empty());
    assert_eq!(ep.poll_timeout(), Some(ep.config().ack_delay));
    ep.handle_packet(NOW, 5, &request(Mode::Rud, FLAG_AR, start + 3, 3, pdc)).unwrap();
    let out = sent(&mut ep);
    assert!(
        matches!(out[..], [(5, PdsRepr::Ack(a))] if a.cack_psn == start + 4 && a.cc_info().unwrap().sack_bitmap == 0)
    );
}

#[test]
fn fatal_nack_fails_the_initiator() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    let (pdc, _) = ep.send(5, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"x"), 11).unwrap();
    let out = sent(&mut ep);
    let PdsRepr::Request(r) = out[0].1 else { panic!() };
    assert!(r.syn() && r.psn_offset() == Some(0) && r.flags & FLAG_AR != 0);
    let nack = NackRepr {
        next_hdr: NextHeader::None,
        flags: 0,
        nack_code: NackCode::PdcModeMismatch,
        vendor_code: 0,
        nack_psn: r.psn,
        spdcid: 0,
        dpdcid: pdc,
        payload: 0,
        ccx: None,
    };
    let mut b = [0u8; 16];
    nack.emit(&mut b).unwrap();
    // From someone else: ignored.
    ep.handle_packet(NOW, 6, &b).unwrap();
    assert_eq!(ep.poll_event(), None);
    ep.handle_packet(NOW, 5, &b).unwrap();
    assert_eq!(
        ep.poll_event(),
        Some(Event::Failed {
            pdc,
            peer: 5,
            error: PdcError::Nack(NackCode::PdcModeMismatch),
            unacked: vec![11]
        })
    );
    assert_eq!(ep.pdc_count(), 0);
    assert_eq!(ep.send_on(pdc, NextHeader::ReqStd, Bytes::new(), 0), Err(SendError::UnknownPdc));
}

#[test]
fn a_lazy_packet_asks_for_no_ack_and_a_following_one_does() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 3);
    let (pdc, _) = ep.send(5, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"a"), 1).unwrap();
    let ar = |out: Vec<(u8, PdsRepr)>| match out[..] {
        [(5, PdsRepr::Request(r))] => r.flags & FLAG_AR != 0,
        _ => panic!("one request: {out:?}"),
    };
    assert!(ar(sent(&mut ep)), "a packet someone waits on asks for an ACK");
    ep.send_on_with(pdc, NextHeader::ReqStd, Bytes::from_static(b"b"), 2, Urgency::Lazy).unwrap();
    assert!(!ar(sent(&mut ep)), "an inject's packet leaves the ACK to the receiver's delay");
    ep.send_on_with(pdc, NextHeader::ReqStd, Bytes::from_static(b"c"), 3, Urgency::Prompt).unwrap();
    assert!(ar(sent(&mut ep)));
}

#[test]
fn a_held_response_goes_with_the_next_packet_or_the_delayed_ack() {
    let cfg = Config::default();
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    let at = |ep: &mut Endpoint<u8>, now: Duration| -> Vec<(u8, PdsRepr)> {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| {
            ep.poll_transmit(now, &mut buf).map(|t| (t.dst, PdsRepr::parse(&buf[..t.len]).unwrap()))
        })
        .collect()
    };
    let what = |out: &[(u8, PdsRepr)]| -> Vec<(u8, &'static str, bool)> {
        out.iter()
            .map(|(dst, p)| match p {
                PdsRepr::Request(r) if r.next_hdr == NextHeader::Rsp => (*dst, "rsp", r.flags & FLAG_AR != 0),
                PdsRepr::Request(r) => (*dst, "req", r.flags & FLAG_AR != 0),
                PdsRepr::Ack(_) => (*dst, "ack", false),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let rsp = |ep: &mut Endpoint<u8>, pdc| {
        ep.send_on_with(pdc, NextHeader::Rsp, Bytes::from_static(b"rsp"), 0, Urgency::Held).unwrap();
    };
    // A request that asks for no ACK: its response waits, then follows the next packet out.
    let pkt = syn(Mode::Rud, 100, 0, 3);
    let d = ep.handle_packet(NOW, 5, &pkt).unwrap().unwrap();
    let DeliveryKind::Pdc { pdc, ack_requested: false, .. } = d.kind else { panic!("{d:?}") };
    rsp(&mut ep, pdc);
    assert_eq!(what(&sent(&mut ep)), [], "nothing else goes out and the ACK is not due");
    ep.send(6, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"req"), 1).unwrap();
    assert_eq!(what(&sent(&mut ep)), [(6, "req", true), (5, "rsp", false)]);
    // Without company it goes with the delayed ACK.
    let kind = |ep: &mut Endpoint<u8>, flags, psn| {
        ep.handle_packet(NOW, 5, &request(Mode::Rud, flags, psn, 3, pdc)).unwrap().map(|d| d.kind)
    };
    assert!(matches!(kind(&mut ep, 0, 101), Some(DeliveryKind::Pdc { ack_requested: false, .. })));
    rsp(&mut ep, pdc);
    assert_eq!(what(&sent(&mut ep)), []);
    assert_eq!(ep.poll_timeout(), Some(cfg.ack_delay), "the PDC wakes for its delayed ACK");
    assert_eq!(what(&at(&mut ep, cfg.ack_delay)), [(5, "ack", false), (5, "rsp", false)]);
    // A request that asks for an ACK has it at once, and the response with it.
    assert!(matches!(kind(&mut ep, FLAG_AR, 102), Some(DeliveryKind::Pdc { ack_requested: true, .. })));
    rsp(&mut ep, pdc);
    assert_eq!(what(&sent(&mut ep)), [(5, "ack", false), (5, "rsp", false)]);
}
