//! `softrdma pingpong`: one side against rdma-core's ibv_{rc,uc,ud}_pingpong.

use std::process::ExitCode;

use engine::verbs::{Mtu, QpType};
use softrdma::perf;

use super::args::{PingpongArgs, RxIcrcArg, TransportArg};
use engine::datapath::link::{Backend, XdpQueue};

pub(crate) fn run_pingpong(a: &PingpongArgs) -> ExitCode {
    use engine::datapath::udp::RxIcrc;
    let qp_type = match a.transport {
        TransportArg::Rc => QpType::Rc,
        TransportArg::Uc => QpType::Uc,
        TransportArg::Ud => QpType::Ud,
    };
    let mtu = Mtu::from_bytes(a.mtu).unwrap_or(Mtu::Mtu1024);
    let size = a.size.map_or(if qp_type == QpType::Ud { 2048 } else { 4096 }, |s| s as usize);
    if qp_type == QpType::Ud && size > 4096 {
        eprintln!("softrdma pingpong: a UD message must fit one packet (at most 4096 bytes)");
        return ExitCode::from(2);
    }
    let _ = (&a.ib_dev, a.gid_idx);
    let (backend, xdp) = match (a.backend, &a.dev) {
        (Backend::Udp, _) => (Backend::Udp, None),
        (Backend::AfXdp, Some(dev)) => {
            let mode = engine::datapath::afxdp::XdpMode::Generic;
            (Backend::AfXdp, Some(XdpQueue { dev: dev.clone(), queue: a.queue, mode, multi_buffer: true }))
        }
        (Backend::AfXdp, None) => {
            eprintln!("softrdma pingpong: --backend afxdp needs --dev IFACE");
            return ExitCode::from(2);
        }
        (Backend::Sim, _) => {
            eprintln!("softrdma pingpong: the peer is another process: --backend udp or afxdp");
            return ExitCode::from(2);
        }
    };
    let net = perf::remote::Net {
        backend,
        xdp,
        rx_icrc: match a.rx_icrc {
            RxIcrcArg::Verify => RxIcrc::Verify,
            RxIcrcArg::Trust => RxIcrc::Trust,
        },
        tx_faults: engine::datapath::wrap::TxFaults { loss: a.tx_loss, ..Default::default() },
        seed: a.seed,
        ..perf::remote::Net::udp()
    };
    let o = softrdma::pingpong::Options {
        net,
        qp_type,
        server: a.server.clone(),
        port: a.port,
        local: a.local,
        size,
        mtu,
        rx_depth: a.rx_depth,
        iters: a.iters,
        chk: a.chk,
        timeout: a.timeout,
        cm: a.cm,
    };
    match softrdma::pingpong::run(&o) {
        Ok(r) => {
            let secs = r.elapsed.as_secs_f64().max(1e-9);
            println!(
                "{} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
                r.bytes,
                r.bytes as f64 * 8.0 / secs / 1e6
            );
            println!("{} iters in {secs:.2} seconds = {:.2} usec/iter", r.iters, secs * 1e6 / r.iters as f64);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("softrdma pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}
