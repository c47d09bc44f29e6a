//! One-sided latency against a target whose program polls busily, every 500 us, or not at all
//! (issue 54, "What to build" 4): READs, WRITEs and FETCH_ADDs of 8 bytes over kernel UDP, the
//! target a `Device` (as `libsoftrdma_ibverbs` runs it), the initiator polling busily. Rounds
//! alternate the three targets; the table gives each one's medians per round.
//!
//! `cargo run --release --example idle_target -- [ROUNDS] [NS_A IP_A NS_B IP_B]`: without the
//! namespaces, 127.0.41.1 and .2 on loopback; with them (names under /run/netns, root), the
//! initiator's socket opens in NS_A on IP_A and the target's in NS_B on IP_B, e.g. the two ends
//! of a veth pair.

#[allow(unreachable_pub)]
#[path = "../tests/common/responder.rs"]
mod responder;

use engine::datapath::udp::{RxIcrc, UdpPort};
use responder::{Target, median, run};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use std::net::Ipv4Addr;
use std::time::Duration;

/// Binds RoCE's UDP port (4791) on `ip` in network namespace `ns` (this thread stays there).
fn bind_in(ns: Option<String>, ip: Ipv4Addr) -> std::io::Result<UdpPort> {
    if let Some(ns) = ns {
        let f = std::fs::File::open(format!("/run/netns/{ns}"))?;
        move_into_link_name_space(std::os::fd::AsFd::as_fd(&f), Some(LinkNameSpaceType::Network))?;
    }
    UdpPort::bind(ip, 4791, RxIcrc::Verify)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.first().map_or(Ok(3), |s| s.parse())?;
    let (ns_a, ip_a, ns_b, ip_b) = match &args[1.min(args.len())..] {
        [na, ia, nb, ib] => (Some(na.clone()), ia.parse()?, Some(nb.clone()), ib.parse()?),
        [] => (None, Ipv4Addr::new(127, 0, 41, 1), None, Ipv4Addr::new(127, 0, 41, 2)),
        _ => return Err("arguments: [ROUNDS] [NS_A IP_A NS_B IP_B]".into()),
    };
    let targets = [
        ("busy", Target::Busy),
        ("every 500 us", Target::Every(Duration::from_micros(500))),
        ("asleep", Target::Asleep),
    ];
    let us = |d: Duration| format!("{:7.1}", d.as_secs_f64() * 1e6);
    println!(
        "{:<14} {:>5} {:>9} {:>9} {:>9}   (medians, us)",
        "target", "round", "READ", "WRITE", "FETCH_ADD"
    );
    for round in 0..rounds {
        for (name, t) in targets {
            // Each side's socket opens in its namespace, on a thread of its own.
            let (na, nb) = (ns_a.clone(), ns_b.clone());
            let a = std::thread::spawn(move || bind_in(na, ip_a)).join().map_err(|_| "bind")??;
            let b = std::thread::spawn(move || bind_in(nb, ip_b)).join().map_err(|_| "bind")??;
            let l = run(a, ip_a, b, ip_b, t, 300, Duration::from_micros(137));
            println!(
                "{name:<14} {round:>5} {:>9} {:>9} {:>9}",
                us(median(&l.read)),
                us(median(&l.write)),
                us(median(&l.atomic))
            );
        }
    }
    Ok(())
}
