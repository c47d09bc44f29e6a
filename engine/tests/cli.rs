//! The `softrdma` binary as a user runs it.

mod common;

use common::softrdma;

#[test]
fn decode_verify_good_capture() {
    let f = common::shared().join("captures/roce/linlinw5/rdma_write_bw.pcap");
    let o = softrdma(&["decode", "--verify", f.to_str().unwrap()]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("RC_WRITE_FIRST"), "{out}");
    assert!(out.contains("RETH(va="), "{out}");
    assert!(
        out.trim_end()
            .ends_with("roce frames: 20 ok, 0 bad; uet frames: 0 ok, 0 bad (40 other frames skipped)"),
        "{out}"
    );
}

#[test]
fn decode_verify_flags_a_corrupted_frame_and_fails() {
    let src = common::shared().join("captures/roce/cx4lx_cnp_scapy.pcap");
    let mut bytes = std::fs::read(src).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0x04; // a reserved byte of the CNP body
    let dir = common::scratch_dir("cli");
    let bad = dir.join("bad.pcap");
    std::fs::write(&bad, &bytes).unwrap();

    let o = softrdma(&["decode", "--verify", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("BAD: bad ICRC"), "{out}");
    assert!(out.contains("roce frames: 0 ok, 1 bad"), "{out}");

    // Without --verify the frame still decodes, and the exit status is 0.
    let o = softrdma(&["decode", bad.to_str().unwrap()]);
    assert!(o.status.success());

    let o = softrdma(&["decode", "--verify", "--json", bad.to_str().unwrap()]);
    let line = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["status"], "bad");
    assert_eq!(v["bth"]["opcode"], 0x81);
    assert!(String::from_utf8(o.stderr).unwrap().contains("roce frames: 0 ok, 1 bad"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_arguments_give_clear_errors() {
    let o = softrdma(&["decode"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr).unwrap().contains("FILES"));

    let o = softrdma(&["decode", "/nonexistent/x.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr).unwrap().contains("cannot read /nonexistent/x.pcap"));

    let o = softrdma(&["decode", env!("CARGO_MANIFEST_DIR")]);
    assert_eq!(o.status.code(), Some(2));

    let o = softrdma(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}
