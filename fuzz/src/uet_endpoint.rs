//! Feeds arbitrary UET packets (PDS header onwards) from four peers into a SES endpoint that has work
//! of its own outstanding (an open RUD and ROD PDC with sends in flight, one of them a rendezvous, a
//! RUDI read, a fetching atomic, posted tagged and untagged receives, a read-only and a writable
//! region), running its timers and transmissions in between, with NSCC and RCCC on (little
//! speculative credit, so grants, CREDIT and CREDIT_REQ are in play), in the HPC, AI Full or AI Base
//! profile, as an RDM or a DGRAM endpoint, with small limits on what remote parties can make it
//! keep. Checks: no panic; everything it sends parses as a PDS header (and the SES header its
//! next_hdr announces); the read-only region never changes; every table a peer can grow stays within
//! its limit (PDCs in all and per source, partly received messages per source, unexpected messages);
//! the counters account for every packet once (PDS: malformed, or delivered, taken or refused; SES:
//! each delivered packet used or refused).
//!
//! Input: chunks of `[time step: u8][len: u8][len bytes]`; bits 0 and 3 of the time step pick the
//! peer (1 to 4), bit 1 says the packet arrived ECN CE-marked, bit 2 that a switch trimmed it. The
//! first byte also sets up the endpoint: bit 3 secure 1-RTT establishment (else 0-RTT), bits 4-5 the
//! profile (HPC, AI Full, AI Base), bit 6 a DGRAM endpoint.

use ses::{Access, Addr, Config, Endpoint, JobScope, Opts, RecvSpec};
use std::time::Duration;
use wire::uet::{PdsRepr, SesRepr};

const RO: u64 = 0x10;
const RW: u64 = 0x20 | ses::key::IDEMPOTENT_SAFE;

pub fn run(data: &[u8]) {
    let cc = pds::cc::NsccConfig { link_bps: 10_000_000_000, base_rtt: Duration::from_micros(10), mss: 600 };
    let rccc =
        pds::credit::RcccConfig { grant_bps: 1_000_000_000, speculative: 1024, pull: 2048, overhead: 42 };
    let pds = pds::Config { cc: Some(cc), rccc: Some(rccc), ..pds::Config::default() };
    let setup = data.first().copied().unwrap_or(0);
    let profile =
        [ses::Profile::Hpc, ses::Profile::AiFull, ses::Profile::AiBase][usize::from(setup >> 4 & 3) % 3];
    let ep_type = if setup & 0x40 != 0 { ses::EpType::Dgram } else { ses::EpType::Rdm };
    // Small limits, so that fuzzed peers reach them.
    let pds = pds::Config { max_pdcs: 24, max_pdcs_per_peer: 8, max_ctrl: 64, ..pds };
    let cfg = Config {
        pds,
        profile,
        ep_type,
        max_inbound_per_pdc: 4,
        max_inbound_per_source: 6,
        max_unexpected_msgs: 8,
        max_served_reads: 4,
        read_window: 8,
        max_payload: 512,
        unexpected_bytes: 4096,
        msg_rendezvous_size: 1200,
        tag_rendezvous_size: 1200,
        ..Config::default()
    };
    let mut ep: Endpoint<u8> = Endpoint::new(cfg, 7);
    let establishment = if setup & 8 != 0 { pds::Establishment::OneRtt } else { pds::Establishment::ZeroRtt };
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
        Opts { context: 4, ordered: true, header_data: Some(5), job_id: None, lazy_ack: false },
    );
    let _ = ep.read(peer(1), RW, 0, 700, Opts { context: 5, ..Opts::default() });
    let (op, dt) = (wire::uet::ses::AmoOpcode::Sum, wire::uet::ses::AmoDatatype::Uint64);
    let _ =
        ep.fetch_atomic(peer(2), RW, 8, op, dt, &1u64.to_le_bytes(), Opts { context: 6, ..Opts::default() });
    let mut now = Duration::ZERO;
    let mut out = vec![0u8; 4096];
    let mut rest = data;
    let mut fed = 0u64;
    while rest.len() >= 2 {
        let (step, len) = (rest[0], usize::from(rest[1]));
        let pkt = &rest[2..(2 + len).min(rest.len())];
        rest = &rest[(2 + len).min(rest.len())..];
        now += Duration::from_micros(u64::from(step) * 50);
        let src = 1 + (step & 1) + 2 * (step >> 3 & 1);
        if step & 4 != 0 {
            let _ = ep.pds().handle_trimmed(now, src, pkt);
        } else {
            fed += 1;
            let _ = ep.handle_packet_ecn(now, src, pkt, step & 2 != 0);
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
        let (pdcs, cfg) = (ep.pds().pdc_count(), ep.config());
        assert!(pdcs <= cfg.pds.max_pdcs, "{pdcs} PDCs");
        assert!(
            ep.inbound_count() <= 4 * cfg.max_inbound_per_source,
            "{} partial messages",
            ep.inbound_count()
        );
        assert!(ep.unexpected_count() <= cfg.max_unexpected_msgs, "{} unexpected", ep.unexpected_count());
    }
    assert_eq!(ep.regions.get(RO).unwrap().data.bytes(), &ro_bytes[..], "a read-only region changed");
    let (p, s) = (*ep.pds().stats(), *ep.stats());
    assert_eq!(p.rx_malformed + p.rx_packets, fed, "{p:?}");
    assert_eq!(p.rx_delivered + p.rx_control + p.rx_refused(), p.rx_packets, "{p:?}");
    assert_eq!(s.rx_used + s.rx_refused(), p.rx_delivered, "{s:?}");
}
