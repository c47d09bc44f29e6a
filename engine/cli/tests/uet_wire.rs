//! What `softrdma perf --transport rud|rod` puts on the wire, read back from its `--pcap` with the
//! wire crate: the SES header forms of each operation and size (the table in ses/README.md; issue
//! 58, acceptance 1) and the DSCP of each kind of packet (`--tclass`, `--ack-tclass`; acceptance
//! 3).

mod common;

use common::{scratch_dir, softrdma};
use std::collections::HashSet;

use wire::uet::pds::{CtlType, NextHeader};
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

/// The SES forms (next_hdr) of the requests in a capture of `perf OP --transport T --size N`.
fn forms_of(transport: &str, op: &[&str], size: &str, extra: &[&str]) -> HashSet<NextHeader> {
    let iters = if size == "8" { "20" } else { "3" };
    let mut args = op.to_vec();
    args.extend_from_slice(&["--transport", transport, "--size", size, "--iters", iters]);
    args.extend_from_slice(extra);
    let b = perf_capture("uet-forms", &args);
    let mut forms = HashSet::new();
    uet_frames(&b, |_, u| {
        if let UetRepr::Clear { pds: PdsRepr::Request(r), .. } = u {
            if r.next_hdr != NextHeader::None {
                forms.insert(r.next_hdr);
            }
        }
    });
    forms
}

#[test]
fn perf_runs_send_every_ses_form_the_table_says() {
    use NextHeader::{ReqMedium, ReqSmall, ReqStd, Rsp, RspData, RspDataSmall};
    let set = |f: &[NextHeader]| f.iter().copied().collect::<HashSet<_>>();
    let mut all = HashSet::new();
    for t in ["rud", "rod"] {
        let runs: [(&[&str], &str, &[NextHeader]); 8] = [
            (&["send"], "8", &[ReqMedium, Rsp]),
            (&["tsend"], "8", &[ReqMedium, Rsp]),
            // Rendezvous: the target READs the rest of the message, answered RSP_DATA.
            (&["send"], "1048576", &[ReqStd, Rsp, RspData]),
            (&["tsend"], "1048576", &[ReqStd, Rsp, RspData]),
            (&["write"], "8", &[ReqSmall, Rsp]),
            (&["write"], "1048576", &[ReqStd, Rsp]),
            (&["read"], "8", &[ReqSmall, RspDataSmall]),
            (&["read"], "1048576", &[ReqStd, RspData]),
        ];
        for (op, size, want) in runs {
            let got = forms_of(t, op, size, &[]);
            assert_eq!(got, set(want), "{t} {op:?} {size}");
            all.extend(got);
        }
        for atomic in ["fetch-add", "cmp-swap"] {
            let got = forms_of(t, &["atomic", "--atomic", atomic], "8", &[]);
            assert_eq!(got, set(&[ReqSmall, RspDataSmall]), "{t} {atomic}");
        }
        // --ses-headers standard: the 44-byte header only, as before the compact forms.
        for op in ["send", "write", "read"] {
            let got = forms_of(t, &[op], "8", &["--ses-headers", "standard"]);
            assert!(got.is_subset(&set(&[ReqStd, Rsp, RspData])), "{t} {op}: {got:?}");
        }
    }
    assert_eq!(all, set(&[ReqSmall, ReqMedium, ReqStd, Rsp, RspData, RspDataSmall]));
}
