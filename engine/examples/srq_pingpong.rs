//! `ibv_srq_pingpong` over the simulated network: several RC QPs on each side share one receive
//! queue; every QP ping-pongs, and receives come from whichever SRQ entry is next.
//! `cargo run --release --example srq_pingpong -- [ITERS] [QPS]`

use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, RecvWr, SendWr, Sge, WcOpcode, WcStatus, WrOpcode};

const SIZE: u32 = 4096;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: u64 = args.next().map_or(Ok(500), |s| s.parse())?;
    let qps: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    let mut p = SimPair::new(&PairConfig { srq: true, qps, ..PairConfig::default() })?;
    let (srq_a, srq_b) = p.srqs.ok_or("the pair has SRQs")?;
    let buf_a = p.a.reg_mr(p.pd_a, SIZE as usize * 2 * qps, Access::LOCAL_WRITE)?;
    let buf_b = p.b.reg_mr(p.pd_b, SIZE as usize * 2 * qps, Access::LOCAL_WRITE)?;
    let slot = |mr: &engine::verbs::Mr, k: u64| Sge {
        addr: mr.addr + k * u64::from(SIZE),
        length: SIZE,
        lkey: mr.lkey,
    };
    // One SRQ entry per QP per side, in the first half of each buffer; sends use the second half.
    for k in 0..qps as u64 {
        p.a.post_srq_recv(srq_a, &[RecvWr { wr_id: k, sg_list: vec![slot(&buf_a, k)] }])
            .map_err(|(_, e)| e)?;
        p.b.post_srq_recv(srq_b, &[RecvWr { wr_id: k, sg_list: vec![slot(&buf_b, k)] }])
            .map_err(|(_, e)| e)?;
    }
    for (i, &(qa, _)) in p.qps.iter().enumerate() {
        let wr = SendWr::new(2, WrOpcode::Send, vec![slot(&buf_a, (qps + i) as u64)]);
        p.a.post_send(qa, &[wr]).map_err(|(_, e)| e)?;
    }
    let mut rounds = 0u64;
    let mut wcs = Vec::new();
    while rounds < iters * qps as u64 {
        if !p.step()? {
            return Err("stalled".into());
        }
        for on_a in [false, true] {
            wcs.clear();
            let (ctx, cq, srq, buf) =
                if on_a { (&mut p.a, p.cq_a, srq_a, &buf_a) } else { (&mut p.b, p.cq_b, srq_b, &buf_b) };
            ctx.poll_cq(cq, &mut wcs, 64)?;
            for wc in wcs.iter().filter(|w| w.opcode == WcOpcode::Recv) {
                assert!(wc.status == WcStatus::Success && wc.byte_len == SIZE);
                // Repost the SRQ entry that was used, and answer on the QP the message came on.
                ctx.post_srq_recv(srq, &[RecvWr { wr_id: wc.wr_id, sg_list: vec![slot(buf, wc.wr_id)] }])
                    .map_err(|(_, e)| e)?;
                let qp = p
                    .qps
                    .iter()
                    .map(|q| if on_a { q.0 } else { q.1 })
                    .find(|q| q.qpn() == wc.qp_num)
                    .ok_or("unknown QP")?;
                if on_a {
                    rounds += 1;
                }
                let i = p.qps.iter().position(|q| q.0 == qp || q.1 == qp).unwrap_or(0);
                ctx.post_send(qp, &[SendWr::new(2, WrOpcode::Send, vec![slot(buf, (qps + i) as u64)])])
                    .map_err(|(_, e)| e)?;
            }
        }
    }
    println!(
        "{qps} QPs x {iters} round trips of {SIZE} bytes through one SRQ per side, virtual time {:?}",
        p.net.now()
    );
    Ok(())
}
