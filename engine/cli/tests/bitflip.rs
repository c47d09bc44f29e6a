//! Acceptance: a flipped bit anywhere in the ICRC-covered part of a real frame is caught by
//! `--verify`, except in the fields that identify the frame as RoCEv2 (EtherType, IP version and
//! protocol, UDP destination port) and BTH byte 4 (FECN, BECN, resv6), which the ICRC masks and
//! nothing else protects. The other masked fields are still caught: the IPv4 TOS, TTL and header
//! checksum by the IPv4 header checksum, the UDP checksum by the UDP checksum check.

mod common;

use softrdma::capture;
use softrdma::decode::{self, Verdict};
use wire::uet::UetConfig;

/// Byte offsets (from the start of the IP header) that identify an IPv4 RoCEv2 frame or that no
/// check can cover. (The version nibble of byte 0 is handled by the caller.)
fn exempt(ip_off: usize, ihl: usize) -> bool {
    ip_off == 9 // IPv4 protocol
        || ip_off == ihl + 2 // UDP destination port
        || ip_off == ihl + 3
        || ip_off == ihl + 8 + 4 // BTH byte 4
}

#[test]
fn every_bit_of_real_frames() {
    let shared = common::shared();
    let picks: &[(&str, usize)] = &[
        ("captures/roce/linlinw5/rdma_write_bw.pcap", 3),
        ("captures/roce/linlinw5/rdma_read_bw.pcap", 4),
        ("captures/roce/linlinw5/pingpong_ud.pcap", 0),
        ("captures/roce/linlinw5/rdma_atomic_bw.pcap", 0),
        ("captures/roce/huawei_nic_oferby.pcap", 0),
        ("captures/roce/cx4lx_cnp_scapy.pcap", 0),
        ("captures/roce/rxe_read_request_pcapplusplus.pcap", 0),
    ];
    let mut checked = 0;
    for (file, nth) in picks {
        let frames = capture::read_file(&shared.join(file)).unwrap();
        let mut roce = frames
            .iter()
            .filter(|f| matches!(decode::examine(f, true, &UetConfig::default()), Verdict::Good(..)));
        let frame = roce.nth(*nth).unwrap_or_else(|| panic!("{file}: no RoCE frame #{nth}"));
        assert_eq!(&frame.data[12..14], &[0x08, 0x00], "these samples are untagged IPv4");
        let ip = 14;
        let ihl = usize::from(frame.data[ip] & 0xF) * 4;
        let total = usize::from(u16::from_be_bytes([frame.data[ip + 2], frame.data[ip + 3]]));
        for byte in ip..ip + total {
            for bit in 0..8 {
                let off = byte - ip;
                // The version nibble identifies the frame as IPv4; IHL (low nibble) is covered.
                if exempt(off, ihl) || (off == 0 && bit >= 4) {
                    continue;
                }
                let mut f = frame.clone();
                f.data[byte] ^= 1 << bit;
                match decode::examine(&f, true, &UetConfig::default()) {
                    Verdict::Bad(..) => checked += 1,
                    Verdict::Good(..) => panic!("{file}: flip of bit {bit} at IP offset {off} not caught"),
                    Verdict::Other => panic!("{file}: flip of bit {bit} at IP offset {off} hid the frame"),
                }
            }
        }
    }
    assert!(checked > 7 * 8 * 40);
}
