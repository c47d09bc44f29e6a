//! `softrdma gen roce` output: verified by our decoder, and read by Debian's tshark InfiniBand
//! dissector with no malformed-packet or expert error and the same opcode, dest QP and PSN.

mod common;

use std::process::Command;

use common::softrdma;
use softrdma::corpus;

#[test]
fn gen_roce_decodes_and_verifies() {
    let dir = common::scratch_dir("gen-roce");
    let out = dir.join("roce.pcap");
    let o = softrdma(&["gen", "roce", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = softrdma(&["decode", "--verify", out.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.trim_end()
            .ends_with("roce frames: 86 ok, 0 bad; uet frames: 0 ok, 0 bad (0 other frames skipped)"),
        "{text}"
    );

    let tshark_found = Command::new("tshark").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tshark_found {
        assert!(std::env::var_os("CI").is_none(), "CI must have tshark (scripts/setup.sh installs it)");
        eprintln!("SKIP tshark cross-check: tshark is not installed (apt-get install tshark)");
        return;
    }
    let o = Command::new("tshark")
        .args([
            "-r",
            out.to_str().unwrap(),
            "--disable-protocol",
            "rpcordma",
            "-T",
            "fields",
            "-E",
            "occurrence=f",
        ])
        .args(["-e", "frame.number", "-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn", "-e", "_ws.malformed"])
        .args(["-e", "_ws.expert.message"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = String::from_utf8(o.stdout).unwrap();
    let expected = corpus::roce_corpus();
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), expected.len());
    for (line, g) in lines.iter().zip(&expected) {
        let f: Vec<&str> = line.split('\t').collect();
        assert!(f[1].ends_with(":udp:infiniband") || f[1].contains(":infiniband"), "{line}");
        assert_eq!(f[2].parse::<u32>().unwrap(), u32::from(g.opcode), "{line}");
        assert_eq!(u32::from_str_radix(f[3].trim_start_matches("0x"), 16).unwrap(), g.dest_qp, "{line}");
        assert_eq!(f[4].parse::<u32>().unwrap(), g.psn, "{line}");
        assert_eq!(f[5], "", "malformed: {line}");
        assert_eq!(f.get(6).copied().unwrap_or(""), "", "expert info: {line}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
