//! The provider in the AI Base profile: two processes on the simulated fabric, JobIDs from the
//! control plane (indirect method), untagged send/recv with completion data, RMA write and read,
//! a batched atomic and a fetching one, completion counters. Tagged messages are not part of AI
//! Base: `tsend` is refused.
//!
//! `cargo run --example uet_ai_base` (reads the `UET_PROVIDER_*` variables).

use std::time::Duration;

use engine::provider::{
    ControlPlane, EpAttr, Fabric, FiErrno, Hints, MrAccess, MrAuth, ProviderConfig, bind, cq_flags, getinfo,
};
use nicsim::LinkConfig;
use ses::{EpType, Profile};
use wire::uet::ses::{AmoDatatype, AmoOpcode};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = ProviderConfig::from_env()?;
    let hints = Hints { profile: Some(Profile::AiBase), ep_type: Some(EpType::Rdm), ..Hints::default() };
    let info = getinfo(&hints, &config)?.remove(0);
    println!("profile {:?}, caps {:#x}, limits {:?}", info.profile, info.caps, info.limits);

    // The privileged side: both processes belong to job 1234.
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 1234)?;
    cp.assign_job(2, 1234)?;
    let fabric = Fabric::open_sim(7, LinkConfig { loss: 0.01, ..LinkConfig::default() }, cp);
    let (d1, d2) = (fabric.domain(&info, 1), fabric.domain(&info, 2));
    let (a, b) =
        (d1.endpoint(EpAttr::default())?, d2.endpoint(EpAttr { rank: Some(1), ..EpAttr::default() })?);
    let (cq_a, cq_b) = (d1.cq_open(), d2.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let sent = d1.cntr_open();
    a.bind_cntr(&sent, cq_flags::SEND | cq_flags::WRITE);
    let (av_a, av_b) = (d1.av_open(), d2.av_open());
    a.bind_av(&av_a);
    b.bind_av(&av_b);
    let peer = av_a.insert(&[b.getname()])[0];
    av_b.insert(&[a.getname()]);
    let wait = Duration::from_secs(1);

    b.recv(4096, u64::MAX, 10)?;
    a.senddata(b"hello from AI Base", 42, peer, 1)?;
    let r = cq_b.sread(wait)?.map_err(|e| format!("receive failed: {e:?}"))?;
    println!(
        "B received {:?} with data {:?} from AV index {}",
        String::from_utf8_lossy(&r.buf),
        r.data,
        r.src
    );

    let mr = d2.mr_reg(&b, vec![0; 64], MrAccess::ALL, 0x100, 0, MrAuth::Endpoint)?;
    a.write(b"written by A", peer, mr.key(), 0, 2)?;
    let counters: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
    a.atomic(&counters, peer, mr.key(), 32, AmoDatatype::Uint32, AmoOpcode::Sum, 3)?;
    a.fetch_atomic(&10u32.to_le_bytes(), peer, mr.key(), 32, AmoDatatype::Uint32, AmoOpcode::Sum, 4)?;
    a.read(12, peer, mr.key(), 0, 5)?;
    for _ in 0..5 {
        let c = cq_a.sread(wait)?.map_err(|e| format!("operation failed: {e:?}"))?;
        if c.op_context == 4 {
            println!("fetch-add saw {}", u32::from_le_bytes(c.buf[..4].try_into()?));
        }
        if c.op_context == 5 {
            assert_eq!(c.buf, b"written by A");
        }
    }
    let data = mr.data();
    let sums: Vec<u32> =
        data[32..48].chunks(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect();
    assert_eq!(sums, [11, 2, 3, 4]);
    println!(
        "region after the atomics: {sums:?}; counter: {} completions, {} bytes",
        sent.read(),
        sent.read_bytes()
    );
    match a.tsend(b"tagged", peer, 7, 6) {
        Err(e) if e.errno == FiErrno::EOPNOTSUPP => println!("tsend refused as expected: {e}"),
        other => return Err(format!("AI Base must refuse tagged sends, got {other:?}").into()),
    }
    Ok(())
}
