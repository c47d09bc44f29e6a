//! TSS through the engine (issue 10, acceptance 1): two UET nodes in one secure domain over nicsim
//! exchange a message sealed with AES-256-GCM; then frames recorded on the wire are replayed,
//! tampered (ciphertext, header bits inside the AAD) and sent under a wrong key or an old epoch, and
//! every one is dropped and counted, never delivered; the failure latch engages after the
//! configured number of authentication failures.

use std::net::Ipv4Addr;
use std::time::Duration;

use engine::datapath::Datapath;
use engine::datapath::sim::SimNet;
use engine::uet::{UetNode, write_headers};
use nicsim::LinkConfig;
use ses::{Addr, Config, Opts, RecvSpec, Status};
use tss::{KeyMode, SecureDomain};
use wire::frame::ETH_IPV4_UDP_LEN as HEADERS;

fn domain(key: u8, limit: u32) -> SecureDomain {
    let cfg = tss::Config { mode: KeyMode::Cluster, auth_fail_limit: limit, ..tss::Config::default() };
    SecureDomain::new(cfg, [key; 32], 0)
}

struct Two {
    net: SimNet,
    a: UetNode<engine::datapath::sim::SimPort>,
    b: UetNode<engine::datapath::sim::SimPort>,
}

impl Two {
    fn new(key_b: u8) -> Two {
        let (net, pa, pb) = SimNet::pair(3, LinkConfig::default(), LinkConfig::default());
        let cfg = Config { max_payload: 1000, ..Config::default() };
        let mut a = UetNode::new(pa, ses::Endpoint::new(cfg, 1), true).unwrap();
        let mut b = UetNode::new(pb, ses::Endpoint::new(cfg, 2), true).unwrap();
        a.enable_tss(domain(7, 5));
        b.enable_tss(domain(key_b, 5));
        net.with(|n| n.enable_tap());
        Two { net, a, b }
    }

    /// Runs until nothing happens any more (or 1 s of virtual time).
    fn settle(&mut self) {
        let limit = self.net.now() + Duration::from_secs(1);
        let Ok(_) = nicsim::run_until(self, limit, |_| false);
    }

    fn dst(&self) -> Addr<Ipv4Addr> {
        Addr { fep: self.b.ip(), pid_on_fep: 0, resource_index: 0 }
    }

    /// A's frames recorded on the wire so far.
    fn sent_by_a(&self) -> Vec<Vec<u8>> {
        self.net.with(|n| n.take_tap()).into_iter().filter(|r| r.port == 0).map(|r| r.bytes).collect()
    }

    /// Puts `frame` on the wire from A's port (as an attacker next to A would) and lets B alone
    /// take it (A's timers do not run meanwhile).
    fn inject(&mut self, frame: &[u8]) {
        let port = self.a.datapath().port();
        self.net.with(|n| {
            let mut f = n.alloc();
            f.buffer_mut()[..frame.len()].copy_from_slice(frame);
            f.set_len(frame.len());
            n.transmit(port, f).unwrap();
        });
        let seen = self.b.stats().rx_frames + self.b.stats().rx_tss_drops;
        while self.b.stats().rx_frames + self.b.stats().rx_tss_drops == seen {
            if let Some(t) = self.net.next_event() {
                self.net.advance_to(t);
            }
            self.b.progress();
        }
    }
}

impl nicsim::System for Two {
    type Error = std::convert::Infallible;

    fn pass(&mut self) -> Result<bool, Self::Error> {
        Ok(self.a.progress() | self.b.progress())
    }

    fn next_event(&self) -> Option<Duration> {
        [self.net.next_event(), self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min()
    }

    fn now(&self) -> Duration {
        self.net.now()
    }

    fn advance_to(&mut self, t: Duration) {
        self.net.advance_to(t);
    }
}

/// Rewrites the Ethernet/IPv4/UDP headers of `frame` (after its UET bytes were changed) so its
/// UDP checksum is valid again: only the TSS can notice the change.
fn fix_checksum(frame: &mut [u8]) {
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let (dmac, smac): ([u8; 6], [u8; 6]) = (frame[..6].try_into().unwrap(), frame[6..12].try_into().unwrap());
    let n = frame.len() - HEADERS;
    write_headers(frame, smac, dmac, src, dst, n).unwrap();
}

#[test]
fn sealed_round_trip_and_every_attack_dropped_and_counted() {
    let mut t = Two::new(7);
    t.b.ses().post_recv(RecvSpec::any(), 4000, 1);
    let msg: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
    let dst = t.dst();
    t.a.ses().send(dst, &msg, None, Opts { context: 9, ..Opts::default() }).unwrap();
    t.settle();
    let got = t.b.ses().poll_completion().unwrap();
    assert_eq!((got.status, &got.data), (Status::Ok, &msg));
    assert_eq!(t.a.ses().poll_completion().map(|c| c.status), Some(Status::Ok));
    let frames = t.sent_by_a();
    let data = frames.iter().find(|f| f.len() > 1000).unwrap().clone();
    // On the wire the payload is ciphertext: the message's bytes do not appear.
    assert!(!data.windows(32).any(|w| msg.windows(32).any(|m| m == w)));
    // Sealed datagrams carry no UDP checksum (the ICV covers them), though B requires checksums on
    // clear frames.
    assert_eq!(data[HEADERS - 2..HEADERS], [0, 0]);
    let opened = t.b.tss().unwrap().stats().opened;
    assert!(opened >= 4, "3 data packets and an ACK at least");

    // Replay: the same frame again.
    t.b.ses().post_recv(RecvSpec::any(), 4000, 2);
    t.inject(&data);
    assert_eq!(t.b.tss().unwrap().stats().replays, 1);
    // A second message, whose frames an attacker takes off the wire before B sees them: tampered
    // copies carry TSCs B has not seen, so the ICV is what refuses them.
    t.a.ses().send(dst, &msg[..1500], None, Opts { context: 10, ..Opts::default() }).unwrap();
    t.a.progress();
    let mut stolen = Vec::new();
    while stolen.is_empty() {
        let next = t.net.next_event().expect("frames in flight");
        t.net.advance_to(next);
        while let Some(f) = t.b.datapath().receive() {
            stolen.push(f.as_slice().to_vec());
            t.b.datapath().recycle(f);
        }
    }
    let fresh = stolen.iter().max_by_key(|f| f.len()).unwrap().clone();
    let mut bad = fresh.clone();
    let at = bad.len() - 20;
    bad[at] ^= 0x01;
    fix_checksum(&mut bad);
    t.inject(&bad);
    let mut bad = fresh.clone();
    bad[HEADERS] ^= 0x02; // the TSS header's reserved bit, inside the AAD
    fix_checksum(&mut bad);
    t.inject(&bad);
    let s = t.b.tss().unwrap().stats();
    assert_eq!((s.auth_failures, s.replays), (2, 1));
    assert!(t.b.ses().poll_completion().is_none(), "nothing delivered");
    assert_eq!(t.b.stats().rx_tss_drops, 3);
    assert_eq!(t.b.tss().unwrap().stats().opened, opened, "no attack frame opened");
    // The genuine frame still opens (failed copies do not mark its TSC seen), and A's
    // retransmissions complete the message.
    t.inject(&fresh);
    t.settle();
    assert_eq!(t.b.ses().poll_completion().map(|c| (c.status, c.len)), Some((Status::Ok, 1500)));
}

#[test]
fn wrong_key_old_epoch_and_the_latch() {
    // B has another key: A's packets never open; after 5 failures B's domain latches.
    let mut t = Two::new(8);
    t.b.ses().post_recv(RecvSpec::any(), 100, 1);
    let dst = t.dst();
    t.a.ses().send(dst, b"under the wrong key", None, Opts::default()).unwrap();
    t.settle();
    let s = t.b.tss().unwrap().stats();
    assert!(s.auth_failures >= 5, "SYN retransmissions all fail: {s:?}");
    assert!(t.b.tss().unwrap().latched());
    assert!(s.other_drops > 0, "after the latch, frames are dropped unopened");
    assert!(t.b.ses().poll_completion().is_none());

    // Old epoch: B has moved on by more than the lifetime (16).
    let mut t = Two::new(7);
    let mut newer = domain(7, 5);
    newer.new_epoch(40);
    t.b.enable_tss(newer);
    t.b.ses().post_recv(RecvSpec::any(), 100, 1);
    let dst = t.dst();
    t.a.ses().send(dst, b"from epoch 0", None, Opts::default()).unwrap();
    t.settle();
    assert!(t.b.tss().unwrap().stats().old_epochs > 0);
    assert!(t.b.ses().poll_completion().is_none());
    assert_eq!(t.b.tss().unwrap().stats().opened, 0);
}

/// With an SSI in the header (SP set), sender and receiver take the IV's source from it.
#[test]
fn a_domain_with_an_ssi_round_trips() {
    let (net, pa, pb) = SimNet::pair(4, LinkConfig::default(), LinkConfig::default());
    let cfg = Config { max_payload: 1000, ..Config::default() };
    let mut a = UetNode::new(pa, ses::Endpoint::new(cfg, 1), true).unwrap();
    let mut b = UetNode::new(pb, ses::Endpoint::new(cfg, 2), true).unwrap();
    let with_ssi = |ssi| tss::Config { mode: KeyMode::Cluster, ssi: Some(ssi), ..tss::Config::default() };
    a.enable_tss(SecureDomain::new(with_ssi(0xA1), [7; 32], 0));
    b.enable_tss(SecureDomain::new(with_ssi(0xB2), [7; 32], 0));
    let mut t = Two { net, a, b };
    t.b.ses().post_recv(RecvSpec::any(), 4000, 1);
    let dst = t.dst();
    t.a.ses().send(dst, b"sealed with an SSI", None, Opts::default()).unwrap();
    t.settle();
    let got = t.b.ses().poll_completion().unwrap();
    assert_eq!((got.status, &got.data[..]), (Status::Ok, &b"sealed with an SSI"[..]));
    assert_eq!(t.b.tss().unwrap().stats().auth_failures, 0);
}

/// The sender seals a packet's first payload bytes with its headers (up to the next 16-byte
/// boundary) and the rest from the message: payloads shorter than, as long as and longer than
/// that piece all arrive intact, one packet or several.
#[test]
fn sealed_payloads_of_every_short_length_and_several_packets_round_trip() {
    let mut t = Two::new(7);
    let dst = t.dst();
    let mut sent = Vec::new();
    for (i, n) in (0..=40).chain([999, 1000, 1001, 2500]).enumerate() {
        let msg: Vec<u8> = (0..n).map(|k| (k * 31 + i * 7 + 1) as u8).collect();
        t.b.ses().post_recv(RecvSpec::any(), 4000, i as u64);
        t.a.ses().send(dst, &msg, None, Opts { context: i as u64, ..Opts::default() }).unwrap();
        sent.push(msg);
        t.settle();
    }
    for msg in &sent {
        let got = t.b.ses().poll_completion().unwrap();
        assert_eq!((got.status, &got.data), (Status::Ok, msg), "{} bytes", msg.len());
    }
    assert_eq!(t.b.tss().unwrap().stats().auth_failures, 0);
}
