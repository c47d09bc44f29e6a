//! RDMA WRITE bandwidth with the verbs API over the simulated network, in the shape of
//! `ib_write_bw`: the server registers a buffer with REMOTE_WRITE and tells the client its address
//! and R_Key; the client keeps `DEPTH` writes in flight.
//!
//! `cargo run --release --example write_bw -- [ITERS] [SIZE]`. `softrdma perf write` is the full
//! tool (several QPs, impairments, data checks, the baseline).

use engine::simpair::{PairConfig, SimPair};
use engine::verbs::{Access, Mtu, SendWr, Sge, WcStatus, WrOpcode};
use std::time::Instant;

const DEPTH: u64 = 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: u64 = args.next().map_or(Ok(5000), |s| s.parse())?;
    let size: usize = args.next().map_or(Ok(65536), |s| s.parse())?;

    // Two devices with one connected RC QP pair (see rc_pingpong.rs for the modify_qp steps).
    let mut p = SimPair::new(&PairConfig { mtu: Mtu::Mtu4096, ..PairConfig::default() })?;
    let (qp, _) = p.qps[0];
    let src = p.a.reg_mr(p.pd_a, size, Access::LOCAL_WRITE)?;
    p.a.mr_bytes_mut(&src)?.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let dst = p.b.reg_mr(p.pd_b, size, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    // What the server would send the client out of band.
    let (remote_addr, rkey) = (dst.addr, dst.rkey);

    let start = Instant::now();
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut wcs = Vec::new();
    while completed < iters {
        while posted < iters && posted - completed < DEPTH {
            let sge = Sge { addr: src.addr, length: size as u32, lkey: src.lkey };
            let wr = SendWr::new(posted, WrOpcode::RdmaWrite { remote_addr, rkey }, vec![sge]);
            p.a.post_send(qp, &[wr]).map_err(|(_, e)| e)?;
            posted += 1;
        }
        if !p.step()? {
            return Err("stalled".into());
        }
        wcs.clear();
        p.a.poll_cq(p.cq_a, &mut wcs, 64)?;
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                return Err(format!("write failed: {wc:?}").into());
            }
            completed += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert!(p.b.mr_bytes(&dst)? == p.a.mr_bytes(&src)?, "the target holds the source bytes");
    let bytes = size as u64 * iters;
    println!(" #bytes  #iterations  BW average[MB/sec]  BW average[Gb/sec]");
    println!(
        " {size:<7} {iters:<12} {:<19.2} {:.2}",
        bytes as f64 / secs / 1048576.0,
        bytes as f64 * 8.0 / secs / 1e9
    );
    Ok(())
}
