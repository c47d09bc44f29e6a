//! Compact requests as another stack may send them, crafted with the wire crate: what the target
//! accepts, answers and refuses (see `compact`).

use std::time::Duration;

use wire::FixedHeader;
use wire::uet::pds::{NextHeader, PdsRepr};
use wire::uet::ses::common::{FLAG_EOM, FLAG_SOM};
use wire::uet::ses::{
    MediumRequest, RequestCommon, Response, ReturnCode, SesHeader, SesOpcode, SesRepr, SmallRequest,
};

use super::*;
use crate::key::OPTIMIZED;
use crate::{Access, JobScope, RecvSpec};

const T0: Duration = Duration::ZERO;

fn common(cfg: &Config, opcode: SesOpcode, flags: u8, len: u16, ri: u16) -> RequestCommon {
    RequestCommon {
        rsvd: 0,
        opcode,
        version: 0,
        flags,
        word2: len,
        ri_generation: 0,
        job_id: cfg.job_id,
        pid_word: cfg.pid_on_fep,
        ri_word: ri,
    }
}

/// Sends `header` and `payload` from a bare PDS at `from` over a new PDC to `rx`; the RSPs `rx` answers with
/// (return code, message id), and the PSN the request went with.
fn exchange(
    rx: &mut Endpoint<u8>,
    from: u8,
    header: SesHeader,
    payload: &[u8],
) -> (Vec<(ReturnCode, u16)>, u32) {
    let mut tx = Endpoint::<u8>::new(Config::default(), u64::from(from));
    let pdc = tx.pds().connect(1, pds::Mode::Rud).unwrap();
    let repr = SesRepr { header, ext: None };
    let mut body = vec![0u8; repr.buffer_len()];
    repr.emit(&mut body).unwrap();
    body.extend_from_slice(payload);
    let psn = tx.pds().send_on(pdc, repr.next_header(), bytes::Bytes::from(body), 0).unwrap();
    let mut buf = vec![0u8; 9000];
    while let Some(t) = tx.poll_transmit(T0, &mut buf) {
        rx.handle_packet(T0, from, &buf[..t.len]).unwrap();
    }
    let mut rsps = Vec::new();
    while let Some(t) = rx.poll_transmit(T0, &mut buf) {
        let p = &buf[..t.len];
        if let Ok(PdsRepr::Request(r)) = PdsRepr::parse(p) {
            if r.next_hdr == NextHeader::Rsp {
                let rsp = Response::parse(&p[r.buffer_len()..]).unwrap();
                rsps.push((rsp.head.return_code, rsp.message_id));
            }
        }
    }
    (rsps, psn)
}

fn target() -> Endpoint<u8> {
    let mut rx = Endpoint::<u8>::new(Config::default(), 2);
    rx.regions.register(0x42 | OPTIMIZED, vec![0u8; 64], Access::ALL, JobScope::Any).unwrap();
    rx.regions.register(0x43, vec![0u8; 64], Access::ALL, JobScope::Any).unwrap();
    rx
}

#[test]
fn a_small_write_reaches_an_optimized_region_named_by_its_resource_index() {
    let mut rx = target();
    let c = *rx.config();
    let one = FLAG_SOM | FLAG_EOM;
    let w = SmallRequest { common: common(&c, SesOpcode::Write, one, 4, 0x42), buffer_offset: 8 };
    let (rsps, psn) = exchange(&mut rx, 11, SesHeader::Small(w), &[1, 2, 3, 4]);
    assert_eq!(rsps, [(ReturnCode::Ok, psn as u16)], "answered with the request's PSN as message id");
    assert_eq!(&rx.regions.get(0x42).unwrap().data.bytes()[8..12], &[1, 2, 3, 4]);
    // A region not registered OPTIMIZED cannot be reached by the optimized header.
    let w = SmallRequest { common: common(&c, SesOpcode::Write, one, 4, 0x43), buffer_offset: 8 };
    let (rsps, _) = exchange(&mut rx, 12, SesHeader::Small(w), &[1, 2, 3, 4]);
    assert_eq!(rsps.iter().map(|r| r.0).collect::<Vec<_>>(), [ReturnCode::BadMkey]);
    assert_eq!(&rx.regions.get(0x43).unwrap().data.bytes()[8..12], &[0; 4]);
    // Nor does it carry sends (no match bits, no initiator).
    let s = SmallRequest { common: common(&c, SesOpcode::Send, one, 4, 0x42), buffer_offset: 0 };
    rx.post_recv(RecvSpec::any(), 10, 5);
    let (rsps, _) = exchange(&mut rx, 13, SesHeader::Small(s), &[1, 2, 3, 4]);
    assert_eq!(rsps.iter().map(|r| r.0).collect::<Vec<_>>(), [ReturnCode::UnsupportedOp]);
    assert_eq!(rx.posted_count(), 1, "the receive was not taken");
}

#[test]
fn compact_requests_are_single_packets_or_dropped() {
    let mut rx = target();
    let c = *rx.config();
    rx.post_recv(RecvSpec::any(), 100, 5);
    let medium = |flags, len| MediumRequest {
        common: common(&c, SesOpcode::Send, flags, len, c.resource_index),
        data_or_offset: 0,
        initiator: 3,
        match_bits: 0,
    };
    // SOM without EOM: it claims to be part of a longer message, which the form cannot describe.
    let (rsps, _) = exchange(&mut rx, 14, SesHeader::Medium(medium(FLAG_SOM, 10)), &[7; 10]);
    assert!(rsps.is_empty());
    // A payload short of request_length.
    let (rsps, _) = exchange(&mut rx, 15, SesHeader::Medium(medium(FLAG_SOM | FLAG_EOM, 20)), &[7; 10]);
    assert!(rsps.is_empty());
    assert_eq!((rx.posted_count(), rx.inbound_count()), (1, 0), "nothing taken, nothing kept");
    assert_eq!(rx.stats().dropped, 2);
    // The whole message in one packet is received and answered.
    let (rsps, psn) = exchange(&mut rx, 16, SesHeader::Medium(medium(FLAG_SOM | FLAG_EOM, 10)), &[7; 10]);
    assert_eq!(rsps, [(ReturnCode::Ok, psn as u16)]);
    let got = rx.poll_completion().unwrap();
    assert_eq!((got.status, got.data, got.src.map(|s| s.initiator)), (Status::Ok, vec![7; 10], Some(3)));
}
