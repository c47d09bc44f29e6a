//! `ibv_ud_pingpong` over the simulated network: UD QPs, an address handle per side, Q_Keys, and
//! the 40-byte GRH area in front of received data. `cargo run --release --example ud_pingpong -- [ITERS]`

use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, QpType, RecvWr, SendWr, Sge, UdDest, WcOpcode, WcStatus, WrOpcode};

const SIZE: u32 = 1024;
const GRH: u32 = 40;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iters: u64 = std::env::args().nth(1).map_or(Ok(1000), |s| s.parse())?;
    let cfg = PairConfig { qp_type: QpType::Ud, ..PairConfig::default() };
    let mut p = SimPair::new(&cfg)?;
    let (qa, qb) = p.qps[0];
    let (ah_a, ah_b) = p.ahs.ok_or("UD pairs have address handles")?;
    let buf_a = p.a.reg_mr(p.pd_a, 2 * (SIZE + GRH) as usize, Access::LOCAL_WRITE)?;
    let buf_b = p.b.reg_mr(p.pd_b, 2 * (SIZE + GRH) as usize, Access::LOCAL_WRITE)?;
    // Receive buffers leave room for the GRH area; sends come from the second half.
    let recv = |mr: &engine::verbs::Mr| RecvWr {
        wr_id: 1,
        sg_list: vec![Sge { addr: mr.addr, length: SIZE + GRH, lkey: mr.lkey }],
    };
    let send = |mr: &engine::verbs::Mr, ah, qpn| {
        let sge = Sge { addr: mr.addr + u64::from(SIZE + GRH), length: SIZE, lkey: mr.lkey };
        let mut wr = SendWr::new(2, WrOpcode::Send, vec![sge]);
        wr.ud = Some(UdDest { ah, remote_qpn: qpn, remote_qkey: cfg.qkey });
        wr
    };
    p.a.post_recv(qa, &[recv(&buf_a)]).map_err(|(_, e)| e)?;
    p.b.post_recv(qb, &[recv(&buf_b)]).map_err(|(_, e)| e)?;
    p.a.post_send(qa, &[send(&buf_a, ah_a, qb.qpn())]).map_err(|(_, e)| e)?;
    let (mut pongs, mut pings) = (0u64, 0u64);
    let mut wcs = Vec::new();
    while pongs < iters {
        if !p.step()? {
            return Err("a datagram was lost (the cable is lossless here)".into());
        }
        wcs.clear();
        p.b.poll_cq(p.cq_b, &mut wcs, 16)?;
        for wc in wcs.iter().filter(|w| w.opcode == WcOpcode::Recv) {
            assert!(wc.status == WcStatus::Success && wc.byte_len == SIZE + GRH && wc.src_qp == qa.qpn());
            pings += 1;
            p.b.post_recv(qb, &[recv(&buf_b)]).map_err(|(_, e)| e)?;
            p.b.post_send(qb, &[send(&buf_b, ah_b, wc.src_qp)]).map_err(|(_, e)| e)?;
        }
        wcs.clear();
        p.a.poll_cq(p.cq_a, &mut wcs, 16)?;
        for wc in wcs.iter().filter(|w| w.opcode == WcOpcode::Recv) {
            assert!(wc.status == WcStatus::Success && wc.src_gid == Some(p.b.gid()));
            pongs += 1;
            p.a.post_recv(qa, &[recv(&buf_a)]).map_err(|(_, e)| e)?;
            if pongs < iters {
                p.a.post_send(qa, &[send(&buf_a, ah_a, qb.qpn())]).map_err(|(_, e)| e)?;
            }
        }
    }
    println!(
        "{iters} UD round trips of {SIZE} bytes ({pings} pings answered), virtual time {:?}",
        p.net.now()
    );
    Ok(())
}
