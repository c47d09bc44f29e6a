//! `ibv_uc_pingpong` over the simulated network: UC QPs (no ACKs; a request completes when sent),
//! SEND ping-pong. `cargo run --release --example uc_pingpong -- [ITERS]`

use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, QpType, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode};

const SIZE: u32 = 4096;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iters: u64 = std::env::args().nth(1).map_or(Ok(1000), |s| s.parse())?;
    let mut p = SimPair::new(&PairConfig { qp_type: QpType::Uc, ..PairConfig::default() })?;
    let (qa, qb) = p.qps[0];
    let buf_a = p.a.reg_mr(p.pd_a, SIZE as usize, Access::LOCAL_WRITE)?;
    let buf_b = p.b.reg_mr(p.pd_b, SIZE as usize, Access::LOCAL_WRITE)?;
    let sge = |mr: &engine::verbs::Mr| Sge { addr: mr.addr, length: SIZE, lkey: mr.lkey };
    p.a.post_recv(qa, &[RecvWr { wr_id: 1, sg_list: vec![sge(&buf_a)] }]).map_err(|(_, e)| e)?;
    p.b.post_recv(qb, &[RecvWr { wr_id: 1, sg_list: vec![sge(&buf_b)] }]).map_err(|(_, e)| e)?;
    p.a.post_send(qa, &[SendWr::new(2, WrOpcode::Send, vec![sge(&buf_a)])]).map_err(|(_, e)| e)?;
    let mut rounds = 0u64;
    let mut wcs = Vec::new();
    while rounds < iters {
        if !p.step()? {
            return Err("a message was lost (the cable is lossless here)".into());
        }
        for (side, on_a) in [(0, false), (1, true)] {
            wcs.clear();
            let (ctx, cq, qp, buf) =
                if on_a { (&mut p.a, p.cq_a, qa, &buf_a) } else { (&mut p.b, p.cq_b, qb, &buf_b) };
            ctx.poll_cq(cq, &mut wcs, 16)?;
            for wc in wcs.iter().filter(|w| w.opcode == WcOpcode::Recv) {
                assert!(wc.status == WcStatus::Success && wc.byte_len == SIZE);
                ctx.post_recv(qp, &[RecvWr { wr_id: 1, sg_list: vec![sge(buf)] }]).map_err(|(_, e)| e)?;
                rounds += side;
                if rounds < iters {
                    ctx.post_send(qp, &[SendWr::new(2, WrOpcode::Send, vec![sge(buf)])])
                        .map_err(|(_, e)| e)?;
                }
            }
        }
    }
    println!("{iters} UC round trips of {SIZE} bytes, virtual time {:?}", p.net.now());
    Ok(())
}
