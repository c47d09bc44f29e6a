//! `softrdma gen uet`: a deterministic corpus of well-formed UET frames. It holds every PDS packet type
//! (with every CP control type), every SES header format, each extension header, the deferrable
//! restart-token forms, and TSS frames with and without an SSI. Each clear packet goes out over UDP
//! 4793 and over native IP (protocol 253), on IPv4, some on IPv6 too. TSS bodies are opaque
//! pattern bytes: the codec does not decrypt. CRC trailers are off (their default).

use super::frame::{emit_frame, ip_header};
use wire::ipv4::PROTO_UDP;
use wire::uet::pds::{
    AckCc, AckCcInfo, AckRepr, CcRequest, CpRepr, CreditState, CtlType, Mode, NackCode, NackRepr, NextHeader,
    NsccState, RequestRepr, RudiRepr, UudRepr, ack, nack, request,
};
use wire::uet::ses::common::{FLAG_EOM, FLAG_HD, FLAG_SOM};
use wire::uet::ses::{
    AmoDatatype, AmoOpcode, AtomicExt, CasExt, MediumRequest, RendezvousExt, RequestCommon, Response,
    ResponseData, ResponseDataSmall, ResponseHead, ResponseOpcode, ReturnCode, SesExt, SesHeader, SesOpcode,
    SmallRequest, SomField, StandardRequest,
};
use wire::uet::{DEFAULT_IP_PROTO, EntropyRepr, PdsRepr, SesRepr, TssRepr, UDP_PORT, UetRepr};
use wire::{L4Repr, UdpChecksum, UdpRepr};

/// A clear UET packet description: PDS header, SES header, payload length.
type Clear = (PdsRepr, Option<SesRepr>, usize);

fn common(opcode: SesOpcode, flags: u8, word2: u16) -> RequestCommon {
    RequestCommon {
        rsvd: 0,
        opcode,
        version: 0,
        flags,
        word2,
        ri_generation: 1,
        job_id: 0x00_1234,
        pid_word: 0x010,
        ri_word: 0x002,
    }
}

fn standard(opcode: SesOpcode, flags: u8, som_field: SomField, len: u32, ext: Option<SesExt>) -> SesRepr {
    let (buffer_offset, memory_key) = match opcode {
        // Deferrable sends carry the restart token (initiator_token | target_token) in buffer_offset,
        // ready-to-restart in the memory_key slot.
        SesOpcode::DeferrableSend => (0x0000_0007_0000_0009, 0xabcd),
        SesOpcode::DeferrableRtr => (0x1000, 0x0000_0007_0000_0009),
        _ => (0x1000, 0xabcd),
    };
    let header = SesHeader::Standard(StandardRequest {
        common: common(opcode, flags, 0x0042),
        buffer_offset,
        initiator: 0x0a4d_0001,
        memory_key,
        som_field,
        request_length: len,
    });
    SesRepr { header, ext }
}

fn head(opcode: ResponseOpcode, return_code: ReturnCode) -> ResponseHead {
    ResponseHead { list: 0, opcode, version: 0, return_code }
}

fn req(mode: Mode, cc: bool, nh: NextHeader, flags: u8, n: u32) -> PdsRepr {
    let syn = flags & request::FLAG_SYN != 0;
    PdsRepr::Request(RequestRepr {
        mode,
        next_hdr: nh,
        flags,
        clear_psn_offset: -2,
        psn: 0x1000_0000 + n,
        spdcid: 0x11,
        dpdcid: if syn { RequestRepr::syn_word(false, n as u16) } else { 0x22 },
        cc: cc.then_some(CcRequest { ccc_id: 3, credit_target: 64 }),
    })
}

fn ack(nh: NextHeader, cc: AckCc) -> PdsRepr {
    PdsRepr::Ack(AckRepr {
        next_hdr: nh,
        flags: ack::REQ_CLEAR,
        ack_psn_offset: -1,
        cack_psn: 0x1000_0010,
        spdcid: 0x22,
        dpdcid: 0x11,
        cc,
    })
}

fn nack(code: NackCode, flags: u8, ccx: Option<[u8; 16]>) -> PdsRepr {
    let rudi = flags & nack::FLAG_NT != 0;
    PdsRepr::Nack(NackRepr {
        next_hdr: NextHeader::None,
        flags,
        nack_code: code,
        vendor_code: 0,
        nack_psn: 0x1000_0004,
        spdcid: if rudi { 0 } else { 0x22 },
        dpdcid: if rudi { 0 } else { 0x11 },
        payload: 0x1000_0008,
        ccx,
    })
}

/// Every clear packet of the corpus.
fn clear_packets() -> Vec<Clear> {
    use Mode::{Rod, Rud};
    use NextHeader as Nh;
    let som_eom = FLAG_SOM | FLAG_EOM;
    let info = AckCcInfo { cc_type: 0, cc_flags: 0, mpr: 64, sack_psn_offset: 1, sack_bitmap: 0b1011 };
    let nscc =
        NsccState { service_time: 12, restore_cwnd: false, rcv_cwnd_pend: 0, rcvd_bytes: 16, ooo_count: 2 };
    let credit = CreditState { credit: 64, ooo_count: 0 };
    let atomic =
        AtomicExt { amo_opcode: AmoOpcode::Sum, datatype: AmoDatatype::Uint64, sem_ctl: 0x01, reserved: 0 };
    let cas = CasExt {
        atomic: AtomicExt { amo_opcode: AmoOpcode::Cswap, ..atomic },
        compare: [0x11; 16],
        swap: [0x22; 16],
    };
    let rendezvous =
        RendezvousExt { eager_length: 64, rd_word: 0x0100_2003, read_offset: 0x2000, read_match_bits: 7 };
    let hd = SomField::HeaderData(0xfeed);
    let mut v: Vec<Clear> = vec![
        (
            req(Rud, false, Nh::ReqStd, request::FLAG_AR, 1),
            Some(standard(SesOpcode::Send, som_eom, SomField::HeaderData(0), 64, None)),
            64,
        ),
        (
            req(Rud, false, Nh::ReqStd, request::FLAG_SYN | request::FLAG_AR, 2),
            Some(standard(SesOpcode::Write, som_eom | FLAG_HD, hd, 48, None)),
            48,
        ),
        (
            req(Rod, false, Nh::ReqStd, 0, 3),
            Some(standard(
                SesOpcode::Write,
                FLAG_EOM,
                SomField::Segment { reserved: 0, payload_length: 32, message_offset: 4096 },
                4128,
                None,
            )),
            32,
        ),
        (req(Rud, true, Nh::ReqStd, 0, 4), Some(standard(SesOpcode::TaggedSend, som_eom, hd, 16, None)), 16),
        (
            req(Rod, true, Nh::ReqStd, request::FLAG_AR, 5),
            Some(standard(SesOpcode::Read, som_eom, hd, 256, None)),
            0,
        ),
        (
            req(Rud, false, Nh::ReqStd, 0, 6),
            Some(standard(SesOpcode::DeferrableSend, som_eom, hd, 8, None)),
            8,
        ),
        (
            req(Rud, false, Nh::ReqStd, 0, 7),
            Some(standard(SesOpcode::DeferrableRtr, som_eom, hd, 0, None)),
            0,
        ),
        (
            req(Rud, false, Nh::ReqStd, 0, 8),
            Some(standard(SesOpcode::Atomic, som_eom, hd, 8, Some(SesExt::Atomic(atomic)))),
            8,
        ),
        (
            req(Rud, false, Nh::ReqStd, 0, 9),
            Some(standard(SesOpcode::FetchingAtomic, som_eom, hd, 8, Some(SesExt::CompareSwap(cas)))),
            0,
        ),
        (
            req(Rud, false, Nh::ReqStd, 0, 10),
            Some(standard(
                SesOpcode::RendezvousSend,
                FLAG_SOM,
                hd,
                4096,
                Some(SesExt::Rendezvous(rendezvous)),
            )),
            64,
        ),
        (
            PdsRepr::Rudi(RudiRepr {
                response: false,
                next_hdr: Nh::ReqSmall,
                flags: 0,
                reserved: 0,
                pkt_id: 0x77,
            }),
            Some(SesRepr {
                header: SesHeader::Small(SmallRequest {
                    common: common(SesOpcode::Write, som_eom, 16),
                    buffer_offset: 0x40,
                }),
                ext: None,
            }),
            16,
        ),
        (
            PdsRepr::Rudi(RudiRepr {
                response: false,
                next_hdr: Nh::ReqSmall,
                flags: 0,
                reserved: 0,
                pkt_id: 0x78,
            }),
            Some(SesRepr {
                header: SesHeader::Small(SmallRequest {
                    common: common(SesOpcode::FetchingAtomic, som_eom, 8),
                    buffer_offset: 0x80,
                }),
                ext: Some(SesExt::Atomic(AtomicExt {
                    amo_opcode: AmoOpcode::Read,
                    datatype: AmoDatatype::Int32,
                    ..atomic
                })),
            }),
            0,
        ),
        (
            req(Rud, false, Nh::ReqMedium, 0, 11),
            Some(SesRepr {
                header: SesHeader::Medium(MediumRequest {
                    common: common(SesOpcode::TaggedSend, som_eom | FLAG_HD, 24),
                    data_or_offset: 0xfeed,
                    initiator: 0x0a4d_0001,
                    match_bits: 0x5eed,
                }),
                ext: None,
            }),
            24,
        ),
        (
            req(Rud, false, Nh::ReqMedium, 0, 12),
            Some(SesRepr {
                header: SesHeader::Medium(MediumRequest {
                    common: common(SesOpcode::TsendAtomic, som_eom, 8),
                    data_or_offset: 0,
                    initiator: 0x0a4d_0001,
                    match_bits: 0x5eed,
                }),
                ext: Some(SesExt::Atomic(AtomicExt { amo_opcode: AmoOpcode::Bxor, ..atomic })),
            }),
            8,
        ),
        (
            PdsRepr::Rudi(RudiRepr {
                response: true,
                next_hdr: Nh::Rsp,
                flags: 0,
                reserved: 0,
                pkt_id: 0x77,
            }),
            Some(SesRepr {
                header: SesHeader::Response(Response {
                    head: head(ResponseOpcode::Response, ReturnCode::Ok),
                    message_id: 0x42,
                    ri_generation: 1,
                    job_id: 0x1234,
                    modified_length: 16,
                }),
                ext: None,
            }),
            0,
        ),
        (
            PdsRepr::Uud(UudRepr { next_hdr: Nh::ReqStd, flags: 0, reserved: 0 }),
            Some(standard(SesOpcode::DatagramSend, som_eom, hd, 20, None)),
            20,
        ),
        (ack(Nh::None, AckCc::None), None, 0),
        (
            ack(Nh::Rsp, AckCc::None),
            Some(SesRepr {
                header: SesHeader::Response(Response {
                    head: head(ResponseOpcode::Response, ReturnCode::NoMatch),
                    message_id: 0x42,
                    ri_generation: 1,
                    job_id: 0x1234,
                    modified_length: 0,
                }),
                ext: None,
            }),
            0,
        ),
        (
            ack(Nh::RspData, AckCc::None),
            Some(SesRepr {
                header: SesHeader::ResponseData(ResponseData {
                    head: head(ResponseOpcode::ResponseWData, ReturnCode::Ok),
                    message_id: 0x43,
                    reserved: 0,
                    job_id: 0x1234,
                    read_req_message_id: 0x42,
                    length_word: 64,
                    modified_length: 256,
                    message_offset: 0,
                }),
                ext: None,
            }),
            64,
        ),
        (
            ack(Nh::RspDataSmall, AckCc::None),
            Some(SesRepr {
                header: SesHeader::ResponseDataSmall(ResponseDataSmall {
                    head: head(ResponseOpcode::ResponseWData, ReturnCode::Ok),
                    length_word: 12,
                    job_word: 0x1234,
                    original_request_psn: 0x1000_0005,
                }),
                ext: None,
            }),
            12,
        ),
        (ack(Nh::None, AckCc::Cc(info, nscc.to_bytes())), None, 0),
        (ack(Nh::None, AckCc::Cc(AckCcInfo { cc_type: 1, ..info }, credit.to_bytes())), None, 0),
        (ack(Nh::None, AckCc::Ccx(AckCcInfo { cc_type: 2, ..info }, [0x33; 16])), None, 0),
        (nack(NackCode::PsnOorWindow, 0, None), None, 0),
        (nack(NackCode::NoPdcAvail, nack::FLAG_NT, None), None, 0),
        (nack(NackCode::RodOoo, 0, Some([0x10; 16])), None, 0),
    ];
    for ctl in 0..=9u8 {
        let cp = CpRepr {
            ctl_type: CtlType::from(ctl),
            flags: 0,
            probe_opaque: 0,
            psn: 0x1000_0020,
            spdcid: 0x11,
            dpdcid: 0x22,
            payload: u32::from(ctl) * 16,
        };
        v.push((PdsRepr::Cp(cp), None, 0));
    }
    v
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + seed) as u8).collect()
}

/// Wraps a UET packet for UDP 4793 or native IP, with `entropy` as UDP source port or in the
/// entropy header, and emits the frame.
fn uet_frame(packet: UetRepr<'_>, native: bool, ipv6: bool, entropy: u16) -> Vec<u8> {
    if native {
        let l4 = L4Repr::UetIp { entropy: EntropyRepr { entropy, reserved: 0 }, packet };
        emit_frame(ip_header(ipv6, DEFAULT_IP_PROTO), l4)
    } else {
        let udp = UdpRepr { src_port: entropy, dst_port: UDP_PORT, checksum: UdpChecksum::Computed };
        emit_frame(ip_header(ipv6, PROTO_UDP), L4Repr::UetUdp { udp, packet })
    }
}

/// The UET corpus: every clear packet over UDP then native IP (IPv4), the first two also over
/// IPv6, then TSS frames with and without SSI over both encapsulations.
pub fn uet_corpus() -> Vec<Vec<u8>> {
    let packets = clear_packets();
    let mut out = Vec::new();
    let mut push = |(pds, ses, len): &Clear, i: usize, native: bool, ipv6: bool| {
        let payload = pattern(*len, i);
        let packet = UetRepr::Clear { pds: *pds, ses: *ses, payload: &payload, crc: false };
        out.push(uet_frame(packet, native, ipv6, 0xC000 | i as u16));
    };
    for native in [false, true] {
        for (i, p) in packets.iter().enumerate() {
            push(p, i, native, false);
        }
    }
    for native in [false, true] {
        for (i, p) in packets.iter().take(2).enumerate() {
            push(p, i, native, true);
        }
    }
    let ciphertext = pattern(76, 99);
    let tss_frames = [
        (false, false, None),
        (false, true, None),
        (true, false, Some(0x0a4d_0001)),
        (true, true, Some(0x0a4d_0001)),
        (true, false, None),
    ];
    for (i, (native, ipv6, ssi)) in tss_frames.into_iter().enumerate() {
        let tss =
            TssRepr { reserved: false, an: i % 2 == 1, sdi: 0x42, ssi, tsc: (1 << 48) | (i as u64 + 1) };
        let packet = UetRepr::Secure { tss, ciphertext: &ciphertext, icv: [0xA5; 16] };
        out.push(uet_frame(packet, native, ipv6, 0xD000 | i as u16));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use wire::FrameRepr;
    use wire::frame::Encapsulation;
    use wire::uet::UetConfig;
    use wire::uet::pds::PdsType;

    #[test]
    fn corpus_covers_every_type_format_and_extension() {
        let frames = uet_corpus();
        assert_eq!(frames, uet_corpus(), "deterministic");
        let cfg = UetConfig { crc: false, ip_proto: Some(DEFAULT_IP_PROTO) };
        let (mut types, mut formats, mut exts, mut ctls, mut encaps) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let (mut tss_ssi, mut tss_plain) = (0, 0);
        for f in &frames {
            let r = FrameRepr::parse_verified(f, &cfg).unwrap();
            let mut o = vec![0u8; r.buffer_len()];
            r.emit(&mut o).unwrap();
            assert_eq!(&o, f);
            encaps.insert(format!("{:?}", wire::frame::identify(f, &cfg).unwrap()));
            match r.uet().unwrap() {
                UetRepr::Secure { tss, .. } => {
                    if tss.ssi.is_some() {
                        tss_ssi += 1
                    } else {
                        tss_plain += 1
                    }
                }
                UetRepr::Clear { pds, ses, .. } => {
                    types.insert(u8::from(pds.pds_type()));
                    if let PdsRepr::Cp(cp) = pds {
                        ctls.insert(u8::from(cp.ctl_type));
                    }
                    if let Some(s) = ses {
                        formats.insert(u8::from(s.next_header()));
                        if let Some(e) = s.ext {
                            exts.insert(match e {
                                SesExt::Atomic(_) => "atomic",
                                SesExt::CompareSwap(_) => "compare-and-swap",
                                SesExt::Rendezvous(_) => "rendezvous",
                            });
                        }
                    }
                }
            }
        }
        let all_pds: BTreeSet<u8> = (2..=14).collect();
        assert_eq!(types, all_pds, "every PDS type but TSS (1)");
        assert_eq!(formats, (1..=6).collect(), "every SES header format");
        assert_eq!(exts.len(), 3, "atomic, compare-and-swap and rendezvous extensions");
        assert_eq!(ctls, (0..=9).collect(), "every CP control type");
        assert!(tss_ssi > 0 && tss_plain > 0);
        assert_eq!(encaps.len(), 2, "UDP and native IP: {encaps:?}");
        assert!(encaps.contains(&format!("{:?}", Encapsulation::UetIp)));
        assert_eq!(PdsType::from(1), PdsType::Tss);
    }
}
