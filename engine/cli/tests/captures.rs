//! Acceptance: `decode --verify` over every real RoCEv2 capture reports no bad frame.

mod common;

use softrdma::capture;
use softrdma::decode::{self, Options, Verdict};
use wire::uet::UetConfig;

#[test]
fn every_roce_capture_verifies() {
    let files = common::files_with_ext(&common::shared().join("captures/roce"), "pcap");
    assert!(files.len() >= 20, "expected the rxe, Huawei, ConnectX-4 Lx, NCCL and rdma_cm captures");
    let mut total = 0;
    for f in &files {
        let mut out = Vec::new();
        let stats =
            decode::run(std::slice::from_ref(f), &Options { verify: true, ..Options::default() }, &mut out)
                .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            stats.bad(),
            0,
            "{}:\n{}",
            f.display(),
            text.lines().filter(|l| l.contains("BAD")).collect::<Vec<_>>().join("\n")
        );
        assert!(stats.roce.ok > 0, "{} holds no RoCEv2 frame", f.display());
        total += stats.roce.ok;
    }
    assert_eq!(total, 1760, "RoCEv2 frame count over all captures changed");
}

#[test]
fn huawei_ports_69_and_72_are_detected_by_destination_port() {
    let path = common::shared().join("captures/roce/huawei_nic_oferby.pcap");
    let frames = capture::read_file(&path).unwrap();
    let mut ports = std::collections::BTreeSet::new();
    let mut roce = 0;
    for f in &frames {
        if let Verdict::Good(_, r) = decode::examine(f, true, &UetConfig::default()) {
            roce += 1;
            ports.insert(r.udp().unwrap().src_port);
            let p = r.roce().unwrap();
            assert!(p.bth.migreq, "the Huawei NIC sets MigReq");
        }
    }
    assert_eq!(roce, 105);
    assert_eq!(ports.into_iter().collect::<Vec<_>>(), vec![69, 72]);
}

#[test]
fn rdma_cm_mads_on_qp1_decode() {
    let path = common::shared().join("captures/roce/linlinw5/rdma_cm.pcap");
    let mut gsi = 0;
    for f in &capture::read_file(&path).unwrap() {
        if let Verdict::Good(_, r) = decode::examine(f, true, &UetConfig::default()) {
            let p = r.roce().unwrap();
            if p.bth.dest_qp == 1 {
                assert_eq!(p.deth.unwrap().qkey, wire::ib::deth::GSI_QKEY);
                gsi += 1;
            }
        }
    }
    assert!(gsi >= 5, "CM REQ/REP/RTU/DREQ/DREP travel to QP1");
}
