//! The libfabric-shaped provider over UET on the simulated fabric (issue 9, acceptance 2): every
//! JobID authorization path (wrong JobID, any-JobID buffers, AV auth keys, the fallback JobID with
//! and without `UET_PROVIDER_INITIATOR_ID`), AI Full refusing wildcard tags and HPC matching them,
//! counters refused on IDEMPOTENT_SAFE regions, CQ error entries, counters, event queues, inject.
//! Malformed service files and variables are tested in `provider::config`.

use std::time::Duration;

use engine::provider::{
    ControlPlane, CqEntry, CqErrEntry, EpAttr, EqEvent, FALLBACK_JOB_ID, Fabric, FiErrno, Hints, JobIdMethod,
    MrAccess, MrAuth, ProviderConfig, bind, caps, cq_flags, getinfo,
};
use nicsim::LinkConfig;
use ses::key::IDEMPOTENT_SAFE;
use ses::{Profile, ReturnCode};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

const WAIT: Duration = Duration::from_secs(2);

fn info(profile: Profile, config: &ProviderConfig) -> engine::provider::Info {
    let hints = Hints { profile: Some(profile), ep_type: Some(ses::EpType::Rdm), ..Hints::default() };
    getinfo(&hints, config).unwrap().remove(0)
}

/// Two processes (1 and 2) with JobIDs 10 and 20; process 2 may also use 10.
fn control() -> ControlPlane {
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 10).unwrap();
    cp.assign_job(2, 20).unwrap();
    cp.assign_job(2, 10).unwrap();
    cp
}

struct Pair {
    fabric: Fabric,
    a: engine::provider::Endpoint,
    b: engine::provider::Endpoint,
    cq_a: engine::provider::CompletionQueue,
    cq_b: engine::provider::CompletionQueue,
    av_a: engine::provider::AddressVector,
    av_b: engine::provider::AddressVector,
}

fn pair(profile: Profile, attr_a: EpAttr, attr_b: EpAttr, cp: ControlPlane) -> Pair {
    let config = ProviderConfig::default();
    let i = info(profile, &config);
    let fabric = Fabric::open_sim(1, LinkConfig::default(), cp);
    let (da, db) = (fabric.domain(&i, 1), fabric.domain(&i, 2));
    let a = da.endpoint(EpAttr { rank: Some(0), ..attr_a }).unwrap();
    let b = db.endpoint(EpAttr { rank: Some(1), ..attr_b }).unwrap();
    let (cq_a, cq_b) = (da.cq_open(), db.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let (av_a, av_b) = (da.av_open(), db.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    Pair { fabric, a, b, cq_a, cq_b, av_a, av_b }
}

fn next(cq: &engine::provider::CompletionQueue) -> Result<CqEntry, CqErrEntry> {
    cq.sread(WAIT).expect("a completion")
}

#[test]
fn messages_rma_atomics_and_counters_between_two_processes() {
    let p = pair(Profile::Hpc, EpAttr::default(), EpAttr::default(), control());
    assert_eq!((p.a.job_id(), p.b.job_id()), (10, 20));
    // Table semantics: indices in insertion order.
    let ab = p.av_a.insert(&[p.b.getname()]);
    let ba = p.av_b.insert(&[p.a.getname(), p.b.getname()]);
    assert_eq!((ab.clone(), ba), (vec![0], vec![0, 1]));
    let b = ab[0];
    // B also serves JobID 10 (assigned to process 2) through an auth key.
    let k = p.av_b.insert_auth_key(10).unwrap();
    let b_to_a = p.av_b.insert_with_auth_key(&[p.a.getname()], k).unwrap()[0];
    assert_eq!((b_to_a, p.av_b.lookup_auth_key(b_to_a)), (2, Ok(10)));
    assert_eq!(p.av_b.lookup_auth_key(0).unwrap_err().errno, FiErrno::ENOKEY);
    let (cntr, bytes) =
        (p.fabric.domain(&info(Profile::Hpc, &ProviderConfig::default()), 1).cntr_open(), 5000);
    p.a.bind_cntr(&cntr, cq_flags::SEND);
    p.b.recv(8000, 0, 77).unwrap();
    p.a.senddata(&vec![7; bytes], 0xD0, b, 1).unwrap();
    let got = next(&p.cq_b).unwrap();
    assert_eq!((got.op_context, got.len, got.data, got.src), (77, bytes, Some(0xD0), 0));
    assert_eq!(
        got.flags & (cq_flags::RECV | cq_flags::REMOTE_CQ_DATA),
        cq_flags::RECV | cq_flags::REMOTE_CQ_DATA
    );
    assert_eq!(next(&p.cq_a).unwrap().op_context, 1);
    assert_eq!((cntr.read(), cntr.read_bytes()), (1, bytes as u64));
    // RMA with a counter on the region; atomics; errors carry errno and the SES return code.
    let dom_b = p.fabric.domain(&info(Profile::Hpc, &ProviderConfig::default()), 2);
    let mr = dom_b.mr_reg(&p.b, vec![0; 64], MrAccess::ALL, 0x55, 0, MrAuth::Any).unwrap();
    let mr_cntr = dom_b.cntr_open();
    mr.bind_cntr(&mr_cntr).unwrap();
    p.a.write(&[1, 2, 3, 4], b, mr.key(), 8, 2).unwrap();
    assert_eq!(next(&p.cq_a).unwrap().flags & cq_flags::WRITE, cq_flags::WRITE);
    p.a.fetch_atomic(&5u64.to_le_bytes(), b, mr.key(), 16, AmoDatatype::Uint64, AmoOpcode::Sum, 3).unwrap();
    assert_eq!(next(&p.cq_a).unwrap().buf, 0u64.to_le_bytes());
    p.a.compare_atomic(
        &5u64.to_le_bytes(),
        &9u64.to_le_bytes(),
        b,
        mr.key(),
        16,
        AmoDatatype::Uint64,
        AmoOpcode::Cswap,
        4,
    )
    .unwrap();
    assert_eq!(next(&p.cq_a).unwrap().buf, 5u64.to_le_bytes());
    assert_eq!(&mr.data()[8..12], &[1, 2, 3, 4]);
    assert_eq!(u64::from_le_bytes(mr.data()[16..24].try_into().unwrap()), 9);
    assert_eq!(mr_cntr.read(), 3, "write, fetch-add and compare-swap on the region");
    p.a.read(4, b, 0x999, 0, 5).unwrap();
    let e = next(&p.cq_a).unwrap_err();
    assert_eq!(
        (e.op_context, e.err, e.prov_errno),
        (5, FiErrno::EKEYREJECTED, u8::from(ReturnCode::BadMkey))
    );
    // inject: no completion on success.
    p.b.recv(10, 0, 78).unwrap();
    p.a.inject(b"hello", b).unwrap();
    assert_eq!(next(&p.cq_b).unwrap().buf, b"hello");
    p.fabric.step();
    assert!(matches!(p.cq_a.read(), Ok(None)), "inject completes silently");
}

#[test]
fn a_wrong_jobid_is_refused_and_touches_nothing() {
    let mut cp = control();
    cp.assign_job(3, 30).unwrap();
    let p = pair(Profile::Hpc, EpAttr::default(), EpAttr::default(), cp);
    let b = p.av_a.insert(&[p.b.getname()])[0];
    // A (JobID 10) -> B (JobID 20, no auth key for 10 yet): BAD_JOB_ID, B's buffer untouched.
    p.b.recv(100, u64::MAX, 1).unwrap();
    p.a.send(b"x", b, 9).unwrap();
    let e = next(&p.cq_a).unwrap_err();
    assert_eq!((e.op_context, e.err, e.prov_errno), (9, FiErrno::EACCES, u8::from(ReturnCode::BadJobId)));
    assert!(matches!(p.cq_b.read(), Ok(None)));
    // An auth key of a JobID the process was not assigned is rejected.
    assert_eq!(p.av_b.insert_auth_key(30).unwrap_err().errno, FiErrno::EKEYREJECTED);
    // With JobID 10 authorized at B, the same send lands in the any-JobID buffer.
    p.av_b.insert_auth_key(10).unwrap();
    p.a.send(b"y", b, 10).unwrap();
    assert_eq!(next(&p.cq_b).unwrap().buf, b"y");
    assert_eq!(next(&p.cq_a).unwrap().op_context, 10);
    // A region bound to B's own JobID refuses A's JobID.
    let dom_b = p.fabric.domain(&info(Profile::Hpc, &ProviderConfig::default()), 2);
    let mr = dom_b.mr_reg(&p.b, vec![0; 8], MrAccess::ALL, 0x77, 0, MrAuth::Endpoint).unwrap();
    p.a.write(b"zz", b, mr.key(), 0, 11).unwrap();
    assert_eq!(next(&p.cq_a).unwrap_err().prov_errno, u8::from(ReturnCode::BadJobId));
    assert_eq!(mr.data(), vec![0; 8]);
}

#[test]
fn av_auth_keys_select_the_jobid_per_destination() {
    let av_attr = EpAttr { job_id: JobIdMethod::Av, ..EpAttr::default() };
    let mut cp = control();
    cp.assign_job(1, 20).unwrap();
    let p = pair(Profile::Hpc, av_attr, EpAttr::default(), cp);
    // Without an auth key the AV method has no JobID for the destination.
    let plain = p.av_a.insert(&[p.b.getname()])[0];
    assert_eq!(p.a.send(b"-", plain, 1).unwrap_err().errno, FiErrno::ENOKEY);
    let k20 = p.av_a.insert_auth_key(20).unwrap();
    let b20 = p.av_a.insert_with_auth_key(&[p.b.getname()], k20).unwrap()[0];
    let a_at_b = p.av_b.insert(&[p.a.getname()])[0];
    let k10 = p.av_b.insert_auth_key(10).unwrap();
    let a10_at_b = p.av_b.insert_with_auth_key(&[p.a.getname()], k10).unwrap()[0];
    // A buffer bound to JobID 10 (fi_recvmsg with FI_AV_AUTH_KEY) does not take a JobID-20 message.
    p.b.recvmsg_auth_key(100, a10_at_b, 50).unwrap();
    p.b.recv(100, a_at_b, 51).unwrap();
    p.a.send(b"job 20", b20, 2).unwrap();
    let got = next(&p.cq_b).unwrap();
    assert_eq!((got.op_context, got.buf.as_slice()), (51, &b"job 20"[..]));
    assert_eq!(next(&p.cq_a).unwrap().op_context, 2);
    // A's JobID 10 (its indirect JobID is also 10, assigned first): via an auth key of 10.
    let k10a = p.av_a.insert_auth_key(10).unwrap();
    let b10 = p.av_a.insert_with_auth_key(&[p.b.getname()], k10a).unwrap()[0];
    p.a.send(b"job 10", b10, 3).unwrap();
    let got = next(&p.cq_b).unwrap();
    assert_eq!((got.op_context, got.buf.as_slice()), (50, &b"job 10"[..]));
}

#[test]
fn the_fallback_jobid_needs_the_initiator_id_variable() {
    let without = ProviderConfig::default();
    let with =
        ProviderConfig::from_vars(|k| (k == "UET_PROVIDER_INITIATOR_ID").then(|| "7".to_string())).unwrap();
    let mut cp = ControlPlane::new();
    let fabric = Fabric::open_sim(2, LinkConfig::default(), cp.clone());
    let d = fabric.domain(&info(Profile::AiBase, &with), 5);
    assert_eq!(d.endpoint(EpAttr::default()).unwrap_err().errno, FiErrno::EACCES, "no JobID, no fallback");
    cp.enable_fallback(true);
    let fabric = Fabric::open_sim(2, LinkConfig::default(), cp);
    let d = fabric.domain(&info(Profile::AiBase, &without), 5);
    let e = d.endpoint(EpAttr::default()).unwrap_err();
    assert_eq!(e.errno, FiErrno::EINVAL);
    assert!(e.what.contains("UET_PROVIDER_INITIATOR_ID"), "{e}");
    let d = fabric.domain(&info(Profile::AiBase, &with), 5);
    let ep = d.endpoint(EpAttr::default()).unwrap();
    assert_eq!((ep.job_id(), ep.getname().initiator), (FALLBACK_JOB_ID, 7));
    // Direct method: only an assigned JobID.
    assert_eq!(
        d.endpoint(EpAttr { job_id: JobIdMethod::Direct(44), ..EpAttr::default() }).unwrap_err().errno,
        FiErrno::EACCES
    );
    fabric.control().assign_job(5, 44).unwrap();
    assert_eq!(
        d.endpoint(EpAttr { job_id: JobIdMethod::Direct(44), ..EpAttr::default() }).unwrap().job_id(),
        44
    );
}

#[test]
fn ai_full_refuses_wildcard_tags_and_hpc_matches_them() {
    let p = pair(Profile::AiFull, EpAttr::default(), EpAttr::default(), control());
    p.av_b.insert_auth_key(10).unwrap();
    let b = p.av_a.insert(&[p.b.getname()])[0];
    assert_eq!(p.b.trecv(64, u64::MAX, 0x1200, 0xFF, 1).unwrap_err().errno, FiErrno::EINVAL);
    p.b.trecv(64, u64::MAX, 0x1234, 0, 2).unwrap();
    p.a.tsend(b"exact", b, 0x1234, 3).unwrap();
    assert_eq!(next(&p.cq_b).unwrap().tag, Some(0x1234));

    let p = pair(Profile::Hpc, EpAttr::default(), EpAttr::default(), control());
    p.av_b.insert_auth_key(10).unwrap();
    let b = p.av_a.insert(&[p.b.getname()])[0];
    p.b.trecv(64, u64::MAX, 0x1200, 0xFF, 1).unwrap();
    p.a.tsend(b"wild", b, 0x1234, 3).unwrap();
    let got = next(&p.cq_b).unwrap();
    assert_eq!((got.op_context, got.tag, got.flags & cq_flags::TAGGED), (1, Some(0x1234), cq_flags::TAGGED));

    // AI Base has no tagged messages at all.
    let p = pair(Profile::AiBase, EpAttr::default(), EpAttr::default(), control());
    let b = p.av_a.insert(&[p.b.getname()])[0];
    assert_eq!(p.a.tsend(b"t", b, 1, 1).unwrap_err().errno, FiErrno::EOPNOTSUPP);
    let hints = Hints { profile: Some(Profile::AiBase), caps: caps::TAGGED, ..Hints::default() };
    assert_eq!(getinfo(&hints, &ProviderConfig::default()).unwrap_err().errno, FiErrno::ENODATA);
}

#[test]
fn counters_cannot_be_bound_to_idempotent_safe_regions() {
    let p = pair(Profile::Hpc, EpAttr::default(), EpAttr::default(), control());
    let i = info(Profile::Hpc, &ProviderConfig::default());
    let dom = p.fabric.domain(&i, 2);
    let eq = dom.eq_open();
    p.b.bind_eq(&eq);
    let safe = dom.mr_reg(&p.b, vec![0; 16], MrAccess::ALL, 0x10, IDEMPOTENT_SAFE, MrAuth::Any).unwrap();
    let cntr = dom.cntr_open();
    assert_eq!(safe.bind_cntr(&cntr).unwrap_err().errno, FiErrno::EINVAL);
    assert_eq!(eq.read(), Some(EqEvent::MrComplete { key: 0x10 | IDEMPOTENT_SAFE }));
    // Keys outside the RKEY bits, reused keys and set_max_rma_size out of range are refused.
    assert_eq!(
        dom.mr_reg(&p.b, vec![], MrAccess::ALL, 1 << 50, 0, MrAuth::Any).unwrap_err().errno,
        FiErrno::EINVAL
    );
    assert_eq!(
        dom.mr_reg(&p.b, vec![], MrAccess::ALL, 0x10, 0, MrAuth::Any).unwrap_err().errno,
        FiErrno::EBUSY
    );
    assert_eq!(p.a.set_max_rma_size(1 << 20).unwrap_err().errno, FiErrno::EINVAL);
    assert!(p.a.set_max_rma_size((1 << 32) - 1).is_ok());
    // Idempotent RMA (RUDI in HPC) still works on the region.
    p.av_b.insert_auth_key(10).unwrap();
    let b = p.av_a.insert(&[p.b.getname()])[0];
    p.a.write(b"idem", b, safe.key(), 0, 1).unwrap();
    next(&p.cq_a).unwrap();
    assert_eq!(&safe.data()[..4], b"idem");
}

#[test]
fn dgram_endpoints_carry_datagrams_only() {
    let config = ProviderConfig::default();
    let hints = Hints { ep_type: Some(ses::EpType::Dgram), ..Hints::default() };
    let i = getinfo(&hints, &config).unwrap().remove(0);
    assert_eq!(i.caps, caps::MSG);
    let fabric = Fabric::open_sim(3, LinkConfig::default(), control());
    let (da, db) = (fabric.domain(&i, 1), fabric.domain(&i, 2));
    let (a, b) = (da.endpoint(EpAttr::default()).unwrap(), db.endpoint(EpAttr::default()).unwrap());
    assert_eq!(a.ep_type(), ses::EpType::Dgram);
    let (cq_a, cq_b) = (da.cq_open(), db.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT);
    b.bind_cq(&cq_b, bind::RECV);
    let (av_a, av_b) = (da.av_open(), db.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    av_b.insert_auth_key(10).unwrap();
    let peer = av_a.insert(&[b.getname()])[0];
    b.recv(2000, u64::MAX, 1).unwrap();
    a.send(&[9; 1500], peer, 2).unwrap();
    assert_eq!(next(&cq_b).unwrap().len, 1500);
    assert_eq!(next(&cq_a).unwrap().op_context, 2);
    assert_eq!(a.write(b"x", peer, 1, 0, 3).unwrap_err().errno, FiErrno::EOPNOTSUPP);
    assert_eq!(a.send(&[0; 5000], peer, 4).unwrap_err().errno, FiErrno::EMSGSIZE, "a datagram is one packet");
}
