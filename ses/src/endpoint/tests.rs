//! Tests of the endpoint against crafted and misbehaving peers (the security review's findings),
//! looking at its private state: partial messages, unexpected messages, served reads.

use std::time::Duration;

use wire::uet::pds::{NextHeader, RudiRepr, UudRepr};
use wire::uet::ses::common::FLAG_SOM;
use wire::uet::ses::{RequestCommon, SesHeader, SesOpcode, SesRepr, SomField, StandardRequest};

use super::*;
use crate::matching::RecvSpec;
use wire::uet::ses::ReturnCode;

const T0: Duration = Duration::ZERO;

fn cfg() -> Config {
    Config { max_payload: 1000, ..Config::default() }
}

fn addr_of(cfg: &Config, fep: u8) -> Addr<u8> {
    Addr { fep, pid_on_fep: cfg.pid_on_fep, resource_index: cfg.resource_index }
}

/// A standard request header for the endpoint `cfg` describes.
fn request(cfg: &Config, opcode: SesOpcode, msg_id: u16, flags: u8, total: u32, key: u64) -> StandardRequest {
    let common = RequestCommon {
        rsvd: 0,
        opcode,
        version: 0,
        flags,
        word2: msg_id,
        ri_generation: 0,
        job_id: cfg.job_id,
        pid_word: cfg.pid_on_fep,
        ri_word: cfg.resource_index,
    };
    StandardRequest {
        common,
        buffer_offset: 0,
        initiator: 7,
        memory_key: key,
        som_field: SomField::HeaderData(0),
        request_length: total,
    }
}

/// The SES header and payload of a request after a PDS header already in `pkt`.
fn append_request(mut pkt: Vec<u8>, r: StandardRequest, payload: &[u8]) -> Vec<u8> {
    let mut ses = [0u8; 128];
    let n = SesRepr { header: SesHeader::Standard(r), ext: None }.emit(&mut ses).unwrap();
    pkt.extend_from_slice(&ses[..n]);
    pkt.extend_from_slice(payload);
    pkt
}

/// A UUD datagram carrying `r`.
fn uud(r: StandardRequest, payload: &[u8]) -> Vec<u8> {
    let mut pds = vec![0u8; wire::uet::pds::uud::LEN];
    UudRepr { next_hdr: NextHeader::ReqStd, flags: 0, reserved: 0 }.emit(&mut pds).unwrap();
    append_request(pds, r, payload)
}

/// A RUDI request carrying `r`.
fn rudi(pkt_id: u32, r: StandardRequest, payload: &[u8]) -> Vec<u8> {
    let mut pds = vec![0u8; wire::uet::layout::RUDI_LEN];
    RudiRepr { response: false, next_hdr: NextHeader::ReqStd, flags: 0, reserved: 0, pkt_id }
        .emit(&mut pds)
        .unwrap();
    append_request(pds, r, payload)
}

/// Everything `ep` sends now.
fn drain(ep: &mut Endpoint<u8>, now: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 20_000];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

/// The first packets (SOM, 1000 of 3000 bytes) of SENDs with message ids `ids`, over `tx`'s PDC
/// of `mode` to `to`, as they leave `tx`.
fn partials(
    tx: &mut Endpoint<u8>,
    to: u8,
    mode: pds::Mode,
    c: &Config,
    ids: std::ops::Range<u16>,
) -> Vec<Vec<u8>> {
    let pdc = tx.pds().connect(to, mode).unwrap();
    for id in ids {
        let body = append_request(Vec::new(), request(c, SesOpcode::Send, id, FLAG_SOM, 3000, 0), &[6; 1000]);
        tx.pds().send_on(pdc, NextHeader::ReqStd, bytes::Bytes::from(body), 0).unwrap();
    }
    drain(tx, T0)
}

fn completions(ep: &mut Endpoint<u8>) -> Vec<Completion<u8>> {
    std::iter::from_fn(|| ep.poll_completion()).collect()
}

/// A partial UUD message (SOM without EOM) takes no posted receive and leaves no state; a
/// multi-packet message refused at its first packet (bad JobID) is answered at once and leaves no
/// state; partial messages are capped per PDC and per source and reaped after the reassembly
/// timeout, giving back what they had taken.
#[test]
fn partial_messages_are_bounded_refused_at_once_and_reaped() {
    let c = Config { max_inbound_per_pdc: 4, max_inbound_per_source: 6, ..cfg() };
    let mut rx = Endpoint::<u8>::new(c, 2);
    rx.post_recv(RecvSpec::any(), 100, 1);
    for i in 0..50u16 {
        let r = request(&c, SesOpcode::Send, i, FLAG_SOM, 1000, 0);
        rx.handle_packet(T0, 100 + i as u8, &uud(r, &[1])).unwrap();
        let r = request(&c, SesOpcode::Write, i, FLAG_SOM, 1000, 0);
        rx.handle_packet(T0, 100 + i as u8, &rudi(u32::from(i), r, &[1])).unwrap();
    }
    assert_eq!(rx.inbound.len(), 0, "UUD and RUDI requests are single packets: no partial state");
    assert_eq!(rx.posted_count(), 1, "a spoofed datagram took the posted receive");
    assert!(rx.stats().wrong_delivery >= 50);
    rx.cancel_recv(1);
    completions(&mut rx);
    drain(&mut rx, T0);

    // A message refused at its first packet is answered then, and nothing is kept for the rest.
    let mut tx = Endpoint::<u8>::new(cfg(), 1);
    let to_rx = addr_of(&c, 1);
    tx.send(to_rx, &[5; 3000], None, Opts { context: 9, job_id: Some(99), ..Opts::default() }).unwrap();
    let pkts = drain(&mut tx, T0);
    rx.handle_packet(T0, 0, &pkts[0]).unwrap();
    assert_eq!(rx.inbound.len(), 0, "a refused message keeps no state");
    for p in drain(&mut rx, T0) {
        tx.handle_packet(T0, 1, &p).unwrap();
    }
    let done = completions(&mut tx);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status, Status::Remote(ReturnCode::BadJobId));

    // Partial messages: at most 4 on a PDC, 6 from one source, each further one refused.
    rx.post_recv(RecvSpec::any(), 3000, 2);
    let mut tx = Endpoint::<u8>::new(cfg(), 3);
    let mut firsts = partials(&mut tx, 1, pds::Mode::Rud, &c, 0..5);
    firsts.extend(partials(&mut tx, 1, pds::Mode::Rod, &c, 5..10));
    for p in &firsts {
        rx.handle_packet(T0, 3, p).unwrap();
    }
    assert_eq!(rx.inbound.len(), 6, "per-PDC and per-source caps");
    assert_eq!(rx.unexpected_count(), 5, "the first took the posted receive");
    assert_eq!(rx.stats().inbound_refused, 4);
    let dropped = |rsp: &Vec<u8>| {
        let pds = wire::uet::PdsRepr::parse(rsp).unwrap();
        let ses = SesRepr::parse(&rsp[pds.buffer_len()..], pds.next_header().unwrap()).unwrap();
        matches!(ses.map(|s| s.header), Some(SesHeader::Response(r)) if r.head.return_code == ReturnCode::Dropped)
    };
    assert_eq!(drain(&mut rx, T0).iter().filter(|p| dropped(p)).count(), 4, "each refused one answered");

    // The reaper: a receive taken by a partial message comes back, unexpected bytes are freed.
    let later = T0 + c.reassembly_timeout;
    assert!(rx.poll_timeout().is_some_and(|t| t <= later), "a reassembly deadline is armed");
    rx.handle_timeout(later);
    assert_eq!(rx.inbound.len(), 0);
    assert_eq!(rx.unexpected_count(), 0);
    assert_eq!(rx.unexpected_bytes, 0);
    assert_eq!(rx.posted_count(), 1, "the receive was posted again");
    assert_eq!(rx.stats().reassembly_timeouts, 6);
}

/// A response for a pending read arriving from the peer's address but over another PDC (one
/// an off-path attacker opened with a SYN) is dropped; the read completes with the real data from
/// its own PDC. Message ids of standard requests are not sequential (those of compact requests
/// are their PSNs' low bits, which start at the PDC's random Start_PSN).
#[test]
fn responses_count_only_on_the_pdc_of_their_operation() {
    let (ca, cb) = (Config { forms: crate::HeaderForms::Standard, ..cfg() }, cfg());
    let mut a = Endpoint::<u8>::new(ca, 1);
    let mut b = Endpoint::<u8>::new(cb, 2);
    let real: Vec<u8> = (0..100).collect();
    b.regions.register(5, real.clone(), crate::key::Access::ALL, crate::key::JobScope::Any).unwrap();
    let ids: Vec<u16> = (0..4)
        .map(|i| a.read(addr_of(&cb, 1), 5, 0, 100, Opts { context: i, ..Opts::default() }).unwrap())
        .collect();
    assert!(ids.windows(2).any(|w| w[1] != w[0].wrapping_add(1)), "sequential message ids {ids:?}");
    let requests = drain(&mut a, T0);

    // Mallory, spoofing b's address, opens a PDC of her own to a and answers every read.
    let mut m = Endpoint::<u8>::new(cb, 3);
    let pdc = m.pds().connect(0, pds::Mode::Rud).unwrap();
    for &id in &ids {
        let rsp = super::response::data_response(id, cb.job_id, 100, 0, &[0xEE; 100]);
        m.pds().send_on(pdc, NextHeader::RspData, rsp, 0).unwrap();
    }
    for p in drain(&mut m, T0) {
        a.handle_packet(T0, 1, &p).unwrap();
    }
    assert_eq!(completions(&mut a), Vec::new(), "injected responses completed reads");
    assert_eq!(a.outstanding(), 4);

    for p in requests {
        b.handle_packet(T0, 0, &p).unwrap();
    }
    for p in drain(&mut b, T0) {
        a.handle_packet(T0, 1, &p).unwrap();
    }
    let done = completions(&mut a);
    assert_eq!(done.len(), 4);
    assert!(done.iter().all(|d| d.status == Status::Ok && d.data == real));
}

/// The unexpected list is capped in entries, whatever their size: zero-length sends,
/// rendezvous requests without eager bytes and deferred sends beyond `max_unexpected_msgs` are
/// answered NO_MATCH and counted.
#[test]
fn unexpected_messages_are_capped_in_number() {
    use crate::config::Profile;
    let small = Config { msg_rendezvous_size: 10, max_eager: 0, ..cfg() };
    let kinds = [
        ("zero-length send", Config { ..cfg() }, 0),
        ("rendezvous without eager bytes", small, 100),
        ("deferred send", Config { profile: Profile::AiFull, ..small }, 100),
    ];
    for (what, txc, len) in kinds {
        let rxc = Config { profile: Profile::AiFull, max_unexpected_msgs: 8, ..cfg() };
        let mut rx = Endpoint::<u8>::new(rxc, 2);
        let mut tx = Endpoint::<u8>::new(txc, 1);
        for i in 0..10 {
            tx.send(addr_of(&rxc, 1), &vec![1; len], None, Opts { context: i, ..Opts::default() }).unwrap();
        }
        for p in drain(&mut tx, T0) {
            rx.handle_packet(T0, 0, &p).unwrap();
        }
        for p in drain(&mut rx, T0) {
            tx.handle_packet(T0, 1, &p).unwrap();
        }
        assert_eq!(rx.unexpected_count(), 8, "{what}");
        let refused = completions(&mut tx)
            .into_iter()
            .filter(|d| d.status == Status::Remote(ReturnCode::NoMatch))
            .count();
        assert_eq!(refused, 2, "{what}");
        assert_eq!(rx.stats().unexpected_refused, 2, "{what}");
    }
}

/// With an operation outstanding under every message id, one more is refused with Busy (it
/// used to loop for ever looking for a free id).
#[test]
fn message_ids_run_out_with_busy_not_a_hang() {
    let c = cfg();
    let mut a = Endpoint::<u8>::new(c, 1);
    let key = 5 | crate::key::IDEMPOTENT_SAFE;
    for _ in 0..=u16::MAX {
        a.read(addr_of(&c, 1), key, 0, 1, Opts::default()).unwrap();
    }
    assert_eq!(a.outstanding(), 65536);
    assert_eq!(a.read(addr_of(&c, 1), key, 0, 1, Opts::default()), Err(Error::Busy));
    assert_eq!(a.send(addr_of(&c, 1), &[1], None, Opts::default()), Err(Error::Busy));
}

/// RUDI (idempotent, no duplicate suppression) writes and reads of a region not registered
/// IDEMPOTENT_SAFE are refused with PERM_VIOLATION and leave it untouched.
#[test]
fn rudi_access_needs_an_idempotent_safe_region() {
    let c = cfg();
    let mut a = Endpoint::<u8>::new(c, 1);
    let mut b = Endpoint::<u8>::new(c, 2);
    b.regions.register(5, vec![0; 100], crate::key::Access::ALL, crate::key::JobScope::Any).unwrap();
    let safe = 5 | crate::key::IDEMPOTENT_SAFE;
    a.write(addr_of(&c, 1), safe, 0, &[9; 100], Opts { context: 1, ..Opts::default() }).unwrap();
    a.read(addr_of(&c, 1), safe, 0, 100, Opts { context: 2, ..Opts::default() }).unwrap();
    for p in drain(&mut a, T0) {
        b.handle_packet(T0, 0, &p).unwrap();
    }
    for p in drain(&mut b, T0) {
        a.handle_packet(T0, 1, &p).unwrap();
    }
    assert_eq!(b.regions.get(5).unwrap().data.bytes(), &[0; 100][..], "a RUDI write changed the region");
    let done = completions(&mut a);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|d| d.status == Status::Remote(ReturnCode::PermViolation)), "{done:?}");
}

/// Packets queued (sent or not) on the PDCs of `ep`.
fn queued(ep: &mut Endpoint<u8>) -> usize {
    (0..16).filter_map(|id| ep.pds().pdc_info(id)).map(|i| i.unacked).sum()
}

/// One READ request for a large region is answered as the PDC takes the packets, never with
/// the whole range copied and queued at once; it still completes. A RUDI READ longer than one
/// packet is refused (TOO_LONG); reads served at once to one peer are capped.
#[test]
fn read_responses_are_produced_as_the_pdc_takes_them() {
    let c = Config { read_window: 32, max_served_reads: 2, ..cfg() };
    let mut a = Endpoint::<u8>::new(c, 1);
    let mut b = Endpoint::<u8>::new(c, 2);
    let region: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    b.regions.register(5, region.clone(), crate::key::Access::ALL, crate::key::JobScope::Any).unwrap();
    a.read(addr_of(&c, 1), 5, 0, region.len(), Opts { context: 1, ..Opts::default() }).unwrap();
    let mut now = T0;
    let req = drain(&mut a, now);
    assert_eq!(req.len(), 1);
    b.handle_packet(now, 0, &req[0]).unwrap();
    assert!(queued(&mut b) <= 32, "{} response packets queued at once", queued(&mut b));
    let mut done = Vec::new();
    for _ in 0..100_000 {
        for p in drain(&mut b, now) {
            a.handle_packet(now, 1, &p).unwrap();
        }
        for p in drain(&mut a, now) {
            b.handle_packet(now, 0, &p).unwrap();
        }
        assert!(queued(&mut b) <= 32);
        done.extend(completions(&mut a));
        if !done.is_empty() {
            break;
        }
        now += Duration::from_micros(50);
        for ep in [&mut a, &mut b] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
    }
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status, Status::Ok);
    assert!(done[0].data == region, "the read returned other bytes");

    // Two reads served at once to a peer; a third is refused.
    for i in 0..3 {
        a.read(addr_of(&c, 1), 5, 0, 1 << 20, Opts { context: 10 + i, ..Opts::default() }).unwrap();
    }
    for p in drain(&mut a, now) {
        b.handle_packet(now, 0, &p).unwrap();
    }
    assert_eq!(b.stats().reads_refused, 1);

    // RUDI: one packet at most.
    b.regions
        .register(
            6 | crate::key::IDEMPOTENT_SAFE,
            vec![1; 5000],
            crate::key::Access::ALL,
            crate::key::JobScope::Any,
        )
        .unwrap();
    let r = StandardRequest {
        buffer_offset: 0,
        ..request(&c, SesOpcode::Read, 1, FLAG_SOM | wire::uet::ses::common::FLAG_EOM, 5000, 6)
    };
    b.handle_packet(now, 9, &rudi(1, r, &[])).unwrap();
    let out: Vec<_> = drain(&mut b, now)
        .into_iter()
        .filter(|p| {
            let pds = wire::uet::PdsRepr::parse(p).unwrap();
            matches!(pds, wire::uet::PdsRepr::Rudi(_))
        })
        .collect();
    assert_eq!(out.len(), 1, "a RUDI READ answered with {} packets", out.len());
}

/// Runs a READ of `len` bytes at `key` from `from` (fabric address `src` at `to`) to completion.
fn read_status(
    from: &mut Endpoint<u8>,
    src: u8,
    to: &mut Endpoint<u8>,
    dst: Addr<u8>,
    key: u64,
    job_id: u32,
) -> Status {
    from.read(dst, key, 0, 10, Opts { context: 77, job_id: Some(job_id), ..Opts::default() }).unwrap();
    for p in drain(from, T0) {
        to.handle_packet(T0, src, &p).unwrap();
    }
    for p in drain(to, T0) {
        from.handle_packet(T0, dst.fep, &p).unwrap();
    }
    let done = completions(from);
    assert_eq!(done.len(), 1);
    done[0].status
}

/// A rendezvous buffer is readable only by the receiver it was sent to, under a random key;
/// the JobID exemption of rendezvous reads does not skip the PIDonFEP check.
#[test]
fn rendezvous_buffers_are_bound_to_their_receiver() {
    let c = Config { msg_rendezvous_size: 100, ..cfg() };
    let mut a = Endpoint::<u8>::new(c, 1);
    let to_b = addr_of(&c, 1);
    for i in 0..2 {
        a.send(to_b, &[3; 500], None, Opts { context: i, job_id: Some(77), ..Opts::default() }).unwrap();
    }
    let mut keys: Vec<u64> = a.ops.values().filter_map(|o| o.cleanup_key).collect();
    keys.sort_unstable();
    assert_eq!(keys.len(), 2);
    assert!(keys[1] - keys[0] > 1, "sequential internal keys {keys:x?}");
    let key = keys[0];
    let a_addr = addr_of(&c, 0);

    // A third member of the job (address 2) reads it.
    let mut m = Endpoint::<u8>::new(c, 3);
    let st = read_status(&mut m, 2, &mut a, a_addr, key, 77);
    assert_eq!(st, Status::Remote(ReturnCode::BadMkey), "a third party read a rendezvous buffer");

    // The receiver, naming another PIDonFEP.
    let mut b = Endpoint::<u8>::new(c, 2);
    let wrong_pid = Addr { pid_on_fep: 99, ..a_addr };
    let st = read_status(&mut b, 1, &mut a, wrong_pid, key, 77);
    assert_eq!(st, Status::Remote(ReturnCode::BadPid));
    assert_eq!(read_status(&mut b, 1, &mut a, a_addr, key, 77), Status::Ok);
}

/// UUD datagrams are for DGRAM endpoints: an RDM endpoint drops them (a spoofed one took a
/// posted receive), a DGRAM endpoint delivers them.
#[test]
fn rdm_endpoints_drop_uud_datagrams() {
    use crate::config::EpType;
    for (ep_type, delivered) in [(EpType::Rdm, false), (EpType::Dgram, true)] {
        let c = Config { ep_type, ..cfg() };
        let mut rx = Endpoint::<u8>::new(c, 2);
        rx.post_recv(RecvSpec::any(), 100, 1);
        let r = request(&c, SesOpcode::DatagramSend, 1, FLAG_SOM | wire::uet::ses::common::FLAG_EOM, 3, 0);
        rx.handle_packet(T0, 9, &uud(r, &[1, 2, 3])).unwrap();
        assert_eq!(rx.posted_count() == 0, delivered, "{ep_type:?}");
        assert_eq!(completions(&mut rx).len(), usize::from(delivered), "{ep_type:?}");
    }
}

/// An endpoint is not made from a configuration whose max_payload the header cannot carry.
#[test]
fn try_new_refuses_a_max_payload_beyond_the_header_field() {
    use crate::config::{ConfigError, MAX_PAYLOAD};
    for n in [0, MAX_PAYLOAD + 1, 65536] {
        let cfg = Config { max_payload: n, ..Config::default() };
        assert_eq!(Endpoint::<u8>::try_new(cfg, 1).err(), Some(ConfigError::MaxPayload(n)));
    }
}
