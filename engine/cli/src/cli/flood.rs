//! `softrdma flood`: sends hostile datagrams ([`softrdma::flood`]) at a receiver from one or more
//! local addresses, at a chosen rate, and says how many left.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use softrdma::flood::{Flood, FloodKind, UetTarget};

/// Options of `softrdma flood`.
#[derive(Args)]
pub(crate) struct FloodArgs {
    /// The receiver's IPv4 address.
    #[arg(long)]
    connect: Ipv4Addr,
    /// What to send.
    #[arg(long, value_enum)]
    kind: KindArg,
    /// Datagrams to send.
    #[arg(long, default_value_t = 100_000)]
    count: u64,
    /// Local address to send from (repeat for several sources; each must be assigned to an
    /// interface). Datagrams go round-robin over them. Default: the address the route chooses.
    #[arg(long = "from", value_name = "IP")]
    from: Vec<Ipv4Addr>,
    /// Datagrams per second over all sources (0: as fast as the kernel takes them).
    #[arg(long, default_value_t = 0)]
    pps: u64,
    /// UDP destination port (default: 4791 for RoCE kinds, 4793 for UET kinds).
    #[arg(long)]
    port: Option<u16>,
    /// Seed of the generated datagrams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// UET JobID the requests carry (perf's default is 1).
    #[arg(long, default_value_t = 1)]
    job_id: u32,
    /// UET PIDonFEP the requests address.
    #[arg(long, default_value_t = 0)]
    pid_on_fep: u16,
    /// UET resource index the requests address.
    #[arg(long, default_value_t = 0)]
    resource_index: u16,
}

#[derive(Clone, Copy, ValueEnum)]
enum KindArg {
    /// RoCEv2 to 4791: random bytes, SENDs to unknown QPNs, SENDs to QPNs 0x11.. from a stranger,
    /// and the same with a bad ICRC (in turn).
    RoceGarbage,
    /// Random bytes to 4793.
    UetGarbage,
    /// UET SYNs, each with a new SPDCID (each would open a PDC).
    UetSyn,
    /// First packets of UET SENDs claiming 4 GiB that never finish, over UUD, RUDI and new PDCs.
    UetPartial,
}

pub(crate) fn run_flood(a: &FloodArgs) -> ExitCode {
    match flood(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("softrdma flood: {e}");
            ExitCode::from(2)
        }
    }
}

fn flood(a: &FloodArgs) -> Result<(), String> {
    let kind = match a.kind {
        KindArg::RoceGarbage => FloodKind::RoceGarbage,
        KindArg::UetGarbage => FloodKind::UetGarbage,
        KindArg::UetSyn => FloodKind::UetSyn,
        KindArg::UetPartial => FloodKind::UetPartial,
    };
    if a.job_id > 0xFF_FFFF || a.pid_on_fep > 0xFFF || a.resource_index > 0xFFF {
        return Err("--job-id has 24 bits, --pid-on-fep and --resource-index 12".into());
    }
    let target = UetTarget { job_id: a.job_id, pid_on_fep: a.pid_on_fep, resource_index: a.resource_index };
    let dst = SocketAddrV4::new(a.connect, a.port.unwrap_or(kind.port()));
    let from = if a.from.is_empty() { vec![softrdma::oob::route_source(*dst.ip())?] } else { a.from.clone() };
    let mut sources = Vec::with_capacity(from.len());
    for (i, ip) in from.iter().enumerate() {
        // Not connected: an ICMP error from the target must not fail the sends that follow.
        let s = UdpSocket::bind(SocketAddrV4::new(*ip, 0)).map_err(|e| format!("bind {ip}: {e}"))?;
        let SocketAddr::V4(local) = s.local_addr().map_err(|e| e.to_string())? else {
            return Err("an IPv4 socket has an IPv4 address".into());
        };
        sources.push((s, Flood::new(kind, local, *dst.ip(), target, a.seed.wrapping_add(i as u64))));
    }
    let start = Instant::now();
    let (mut sent, mut failed, mut last_error) = (0u64, 0u64, None);
    let mut datagram = Vec::with_capacity(2048);
    for n in 0..a.count {
        if a.pps > 0 {
            let due = start + Duration::from_secs_f64(n as f64 / a.pps as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let (socket, flood) = &mut sources[(n % from.len() as u64) as usize];
        flood.next_datagram(&mut datagram);
        match socket.send_to(&datagram, dst) {
            Ok(_) => sent += 1,
            Err(e) => {
                failed += 1;
                last_error = Some(e);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    println!(
        "sent {sent} datagrams to {dst} from {} address(es) in {secs:.2} s ({:.0}/s); send errors {failed}{}",
        sources.len(),
        sent as f64 / secs,
        last_error.map_or(String::new(), |e| format!(" (last: {e})"))
    );
    Ok(())
}
