//! The responder answers without the program (issue 54, "What to build" 4): READs, WRITEs and
//! atomics against a target device whose program polls every 500 us, or sleeps and never calls a
//! verb, complete about as soon as against a target that polls busily, over kernel UDP on
//! loopback. Before the progress thread slept on the datapath whenever the program was not inside
//! a verb, a target polling every 500 us answered on its next poll (about half the period late).

mod common;

use common::responder::{Latencies, Target, median, run};
use engine::datapath::udp::{RxIcrc, UdpPort};
use std::net::Ipv4Addr;
use std::time::Duration;

fn measure(net: u8, target: Target) -> Latencies {
    let (ip_a, ip_b) = (Ipv4Addr::new(127, 0, net, 1), Ipv4Addr::new(127, 0, net, 2));
    let bind = |ip| UdpPort::bind(ip, 4791, RxIcrc::Verify).expect("bind 4791 on a loopback address");
    run(bind(ip_a), ip_a, bind(ip_b), ip_b, target, 100, Duration::from_micros(137))
}

#[test]
fn a_target_polling_every_500us_or_asleep_answers_one_sided_operations_at_once() {
    let busy = measure(31, Target::Busy);
    let every = measure(32, Target::Every(Duration::from_micros(500)));
    let asleep = measure(33, Target::Asleep);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (op, pick) in [
        ("READ", (|l: &Latencies| l.read.clone()) as fn(&Latencies) -> Vec<Duration>),
        ("WRITE", |l| l.write.clone()),
        ("FETCH_ADD", |l| l.atomic.clone()),
    ] {
        let (b, e, s) = (median(&pick(&busy)), median(&pick(&every)), median(&pick(&asleep)));
        eprintln!(
            "{op} median: target polling busily {:.1} us, every 500 us {:.1} us, asleep {:.1} us",
            us(b),
            us(e),
            us(s)
        );
        // Answered on the target's next poll, the median would be near 250 us past the busy one;
        // answered by the progress thread on the packet, it is one thread wake-up past it.
        let bound = Duration::from_micros(150).max(3 * b);
        assert!(e < bound, "{op} against a target polling every 500 us: median {e:?}, busy {b:?}");
        assert!(s < bound, "{op} against a sleeping target: median {s:?}, busy {b:?}");
    }
}
