//! The SES header forms (issue 58, acceptance 1; the table in `ses/README.md`): each operation
//! goes in the form the table says, read back from the frames with the wire crate, and is decoded
//! and executed by the peer, which answers in the matching response form; with
//! `HeaderForms::Standard` only the standard header goes.

mod common;

use std::time::Duration;

use common::{Ses, Sim, addr, pattern};
use nicsim::LinkConfig;
use ses::key::OPTIMIZED;
use ses::{Access, Config, HeaderForms, JobScope, Opts, RecvSpec, Status};
use wire::uet::pds::NextHeader;
use wire::uet::ses::{AmoDatatype, AmoOpcode};
use wire::uet::{PdsRepr, UetConfig, UetRepr};

const LIMIT: Duration = Duration::from_secs(5);
/// An OPTIMIZED key whose RKEY fits the resource index (the optimized header's).
const OPT_KEY: u64 = OPTIMIZED | 0x123;
/// A key the optimized header cannot carry.
const PLAIN_KEY: u64 = 0x5000;

fn sim(forms: HeaderForms) -> Sim {
    let a = Config {
        initiator: 10,
        pid_on_fep: 1,
        resource_index: 3,
        max_payload: 1000,
        forms,
        ..Config::default()
    };
    let b = Config {
        initiator: 20,
        pid_on_fep: 2,
        resource_index: 5,
        max_payload: 1000,
        forms,
        ..Config::default()
    };
    let mut sim = Ses::pair(1, [a, b], LinkConfig::default());
    for key in [OPT_KEY, PLAIN_KEY] {
        sim.ends.eps[1].regions.register(key, pattern(key, 256), Access::ALL, JobScope::Any).unwrap();
    }
    sim.net.enable_tap();
    sim
}

/// The next_hdr of every SES-carrying packet each side sent since the last call.
fn forms_sent(sim: &mut Sim) -> [Vec<NextHeader>; 2] {
    let cfg = UetConfig { crc: true, ..UetConfig::default() };
    let mut out = [Vec::new(), Vec::new()];
    for t in sim.net.take_tap() {
        if let UetRepr::Clear { pds: PdsRepr::Request(r), .. } = UetRepr::parse(&t.bytes, &cfg).unwrap() {
            if r.next_hdr != NextHeader::None {
                out[usize::from(t.port != sim.ports[0].0)].push(r.next_hdr);
            }
        }
    }
    out
}

/// Runs until side 0's operation `context` completes; its completion.
fn run(sim: &mut Sim, context: u64) -> ses::Completion<u8> {
    assert!(sim.run_until(LIMIT, |s| s.ends.completion(0, context).is_some()), "no completion {context}");
    sim.ends.completion(0, context).unwrap().clone()
}

/// One operation: what side 0 posts, and the forms it and the answer go in.
struct Case {
    name: &'static str,
    post: fn(&mut Sim, u64),
    request: NextHeader,
    response: NextHeader,
}

fn opts(context: u64) -> Opts {
    Opts { context, ..Opts::default() }
}

fn dst(sim: &Sim) -> ses::Addr<u8> {
    addr(sim.ends.eps[1].config(), 1)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "send 8 B",
            post: |s, c| {
                s.ends.eps[1].post_recv(RecvSpec::any(), 100, 1000 + c);
                s.ends.eps[0].send(dst(s), &pattern(c, 8), None, opts(c)).unwrap();
            },
            request: NextHeader::ReqMedium,
            response: NextHeader::Rsp,
        },
        Case {
            name: "senddata 900 B",
            post: |s, c| {
                s.ends.eps[1].post_recv(RecvSpec::any(), 1000, 1000 + c);
                let o = Opts { header_data: Some(0xD00D), ..opts(c) };
                s.ends.eps[0].send(dst(s), &pattern(c, 900), None, o).unwrap();
            },
            request: NextHeader::ReqMedium,
            response: NextHeader::Rsp,
        },
        Case {
            name: "tsend 64 B",
            post: |s, c| {
                s.ends.eps[1].post_recv(RecvSpec { tag: Some((0x77, 0)), ..RecvSpec::any() }, 100, 1000 + c);
                s.ends.eps[0].send(dst(s), &pattern(c, 64), Some(0x77), opts(c)).unwrap();
            },
            request: NextHeader::ReqMedium,
            response: NextHeader::Rsp,
        },
        Case {
            name: "send 3000 B (three packets)",
            post: |s, c| {
                s.ends.eps[1].post_recv(RecvSpec::any(), 3000, 1000 + c);
                s.ends.eps[0].send(dst(s), &pattern(c, 3000), None, opts(c)).unwrap();
            },
            request: NextHeader::ReqStd,
            response: NextHeader::Rsp,
        },
        Case {
            name: "write to an OPTIMIZED key",
            post: |s, c| s.ends.eps[0].write(dst(s), OPT_KEY, 16, &[9; 32], opts(c)).map(drop).unwrap(),
            request: NextHeader::ReqSmall,
            response: NextHeader::Rsp,
        },
        Case {
            name: "write to another key",
            post: |s, c| s.ends.eps[0].write(dst(s), PLAIN_KEY, 16, &[9; 32], opts(c)).map(drop).unwrap(),
            request: NextHeader::ReqMedium,
            response: NextHeader::Rsp,
        },
        Case {
            name: "writedata",
            post: |s, c| {
                let o = Opts { header_data: Some(5), ..opts(c) };
                s.ends.eps[0].write(dst(s), OPT_KEY, 16, &[9; 32], o).map(drop).unwrap();
            },
            request: NextHeader::ReqStd,
            response: NextHeader::Rsp,
        },
        Case {
            name: "read from an OPTIMIZED key",
            post: |s, c| s.ends.eps[0].read(dst(s), OPT_KEY, 8, 100, opts(c)).map(drop).unwrap(),
            request: NextHeader::ReqSmall,
            response: NextHeader::RspDataSmall,
        },
        Case {
            name: "read from another key",
            post: |s, c| s.ends.eps[0].read(dst(s), PLAIN_KEY, 8, 100, opts(c)).map(drop).unwrap(),
            request: NextHeader::ReqMedium,
            response: NextHeader::RspDataSmall,
        },
        Case {
            name: "fetch-add on an OPTIMIZED key",
            post: |s, c| {
                let (op, dt) = (AmoOpcode::Sum, AmoDatatype::Uint64);
                s.ends.eps[0]
                    .fetch_atomic(dst(s), OPT_KEY, 64, op, dt, &3u64.to_le_bytes(), opts(c))
                    .unwrap();
            },
            request: NextHeader::ReqSmall,
            response: NextHeader::RspDataSmall,
        },
        Case {
            name: "compare-swap on another key",
            post: |s, c| {
                let (op, dt) = (AmoOpcode::Cswap, AmoDatatype::Uint64);
                let cmp = u64::from_le_bytes(pattern(PLAIN_KEY, 256)[64..72].try_into().unwrap());
                let (cmp, swap) = (cmp.to_le_bytes(), 7u64.to_le_bytes());
                s.ends.eps[0].compare_atomic(dst(s), PLAIN_KEY, 64, op, dt, &cmp, &swap, opts(c)).unwrap();
            },
            request: NextHeader::ReqMedium,
            response: NextHeader::RspDataSmall,
        },
        Case {
            name: "non-fetching atomic batch",
            post: |s, c| {
                let (op, dt) = (AmoOpcode::Bor, AmoDatatype::Uint32);
                s.ends.eps[0].atomic(dst(s), PLAIN_KEY, 128, op, dt, &[1; 16], opts(c)).unwrap();
            },
            request: NextHeader::ReqMedium,
            response: NextHeader::Rsp,
        },
    ]
}

/// What the target holds after each operation: the results are checked, not only the forms.
fn check_results(sim: &Sim, done: &[ses::Completion<u8>]) {
    let plain = pattern(PLAIN_KEY, 256);
    let opt = pattern(OPT_KEY, 256);
    let region = |k| sim.ends.eps[1].regions.get(k).unwrap().data.bytes().to_vec();
    // The writes landed; the reads, which come after them, see their bytes.
    assert_eq!(&region(PLAIN_KEY)[16..48], &[9; 32]);
    assert_eq!(&region(OPT_KEY)[16..48], &[9; 32]);
    let read = |i: usize| &done[i].data;
    let mut want = opt[8..108].to_vec();
    want[8..40].fill(9);
    assert_eq!(read(7), &want, "read from the OPTIMIZED key");
    let mut want = plain[8..108].to_vec();
    want[8..40].fill(9);
    assert_eq!(read(8), &want, "read from the other key");
    let old = u64::from_le_bytes(opt[64..72].try_into().unwrap());
    assert_eq!(read(9), &old.to_le_bytes(), "fetch-add returns the old value");
    assert_eq!(u64::from_le_bytes(region(OPT_KEY)[64..72].try_into().unwrap()), old.wrapping_add(3));
    assert_eq!(u64::from_le_bytes(region(PLAIN_KEY)[64..72].try_into().unwrap()), 7, "swapped");
    let or: Vec<u8> = plain[128..144].iter().map(|b| b | 1).collect();
    assert_eq!(&region(PLAIN_KEY)[128..144], &or[..]);
    // The receives got their messages (and completion data).
    for (ctx, len, hd) in [(1000, 8, None), (1001, 900, Some(0xD00D)), (1002, 64, None), (1003, 3000, None)] {
        let r = sim.ends.completion(1, ctx).expect("received");
        assert_eq!((r.status, &r.data, r.header_data), (Status::Ok, &pattern(ctx - 1000, len), hd), "{ctx}");
    }
}

#[test]
fn each_operation_goes_in_its_form_and_the_peer_executes_it_and_answers_in_kind() {
    let mut sim = sim(HeaderForms::Compact);
    let mut done = Vec::new();
    for (i, case) in cases().iter().enumerate() {
        let context = i as u64;
        (case.post)(&mut sim, context);
        let c = run(&mut sim, context);
        assert_eq!(c.status, Status::Ok, "{}", case.name);
        let [sent, answers] = forms_sent(&mut sim);
        assert!(!sent.is_empty() && sent.iter().all(|&f| f == case.request), "{}: {sent:?}", case.name);
        assert!(
            !answers.is_empty() && answers.iter().all(|&f| f == case.response),
            "{}: {answers:?}",
            case.name
        );
        done.push(c);
    }
    check_results(&sim, &done);
}

#[test]
fn the_standard_configuration_sends_only_standard_headers() {
    let mut sim = sim(HeaderForms::Standard);
    let mut done = Vec::new();
    for (i, case) in cases().iter().enumerate() {
        (case.post)(&mut sim, i as u64);
        done.push(run(&mut sim, i as u64));
    }
    let [sent, answers] = forms_sent(&mut sim);
    assert!(sent.len() >= cases().len() && sent.iter().all(|&f| f == NextHeader::ReqStd), "{sent:?}");
    let standard = [NextHeader::Rsp, NextHeader::RspData];
    assert!(answers.iter().all(|f| standard.contains(f)), "{answers:?}");
    check_results(&sim, &done);
}
