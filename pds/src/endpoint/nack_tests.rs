//! NACK codes (`pds/README.md`, "NACK codes"): each provoked by its condition at a target, and
//! the initiator's reaction to it, for the codes whose other tests check only one side.

use std::time::Duration;

use bytes::Bytes;
use wire::uet::pds::cp::FLAG_AR;
use wire::uet::pds::{CpRepr, CtlType, Mode, NackCode, NackRepr, NextHeader, PdsRepr, RequestRepr};

use super::Endpoint;
use crate::config::Config;
use crate::event::{Event, PdcError};

const NOW: Duration = Duration::ZERO;

fn request(psn: u32, spdcid: u16, dpdcid: u16, flags: u8) -> Vec<u8> {
    super::tests::request(Mode::Rud, flags, psn, spdcid, dpdcid)
}

fn cp(ctl_type: CtlType, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    let c = CpRepr { ctl_type, flags: FLAG_AR, probe_opaque: 0, psn, spdcid, dpdcid, payload: 0 };
    let mut b = vec![0; 16];
    let n = c.emit(&mut b).unwrap();
    b.truncate(n);
    b
}

/// The NACKs `ep` sends now: (destination, code, PSN).
fn nacks(ep: &mut Endpoint<u8>) -> Vec<(u8, NackCode, u32)> {
    let mut buf = [0u8; 2048];
    std::iter::from_fn(|| {
        ep.poll_transmit(NOW, &mut buf).map(|t| (t.dst, PdsRepr::parse(&buf[..t.len]).unwrap()))
    })
    .filter_map(|(dst, p)| match p {
        PdsRepr::Nack(n) => Some((dst, n.nack_code, n.nack_psn)),
        _ => None,
    })
    .collect()
}

/// A target PDC from peer 5 (its PDCID 3) opened at Start_PSN 100, its first packet taken.
fn target() -> (Endpoint<u8>, u16) {
    let mut ep = Endpoint::<u8>::new(Config::default(), 1);
    let syn = request(100, 3, RequestRepr::syn_word(false, 0), wire::uet::pds::request::FLAG_SYN);
    assert!(ep.handle_packet(NOW, 5, &syn).unwrap().is_some());
    let Some(Event::Accepted { pdc, .. }) = ep.poll_event() else { panic!("accepted") };
    (ep, pdc)
}

/// An initiator whose packet to 5 is in flight has received `code` for it from 5: the endpoint,
/// its PDC and the packet's PSN.
fn nacked_initiator(code: NackCode) -> (Endpoint<u8>, u16, u32) {
    let mut ep = Endpoint::<u8>::new(Config::default(), 2);
    let (pdc, psn) = ep.send(5, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 11).unwrap();
    let mut buf = [0u8; 2048];
    while ep.poll_transmit(NOW, &mut buf).is_some() {}
    let n = NackRepr {
        next_hdr: NextHeader::None,
        flags: 0,
        nack_code: code,
        vendor_code: 0,
        nack_psn: psn,
        spdcid: 9,
        dpdcid: pdc,
        payload: 0,
        ccx: None,
    };
    let mut b = [0u8; 16];
    n.emit(&mut b).unwrap();
    ep.handle_packet(NOW, 5, &b).unwrap();
    (ep, pdc, psn)
}

/// An initiator whose packet to 5 is in flight receives `code` for it from 5: its reaction.
fn initiator_reaction(code: NackCode) -> Option<Event<u8>> {
    nacked_initiator(code).0.poll_event()
}

/// What `ep` sends at `now`.
fn sent_at(ep: &mut Endpoint<u8>, now: Duration) -> Vec<PdsRepr> {
    let mut buf = [0u8; 2048];
    std::iter::from_fn(|| ep.poll_transmit(now, &mut buf).map(|t| PdsRepr::parse(&buf[..t.len]).unwrap()))
        .collect()
}

/// Moves every packet between `a` (address 2) and `b` (address 5) until both are quiet, except
/// the requests `lose` names by PSN (and whether they are retransmissions); returns the NACKs `b`
/// sent: (code, PSN).
fn shuttle(
    a: &mut Endpoint<u8>,
    b: &mut Endpoint<u8>,
    lose: impl Fn(u32, bool) -> bool,
) -> Vec<(NackCode, u32)> {
    let mut buf = [0u8; 2048];
    let mut nacked = Vec::new();
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(NOW, &mut buf) {
            moved = true;
            if let Ok(PdsRepr::Request(r)) = PdsRepr::parse(&buf[..t.len])
                && lose(r.psn, r.flags & wire::uet::pds::request::FLAG_RETX != 0)
            {
                continue;
            }
            b.handle_packet(NOW, 2, &buf[..t.len]).unwrap();
        }
        while let Some(t) = b.poll_transmit(NOW, &mut buf) {
            moved = true;
            if let Ok(PdsRepr::Nack(n)) = PdsRepr::parse(&buf[..t.len]) {
                nacked.push((n.nack_code, n.nack_psn));
            }
            a.handle_packet(NOW, 5, &buf[..t.len]).unwrap();
        }
        if !moved {
            return nacked;
        }
    }
}

#[test]
fn a_request_beyond_the_window_is_nacked_psn_oor_window_and_waits_for_the_retransmit_timer() {
    let (mut ep, pdc) = target();
    let far = 101 + crate::config::RX_WINDOW;
    assert!(ep.handle_packet(NOW, 5, &request(far, 3, pdc, 0)).unwrap().is_none());
    assert_eq!(ep.stats().rx_out_of_window, 1);
    assert_eq!(nacks(&mut ep), [(5, NackCode::PsnOorWindow, far)]);
    // The initiator neither fails nor resends at once (a transient code would): the packet goes
    // again when its retransmit timer runs out, the window having moved meanwhile.
    let (mut ini, ipdc, psn) = nacked_initiator(NackCode::PsnOorWindow);
    // (The NACK named the target's PDCID: established.)
    let events: Vec<_> = std::iter::from_fn(|| ini.poll_event()).collect();
    assert_eq!(events, [Event::Established { pdc: ipdc, peer: 5 }]);
    assert!(ini.pdc_info(ipdc).is_some(), "the PDC stays");
    assert!(sent_at(&mut ini, NOW).is_empty(), "nothing resent at once");
    let mut resent = None;
    let mut now = NOW;
    for _ in 0..10 {
        now = ini.poll_timeout().expect("a timer runs");
        ini.handle_timeout(now);
        if let Some(r) = sent_at(&mut ini, now).into_iter().find_map(|p| match p {
            PdsRepr::Request(r) if r.psn == psn => Some(r),
            _ => None,
        }) {
            resent = Some(r);
            break;
        }
    }
    let r = resent.expect("resent by the timer");
    assert!(r.flags & wire::uet::pds::request::FLAG_RETX != 0);
    assert!(now >= Config::default().rto, "by the retransmit timer: {now:?}");
    assert_eq!(ini.stats().timeouts, 1);
}

#[test]
fn a_rod_gap_is_nacked_rod_ooo_and_the_initiator_goes_back_to_the_expected_psn() {
    let cfg = Config { ack_every: 1, ..Config::default() };
    let (mut a, mut b) = (Endpoint::<u8>::new(cfg, 2), Endpoint::<u8>::new(cfg, 1));
    let mut psns = Vec::new();
    for i in 0..4 {
        psns.push(a.send(5, Mode::Rod, NextHeader::ReqStd, Bytes::from_static(b"x"), i).unwrap().1);
    }
    // The second packet's first transmission is lost: the third arrives after a gap.
    let lost = psns[1];
    let nacked = shuttle(&mut a, &mut b, |psn, retx| psn == lost && !retx);
    assert_eq!(nacked.first(), Some(&(NackCode::RodOoo, lost)), "{nacked:?}");
    // The initiator went back to it at once (no timer ran) and everything was delivered in order.
    assert_eq!((a.stats().timeouts, a.stats().rx_nacks), (0, nacked.len() as u64));
    assert!(a.stats().tx_retransmits >= 3, "the lost packet and those after it: {:?}", a.stats());
    let pdc = a.connect(5, Mode::Rod).unwrap();
    assert_eq!(a.pdc_info(pdc).unwrap().unacked, 0);
    let mut acked = Vec::new();
    while let Some(e) = a.poll_event() {
        if let Event::Acked { cookie, .. } = e {
            acked.push(cookie);
        }
    }
    assert_eq!(acked, [0, 1, 2, 3]);
}

#[test]
fn a_syn_with_another_start_psn_is_nacked_invalid_syn_and_fails_the_initiators_pdc() {
    let (mut a, mut b) =
        (Endpoint::<u8>::new(Config::default(), 2), Endpoint::<u8>::new(Config::default(), 1));
    a.send(5, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"x"), 1).unwrap();
    assert!(shuttle(&mut a, &mut b, |_, _| false).is_empty());
    // The initiator restarts (no memory of its PDC): the same PDCID, another Start_PSN, while the
    // target still holds the PDC.
    let mut a2 = Endpoint::<u8>::new(Config::default(), 3);
    let (pdc, _) = a2.send(5, Mode::Rud, NextHeader::ReqStd, Bytes::from_static(b"y"), 7).unwrap();
    let (old, new) = (a.pdc_info(pdc).unwrap().start_psn, a2.pdc_info(pdc).unwrap().start_psn);
    assert_ne!(old, new);
    let nacked = shuttle(&mut a2, &mut b, |_, _| false);
    assert_eq!(nacked, [(NackCode::InvalidSyn, new)]);
    assert_eq!(b.stats().rx_invalid_syns, 1);
    // Not a restart of its own: the initiator's PDC fails with the packet unacknowledged.
    assert_eq!(
        a2.poll_event(),
        Some(Event::Failed { pdc, peer: 5, error: PdcError::Nack(NackCode::InvalidSyn), unacked: vec![7] })
    );
    assert_eq!(a2.pdc_count(), 0);
}

#[test]
fn a_request_after_the_close_cmd_is_nacked_closing_and_fails_the_initiators_pdc() {
    let (mut ep, pdc) = target();
    // CLOSE_CMD at 101: the initiator has sent everything.
    assert!(ep.handle_packet(NOW, 5, &cp(CtlType::CloseCmd, 101, 3, pdc)).unwrap().is_none());
    // A request after it is not taken.
    assert!(ep.handle_packet(NOW, 5, &request(102, 3, pdc, 0)).unwrap().is_none());
    assert_eq!(ep.stats().rx_after_close, 1);
    assert_eq!(nacks(&mut ep), [(5, NackCode::Closing, 102)]);
    // The initiator's PDC ends: the peer has closed it.
    let Some(Event::Failed { error, unacked, .. }) = initiator_reaction(NackCode::Closing) else {
        panic!("the PDC fails")
    };
    assert_eq!((error, unacked), (PdcError::Nack(NackCode::Closing), vec![11]));
}

#[test]
fn a_control_packet_the_pdc_does_not_act_on_is_nacked_unexp_event() {
    for ctl in [CtlType::Negotiation, CtlType::ClearReq, CtlType::CloseReq, CtlType::from(12)] {
        let (mut ep, pdc) = target();
        assert!(ep.handle_packet(NOW, 5, &cp(ctl, 101, 3, pdc)).unwrap().is_none());
        assert_eq!(ep.stats().rx_unexpected_cps, 1, "{ctl:?}");
        assert_eq!(nacks(&mut ep), [(5, NackCode::UnexpEvent, 101)], "{ctl:?}");
        // The PDC carries on.
        assert!(ep.handle_packet(NOW, 5, &request(101, 3, pdc, 0)).unwrap().is_some(), "{ctl:?}");
    }
    // Those it acts on draw no such NACK.
    let (mut ep, pdc) = target();
    ep.handle_packet(NOW, 5, &cp(CtlType::AckReq, 101, 3, pdc)).unwrap();
    assert!(nacks(&mut ep).is_empty());
    let Some(Event::Failed { error, .. }) = initiator_reaction(NackCode::UnexpEvent) else {
        panic!("the PDC fails")
    };
    assert_eq!(error, PdcError::Nack(NackCode::UnexpEvent));
}
