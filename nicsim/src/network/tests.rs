use super::*;
use crate::link::jain;

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C: [u8; 6] = [2, 0, 0, 0, 0, 3];

fn frame(dst: [u8; 6], src: [u8; 6], n: u32, len: usize) -> Frame {
    let mut b = vec![0u8; len.max(18)];
    b[0..6].copy_from_slice(&dst);
    b[6..12].copy_from_slice(&src);
    b[14..18].copy_from_slice(&n.to_be_bytes());
    Frame::from_bytes(&b)
}

fn tag(f: &Frame) -> u32 {
    u32::from_be_bytes(f.as_slice()[14..18].try_into().unwrap())
}

fn pair(seed: u64, cfg: LinkConfig) -> (Network, PortId, PortId) {
    let mut net = Network::new(seed);
    let a = net.add_port(A);
    let b = net.add_port(B);
    net.connect(a, b, cfg, cfg).unwrap();
    (net, a, b)
}

/// Sends `n` frames a->b one microsecond apart and returns what b got, with arrival times.
fn run(net: &mut Network, a: PortId, b: PortId, n: u32) -> Vec<(Duration, Vec<u8>)> {
    let mut got = Vec::new();
    for i in 0..n {
        net.transmit(a, frame(B, A, i, 100)).unwrap();
        net.advance_to(net.now() + Duration::from_micros(1));
        while let Some(f) = net.receive(b) {
            got.push((net.now(), f.as_slice().to_vec()));
        }
    }
    while let Some(t) = net.next_event() {
        net.advance_to(t);
        while let Some(f) = net.receive(b) {
            got.push((net.now(), f.as_slice().to_vec()));
        }
    }
    got
}

fn lossy() -> LinkConfig {
    LinkConfig { loss: 0.1, reorder: 0.1, duplicate: 0.1, corrupt: 0.1, ..LinkConfig::default() }
}

#[test]
fn same_seed_same_run() {
    let (mut n1, a1, b1) = pair(7, lossy());
    let (mut n2, a2, b2) = pair(7, lossy());
    let (mut n3, a3, b3) = pair(8, lossy());
    let r1 = run(&mut n1, a1, b1, 500);
    assert_eq!(r1, run(&mut n2, a2, b2, 500));
    assert_ne!(r1, run(&mut n3, a3, b3, 500));
    assert_eq!(n1.total_stats(), n2.total_stats());
}

#[test]
fn latency_is_one_way_delay() {
    let cfg = LinkConfig { latency: Duration::from_micros(5), ..LinkConfig::default() };
    let (mut net, a, b) = pair(1, cfg);
    net.transmit(a, frame(B, A, 1, 64)).unwrap();
    assert!(net.receive(b).is_none());
    assert_eq!(net.next_event(), Some(Duration::from_micros(5)));
    net.advance_to(Duration::from_micros(4));
    assert!(net.receive(b).is_none());
    net.advance_to(Duration::from_micros(5));
    assert_eq!(tag(&net.receive(b).unwrap()), 1);
    assert!(net.receive(a).is_none());
}

#[test]
fn bandwidth_serializes_and_tail_drops() {
    // 1 Gb/s: a 1000-byte frame takes 8 us on the wire; the queue holds 3000 bytes.
    let cfg = LinkConfig {
        latency: Duration::ZERO,
        bandwidth_bps: 1_000_000_000,
        queue_limit: 3000,
        ..LinkConfig::default()
    };
    let (mut net, a, b) = pair(1, cfg);
    for i in 0..5 {
        net.transmit(a, frame(B, A, i, 1000)).unwrap();
    }
    let st = net.egress_stats(a).unwrap();
    assert_eq!((st.offered, st.tail_dropped), (5, 2), "{st:?}");
    let mut arrivals = Vec::new();
    while let Some(t) = net.next_event() {
        net.advance_to(t);
        while let Some(f) = net.receive(b) {
            arrivals.push((t.as_nanos(), tag(&f)));
        }
    }
    assert_eq!(arrivals, vec![(8000, 0), (16000, 1), (24000, 2)]);
}

#[test]
fn impairment_rates_follow_probabilities() {
    let cfg = LinkConfig { loss: 0.3, ..LinkConfig::default() };
    let (mut net, a, b) = pair(3, cfg);
    let got = run(&mut net, a, b, 10_000);
    let lost = 10_000 - got.len();
    assert!((2700..3300).contains(&lost), "lost {lost}");
    assert_eq!(net.egress_stats(a).unwrap().lost as usize, lost);

    let (mut net, a, b) = pair(3, LinkConfig { duplicate: 0.2, ..LinkConfig::default() });
    let got = run(&mut net, a, b, 5_000);
    assert!((5_800..6_200).contains(&got.len()), "{}", got.len());

    let (mut net, a, b) = pair(3, LinkConfig { corrupt: 1.0, ..LinkConfig::default() });
    let orig = frame(B, A, 0xABCD, 100);
    for _ in 0..200 {
        net.transmit(a, orig.clone()).unwrap();
        net.advance_to(net.now() + Duration::from_micros(2));
        let got = net.receive(b).expect("corruption does not drop");
        let bits: u32 = got.as_slice().iter().zip(orig.as_slice()).map(|(x, y)| (x ^ y).count_ones()).sum();
        assert_eq!(bits, 1);
    }
    assert_eq!(net.egress_stats(a).unwrap().corrupted, 200);
}

#[test]
fn reorder_lets_later_frames_overtake() {
    let cfg = LinkConfig { reorder: 0.2, reorder_window: Duration::from_micros(20), ..LinkConfig::default() };
    let (mut net, a, b) = pair(5, cfg);
    let tags: Vec<u32> = run(&mut net, a, b, 1000)
        .iter()
        .map(|(_, f)| u32::from_be_bytes(f[14..18].try_into().unwrap()))
        .collect();
    assert_eq!(tags.len(), 1000, "reordering loses nothing");
    let inversions = tags.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(inversions > 50, "only {inversions} inversions");
    let mut sorted = tags.clone();
    sorted.sort();
    assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
}

#[test]
fn switch_learns_and_floods() {
    let mut net = Network::new(1);
    let sw = net.add_switch();
    let ports: Vec<PortId> = [A, B, C].iter().map(|&m| net.add_port(m)).collect();
    for &p in &ports {
        net.attach(p, sw, LinkConfig::default(), LinkConfig::default()).unwrap();
    }
    net.transmit(ports[0], frame(C, A, 1, 64)).unwrap();
    net.transmit(ports[1], frame([0xff; 6], B, 2, 64)).unwrap();
    net.advance_to(Duration::from_millis(1));
    let drain = |net: &mut Network, p: PortId| {
        let mut v = Vec::new();
        while let Some(f) = net.receive(p) {
            v.push(tag(&f));
        }
        v
    };
    assert_eq!(drain(&mut net, ports[2]), vec![1, 2]);
    assert_eq!(drain(&mut net, ports[0]), vec![2]);
    assert_eq!(drain(&mut net, ports[1]), Vec::<u32>::new());
    assert_eq!(
        net.attach(ports[0], sw, LinkConfig::default(), LinkConfig::default()),
        Err(Error::PortInUse(0))
    );
}

#[test]
fn tap_sees_frames_before_impairments() {
    let (mut net, a, b) = pair(9, LinkConfig { loss: 1.0, ..LinkConfig::default() });
    net.enable_tap();
    assert!(run(&mut net, a, b, 10).is_empty());
    let tap = net.take_tap();
    assert_eq!(tap.len(), 10);
    assert!(tap.iter().all(|r| r.port == a.0 && r.bytes.len() == 100));
    assert_eq!(tap[3].time, Duration::from_micros(3));
}

#[test]
fn bad_config_and_ports_are_errors() {
    let mut net = Network::new(0);
    let a = net.add_port(A);
    let b = net.add_port(B);
    let bad = LinkConfig { loss: 1.5, ..LinkConfig::default() };
    assert!(matches!(net.connect(a, b, bad, bad), Err(Error::BadConfig(_))));
    assert_eq!(net.transmit(a, Frame::new()), Err(Error::NotConnected(0)));
    assert_eq!(net.transmit(PortId(9), Frame::new()), Err(Error::NoSuchPort(9)));
    assert_eq!(net.connect(a, a, LinkConfig::default(), LinkConfig::default()), Err(Error::PortInUse(0)));
}

#[test]
fn a_down_port_sends_and_receives_nothing() {
    let (mut net, a, b) = pair(1, LinkConfig::default());
    net.set_port_up(b, false).unwrap();
    assert!(!net.port_up(b) && net.port_up(a));
    net.transmit(a, frame(B, A, 1, 64)).unwrap();
    net.transmit(b, frame(A, B, 2, 64)).unwrap();
    net.advance_to(Duration::from_millis(1));
    assert!(net.receive(a).is_none() && net.receive(b).is_none());
    net.set_port_up(b, true).unwrap();
    net.transmit(a, frame(B, A, 3, 64)).unwrap();
    net.advance_to(Duration::from_millis(2));
    assert_eq!(tag(&net.receive(b).unwrap()), 3);
    assert_eq!(net.set_port_up(PortId(7), true), Err(Error::NoSuchPort(7)));
}

/// An Ethernet/IPv4 frame of `len` bytes with this ECN codepoint and a correct header checksum.
fn ip_frame(dst: [u8; 6], src: [u8; 6], ecn: u8, len: usize) -> Frame {
    let mut b = vec![0u8; len.max(34)];
    b[0..6].copy_from_slice(&dst);
    b[6..12].copy_from_slice(&src);
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    b[14] = 0x45;
    b[15] = (26 << 2) | ecn;
    b[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    b[22] = 64;
    b[23] = 17;
    b[26..30].copy_from_slice(&[10, 0, 0, 1]);
    b[30..34].copy_from_slice(&[10, 0, 0, 2]);
    let c = ip_checksum(&b[14..34]);
    b[24..26].copy_from_slice(&c.to_be_bytes());
    Frame::from_bytes(&b)
}

/// The IPv4 header checksum computed from scratch (checksum field taken as zero).
fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for i in (0..20).step_by(2) {
        if i != 10 {
            s += u32::from(u16::from_be_bytes([h[i], h[i + 1]]));
        }
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn ce_marking_keeps_the_ipv4_checksum_right() {
    for ecn in 0..4u8 {
        for len in [34usize, 60, 1500] {
            let mut f = ip_frame(B, A, ecn, len);
            let marked = mark_ce(f.as_mut_slice());
            let b = f.as_slice();
            assert_eq!(marked, ecn == 1 || ecn == 2, "ECN {ecn}");
            assert_eq!(b[15] & 3, if ecn == 0 { 0 } else { 3 });
            assert_eq!(u16::from_be_bytes([b[24], b[25]]), ip_checksum(&b[14..34]), "ECN {ecn} len {len}");
        }
    }
    assert!(!mark_ce(&mut frame(B, A, 0, 100).as_mut_slice().to_vec()), "not IPv4");
}

#[test]
fn incast_queues_mark_and_tail_drop_at_the_bottleneck() {
    // Eight senders at 10 Gb/s each into one 10 Gb/s port: the switch's egress toward the
    // receiver is the bottleneck. ECN marks above 20 KB, tail drop above 100 KB.
    let mut net = Network::new(3);
    let sw = net.add_switch();
    let fast = LinkConfig {
        latency: Duration::from_micros(1),
        bandwidth_bps: 10_000_000_000,
        ..LinkConfig::default()
    };
    let bottleneck = LinkConfig { queue_limit: 100_000, ecn_threshold: 20_000, ..fast };
    let rx = net.add_port([2, 0, 0, 0, 1, 0]);
    net.attach(rx, sw, fast, bottleneck).unwrap();
    let senders: Vec<PortId> = (0..8u8)
        .map(|i| {
            let p = net.add_port([2, 0, 0, 0, 0, 10 + i]);
            net.attach(p, sw, fast, fast).unwrap();
            p
        })
        .collect();
    let mut got = [0u64; 8];
    for round in 0..200u32 {
        for (i, &p) in senders.iter().enumerate() {
            net.transmit(p, ip_frame([2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 0, 10 + i as u8], 2, 1500)).unwrap();
        }
        net.advance_to(Duration::from_micros(20 + u64::from(round) * 2));
        while let Some(f) = net.receive(rx) {
            got[usize::from(f.as_slice()[11] - 10)] += 1;
        }
    }
    while let Some(t) = net.next_event() {
        net.advance_to(t);
        while let Some(f) = net.receive(rx) {
            if f.len() == 1500 {
                got[usize::from(f.as_slice()[11] - 10)] += 1;
            }
        }
    }
    let st = net.ingress_stats(rx).unwrap();
    assert!(st.tail_dropped > 100, "an uncontrolled incast overflows the queue: {st:?}");
    assert!(st.ecn_marked > 100, "{st:?}");
    let p99 = net.ingress_queue_quantile(rx, 0.99).unwrap();
    assert!(p99 > 20_000 && p99 <= 100_000 + QUEUE_BUCKET, "p99 {p99}");
    assert!(net.ingress_queue_quantile(rx, 0.0).unwrap() <= QUEUE_BUCKET);
    let delivered: u64 = got.iter().sum();
    assert_eq!(delivered + st.tail_dropped, 1600, "every frame delivered or dropped at the bottleneck");
    let shares: Vec<f64> = got.iter().map(|&g| g as f64).collect();
    // Drop-tail with synchronized senders favours whoever arrives first in each round: the
    // uncontrolled baseline the congestion-control work has to beat.
    assert!(jain(&shares) < 0.9, "{got:?}");
    assert!(
        (jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12 && (jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12
    );
}

#[test]
fn red_marking_rises_between_kmin_and_the_threshold() {
    // 100 frames of 1000 bytes at once into a 1 Gb/s link: frame k arrives behind k*1000 bytes.
    let cfg = LinkConfig {
        bandwidth_bps: 1_000_000_000,
        ecn_threshold: 50_000,
        ecn_min: 10_000,
        ecn_pmax: 0.5,
        ..LinkConfig::default()
    };
    let mut marked_between = 0;
    for seed in 0..20 {
        let (mut net, a, b) = pair(seed, cfg);
        for _ in 0..100 {
            net.transmit(a, ip_frame(B, A, 2, 1000)).unwrap();
        }
        net.advance_to(Duration::from_secs(1));
        for k in 0..100 {
            let ce = net.receive(b).unwrap().as_slice()[15] & 3 == 3;
            match k {
                0..=10 => assert!(!ce, "frame {k} is behind at most Kmin"),
                51.. => assert!(ce, "frame {k} is behind more than the threshold"),
                _ => marked_between += usize::from(ce),
            }
        }
    }
    // Expected 20 x sum over k = 11..=50 of 0.5 (k - 10) / 40 = 205.
    assert!((150..=260).contains(&marked_between), "{marked_between}");
}

#[test]
fn trimming_cuts_fixes_the_headers_and_jumps_the_queue() {
    let mut f = ip_frame(B, A, 2, 1500);
    let b = f.as_mut_slice();
    assert_eq!(trim(b, 1500, 100, 0x21), Some(100));
    assert_eq!(b[15], (0x21 << 2) | 2, "DSCP set, ECN kept");
    assert_eq!(u16::from_be_bytes([b[16], b[17]]), 86, "IPv4 total length");
    assert_eq!(u16::from_be_bytes([b[24], b[25]]), ip_checksum(&b[14..34]));
    assert_eq!(u16::from_be_bytes([b[38], b[39]]), 66, "UDP length");
    assert_eq!(b[40..42], [0, 0], "no UDP checksum");
    assert_eq!(trim(b, 100, 100, 0x21), None, "not longer than the cut");
    assert_eq!(trim(b, 100, 30, 0x21), None, "would cut the UDP header");
    let mut arp = frame(B, A, 1, 200);
    assert_eq!(trim(arp.as_mut_slice(), 200, 64, 1), None, "not IPv4/UDP");

    // A 10-frame queue at 1 Gb/s: of 30 frames sent at once, 20 are trimmed and arrive first.
    let cfg = LinkConfig {
        bandwidth_bps: 1_000_000_000,
        queue_limit: 10 * 1000,
        trim_to: 64,
        trim_dscp: 0x21,
        ..LinkConfig::default()
    };
    let (mut net, a, bp) = pair(1, cfg);
    for _ in 0..30 {
        net.transmit(a, ip_frame(B, A, 0, 1000)).unwrap();
    }
    net.advance_to(Duration::from_secs(1));
    let lens: Vec<usize> = std::iter::from_fn(|| net.receive(bp)).map(|f| f.len()).collect();
    assert_eq!(lens.len(), 30, "nothing dropped");
    assert_eq!(lens.iter().filter(|&&l| l == 64).count(), 20);
    assert!(lens[1..20].iter().all(|&l| l == 64), "trimmed frames overtake the queue: {lens:?}");
    let st = net.ingress_stats(bp).unwrap();
    assert_eq!((st.trimmed, st.tail_dropped), (20, 0));
}
