//! The provider in the HPC profile: wildcard tagged receives, a large tagged send by rendezvous
//! (eager part, then the target reads the rest), idempotent RMA over RUDI to an IDEMPOTENT_SAFE
//! region (a counter cannot be bound to it), and the AV JobID method: the sender reaches a peer of
//! another job through an auth key.
//!
//! `cargo run --example uet_hpc` (`UET_PROVIDER_MAX_EAGER_SIZE`, `UET_PROVIDER_TAG_RENDEZVOUS_SIZE`).

use std::time::Duration;

use engine::provider::{
    ControlPlane, EpAttr, Fabric, FiErrno, Hints, JobIdMethod, MrAccess, MrAuth, ProviderConfig, bind,
    getinfo,
};
use nicsim::LinkConfig;
use ses::key::IDEMPOTENT_SAFE;
use ses::{EpType, Profile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ProviderConfig::from_env()?;
    let hints = Hints { profile: Some(Profile::Hpc), ep_type: Some(EpType::Rdm), ..Hints::default() };
    let info = getinfo(&hints, &config)?.remove(0);
    // Process 1 runs job 100 and may also talk as job 200, the job of process 2.
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 100)?;
    cp.assign_job(1, 200)?;
    cp.assign_job(2, 200)?;
    let fabric = Fabric::open_sim(9, LinkConfig { loss: 0.02, ..LinkConfig::default() }, cp);
    let (d1, d2) = (fabric.domain(&info, 1), fabric.domain(&info, 2));
    let a = d1.endpoint(EpAttr { job_id: JobIdMethod::Av, ..EpAttr::default() })?;
    let b = d2.endpoint(EpAttr { rank: Some(1), ..EpAttr::default() })?;
    let (cq_a, cq_b) = (d1.cq_open(), d2.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let (av_a, av_b) = (d1.av_open(), d2.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    let key = av_a.insert_auth_key(200)?;
    let peer = av_a.insert_with_auth_key(&[b.getname()], key)?[0];
    av_b.insert(&[a.getname()]);
    println!("A (job {}) reaches B (job {}) as job {}", a.job_id(), b.job_id(), av_a.lookup_auth_key(peer)?);
    let wait = Duration::from_secs(2);

    let big: Vec<u8> = (0..config.tag_rendezvous_size * 3).map(|i| (i % 253) as u8).collect();
    b.trecv(big.len(), u64::MAX, 0xAB00, 0xFF, 1)?;
    a.tsend(&big, peer, 0xAB42, 2)?;
    let r = cq_b.sread(wait)?.map_err(|e| format!("receive failed: {e:?}"))?;
    assert_eq!(r.buf, big);
    cq_a.sread(wait)?.map_err(|e| format!("send failed: {e:?}"))?;
    println!("wildcard receive got {} bytes (tag {:#x}) by rendezvous", r.len, r.tag.unwrap_or(0));

    let mr = d2.mr_reg(&b, vec![0; 4096], MrAccess::ALL, 0x42, IDEMPOTENT_SAFE, MrAuth::Any)?;
    match mr.bind_cntr(&d2.cntr_open()) {
        Err(e) if e.errno == FiErrno::EINVAL => println!("counter on an IDEMPOTENT_SAFE region refused: {e}"),
        other => return Err(format!("expected a refusal, got {other:?}").into()),
    }
    a.write(&[0x5A; 3000], peer, mr.key(), 100, 3)?;
    cq_a.sread(wait)?.map_err(|e| format!("write failed: {e:?}"))?;
    assert!(mr.data()[100..3100].iter().all(|&x| x == 0x5A));
    println!("idempotent write over RUDI done");
    Ok(())
}
