//! The request packets a device's RC QPs hold after gaps come from one pool per device, bounded
//! whatever the peers send (`roce/responder/hold.rs`), and all go back to it. Four QPs send 16 KiB
//! SENDs over a lossy link: every message arrives, the receiving device's one pool served all
//! four QPs' held packets, and it holds none once the gaps are filled.

mod common;

use engine::roce::DEVICE_HOLD_PACKETS;
use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, QpCap, RecvWr, SendFlags, SendWr, Sge, WcStatus, WrOpcode};
use nicsim::LinkConfig;
use std::time::Duration;

const QPS: usize = 4;
const MSG: usize = 16 << 10;
const MESSAGES: u64 = 150;
const DEPTH: u64 = 16;

#[test]
fn a_devices_qps_hold_packets_after_gaps_in_its_one_pool_and_give_them_all_back() {
    let cap = QpCap { max_send_wr: DEPTH as u32, max_recv_wr: MESSAGES as u32, ..QpCap::default() };
    let link = LinkConfig { loss: 0.02, ..LinkConfig::default() };
    let cfg = PairConfig { seed: 7, link, qps: QPS, cap, max_retries: Some(1000), ..PairConfig::default() };
    let mut p = SimPair::new(&cfg).unwrap();
    let src = p.a.reg_mr(p.pd_a, MSG, Access::LOCAL_WRITE).unwrap();
    let dst = p.b.reg_mr(p.pd_b, MSG, Access::LOCAL_WRITE).unwrap();
    p.a.mr_bytes_mut(&src).unwrap().iter_mut().enumerate().for_each(|(i, b)| *b = (i % 253) as u8);
    for &(_, qb) in &p.qps {
        let wrs: Vec<RecvWr> = (0..MESSAGES)
            .map(|i| RecvWr {
                wr_id: i,
                sg_list: vec![Sge { addr: dst.addr, length: MSG as u32, lkey: dst.lkey }],
            })
            .collect();
        p.b.post_recv(qb, &wrs).map_err(|(_, e)| e).unwrap();
    }
    let (mut posted, mut sent, mut received) = ([0u64; QPS], [0u64; QPS], 0u64);
    let finished = p
        .run_until(Duration::from_secs(60), |p| {
            for wc in common::drain(p, true) {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                sent[p.qps.iter().position(|&(qa, _)| qa.qpn() == wc.qp_num).unwrap()] += 1;
            }
            for wc in common::drain(p, false) {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                received += 1;
            }
            for (i, &(qa, _)) in p.qps.iter().enumerate() {
                while posted[i] < MESSAGES && posted[i] - sent[i] < DEPTH {
                    let sge = Sge { addr: src.addr, length: MSG as u32, lkey: src.lkey };
                    let mut wr = SendWr::new(posted[i], WrOpcode::Send, vec![sge]);
                    wr.flags = SendFlags::SIGNALED;
                    p.a.post_send(qa, &[wr]).map_err(|(_, e)| e).unwrap();
                    posted[i] += 1;
                }
            }
            received == QPS as u64 * MESSAGES && sent.iter().all(|&s| s == MESSAGES)
        })
        .unwrap();
    assert!(finished, "sent {sent:?}, received {received}");
    assert_eq!(p.b.mr_bytes(&dst).unwrap(), p.a.mr_bytes(&src).unwrap());
    let (drops, hold) = (p.b.stats().drops, p.b.hold_stats());
    eprintln!("receiver: {drops:?}; pool {hold:?}");
    assert!(drops.seq_naks_sent > 0 && drops.placed_ahead > 0, "the loss left gaps with packets after them");
    assert_eq!(drops.not_held, 0, "the pool was never spent");
    assert_eq!((hold.held, hold.capacity), (0, DEVICE_HOLD_PACKETS), "{hold:?}");
    assert!(hold.spare > 0, "the QPs held SENDs in the device's pool");
}
