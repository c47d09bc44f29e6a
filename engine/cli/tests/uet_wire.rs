//! What `softrdma perf --transport rud|rod` puts on the wire, read back from its `--pcap` with the
//! wire crate: the DSCP of each kind of packet (`--tclass`, `--ack-tclass`; issue 58, acceptance
//! 3).

mod common;

use common::{scratch_dir, softrdma};
use wire::uet::pds::CtlType;
use wire::uet::{PdsRepr, UetRepr};
use wire::{FrameRepr, IpRepr};

/// The UET packets of a capture: (the TOS byte of its IP header, its clear UET packet).
fn uet_frames(bytes: &[u8], mut each: impl FnMut(u8, &UetRepr<'_>)) -> usize {
    let mut r = pcap_file::pcap::PcapReader::new(bytes).unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let f = FrameRepr::parse(&p.data).unwrap();
        let IpRepr::V4(ip) = f.ip else { panic!("IPv4 frames") };
        each(ip.dscp_ecn, f.uet().expect("UET frames"));
        n += 1;
    }
    n
}

/// Runs `perf` with `args` and `--pcap`; the capture's bytes.
fn perf_capture(tag: &str, args: &[&str]) -> Vec<u8> {
    let dir = scratch_dir(tag);
    let cap = dir.join("run.pcap");
    let mut all = vec!["perf"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--pcap", cap.to_str().unwrap()]);
    let out = softrdma(&all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let b = std::fs::read(&cap).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    b
}

#[test]
fn tclass_and_ack_tclass_show_in_the_dscp_of_data_and_control_packets() {
    for transport in ["rud", "rod"] {
        let b = perf_capture(
            "uet-dscp",
            &["write", "--transport", transport, "--size", "9000", "--iters", "30", "--tclass", "26"],
        );
        let (mut data, mut acks) = (0, 0);
        uet_frames(&b, |tos, u| {
            let UetRepr::Clear { pds, .. } = u else { panic!("clear frames") };
            // ACKs follow their data's class unless --ack-tclass splits them.
            assert_eq!(tos >> 2, 26, "{pds:?}");
            match pds {
                PdsRepr::Request(_) => data += 1,
                _ => acks += 1,
            }
        });
        assert!(data >= 90 && acks > 0, "{transport}: {data} requests, {acks} others");
        let b = perf_capture(
            "uet-dscp-ack",
            &["send", "--transport", transport, "--size", "100", "--iters", "20", "--tclass", "10"]
                .into_iter()
                .chain(["--ack-tclass", "46"])
                .collect::<Vec<_>>(),
        );
        let mut seen = [0; 2];
        uet_frames(&b, |tos, u| {
            let UetRepr::Clear { pds, .. } = u else { panic!("clear frames") };
            // CLOSE_CMD is sequenced as the requests are, and goes with them.
            let control = match pds {
                PdsRepr::Ack(_) | PdsRepr::Nack(_) => true,
                PdsRepr::Cp(c) => c.ctl_type != CtlType::CloseCmd,
                _ => false,
            };
            assert_eq!(tos >> 2, if control { 46 } else { 10 }, "{pds:?}");
            seen[usize::from(control)] += 1;
        });
        assert!(seen[0] >= 40 && seen[1] > 0, "{transport}: {seen:?}");
    }
    // Without the options: DSCP 0, as before.
    let b = perf_capture("uet-dscp-0", &["send", "--transport", "rud", "--size", "8", "--iters", "5"]);
    uet_frames(&b, |tos, _| assert_eq!(tos >> 2, 0));
    let refused = softrdma(&["perf", "send", "--transport", "rud", "--tclass", "33"]);
    assert_eq!(refused.status.code(), Some(2), "DSCP 0x21 marks trimmed frames");
}
