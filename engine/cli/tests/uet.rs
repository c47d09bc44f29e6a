//! UET through `softrdma`: the xdp2 sample captures and the `gen uet` corpus.

mod common;

use common::softrdma;
use softrdma::capture;
use softrdma::decode::{self, Fault, Verdict};
use wire::uet::UetConfig;

/// xdp2's samples follow its reading of the spec. Where that differs from the Decisions table, a frame
/// must be decoded with the chosen layout or rejected with a named reason. These are the rejected
/// ones: (file, frame number, reason). Every other frame must verify and re-emit byte for byte.
const REJECTED: &[(&str, usize, &str)] = &[
    // ACK_CCX and NACK_CCX with 8-byte CC state (the chosen layout has 16), so the response after them is cut.
    ("xdp2_uet_pds.pcap", 12, "truncated SES response"),
    ("xdp2_uet_pds.pcap", 14, "truncated SES response"),
    // A rendezvous send without its 24-byte extension header.
    ("xdp2_uet_ses.pcap", 16, "truncated SES rendezvous extension"),
];

#[test]
fn xdp2_samples_decode_or_are_rejected_with_a_reason() {
    for file in ["xdp2_uet_pds.pcap", "xdp2_uet_ses.pcap"] {
        let frames = capture::read_file(&common::shared().join("captures/uet").join(file)).unwrap();
        assert!(!frames.is_empty());
        for (i, f) in frames.iter().enumerate() {
            let number = i + 1;
            let expected = REJECTED.iter().find(|(n, k, _)| *n == file && *k == number).map(|r| r.2);
            match (decode::examine(f, true, &UetConfig::default()), expected) {
                (Verdict::Good(_, r), None) => assert!(r.uet().is_some(), "{file} #{number}"),
                (Verdict::Bad(_, _, Fault::Wire(e)), Some(reason)) => {
                    assert_eq!(e.to_string(), reason, "{file} #{number}")
                }
                (v, want) => panic!("{file} #{number}: {v:?}, expected {want:?}"),
            }
        }
    }
}

#[test]
fn xdp2_cp_frames_decode_with_the_16_byte_layout() {
    let frames = capture::read_file(&common::shared().join("captures/uet/xdp2_uet_pds.pcap")).unwrap();
    for f in &frames[14..16] {
        let Verdict::Good(_, r) = decode::examine(f, true, &UetConfig::default()) else {
            panic!("CP frame rejected")
        };
        let wire::uet::UetRepr::Clear { pds: wire::uet::PdsRepr::Cp(cp), payload, .. } = r.uet().unwrap()
        else {
            panic!("CP expected")
        };
        assert_eq!((cp.payload, payload.len()), (0xc109_1234, 8));
    }
}

#[test]
fn gen_uet_verifies_over_udp_and_native_ip() {
    let dir = common::scratch_dir("gen-uet");
    let out = dir.join("uet.pcap");
    let o = softrdma(&["gen", "uet", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = softrdma(&["decode", "--verify", "--uet-ip-proto", "253", out.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.trim_end()
            .ends_with("roce frames: 0 ok, 0 bad; uet frames: 81 ok, 0 bad (0 other frames skipped)"),
        "{text}"
    );
    assert!(text.contains("UET/IP entropy=") && text.contains("TSS SDI="), "{text}");
    // Without the protocol number, native-IP frames are not UET: they are skipped, not bad.
    let o = softrdma(&["decode", "--verify", out.to_str().unwrap()]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.trim_end().ends_with("uet frames: 40 ok, 0 bad (41 other frames skipped)"), "{text}");
    // A bad protocol number is a clear CLI error.
    let o = softrdma(&["decode", "--uet-ip-proto", "300", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(dir).unwrap();
}
