//! The provider in the AI Full profile: exact-match tagged messages (a receive with ignore bits is
//! refused), and a large tagged send that arrives before its receive is posted: the target keeps it
//! on its overflow list, answers "deferred", and asks the sender to restart it (DEFERRABLE_RTR)
//! once the receive is posted. The direct JobID method (`auth_key_size` 3).
//!
//! `cargo run --example uet_ai_full` (`UET_PROVIDER_TAG_RENDEZVOUS_SIZE` sets the size from which
//! tagged sends are deferrable; 64 KiB by default).

use std::time::Duration;

use engine::provider::{
    ControlPlane, EpAttr, Fabric, FiErrno, Hints, JobIdMethod, ProviderConfig, bind, getinfo,
};
use nicsim::LinkConfig;
use ses::{EpType, Profile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ProviderConfig::from_env()?;
    let hints = Hints { profile: Some(Profile::AiFull), ep_type: Some(EpType::Rdm), ..Hints::default() };
    let info = getinfo(&hints, &config)?.remove(0);
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 77)?;
    cp.assign_job(2, 77)?;
    let fabric = Fabric::open_sim(8, LinkConfig::default(), cp);
    let (d1, d2) = (fabric.domain(&info, 1), fabric.domain(&info, 2));
    let direct = EpAttr { job_id: JobIdMethod::Direct(77), ..EpAttr::default() };
    let (a, b) = (d1.endpoint(direct)?, d2.endpoint(EpAttr { rank: Some(1), ..direct })?);
    let (cq_a, cq_b) = (d1.cq_open(), d2.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let (av_a, av_b) = (d1.av_open(), d2.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    let peer = av_a.insert(&[b.getname()])[0];
    av_b.insert(&[a.getname()]);

    match b.trecv(64, u64::MAX, 0x100, 0xFF, 1) {
        Err(e) if e.errno == FiErrno::EINVAL => println!("wildcard receive refused: {e}"),
        other => return Err(format!("AI Full must refuse ignore bits, got {other:?}").into()),
    }
    let big: Vec<u8> = (0..config.tag_rendezvous_size + 1000).map(|i| (i % 251) as u8).collect();
    a.tsend(&big, peer, 0x5150, 2)?;
    // Nothing is posted yet: the send is deferred, not completed.
    for _ in 0..200 {
        fabric.step();
    }
    assert!(cq_a.read()?.is_none(), "a deferred send waits for its receive");
    println!("large tagged send deferred by the target; posting the receive");
    b.trecv(big.len(), u64::MAX, 0x5150, 0, 3)?;
    let r = cq_b.sread(Duration::from_secs(1))?.map_err(|e| format!("receive failed: {e:?}"))?;
    assert_eq!(r.buf, big);
    let s = cq_a.sread(Duration::from_secs(1))?.map_err(|e| format!("send failed: {e:?}"))?;
    println!(
        "received {} bytes with tag {:#x}; send {} completed after the restart",
        r.len,
        r.tag.unwrap_or(0),
        s.op_context
    );
    Ok(())
}
