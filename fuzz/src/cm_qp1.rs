//! The connection manager on QP1 (issue 31): MADs from a peer and from strangers into a CM that
//! listens on two services and whose consumer accepts, establishes and disconnects, while time
//! passes (retries, give-ups, time waits, parked requests).
//!
//! Input: records of a selector byte and a body. Selector bits 0-3: what the record is (0-8 one
//! CM message built from the body's fields, with comm IDs drawn from the ones the CM gave out so
//! they hit real connections; 9 the body's bytes as a raw MAD; 10 time passes by the body's first
//! byte in units of 20 ms; 11 the consumer acts on its events; 12 it connects to the peer). Bit 4:
//! the MAD comes from a stranger instead of the peer.
//!
//! Checks: no panic; the record table, the send queue and the events stay within their bounds;
//! every MAD the CM sends parses.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use engine::cm::{AcceptParams, Cm, CmConfig, CmEvent, ConnId, ConnectParams};
use wire::ib::cm::{CmMessage, Drep, Dreq, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq};
use wire::ib::cma::{port_space, service_id};
use wire::ib::mad::MAD_LEN;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const STRANGER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 66));
const MAX_CONNS: usize = 32;

/// Reads fields off the body, zero past its end.
struct Body<'a>(&'a [u8], usize);

impl Body<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// A comm ID: one the CM gave out (by index), the peer's, or any.
    fn id(&mut self, ours: &[u32]) -> u32 {
        match self.u8() {
            s if s < 128 && !ours.is_empty() => ours[usize::from(s) % ours.len()],
            s if s < 192 => u32::from(s & 7) + 1,
            _ => self.u32(),
        }
    }
}

fn services() -> [u64; 2] {
    [service_id(port_space::TCP, 7174), service_id(port_space::UDP, 7174)]
}

fn message(kind: u8, b: &mut Body<'_>, ours: &[u32]) -> Option<CmMessage<'static>> {
    let svc = services()[usize::from(b.u8() & 1)];
    Some(match kind {
        0 => CmMessage::Req(Req {
            local_comm_id: b.id(ours),
            service_id: if b.u8() < 200 { svc } else { u64::from(b.u32()) },
            local_ca_guid: 2,
            local_qkey: 0,
            local_qpn: b.u32() & 0xFF_FFFF,
            responder_resources: b.u8(),
            local_eecn: 0,
            initiator_depth: b.u8(),
            remote_eecn: 0,
            remote_cm_response_timeout: b.u8() & 31,
            transport_service_type: 0,
            end_to_end_flow_control: false,
            starting_psn: b.u32() & 0xFF_FFFF,
            local_cm_response_timeout: b.u8() & 31,
            retry_count: b.u8() & 7,
            pkey: 0xFFFF,
            path_mtu: b.u8() & 15,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: b.u8() & 15,
            srq: false,
            extended_transport_type: 0,
            primary: Default::default(),
            alternate: Default::default(),
            private_data: &[],
        }),
        1 => CmMessage::Mra(Mra {
            local_comm_id: b.id(ours),
            remote_comm_id: b.id(ours),
            message_mraed: b.u8() & 3,
            service_timeout: b.u8() & 31,
            private_data: &[],
        }),
        2 => CmMessage::Rej(Rej {
            local_comm_id: b.id(ours),
            remote_comm_id: b.id(ours),
            message_rejected: b.u8() & 3,
            reject_info_len: 0,
            reason: u16::from(b.u8()),
            ari: &[],
            private_data: &[],
        }),
        3 => CmMessage::Rep(Rep {
            local_comm_id: b.id(ours),
            remote_comm_id: b.id(ours),
            local_qkey: 0,
            local_qpn: b.u32() & 0xFF_FFFF,
            local_eecn: 0,
            starting_psn: b.u32() & 0xFF_FFFF,
            responder_resources: b.u8(),
            initiator_depth: b.u8(),
            target_ack_delay: 0,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: b.u8() & 7,
            srq: false,
            local_ca_guid: 2,
            private_data: &[],
        }),
        4 => CmMessage::Rtu(Rtu { local_comm_id: b.id(ours), remote_comm_id: b.id(ours), private_data: &[] }),
        5 => CmMessage::Dreq(Dreq {
            local_comm_id: b.id(ours),
            remote_comm_id: b.id(ours),
            remote_qpn: b.u32() & 0xFF_FFFF,
            private_data: &[],
        }),
        6 => {
            CmMessage::Drep(Drep { local_comm_id: b.id(ours), remote_comm_id: b.id(ours), private_data: &[] })
        }
        7 => CmMessage::SidrReq(SidrReq {
            request_id: b.id(ours),
            pkey: 0xFFFF,
            service_id: svc,
            private_data: &[],
        }),
        8 => CmMessage::SidrRep(SidrRep {
            request_id: b.id(ours),
            status: b.u8() & 3,
            additional_info_len: 0,
            qpn: b.u32() & 0xFF_FFFF,
            service_id: svc,
            qkey: b.u32(),
            class_port_info: &[],
            private_data: &[],
        }),
        _ => return None,
    })
}

fn connect_params(qpn: u32) -> ConnectParams {
    ConnectParams {
        service_id: services()[0],
        qpn,
        transport: 0,
        starting_psn: 1,
        responder_resources: 1,
        initiator_depth: 1,
        path_mtu: 3,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: false,
        local_ack_timeout: 14,
        local_gid: [0; 16],
        remote_gid: [0; 16],
        hop_limit: 64,
        traffic_class: 0,
        private_data: vec![],
    }
}

pub fn run(data: &[u8]) {
    let mut cm = Cm::new(CmConfig { max_conns: MAX_CONNS, ..CmConfig::default() });
    for s in services() {
        cm.listen(s, 4).expect("two services");
    }
    let mut now = Duration::ZERO;
    let mut ours: Vec<u32> = Vec::new();
    let mut events: Vec<CmEvent> = Vec::new();
    let mut rest = data;
    while let Some((&sel, tail)) = rest.split_first() {
        let take = tail.len().min(MAD_LEN);
        let (body, next) = tail.split_at(take);
        rest = next;
        let peer = if sel & 0x10 != 0 { STRANGER } else { PEER };
        let mut b = Body(body, 0);
        match sel & 0x0F {
            k @ 0..=8 => {
                if let Some(msg) = message(k, &mut b, &ours) {
                    let mut mad = [0u8; MAD_LEN];
                    if msg.emit(u64::from(b.u32()), &mut mad).is_ok() {
                        cm.handle_mad(now, peer, &mad);
                    }
                }
            }
            9 => cm.handle_mad(now, peer, body),
            10 => {
                now += Duration::from_millis(20 * u64::from(b.u8()));
                if cm.poll_timeout().is_some_and(|t| t <= now) {
                    cm.handle_timeout(now);
                }
            }
            11 => {
                for ev in events.drain(..) {
                    let _ = match ev {
                        CmEvent::Request(id, _) => cm.accept(
                            now,
                            id,
                            &AcceptParams {
                                qpn: 0x20,
                                starting_psn: 5,
                                responder_resources: 1,
                                initiator_depth: 1,
                                rnr_retry_count: 7,
                                srq: false,
                                private_data: vec![],
                            },
                        ),
                        CmEvent::Reply(id, _) => cm.establish(now, id),
                        CmEvent::DisconnectRequest(id, _) | CmEvent::Established(id) => {
                            cm.disconnect(now, id, &[])
                        }
                        CmEvent::SidrRequest(id, ..) => cm.sidr_reply(now, id, 0, 0x30, 0x0123_4567, &[]),
                        _ => Ok(()),
                    };
                }
            }
            12 => {
                if let Ok(ConnId(id)) = cm.connect(now, PEER, &connect_params(u32::from(b.u8()))) {
                    ours.push(id);
                }
            }
            _ => {}
        }
        let mut sent = 0;
        while let Some((_, mad)) = cm.poll_transmit() {
            sent += 1;
            assert!(CmMessage::parse(&mad[..]).is_ok(), "the CM sent a MAD that does not parse");
        }
        assert!(sent <= 256, "the send queue is bounded");
        while let Some(ev) = cm.poll_event() {
            let id = match &ev {
                CmEvent::Request(id, _) | CmEvent::SidrRequest(id, ..) => Some(id.0),
                _ => None,
            };
            ours.extend(id);
            events.push(ev);
        }
        assert!(events.len() <= 4096, "the events are bounded");
        assert!(cm.conns() <= MAX_CONNS, "{} records", cm.conns());
        ours.truncate(64);
    }
}
