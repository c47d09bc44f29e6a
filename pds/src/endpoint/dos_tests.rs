//! Unit tests of what a remote party can do to an [`Endpoint`]'s tables (security review H5, H6):
//! SYN floods against the PDC table, half-open and idle target PDCs, spoofed fatal NACKs, the
//! 1-RTT minted Start_PSNs, the queue of control packets a flood of bad packets fills.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::request::FLAG_SYN;
use wire::uet::pds::{Mode, NackCode, NackRepr, NextHeader, PdsRepr, RequestRepr};

use super::Endpoint;
use super::types::Establishment;
use crate::config::Config;
use crate::event::{Event, PdcError};

const NOW: Duration = Duration::ZERO;

fn req(flags: u8, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    super::tests::request(Mode::Rud, flags, psn, spdcid, dpdcid)
}

fn syn(start: u32, spdcid: u16) -> Vec<u8> {
    req(FLAG_SYN, start, spdcid, RequestRepr::syn_word(false, 0))
}

fn request(psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    req(0, psn, spdcid, dpdcid)
}

fn nack(code: NackCode, psn: u32, spdcid: u16, dpdcid: u16) -> [u8; 16] {
    let n = NackRepr {
        next_hdr: NextHeader::None,
        flags: 0,
        nack_code: code,
        vendor_code: 0,
        nack_psn: psn,
        spdcid,
        dpdcid,
        payload: 0,
        ccx: None,
    };
    let mut b = [0u8; 16];
    n.emit(&mut b).unwrap();
    b
}

fn sent(ep: &mut Endpoint<u8>, now: Duration) -> Vec<(u8, PdsRepr)> {
    let mut buf = [0u8; 2048];
    std::iter::from_fn(|| {
        ep.poll_transmit(now, &mut buf).map(|t| (t.dst, PdsRepr::parse(&buf[..t.len]).unwrap()))
    })
    .collect()
}

/// Moves packets both ways until both sides are quiet: `a` is address 1, `b` address 2.
fn shuttle(a: &mut Endpoint<u8>, b: &mut Endpoint<u8>, now: Duration) {
    let mut buf = [0u8; 2048];
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            moved = true;
            b.handle_packet(now, 1, &buf[..t.len]).unwrap();
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            moved = true;
            a.handle_packet(now, 2, &buf[..t.len]).unwrap();
        }
        if !moved {
            return;
        }
    }
}

fn events(ep: &mut Endpoint<u8>) -> Vec<Event<u8>> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

#[test]
fn a_syn_flood_from_one_source_does_not_lock_out_another() {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    for spdcid in 1..=4096 {
        ep.handle_packet(NOW, 5, &syn(1000, spdcid)).unwrap();
    }
    let cap = ep.config().max_pdcs_per_peer;
    assert_eq!(ep.pdc_count(), cap, "one source holds at most max_pdcs_per_peer PDCs");
    assert_eq!(ep.stats().rx_syns_refused, 4096 - cap as u64);
    let refused = sent(&mut ep, NOW)
        .into_iter()
        .filter(|(dst, p)| *dst == 5 && matches!(p, PdsRepr::Nack(n) if n.nack_code == NackCode::NoPdcAvail))
        .count();
    let answered = (4096 - cap).min(ep.config().max_ctrl);
    assert_eq!(refused, answered, "refused SYNs are answered NO_PDC_AVAIL (up to max_ctrl queued)");
    // Another source still opens a PDC.
    let legit = syn(77, 1);
    assert!(
        ep.handle_packet(NOW, 6, &legit).unwrap().is_some(),
        "the legitimate initiator's SYN is delivered"
    );
}

#[test]
fn half_open_target_pdcs_are_reaped() {
    let cfg = Config::default();
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    for spdcid in 1..=10 {
        ep.handle_packet(NOW, 5, &syn(1000, spdcid)).unwrap();
    }
    // One PDC progresses: its initiator addresses it by its PDCID.
    ep.handle_packet(NOW, 6, &syn(50, 1)).unwrap();
    let live = ep.accepted[&(6, 1)];
    sent(&mut ep, NOW);
    let later = cfg.half_open_timeout / 2;
    ep.handle_packet(later, 6, &request(51, 1, live)).unwrap();
    sent(&mut ep, later);
    events(&mut ep);
    // The caller's timer brings it to the reaper's deadline.
    let t = ep.poll_timeout().expect("half-open PDCs have a deadline");
    assert_eq!(t, cfg.half_open_timeout);
    ep.handle_timeout(t);
    assert_eq!(ep.pdc_count(), 1, "only the PDC that progressed is left");
    assert!(ep.pdc_info(live).is_some());
    assert_eq!(ep.stats().pdcs_reaped, 10);
    assert_eq!(events(&mut ep).iter().filter(|e| matches!(e, Event::Closed { peer: 5, .. })).count(), 10);
}

#[test]
fn idle_target_pdcs_close_gracefully_or_are_reaped() {
    let cfg = Config { ack_every: 1, ..Config::default() };
    let (mut a, mut b) = (Endpoint::<u8>::new(cfg, 1), Endpoint::<u8>::new(cfg, 2));
    a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 1).unwrap();
    shuttle(&mut a, &mut b, NOW);
    a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"y"), 2).unwrap();
    shuttle(&mut a, &mut b, NOW);
    events(&mut a);
    events(&mut b);
    assert_eq!((a.pdc_count(), b.pdc_count()), (1, 1));
    // Idle: the target asks the initiator to close, which it does.
    let t = b.poll_timeout().expect("an idle deadline");
    assert_eq!(t, cfg.idle_timeout);
    b.handle_timeout(t);
    shuttle(&mut a, &mut b, t);
    assert_eq!((a.pdc_count(), b.pdc_count()), (0, 0), "closed by the handshake");
    assert!(events(&mut a).iter().any(|e| matches!(e, Event::Closed { peer: 2, .. })));
    assert_eq!(b.stats().pdcs_reaped, 0);
    // An initiator that went away: the close goes unanswered and the PDC is dropped.
    let mut c = Endpoint::<u8>::new(cfg, 3);
    c.handle_packet(NOW, 9, &syn(300, 4)).unwrap();
    let pdc = c.accepted[&(9, 4)];
    c.handle_packet(NOW, 9, &request(301, 4, pdc)).unwrap();
    sent(&mut c, NOW);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    assert!(sent(&mut c, t).iter().any(|(_, p)| matches!(p, PdsRepr::Cp(_))), "CLOSE_REQ");
    // CLOSE_REQ goes again every RTO, until the PDC is dropped.
    let mut t = t;
    while c.pdc_count() > 0 {
        t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        sent(&mut c, t);
    }
    assert_eq!(t, cfg.idle_timeout + cfg.half_open_timeout);
    assert_eq!(c.stats().pdcs_reaped, 1);
}

#[test]
fn spoofed_fatal_nacks_with_a_wrong_pdcid_pair_or_psn_are_ignored() {
    let cfg = Config { ack_every: 1, ..Config::default() };
    let (mut a, mut b) = (Endpoint::<u8>::new(cfg, 1), Endpoint::<u8>::new(cfg, 2));
    let (pdc, _) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 1).unwrap();
    shuttle(&mut a, &mut b, NOW);
    events(&mut a);
    let info = a.pdc_info(pdc).unwrap();
    let peer_id = info.peer_id.expect("established");
    // One packet in flight (not delivered).
    let (_, psn) = a.send(2, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"y"), 2).unwrap();
    sent(&mut a, NOW);
    for code in [NackCode::InvDpdcid, NackCode::NoPdcAvail, NackCode::ClosingInErr] {
        // SPDCID 0 (once a wildcard), a wrong SPDCID, a PSN outside the PDC's window.
        a.handle_packet(NOW, 2, &nack(code, psn, 0, pdc)).unwrap();
        a.handle_packet(NOW, 2, &nack(code, psn, peer_id.wrapping_add(1), pdc)).unwrap();
        a.handle_packet(NOW, 2, &nack(code, psn.wrapping_add(100), peer_id, pdc)).unwrap();
        a.handle_packet(NOW, 2, &nack(code, info.start_psn.wrapping_sub(1), peer_id, pdc)).unwrap();
    }
    assert_eq!(events(&mut a), [], "no PDC failed");
    assert!(a.pdc_info(pdc).is_some());
    assert_eq!(a.stats().rx_nacks_ignored + a.stats().rx_stale, 12);
    // The target lost the PDC (a fresh endpoint at its address): its INV_DPDCID names the exact
    // pair and the PSN, and ends the initiator's PDC.
    let mut b2 = Endpoint::<u8>::new(cfg, 7);
    let mut buf = [0u8; 2048];
    a.handle_timeout(a.poll_timeout().unwrap());
    while let Some(t) = a.poll_transmit(NOW, &mut buf) {
        b2.handle_packet(NOW, 1, &buf[..t.len]).unwrap();
    }
    while let Some(t) = b2.poll_transmit(NOW, &mut buf) {
        a.handle_packet(NOW, 2, &buf[..t.len]).unwrap();
    }
    assert_eq!(
        events(&mut a),
        [Event::Failed { pdc, peer: 2, error: PdcError::Nack(NackCode::InvDpdcid), unacked: vec![2] }]
    );
}

#[test]
fn one_rtt_minted_start_psns_are_bounded() {
    let cfg = Config { max_pdcs: 16, ..Config::default() };
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    ep.set_secure(Establishment::OneRtt);
    for src in 0..=255u8 {
        ep.handle_packet(NOW, src, &syn(1000, 1)).unwrap();
    }
    assert_eq!(ep.pdc_count(), 0);
    assert!(ep.minted.len() <= cfg.max_pdcs, "{} minted", ep.minted.len());
}

#[test]
fn the_control_queue_is_bounded() {
    let cfg = Config::default();
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    // A flood of requests for no PDC: each would be answered INV_DPDCID.
    for i in 0..5000u32 {
        ep.handle_packet(NOW, 5, &request(i, 3, 9)).unwrap();
    }
    ep.uud_send(6, NextHeader::None, Bytes::from_static(b"u"));
    ep.rudi_respond(6, 1, NextHeader::None, Bytes::from_static(b"r"));
    let queued = ep.ctrl.len();
    assert!(queued <= cfg.max_ctrl, "{queued} control packets queued");
    assert_eq!(ep.stats().ctrl_dropped, 5002 - cfg.max_ctrl as u64);
    assert_eq!(sent(&mut ep, NOW).len(), cfg.max_ctrl);
    // Room again once sent.
    ep.uud_send(6, NextHeader::None, Bytes::from_static(b"u"));
    assert_eq!(sent(&mut ep, NOW).len(), 1);
}

/// A SYN from a spoofed source opens a target PDC whose own packets (the SES response) go to an
/// address that never answers: they are retried `half_open_retries` times, not `max_retries`
/// (a flood of such SYNs would otherwise have the target send `max_retries` packets for each),
/// and then the PDC fails. Once its initiator has answered anything, the usual limit applies.
#[test]
fn a_half_open_pdc_gives_up_its_packets_early() {
    let cfg = Config { max_retries: 100, ..Config::default() };
    let mut ep = Endpoint::<u8>::new(cfg, 1);
    ep.handle_packet(NOW, 5, &syn(1000, 7)).unwrap();
    let pdc = ep.accepted[&(5, 7)];
    ep.send_on(pdc, NextHeader::Rsp, Bytes::from_static(b"response"), 1).unwrap();
    let mut now = NOW;
    let mut packets = 0;
    loop {
        packets += sent(&mut ep, now).iter().filter(|(_, p)| matches!(p, PdsRepr::Request(_))).count();
        let Some(t) = ep.poll_timeout() else { break };
        if ep.pdc_info(pdc).is_none() || now > Duration::from_secs(600) {
            break;
        }
        now = t.max(now);
        ep.handle_timeout(now);
    }
    assert!(ep.pdc_info(pdc).is_none(), "the PDC gave up ({packets} packets by {now:?})");
    assert_eq!(packets as u32, 1 + cfg.half_open_retries, "sent once and retried half_open_retries times");
    assert!(events(&mut ep).iter().any(|e| matches!(e, Event::Failed { pdc: p, .. } if *p == pdc)));
}
