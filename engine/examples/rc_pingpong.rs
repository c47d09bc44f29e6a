//! The verbs API in the shape of `ibv_rc_pingpong`: two devices on a simulated cable, one RC QP each,
//! SEND ping-pong of a 4096-byte buffer.
//!
//! `cargo run --release --example rc_pingpong -- [ITERS] [SIZE]`

use engine::datapath::sim::SimNet;
use engine::verbs::{
    Access, AddressVector, Context, Mtu, QpAttr, QpInitAttr, QpState, RecvWr, SendWr, Sge, VerbsError,
    WcStatus, WorkCompletion, WrOpcode,
};
use nicsim::LinkConfig;
use std::time::{Duration, Instant};

/// The two devices on their cable, as nicsim's driver runs them ([`nicsim::step`]).
struct Devices {
    net: SimNet,
    ctx: [Context; 2],
}

impl nicsim::System for Devices {
    type Error = VerbsError;

    fn pass(&mut self) -> Result<bool, VerbsError> {
        Ok(self.ctx[0].progress()? + self.ctx[1].progress()? > 0)
    }

    fn next_event(&self) -> Option<Duration> {
        let deadlines = self.ctx.iter().filter_map(Context::next_deadline);
        self.net.next_event().into_iter().chain(deadlines).min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let iters: u64 = args.next().map_or(Ok(1000), |s| s.parse())?;
    let size: usize = args.next().map_or(Ok(4096), |s| s.parse())?;

    // Two devices, "sim0" and "sim1", joined by a 1 us cable.
    let (net, port0, port1) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
    let mut ctx = [Context::open(port0), Context::open(port1)];
    let mut side = Vec::new();
    for c in ctx.iter_mut() {
        let pd = c.alloc_pd();
        let mr = c.reg_mr(pd, size, Access::LOCAL_WRITE)?;
        let cq = c.create_cq(16)?;
        let init = QpInitAttr::rc(cq);
        let qp = c.create_qp(pd, &init)?;
        c.modify_qp(qp, QpState::Init, &QpAttr { qp_access_flags: Some(Access::NONE), ..QpAttr::default() })?;
        side.push((mr, cq, qp, c.gid()));
    }
    // Exchange QP numbers and GIDs (ibv_rc_pingpong does this over TCP), then INIT -> RTR -> RTS.
    for i in 0..2 {
        let (_, _, qp, _) = side[i];
        let (_, _, peer, peer_gid) = side[1 - i];
        let rtr = QpAttr {
            ah_attr: Some(AddressVector::new(peer_gid)),
            path_mtu: Some(Mtu::Mtu1024),
            dest_qp_num: Some(peer.qpn()),
            rq_psn: Some(0),
            max_dest_rd_atomic: Some(1),
            min_rnr_timer: Some(12),
            ..QpAttr::default()
        };
        ctx[i].modify_qp(qp, QpState::Rtr, &rtr)?;
        let rts = QpAttr {
            sq_psn: Some(0),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            max_rd_atomic: Some(1),
            ..QpAttr::default()
        };
        ctx[i].modify_qp(qp, QpState::Rts, &rts)?;
    }
    let recv =
        |c: &mut Context, s: &(engine::verbs::Mr, engine::verbs::Cq, engine::verbs::Qp, std::net::IpAddr)| {
            let sge = Sge { addr: s.0.addr, length: size as u32, lkey: s.0.lkey };
            c.post_recv(s.2, &[RecvWr { wr_id: 1, sg_list: vec![sge] }]).map_err(|(_, e)| e)
        };
    let send =
        |c: &mut Context, s: &(engine::verbs::Mr, engine::verbs::Cq, engine::verbs::Qp, std::net::IpAddr)| {
            let sge = Sge { addr: s.0.addr, length: size as u32, lkey: s.0.lkey };
            let wr = SendWr::new(2, WrOpcode::Send, vec![sge]);
            c.post_send(s.2, &[wr]).map_err(|(_, e)| e)
        };
    recv(&mut ctx[0], &side[0])?;
    recv(&mut ctx[1], &side[1])?;

    let start = Instant::now();
    let mut wcs: Vec<WorkCompletion> = Vec::new();
    // Side 0 pings; whoever receives answers; each side needs its SEND and RECV completions.
    send(&mut ctx[0], &side[0])?;
    let mut done = [0u64; 2];
    let mut sim = Devices { net, ctx };
    while done[0] < iters || done[1] < iters {
        // Both devices make progress; if neither had anything to do, virtual time jumps to the
        // next frame arrival or timer.
        if !nicsim::step(&mut sim)? {
            return Err("stalled".into());
        }
        let ctx = &mut sim.ctx;
        for i in 0..2 {
            wcs.clear();
            ctx[i].poll_cq(side[i].1, &mut wcs, 16)?;
            for wc in &wcs {
                if wc.status != WcStatus::Success {
                    return Err(format!("completion failed: {wc:?}").into());
                }
                if wc.wr_id == 1 {
                    done[i] += 1;
                    recv(&mut ctx[i], &side[i])?;
                    if done[i] < iters || i == 1 {
                        send(&mut ctx[i], &side[i])?;
                    }
                }
            }
        }
    }
    let net = sim.net;
    let secs = start.elapsed().as_secs_f64();
    let bytes = 2 * size as u64 * iters;
    println!("{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec", bytes as f64 * 8.0 / secs / 1e6);
    println!("{iters} iters in {secs:.2} seconds = {:.2} usec/iter", secs * 1e6 / iters as f64);
    println!(
        "virtual time: {:?} ({:.2} usec/iter on the simulated 1 us cable)",
        net.now(),
        net.now().as_secs_f64() * 1e6 / iters as f64
    );
    Ok(())
}
