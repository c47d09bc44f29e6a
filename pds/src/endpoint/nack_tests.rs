//! The NACK codes added for issue 58 (`pds/README.md`, "NACK codes"): each provoked by its
//! condition at a target, and the initiator's reaction to it.

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

/// An initiator whose packet to 5 is in flight receives `code` for it from 5: its reaction.
fn initiator_reaction(code: NackCode) -> Option<Event<u8>> {
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
    ep.poll_event()
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
