//! A libfabric domain's traffic class (`tclass`, engine::provider::tclass) in the DSCP of every
//! UET packet its endpoints send, read back from the simulated fabric's frames (issue 58,
//! acceptance 3).

use std::time::Duration;

use engine::provider::tclass::{FI_TC_DSCP, FI_TC_LOW_LATENCY, to_dscp};
use engine::provider::{ControlPlane, EpAttr, Fabric, Hints, ProviderConfig, bind, getinfo};
use nicsim::LinkConfig;
use wire::{FrameRepr, IpRepr};

/// The DSCPs of the frames a send and its answer put on a fabric whose domains have `tclass`.
fn dscps_of_a_send(tclass: u32, config: &ProviderConfig) -> Vec<u8> {
    let hints =
        Hints { profile: Some(ses::Profile::Hpc), ep_type: Some(ses::EpType::Rdm), ..Hints::default() };
    let mut info = getinfo(&hints, config).unwrap().remove(0);
    info.tclass = to_dscp(tclass, config.def_data_tc).unwrap();
    let mut cp = ControlPlane::new();
    cp.assign_job(1, 10).unwrap();
    cp.assign_job(2, 10).unwrap();
    let fabric = Fabric::open_sim(1, LinkConfig::default(), cp);
    let (da, db) = (fabric.domain(&info, 1), fabric.domain(&info, 2));
    let a = da.endpoint(EpAttr { rank: Some(0), ..EpAttr::default() }).unwrap();
    let b = db.endpoint(EpAttr { rank: Some(1), ..EpAttr::default() }).unwrap();
    let (cq_a, cq_b) = (da.cq_open(), db.cq_open());
    a.bind_cq(&cq_a, bind::TRANSMIT | bind::RECV);
    b.bind_cq(&cq_b, bind::TRANSMIT | bind::RECV);
    let av = da.av_open();
    a.bind_av(&av);
    let to_b = av.insert(&[b.getname()])[0];
    fabric.enable_tap();
    b.recv(10_000, u64::MAX, 1).unwrap();
    a.send(&[5; 9000], to_b, 2).unwrap();
    assert!(cq_b.sread(Duration::from_secs(2)).unwrap().is_ok());
    assert!(cq_a.sread(Duration::from_secs(2)).unwrap().is_ok());
    let tap = fabric.take_tap();
    assert!(tap.len() >= 4, "requests, the response and ACKs: {} frames", tap.len());
    tap.iter()
        .map(|t| match FrameRepr::parse(&t.bytes).unwrap().ip {
            IpRepr::V4(ip) => ip.dscp_ecn >> 2,
            IpRepr::V6(_) => panic!("IPv4 frames"),
        })
        .collect()
}

#[test]
fn a_domains_tclass_is_the_dscp_of_its_packets() {
    let all = |tc, config: &ProviderConfig, dscp| {
        let got = dscps_of_a_send(tc, config);
        assert!(got.iter().all(|&d| d == dscp), "tclass {tc:#x}: DSCPs {got:?}");
    };
    let config = ProviderConfig::default();
    all(FI_TC_LOW_LATENCY, &config, 18);
    all(FI_TC_DSCP | 40, &config, 40);
    // FI_TC_UNSPEC: UET_PROVIDER_DEF_DATA_TC.
    all(0, &config, 0);
    all(0, &ProviderConfig { def_data_tc: 12, ..ProviderConfig::default() }, 12);
}
