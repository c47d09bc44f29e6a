//! Feeds arbitrary UET packets (PDS header onwards) from two peers into a SES endpoint that has work
//! of its own outstanding (an open RUD and ROD PDC with sends in flight, one of them a rendezvous, a
//! RUDI read, a fetching atomic, posted tagged and untagged receives, a read-only and a writable
//! region), running its timers and transmissions in between, with NSCC and RCCC on (little
//! speculative credit, so grants, CREDIT and CREDIT_REQ are in play). Checks: no panic;
//! everything it sends parses as a PDS header (and the SES header its next_hdr announces); the
//! read-only region never changes.
//!
//! Input: chunks of `[time step: u8][len: u8][len bytes]`; the low bit of the time step picks the peer,
//! the next bit says the packet arrived ECN CE-marked, the next that a switch trimmed it. The PDS
//! establishes PDCs securely (`set_secure`: 1-RTT if bit 3 of the first byte is set, else 0-RTT).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ses::{Access, Addr, Config, Endpoint, JobScope, Opts, RecvSpec};
use std::time::Duration;
use wire::uet::{PdsRepr, SesRepr};

const RO: u64 = 0x10;
const RW: u64 = 0x20 | ses::key::IDEMPOTENT_SAFE;

fuzz_target!(|data: &[u8]| {
    let cc = pds::cc::NsccConfig { link_bps: 10_000_000_000, base_rtt: Duration::from_micros(10), mss: 600 };
    let rccc = pds::credit::RcccConfig { grant_bps: 1_000_000_000, speculative: 1024, pull: 2048, overhead: 42 };
    let pds = pds::Config { cc: Some(cc), rccc: Some(rccc), ..pds::Config::default() };
    let cfg = Config {
        pds,
        max_payload: 512,
        unexpected_bytes: 4096,
        msg_rendezvous_size: 1200,
        tag_rendezvous_size: 1200,
        ..Config::default()
    };
    let mut ep: Endpoint<u8> = Endpoint::new(cfg, 7);
    let establishment = if data.first().is_some_and(|b| b & 8 != 0) {
        pds::Establishment::OneRtt
    } else {
        pds::Establishment::ZeroRtt
    };
    ep.pds().set_secure(establishment);
    let ro_bytes: Vec<u8> = (0..256u32).map(|i| i as u8).collect();
    ep.regions
        .register(RO, ro_bytes.clone(), Access { remote_read: true, remote_write: false }, JobScope::Any)
        .unwrap();
    ep.regions.register(RW, vec![0; 2048], Access::ALL, JobScope::Job(1)).unwrap();
    ep.post_recv(RecvSpec::any(), 1000, 1);
    ep.post_recv(RecvSpec::tagged(0x5500, 0xFF), 1000, 2);
    let peer = |fep| Addr { fep, pid_on_fep: 0, resource_index: 0 };
    let _ = ep.send(peer(1), &[7; 1300], None, Opts { context: 3, ..Opts::default() });
    let _ = ep.send(
        peer(2),
        &[8; 100],
        Some(9),
        Opts { context: 4, ordered: true, header_data: Some(5), job_id: None },
    );
    let _ = ep.read(peer(1), RW, 0, 700, Opts { context: 5, ..Opts::default() });
    let (op, dt) = (wire::uet::ses::AmoOpcode::Sum, wire::uet::ses::AmoDatatype::Uint64);
    let _ =
        ep.fetch_atomic(peer(2), RW, 8, op, dt, &1u64.to_le_bytes(), Opts { context: 6, ..Opts::default() });
    let mut now = Duration::ZERO;
    let mut out = vec![0u8; 4096];
    let mut rest = data;
    while rest.len() >= 2 {
        let (step, len) = (rest[0], usize::from(rest[1]));
        let pkt = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        now += Duration::from_micros(u64::from(step) * 50);
        if step & 4 != 0 {
            let _ = ep.pds().handle_trimmed(now, 1 + (step & 1), pkt);
        } else {
            let _ = ep.handle_packet_ecn(now, 1 + (step & 1), pkt, step & 2 != 0);
        }
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        let mut sent = 0;
        while let Some(t) = ep.poll_transmit(now, &mut out) {
            let bytes = &out[..t.len];
            let pds = PdsRepr::parse(bytes).expect("what the endpoint sends parses");
            if let Some(nh) = pds.next_header() {
                SesRepr::parse(&bytes[pds.buffer_len()..], nh).expect("its SES header parses");
            }
            sent += 1;
            assert!(sent < 10_000, "poll_transmit never ends");
        }
        while ep.poll_completion().is_some() {}
    }
    assert_eq!(ep.regions.get(RO).unwrap().data, ro_bytes, "a read-only region changed");
});
