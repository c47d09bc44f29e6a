//! Round trips, rxe's MADs byte for byte, and the errors.

use super::*;
use crate::ib::cma::{self, CmaHdr};
use crate::testutil::hex;
use proptest::collection::vec;
use proptest::prelude::*;
use std::vec::Vec;

// The CM MADs of captures/roce/linlinw5/rping.pcap (Linux rdma_rxe, rping over rdma_cm),
// extracted with `tshark -r rping.pcap -Y infiniband.mad -T fields -e udp.payload`.
/// rping.pcap frame 1: UDP payload (BTH, DETH, MAD, ICRC).
const FRAME_REQ: &str = concat!(
    "6400ffff000000018000000680010000000000010107020300000000000000026dc5c06e00100000",
    "000000006ec0c56d000000000000000001061c06025056fffea77d03000000000000000000002c01",
    "00000001000000a0003da6a7ffff37f0ffffffff00000000000000000000ffff0a01103e00000000",
    "000000000000ffff0a01103d70bbd000004000880000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000040bd69000000000000000000000000",
    "0a01103e0000000000000000000000000a01103d0000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000064e63802",
);
/// rping.pcap frame 2: UDP payload (BTH, DETH, MAD, ICRC).
const FRAME_REP: &str = concat!(
    "6400ffff000000018000000480010000000000010107020300000000000000026dc5c06e00130000",
    "000000009d88f4566ec0c56d0000000000002b0000000000febd3d00010178e0025056fffea7129f",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "000000000000000000000000000000000000000000000000000000000000000000000000beb27888",
);
/// rping.pcap frame 3: UDP payload (BTH, DETH, MAD, ICRC).
const FRAME_RTU: &str = concat!(
    "6400ffff000000018000000780010000000000010107020300000000000000026dc5c06e00140000",
    "000000006ec0c56d9d88f45600000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000054764a94",
);
/// rping.pcap frame 64: UDP payload (BTH, DETH, MAD, ICRC).
const FRAME_DREQ: &str = concat!(
    "6400ffff000000018000000880010000000000010107020300000000000000026dc5c06e00150000",
    "000000006ec0c56d9d88f45600002b00000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000070d09643",
);
/// rping.pcap frame 65: UDP payload (BTH, DETH, MAD, ICRC).
const FRAME_DREP: &str = concat!(
    "6400ffff000000018000000580010000000000010107020300000000000000026dc5c06e00160000",
    "000000009d88f4566ec0c56d00000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "000000000000000000000000000000000000000000000000000000000000000000000000243487d5",
);

/// The MAD of a captured UDP payload: after BTH (12) and DETH (8), before the ICRC.
fn mad_of(frame: &str) -> Vec<u8> {
    let p = hex(frame);
    assert_eq!(p.len(), 20 + MAD_LEN + 4);
    p[20..20 + MAD_LEN].to_vec()
}

/// `data` zero-padded to `cap` bytes.
fn pad(data: &[u8], cap: usize) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(cap, 0);
    v
}

/// Parses `mad`, checks the CM header of a message emitted by this codec and returns it.
fn parse_own(mad: &[u8], tid: u64) -> CmMessage<'_> {
    let (hdr, msg) = CmMessage::parse(mad).unwrap();
    assert_eq!(
        hdr,
        MadHeader {
            base_version: 1,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid,
            attr_id: msg.attr_id(),
            attr_mod: 0,
        }
    );
    msg
}

/// Emits `msg` into a buffer that starts dirty and asserts that parsing it gives `expected`.
fn check_roundtrip(msg: CmMessage<'_>, expected: CmMessage<'_>, tid: u64) {
    let mut b = [0xA5u8; MAD_LEN + 8];
    assert_eq!(msg.emit(tid, &mut b), Ok(MAD_LEN));
    assert_eq!(b[MAD_LEN..], [0xA5u8; 8], "emit wrote past the MAD");
    let got = parse_own(&b, tid);
    assert_eq!(got, expected);
    assert_eq!(got.attr_id(), msg.attr_id());
    assert_eq!(got.private_data().len(), msg.private_capacity());
}

/// Parses a captured MAD and re-emits it with the captured TID: the 256 bytes must come back.
fn reemit_exact(mad: &[u8]) -> (MadHeader, CmMessage<'_>) {
    let (hdr, msg) = CmMessage::parse(mad).unwrap();
    let mut o = [0u8; MAD_LEN];
    assert_eq!(msg.emit(hdr.tid, &mut o), Ok(MAD_LEN));
    assert_eq!(o[..], mad[..], "re-emit of {:#06x} differs", hdr.attr_id);
    (hdr, msg)
}

#[test]
fn rping_req() {
    let mad = mad_of(FRAME_REQ);
    let (hdr, msg) = reemit_exact(&mad);
    assert_eq!(hdr.tid, 0x0000_0002_6dc5_c06e);
    assert_eq!(hdr.attr_id, attr::REQ);
    let CmMessage::Req(r) = msg else { panic!("not a REQ: {msg:?}") };
    let gid = |a: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10] = 0xFF;
        g[11] = 0xFF;
        g[12..].copy_from_slice(&a);
        g
    };
    // Values as `tshark -V` shows them, except the primary flow label and packet rate: the
    // Wireshark CM dissector reads that word 8 bits off (it shows flow label 0x0070b, rate
    // 0x30); the bytes are 70 bb d0 00, i.e. flow label 0x70bbd, reserved 0, rate 0 by the
    // IBTA table 106 layout (20 bits flow label, 6 reserved, 6 packet rate).
    let expected = Req {
        local_comm_id: 0x6ec0_c56d,
        service_id: 0x0000_0000_0106_1c06,
        local_ca_guid: 0x0250_56ff_fea7_7d03,
        local_qkey: 0,
        local_qpn: 0x2c,
        responder_resources: 1,
        local_eecn: 0,
        initiator_depth: 1,
        remote_eecn: 0,
        remote_cm_response_timeout: 0x14,
        transport_service_type: 0,
        end_to_end_flow_control: false,
        starting_psn: 0x3da6,
        local_cm_response_timeout: 0x14,
        retry_count: 7,
        pkey: 0xFFFF,
        path_mtu: 3,
        rdc_exists: false,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: false,
        extended_transport_type: 0,
        primary: CmPath {
            local_lid: 0xFFFF,
            remote_lid: 0xFFFF,
            local_gid: gid([10, 1, 16, 62]),
            remote_gid: gid([10, 1, 16, 61]),
            flow_label: 0x70bbd,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 0x40,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 0x11,
        },
        alternate: CmPath::default(),
        private_data: &mad[164..],
    };
    assert_eq!(r, expected);
    assert_eq!(r.private_data.len(), private_len::REQ);
    assert_eq!(cma::split_service_id(r.service_id), Some((cma::port_space::TCP, 7174)));
    let h = CmaHdr::parse(r.private_data).unwrap();
    assert_eq!(h.src_port, 0xbd69);
    assert_eq!(h.src, core::net::IpAddr::from([10, 1, 16, 62]));
    assert_eq!(h.dst, core::net::IpAddr::from([10, 1, 16, 61]));
    assert!(r.private_data[cma::CMA_HDR_LEN..].iter().all(|&b| b == 0));
}

#[test]
fn rping_rep() {
    let mad = mad_of(FRAME_REP);
    let (hdr, msg) = reemit_exact(&mad);
    assert_eq!(hdr.tid, 0x0000_0002_6dc5_c06e);
    let CmMessage::Rep(r) = msg else { panic!("not a REP: {msg:?}") };
    assert_eq!(
        r,
        Rep {
            local_comm_id: 0x9d88_f456,
            remote_comm_id: 0x6ec0_c56d,
            local_qkey: 0,
            local_qpn: 0x2b,
            local_eecn: 0,
            starting_psn: 0xfe_bd3d,
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 0x0f,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: 7,
            srq: false,
            local_ca_guid: 0x0250_56ff_fea7_129f,
            private_data: &[0u8; private_len::REP],
        }
    );
}

#[test]
fn rping_rtu_dreq_drep() {
    let mad = mad_of(FRAME_RTU);
    let (_, msg) = reemit_exact(&mad);
    let zeros = [0u8; MAD_LEN];
    assert_eq!(
        msg,
        CmMessage::Rtu(Rtu {
            local_comm_id: 0x6ec0_c56d,
            remote_comm_id: 0x9d88_f456,
            private_data: &zeros[..private_len::RTU],
        })
    );
    let mad = mad_of(FRAME_DREQ);
    let (hdr, msg) = reemit_exact(&mad);
    assert_eq!(hdr.attr_id, attr::DREQ);
    assert_eq!(
        msg,
        CmMessage::Dreq(Dreq {
            local_comm_id: 0x6ec0_c56d,
            remote_comm_id: 0x9d88_f456,
            remote_qpn: 0x2b,
            private_data: &zeros[..private_len::DREQ],
        })
    );
    let mad = mad_of(FRAME_DREP);
    let (hdr, msg) = reemit_exact(&mad);
    assert_eq!(hdr.attr_id, attr::DREP);
    assert_eq!(
        msg,
        CmMessage::Drep(Drep {
            local_comm_id: 0x9d88_f456,
            remote_comm_id: 0x6ec0_c56d,
            private_data: &zeros[..private_len::DREP],
        })
    );
}

#[test]
fn parse_errors() {
    let mad = mad_of(FRAME_REQ);
    for n in [0, 1, MAD_HEADER_LEN - 1, MAD_HEADER_LEN, MAD_LEN - 1] {
        assert_eq!(CmMessage::parse(&mad[..n]), Err(Error::Truncated("CM MAD")));
    }
    // Longer input: only the first 256 bytes count.
    let mut long = mad.clone();
    long.extend_from_slice(&[0xFF; 40]);
    assert_eq!(CmMessage::parse(&long), CmMessage::parse(&mad));

    let with = |at: usize, v: u8| {
        let mut m = mad.clone();
        m[at] = v;
        m
    };
    for (at, v) in [(0, 0x80), (1, 0x03), (1, 0x81), (2, 1), (2, 3)] {
        assert!(matches!(CmMessage::parse(&with(at, v)), Err(Error::Unsupported(_))), "byte {at} = {v:#x}");
    }
    for a in [0x0000u16, attr::CLASS_PORT_INFO, attr::LAP, attr::APR, 0x001B, 0xFFFF] {
        let mut m = mad.clone();
        m[16..18].copy_from_slice(&a.to_be_bytes());
        assert_eq!(CmMessage::parse(&m), Err(Error::Unsupported("CM attribute")), "{a:#x}");
    }
}

/// A REQ with every field in range, for the error tests to break one at a time.
fn sample_req(pd: &[u8]) -> Req<'_> {
    Req {
        local_comm_id: 1,
        service_id: cma::service_id(cma::port_space::TCP, 4791),
        local_ca_guid: 2,
        local_qkey: 3,
        local_qpn: 0xFF_FFFF,
        responder_resources: 4,
        local_eecn: 0xFF_FFFF,
        initiator_depth: 5,
        remote_eecn: 0xFF_FFFF,
        remote_cm_response_timeout: 31,
        transport_service_type: 3,
        end_to_end_flow_control: true,
        starting_psn: 0xFF_FFFF,
        local_cm_response_timeout: 31,
        retry_count: 7,
        pkey: 0xFFFF,
        path_mtu: 15,
        rdc_exists: true,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: true,
        extended_transport_type: 7,
        primary: CmPath {
            flow_label: 0xF_FFFF,
            packet_rate: 63,
            sl: 15,
            subnet_local: true,
            local_ack_timeout: 31,
            ..CmPath::default()
        },
        alternate: CmPath::default(),
        private_data: pd,
    }
}

#[test]
fn emit_errors() {
    let big = [0x11u8; MAD_LEN];
    let req = sample_req(&big[..private_len::REQ]);
    let mut b = [0u8; MAD_LEN];
    assert_eq!(CmMessage::Req(req).emit(1, &mut b), Ok(MAD_LEN));
    assert_eq!(CmMessage::Req(req).emit(1, &mut b[..MAD_LEN - 1]), Err(Error::BufferTooSmall));

    let over: [fn(&mut Req<'_>); 17] = [
        |r| r.local_qpn = 1 << 24,
        |r| r.local_eecn = 1 << 24,
        |r| r.remote_eecn = 1 << 24,
        |r| r.remote_cm_response_timeout = 32,
        |r| r.transport_service_type = 4,
        |r| r.starting_psn = 1 << 24,
        |r| r.local_cm_response_timeout = 32,
        |r| r.retry_count = 8,
        |r| r.path_mtu = 16,
        |r| r.rnr_retry_count = 8,
        |r| r.max_cm_retries = 16,
        |r| r.extended_transport_type = 8,
        |r| r.primary.flow_label = 1 << 20,
        |r| r.primary.packet_rate = 64,
        |r| r.primary.sl = 16,
        |r| r.primary.local_ack_timeout = 32,
        |r| r.alternate.local_ack_timeout = 0xFF,
    ];
    for (i, f) in over.iter().enumerate() {
        let mut r = req;
        f(&mut r);
        let mut o = [0x5Au8; MAD_LEN];
        assert!(matches!(CmMessage::Req(r).emit(1, &mut o), Err(Error::Inconsistent(_))), "mutation {i}");
        assert_eq!(o, [0x5Au8; MAD_LEN], "mutation {i} wrote into the buffer");
    }

    let inconsistent = |m: CmMessage<'_>| {
        assert!(matches!(m.emit(0, &mut b.clone()), Err(Error::Inconsistent(_))), "{m:?}");
    };
    let rep = Rep {
        local_comm_id: 0,
        remote_comm_id: 0,
        local_qkey: 0,
        local_qpn: 0,
        local_eecn: 0,
        starting_psn: 0,
        responder_resources: 0,
        initiator_depth: 0,
        target_ack_delay: 0,
        failover_accepted: 0,
        end_to_end_flow_control: false,
        rnr_retry_count: 0,
        srq: false,
        local_ca_guid: 0,
        private_data: &[],
    };
    inconsistent(Rep { local_qpn: 1 << 24, ..rep }.into());
    inconsistent(Rep { local_eecn: 1 << 24, ..rep }.into());
    inconsistent(Rep { starting_psn: 1 << 24, ..rep }.into());
    inconsistent(Rep { target_ack_delay: 32, ..rep }.into());
    inconsistent(Rep { failover_accepted: 4, ..rep }.into());
    inconsistent(Rep { rnr_retry_count: 8, ..rep }.into());
    let mra =
        Mra { local_comm_id: 0, remote_comm_id: 0, message_mraed: 0, service_timeout: 0, private_data: &[] };
    inconsistent(Mra { message_mraed: 4, ..mra }.into());
    inconsistent(Mra { service_timeout: 32, ..mra }.into());
    let rej = Rej {
        local_comm_id: 0,
        remote_comm_id: 0,
        message_rejected: 0,
        reject_info_len: 0,
        reason: rej_reason::CONSUMER_REJECT,
        ari: &[],
        private_data: &[],
    };
    inconsistent(Rej { message_rejected: 4, ..rej }.into());
    inconsistent(Rej { reject_info_len: 128, ..rej }.into());
    let dreq = Dreq { local_comm_id: 0, remote_comm_id: 0, remote_qpn: 1 << 24, private_data: &[] };
    inconsistent(dreq.into());
    let sidr_rep = SidrRep {
        request_id: 0,
        status: sidr_status::SUCCESS,
        additional_info_len: 0,
        qpn: 1 << 24,
        service_id: 0,
        qkey: 0,
        class_port_info: &[],
        private_data: &[],
    };
    inconsistent(sidr_rep.into());

    // Private data, ARI and additional information one byte longer than their capacity.
    let too_long: [CmMessage<'_>; 11] = [
        Req { private_data: &big[..private_len::REQ + 1], ..req }.into(),
        Mra { private_data: &big[..private_len::MRA + 1], ..mra }.into(),
        Rej { private_data: &big[..private_len::REJ + 1], ..rej }.into(),
        Rej { ari: &big[..ARI_LEN + 1], ..rej }.into(),
        Rep { private_data: &big[..private_len::REP + 1], ..rep }.into(),
        Rtu { local_comm_id: 0, remote_comm_id: 0, private_data: &big[..private_len::RTU + 1] }.into(),
        Dreq { remote_qpn: 0, private_data: &big[..private_len::DREQ + 1], ..dreq }.into(),
        Drep { local_comm_id: 0, remote_comm_id: 0, private_data: &big[..private_len::DREP + 1] }.into(),
        SidrReq { request_id: 0, pkey: 0, service_id: 0, private_data: &big[..private_len::SIDR_REQ + 1] }
            .into(),
        SidrRep { qpn: 0, private_data: &big[..private_len::SIDR_REP + 1], ..sidr_rep }.into(),
        SidrRep { qpn: 0, class_port_info: &big[..SIDR_INFO_LEN + 1], ..sidr_rep }.into(),
    ];
    for m in too_long {
        let mut o = [0x5Au8; MAD_LEN];
        assert!(matches!(m.emit(0, &mut o), Err(Error::BadLength(_))), "{m:?}");
        assert_eq!(o, [0x5Au8; MAD_LEN]);
        // At capacity it fits.
        let fixed = match m {
            CmMessage::Rej(r) if r.ari.len() > ARI_LEN => Rej { ari: &big[..ARI_LEN], ..r }.into(),
            CmMessage::SidrRep(r) if r.class_port_info.len() > SIDR_INFO_LEN => {
                SidrRep { class_port_info: &big[..SIDR_INFO_LEN], ..r }.into()
            }
            m => with_private(m, &big[..m.private_capacity()]),
        };
        assert_eq!(fixed.emit(0, &mut o), Ok(MAD_LEN), "{fixed:?}");
    }
}

/// `m` with its private data replaced by `pd`.
fn with_private<'a>(m: CmMessage<'a>, pd: &'a [u8]) -> CmMessage<'a> {
    match m {
        CmMessage::Req(x) => Req { private_data: pd, ..x }.into(),
        CmMessage::Mra(x) => Mra { private_data: pd, ..x }.into(),
        CmMessage::Rej(x) => Rej { private_data: pd, ..x }.into(),
        CmMessage::Rep(x) => Rep { private_data: pd, ..x }.into(),
        CmMessage::Rtu(x) => Rtu { private_data: pd, ..x }.into(),
        CmMessage::Dreq(x) => Dreq { private_data: pd, ..x }.into(),
        CmMessage::Drep(x) => Drep { private_data: pd, ..x }.into(),
        CmMessage::SidrReq(x) => SidrReq { private_data: pd, ..x }.into(),
        CmMessage::SidrRep(x) => SidrRep { private_data: pd, ..x }.into(),
    }
}

#[test]
fn emit_zeroes_reserved_and_pads() {
    // Every reserved bit of a REQ set on the wire: parse ignores them, emit writes zero.
    let pd = [0x77u8; 5];
    let req = sample_req(&pd);
    let mut b = [0u8; MAD_LEN];
    CmMessage::Req(req).emit(9, &mut b).unwrap();
    assert_eq!(b[MAD_HEADER_LEN + 140..MAD_HEADER_LEN + 145], pd);
    assert!(b[MAD_HEADER_LEN + 145..].iter().all(|&x| x == 0));
    let mut dirty = b;
    dirty[18] = 0xAB; // MAD header reserved
    dirty[at(4)] = 0xFF; // reserved after the local comm ID
    dirty[at(5)] ^= 0xFF; // vendor ID
    dirty[at(24)] = 0xFF; // reserved before the Q_Key
    dirty[at(88) + 2] |= 0x0F; // reserved bits between flow label and packet rate
    dirty[at(88) + 3] |= 0xC0;
    dirty[at(94)] |= 0x07; // primary SL byte, reserved bits
    dirty[at(95)] |= 0x07; // reserved after the ACK timeout
    dirty[at(139)] |= 0x07; // SAP supported and reserved
    let (_, m) = CmMessage::parse(&dirty).unwrap();
    assert_eq!(m, CmMessage::Req(Req { private_data: &b[at(140)..], ..req }));
    let mut o = [0u8; MAD_LEN];
    m.emit(9, &mut o).unwrap();
    assert_eq!(o, b);
}

fn path() -> impl Strategy<Value = CmPath> {
    (
        (any::<u16>(), any::<u16>(), any::<[u8; 16]>(), any::<[u8; 16]>()),
        (0u32..1 << 20, 0u8..64, any::<u8>(), any::<u8>(), 0u8..16, any::<bool>(), 0u8..32),
    )
        .prop_map(|((ll, rl, lg, rg), (fl, rate, tc, hl, sl, sn, ack))| CmPath {
            local_lid: ll,
            remote_lid: rl,
            local_gid: lg,
            remote_gid: rg,
            flow_label: fl,
            packet_rate: rate,
            traffic_class: tc,
            hop_limit: hl,
            sl,
            subnet_local: sn,
            local_ack_timeout: ack,
        })
}

const U24: core::ops::Range<u32> = 0..1 << 24;

fn req() -> impl Strategy<Value = Req<'static>> {
    (
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u32>(), U24, any::<u8>(), U24, any::<u8>(), U24),
        (0u8..32, 0u8..4, any::<bool>(), U24, 0u8..32, 0u8..8, any::<u16>(), 0u8..16),
        (any::<bool>(), 0u8..8, 0u8..16, any::<bool>(), 0u8..8),
        path(),
        path(),
    )
        .prop_map(|(a, b, c, primary, alternate)| Req {
            local_comm_id: a.0,
            service_id: a.1,
            local_ca_guid: a.2,
            local_qkey: a.3,
            local_qpn: a.4,
            responder_resources: a.5,
            local_eecn: a.6,
            initiator_depth: a.7,
            remote_eecn: a.8,
            remote_cm_response_timeout: b.0,
            transport_service_type: b.1,
            end_to_end_flow_control: b.2,
            starting_psn: b.3,
            local_cm_response_timeout: b.4,
            retry_count: b.5,
            pkey: b.6,
            path_mtu: b.7,
            rdc_exists: c.0,
            rnr_retry_count: c.1,
            max_cm_retries: c.2,
            srq: c.3,
            extended_transport_type: c.4,
            primary,
            alternate,
            private_data: &[],
        })
}

fn rep() -> impl Strategy<Value = Rep<'static>> {
    (
        (any::<u32>(), any::<u32>(), any::<u32>(), U24, U24, U24, any::<u8>(), any::<u8>()),
        (0u8..32, 0u8..4, any::<bool>(), 0u8..8, any::<bool>(), any::<u64>()),
    )
        .prop_map(|(a, b)| Rep {
            local_comm_id: a.0,
            remote_comm_id: a.1,
            local_qkey: a.2,
            local_qpn: a.3,
            local_eecn: a.4,
            starting_psn: a.5,
            responder_resources: a.6,
            initiator_depth: a.7,
            target_ack_delay: b.0,
            failover_accepted: b.1,
            end_to_end_flow_control: b.2,
            rnr_retry_count: b.3,
            srq: b.4,
            local_ca_guid: b.5,
            private_data: &[],
        })
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

proptest! {
    #[test]
    fn req_roundtrip(r in req(), pd in bytes(private_len::REQ), tid in any::<u64>()) {
        let full = pad(&pd, private_len::REQ);
        let expected = Req { private_data: &full, ..r };
        check_roundtrip(Req { private_data: &pd, ..r }.into(), expected.into(), tid);
    }

    #[test]
    fn rep_roundtrip(r in rep(), pd in bytes(private_len::REP), tid in any::<u64>()) {
        let full = pad(&pd, private_len::REP);
        let expected = Rep { private_data: &full, ..r };
        check_roundtrip(Rep { private_data: &pd, ..r }.into(), expected.into(), tid);
    }

    #[test]
    fn mra_roundtrip(
        ids in any::<(u32, u32)>(), code in 0u8..4, timeout in 0u8..32,
        pd in bytes(private_len::MRA), tid in any::<u64>(),
    ) {
        let m = |pd| Mra {
            local_comm_id: ids.0, remote_comm_id: ids.1, message_mraed: code,
            service_timeout: timeout, private_data: pd,
        };
        check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::MRA)).into(), tid);
    }

    #[test]
    fn rej_roundtrip(
        ids in any::<(u32, u32)>(), code in 0u8..4, info_len in 0u8..128, reason in any::<u16>(),
        ari in bytes(ARI_LEN), pd in bytes(private_len::REJ), tid in any::<u64>(),
    ) {
        let m = |ari, pd| Rej {
            local_comm_id: ids.0, remote_comm_id: ids.1, message_rejected: code,
            reject_info_len: info_len, reason, ari, private_data: pd,
        };
        let (ari_full, pd_full) = (pad(&ari, ARI_LEN), pad(&pd, private_len::REJ));
        check_roundtrip(m(&ari, &pd).into(), m(&ari_full, &pd_full).into(), tid);
    }

    #[test]
    fn rtu_drep_roundtrip(
        ids in any::<(u32, u32)>(), pd in bytes(private_len::RTU), tid in any::<u64>(),
    ) {
        let full = pad(&pd, private_len::RTU);
        let rtu = |pd| Rtu { local_comm_id: ids.0, remote_comm_id: ids.1, private_data: pd };
        check_roundtrip(rtu(&pd).into(), rtu(&full).into(), tid);
        let drep = |pd| Drep { local_comm_id: ids.0, remote_comm_id: ids.1, private_data: pd };
        check_roundtrip(drep(&pd).into(), drep(&full).into(), tid);
    }

    #[test]
    fn dreq_roundtrip(
        ids in any::<(u32, u32)>(), qpn in U24, pd in bytes(private_len::DREQ), tid in any::<u64>(),
    ) {
        let m = |pd| Dreq {
            local_comm_id: ids.0, remote_comm_id: ids.1, remote_qpn: qpn, private_data: pd,
        };
        check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::DREQ)).into(), tid);
    }

    #[test]
    fn sidr_req_roundtrip(
        id in any::<u32>(), pkey in any::<u16>(), sid in any::<u64>(),
        pd in bytes(private_len::SIDR_REQ), tid in any::<u64>(),
    ) {
        let m = |pd| SidrReq { request_id: id, pkey, service_id: sid, private_data: pd };
        check_roundtrip(m(&pd).into(), m(&pad(&pd, private_len::SIDR_REQ)).into(), tid);
    }

    #[test]
    fn sidr_rep_roundtrip(
        id in any::<u32>(), status in any::<u8>(), info_len in any::<u8>(), qpn in U24,
        sid in any::<u64>(), qkey in any::<u32>(),
        info in bytes(SIDR_INFO_LEN), pd in bytes(private_len::SIDR_REP), tid in any::<u64>(),
    ) {
        let m = |info, pd| SidrRep {
            request_id: id, status, additional_info_len: info_len, qpn, service_id: sid, qkey,
            class_port_info: info, private_data: pd,
        };
        check_roundtrip(
            m(&info, &pd).into(),
            m(&pad(&info, SIDR_INFO_LEN), &pad(&pd, private_len::SIDR_REP)).into(),
            tid,
        );
    }

    /// Arbitrary bytes under a CM header: parse never panics, and what it returns re-emits to
    /// bytes that parse to the same message.
    #[test]
    fn arbitrary_body(
        mut mad in vec(any::<u8>(), MAD_LEN..MAD_LEN + 4),
        attr_id in prop_oneof![0x0010u16..=0x0018, any::<u16>()],
    ) {
        mad[..4].copy_from_slice(&[BASE_VERSION, MGMT_CLASS_CM, CM_CLASS_VERSION, METHOD_SEND]);
        mad[16..18].copy_from_slice(&attr_id.to_be_bytes());
        match CmMessage::parse(&mad) {
            Ok((hdr, msg)) => {
                prop_assert_eq!(hdr.attr_id, msg.attr_id());
                let mut o = [0u8; MAD_LEN];
                prop_assert_eq!(msg.emit(hdr.tid, &mut o), Ok(MAD_LEN));
                prop_assert_eq!(parse_own(&o, hdr.tid), msg);
            }
            Err(e) => {
                prop_assert!(!(0x0010..=0x0018).contains(&attr_id));
                prop_assert_eq!(e, Error::Unsupported("CM attribute"));
            }
        }
    }
}
