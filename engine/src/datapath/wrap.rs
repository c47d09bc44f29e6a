//! Datapath decorators: a seeded fault injector on the engine's own egress, and RoCEv2 on a UDP
//! port other than 4791. They stack on any datapath, with the capture of
//! [`super::capture`]: `Context::open(RocePort::new(Faulty::new(UdpPort::bind(..)?, faults, seed), port))`.

use super::{Datapath, TxError};
use frame::Frame;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use wire::ib::Mtu;
use wire::ib::icrc::FieldAmend;

/// The `Datapath` methods a decorator passes straight to the datapath it wraps.
macro_rules! delegate_datapath {
    ($inner:ident) => {
        fn now(&self) -> Duration {
            self.$inner.now()
        }
        fn mac(&self) -> [u8; 6] {
            self.$inner.mac()
        }
        fn gid(&self) -> IpAddr {
            self.$inner.gid()
        }
        fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
            self.$inner.resolve(ip)
        }
        fn resolve_now(&self, ip: IpAddr) -> Option<[u8; 6]> {
            self.$inner.resolve_now(ip)
        }
        fn alloc(&mut self) -> Frame {
            self.$inner.alloc()
        }
    };
}

pub(crate) use delegate_datapath;

/// The rest of the passed-through methods.
macro_rules! delegate_datapath_tail {
    ($inner:ident) => {
        fn recycle(&mut self, frame: Frame) {
            self.$inner.recycle(frame);
        }
        fn port_mtu(&self) -> Mtu {
            self.$inner.port_mtu()
        }
        fn link_up(&self) -> bool {
            self.$inner.link_up()
        }
        fn udp_src_port(&self) -> Option<u16> {
            self.$inner.udp_src_port()
        }
        fn flush(&mut self) {
            self.$inner.flush();
        }
        fn tx_waiting(&self) -> bool {
            self.$inner.tx_waiting()
        }
        fn flush_retry_in(&self) -> Option<std::time::Duration> {
            self.$inner.flush_retry_in()
        }
        fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            self.$inner.wait_fd()
        }
    };
}

pub(crate) use delegate_datapath_tail;

/// Probabilities (per frame) of what [`Faulty`] does to frames the engine sends.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TxFaults {
    /// Drop the frame.
    pub loss: f64,
    /// Hold the frame back and send it after the next one.
    pub reorder: f64,
    /// Send the frame twice.
    pub duplicate: f64,
    /// Flip one random bit after the Ethernet/IP/UDP headers (the ICRC check at the receiver
    /// drops it).
    pub corrupt: f64,
}

impl TxFaults {
    /// True if any probability is non-zero.
    pub fn any(&self) -> bool {
        self.loss > 0.0 || self.reorder > 0.0 || self.duplicate > 0.0 || self.corrupt > 0.0
    }
}

/// What [`Faulty`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Frames dropped.
    pub lost: u64,
    /// Frames held back.
    pub reordered: u64,
    /// Frames sent twice.
    pub duplicated: u64,
    /// Frames with a flipped bit.
    pub corrupted: u64,
}

/// Seeded faults on a datapath's egress, for tests against real peers.
#[derive(Debug)]
pub struct Faulty<D> {
    inner: D,
    faults: TxFaults,
    rng: Xoshiro256PlusPlus,
    held: Option<Frame>,
    /// The inner datapath handed the last frame back ([`TxError::Full`]): the engine offers that
    /// same frame next, and it has had its faults already.
    refused: bool,
    counters: Arc<Mutex<FaultCounters>>,
}

impl<D: Datapath> Faulty<D> {
    /// Wraps `inner`; the faults draw from `seed`.
    pub fn new(inner: D, faults: TxFaults, seed: u64) -> Faulty<D> {
        Faulty {
            inner,
            faults,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            held: None,
            refused: false,
            counters: Arc::default(),
        }
    }

    /// A handle on the counters that stays valid after the datapath moves into a context.
    pub fn counters(&self) -> Arc<Mutex<FaultCounters>> {
        self.counters.clone()
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Sends `frame`, then the frame held back, if any (which stays held if there is no room).
    fn send(&mut self, frame: Frame) -> Result<(), TxError> {
        if let Err(e) = self.inner.transmit(frame) {
            self.refused = matches!(e, TxError::Full(_));
            return Err(e);
        }
        self.send_held()
    }

    /// Sends the frame held back, if any; it stays held while the inner datapath is full.
    fn send_held(&mut self) -> Result<(), TxError> {
        match self.held.take().map(|h| self.inner.transmit(h)) {
            Some(Err(TxError::Full(h))) => {
                self.held = Some(h);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            Some(Ok(())) | None => Ok(()),
        }
    }
}

/// Bytes of Ethernet, IPv4 and UDP header the engine writes (corruption goes after them).
use wire::frame::ETH_IPV4_UDP_LEN as L2_L4;

impl<D: Datapath> Datapath for Faulty<D> {
    delegate_datapath!(inner);
    fn transmit(&mut self, mut frame: Frame) -> Result<(), TxError> {
        if std::mem::take(&mut self.refused) {
            // The frame refused last time, offered again: its faults were drawn then.
            return self.send(frame);
        }
        let f = self.faults;
        if self.chance(f.loss) {
            self.counters.lock().unwrap_or_else(PoisonError::into_inner).lost += 1;
            self.inner.recycle(frame);
            return Ok(());
        }
        if frame.len() > L2_L4 && self.chance(f.corrupt) {
            let span = (frame.len() - L2_L4) as u64 * 8;
            let bit = (self.rng.next_u64() % span) as usize;
            frame.as_mut_slice()[L2_L4 + bit / 8] ^= 1 << (bit % 8);
            self.counters.lock().unwrap_or_else(PoisonError::into_inner).corrupted += 1;
        }
        if self.chance(f.duplicate) {
            let mut copy = self.inner.alloc();
            copy.buffer_mut()[..frame.len()].copy_from_slice(frame.as_slice());
            copy.set_len(frame.len());
            match self.inner.transmit(copy) {
                Ok(()) => self.counters.lock().unwrap_or_else(PoisonError::into_inner).duplicated += 1,
                // No room for the extra copy: it is not sent (the original waits its turn).
                Err(TxError::Full(copy)) => self.inner.recycle(copy),
                Err(e) => return Err(e),
            }
        }
        if self.held.is_none() && self.chance(f.reorder) {
            self.counters.lock().unwrap_or_else(PoisonError::into_inner).reordered += 1;
            self.held = Some(frame);
            return Ok(());
        }
        self.send(frame)
    }
    fn receive(&mut self) -> Option<Frame> {
        // A frame held back too long goes out when nothing else does (a failure was counted by
        // the inner datapath; there is no one to report it to here).
        let _ = self.send_held();
        self.inner.receive()
    }
    delegate_datapath_tail!(inner);
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = *self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut v = self.inner.counters();
        if self.faults.any() {
            v.extend([
                ("tx faults: lost", c.lost),
                ("tx faults: reordered", c.reordered),
                ("tx faults: duplicated", c.duplicated),
                ("tx faults: corrupted", c.corrupted),
            ]);
        }
        v
    }
}

/// RoCEv2 on a UDP port other than 4791: the engine knows RoCEv2 frames by their destination port
/// 4791, so received frames addressed to `port` are readdressed to 4791 and their ICRC amended for
/// the change (no pass over the frame). A frame whose ICRC was wrong stays wrong, and the engine
/// drops it (`rx_bad`). What the engine sends is left alone: a QP's address vector says which port
/// the peer listens on (`udp_dport`; where it says none, the context's peer port, which
/// `Context::open_link` sets to this link's).
///
/// The amendment depends only on the frame's length ([`FieldAmend`]): the last two lengths' are
/// kept (a WRITE's first packet and the rest), so a stream pays a few XORs per frame, not the
/// polynomial products of [`wire::ib::icrc::amend`] (16 % of a receiving server's time natively).
#[derive(Debug)]
pub struct RocePort<D> {
    inner: D,
    port: u16,
    readdressed: u64,
    /// The amendments for the last two lengths seen, the newest first.
    amends: [Option<FieldAmend>; 2],
}

impl<D: Datapath> RocePort<D> {
    /// Wraps `inner`, whose RoCEv2 frames arrive at UDP port `port`.
    pub fn new(inner: D, port: u16) -> RocePort<D> {
        RocePort { inner, port, readdressed: 0, amends: [None; 2] }
    }

    /// The amendment of the destination port at `at` in an IP packet of `len` bytes.
    fn amend_for(&mut self, len: usize, at: usize) -> Option<FieldAmend> {
        if let Some(i) = self.amends.iter().position(|a| a.is_some_and(|a| a.fits(len, at))) {
            self.amends.swap(0, i);
            return self.amends[0];
        }
        let a =
            FieldAmend::new(len, at, &self.port.to_be_bytes(), &wire::ROCEV2_UDP_PORT.to_be_bytes()).ok()?;
        self.amends = [Some(a), self.amends[0]];
        Some(a)
    }

    /// Readdresses `f` to port 4791 if it is IPv4/UDP to `self.port`.
    fn readdress(&mut self, f: &mut [u8]) {
        const ETH: usize = wire::ethernet::HEADER_LEN;
        let ipv4 = f.get(12..14) == Some(&wire::ethernet::ethertype::IPV4.to_be_bytes()[..]);
        let Some(ip) = ipv4.then(|| wire::ipv4::Packet::new_checked(&f[ETH..]).ok()).flatten() else {
            return;
        };
        let (udp, end) = (ETH + ip.header_len(), ETH + usize::from(ip.total_len()));
        if ip.protocol() != wire::ipv4::PROTO_UDP || end > f.len() || udp + 8 > end {
            return;
        }
        if f[udp + 2..udp + 4] != self.port.to_be_bytes() {
            return;
        }
        // The ICRC covers the port: amended, not recomputed, so a frame that arrived with a bad
        // one still has a bad one (and the engine drops it).
        let Some(amend) = self.amend_for(end - ETH, udp + 2 - ETH) else { return };
        if amend.apply(&mut f[ETH..end]).is_ok() {
            self.readdressed += 1;
        }
    }
}

impl<D: Datapath> Datapath for RocePort<D> {
    delegate_datapath!(inner);
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        self.inner.transmit(frame)
    }
    fn receive(&mut self) -> Option<Frame> {
        let mut f = self.inner.receive()?;
        let checked = f.icrc_checked();
        self.readdress(f.as_mut_slice());
        if checked {
            // Amended, a right ICRC stays right: the engine need not compute it again.
            f.mark_icrc_checked();
        }
        Some(f)
    }
    delegate_datapath_tail!(inner);
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.inner.counters();
        v.push(("roce port: frames readdressed to 4791", self.readdressed));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::sim::SimNet;
    use crate::roce::Path;
    use nicsim::LinkConfig;

    #[test]
    fn faults_follow_probabilities() {
        let (net, a, mut b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let faults = TxFaults { loss: 0.2, duplicate: 0.1, corrupt: 0.1, reorder: 0.1 };
        let mut tx = Faulty::new(a, faults, 7);
        let counters = tx.counters();
        for i in 0..1000u32 {
            let mut f = tx.alloc();
            f.buffer_mut()[..64].fill(0);
            f.buffer_mut()[60..64].copy_from_slice(&i.to_be_bytes());
            f.set_len(64);
            tx.transmit(f).unwrap();
        }
        net.advance_to(Duration::from_millis(1));
        let mut got = 0;
        while b.receive().is_some() {
            got += 1;
        }
        // ~20% lost, ~10% duplicated: about 900 arrive; one held frame may still wait.
        assert!((800..1000).contains(&got), "{got}");
        let c = *counters.lock().unwrap();
        for (what, n, p) in [("lost", c.lost, 0.2), ("dup", c.duplicated, 0.1), ("corrupt", c.corrupted, 0.1)]
        {
            assert!((n as f64 - 1000.0 * p).abs() < 60.0, "{what}: {n}");
        }
    }

    /// A RoCEv2 SEND to UDP port `dport`, as the engine builds it.
    fn roce_frame(dport: u16) -> Vec<u8> {
        roce_frame_of(dport, 40)
    }

    /// A SEND ONLY of `payload` bytes (0x5A) to UDP port `dport`, with a good ICRC.
    fn roce_frame_of(dport: u16, payload: usize) -> Vec<u8> {
        let path = Path {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 49152,
            dst_port: dport,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        let bth = wire::ib::BthRepr::new(wire::ib::Opcode(0x04), 0x11, 5);
        let mut buf = vec![0u8; 256];
        let n = path
            .emit(&mut buf, &wire::ib::RoceRepr::new(bth, &[]), payload, |b| {
                b.fill(0x5A);
                Ok(())
            })
            .unwrap();
        buf.truncate(n);
        buf
    }

    /// Transmits `bytes` as one frame.
    fn send(a: &mut impl Datapath, bytes: &[u8]) {
        let mut f = a.alloc();
        f.buffer_mut()[..bytes.len()].copy_from_slice(bytes);
        f.set_len(bytes.len());
        a.transmit(f).unwrap();
    }

    #[test]
    fn roce_port_readdresses_frames_to_4791_and_bad_icrcs_stay_bad() {
        let (net, mut a, b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let mut rx = RocePort::new(b, 5000);
        let mut corrupt = roce_frame(5000);
        corrupt[60] ^= 1;
        for bytes in [roce_frame(5000), corrupt, roce_frame(4791)] {
            send(&mut a, &bytes);
        }
        net.advance_to(Duration::from_millis(1));
        let cfg = wire::uet::UetConfig::default();
        let good = rx.receive().unwrap();
        let f = wire::FrameRepr::parse_verified(good.as_slice(), &cfg).unwrap();
        assert_eq!(f.roce().unwrap().payload, &[0x5A; 40][..]);
        let bad = rx.receive().unwrap();
        assert!(
            wire::FrameRepr::parse_verified(bad.as_slice(), &cfg).is_err(),
            "left for the engine to drop"
        );
        assert_eq!(bad.as_slice()[36..38], 4791u16.to_be_bytes());
        let plain = rx.receive().unwrap();
        assert_eq!(plain.as_slice(), &roce_frame(4791)[..], "frames to 4791 pass untouched");
        assert_eq!(rx.readdressed, 2);
    }

    /// Frames of three lengths, interleaved (the amendments of two are kept): each is readdressed
    /// with an ICRC that verifies, and a corrupt one of a length already seen stays bad.
    #[test]
    fn roce_port_amends_frames_of_every_length_it_meets() {
        let (net, mut a, b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
        let mut rx = RocePort::new(b, 5000);
        let lens = [40usize, 100, 40, 100, 160, 40, 160, 100, 40, 160];
        let mut corrupt = roce_frame_of(5000, 100);
        corrupt[70] ^= 0x10;
        for bytes in lens.iter().map(|&n| roce_frame_of(5000, n)).chain([corrupt]) {
            send(&mut a, &bytes);
        }
        net.advance_to(Duration::from_millis(1));
        let cfg = wire::uet::UetConfig::default();
        for n in lens {
            let got = rx.receive().unwrap();
            let f = wire::FrameRepr::parse_verified(got.as_slice(), &cfg).unwrap();
            assert_eq!(f.roce().unwrap().payload, &std::vec![0x5A; n][..]);
            assert_eq!(got.as_slice()[36..38], 4791u16.to_be_bytes());
        }
        let bad = rx.receive().unwrap();
        assert_eq!(bad.as_slice()[36..38], 4791u16.to_be_bytes());
        assert!(wire::FrameRepr::parse_verified(bad.as_slice(), &cfg).is_err(), "a bad ICRC stays bad");
        assert_eq!(rx.readdressed, lens.len() as u64 + 1);
    }

    /// Marks every frame it receives as ICRC-checked, as the UDP datapath does.
    struct Checked<D> {
        inner: D,
    }

    impl<D: Datapath> Datapath for Checked<D> {
        delegate_datapath!(inner);
        fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
            self.inner.transmit(frame)
        }
        fn receive(&mut self) -> Option<Frame> {
            let mut f = self.inner.receive()?;
            f.mark_icrc_checked();
            Some(f)
        }
        delegate_datapath_tail!(inner);
    }

    #[test]
    fn roce_port_keeps_the_icrc_checked_mark_of_a_frame_it_readdresses() {
        for marked in [false, true] {
            let (net, mut a, b) = SimNet::pair(1, LinkConfig::default(), LinkConfig::default());
            let mut rx: RocePort<Box<dyn Datapath>> =
                RocePort::new(if marked { Box::new(Checked { inner: b }) } else { Box::new(b) }, 5000);
            send(&mut a, &roce_frame(5000));
            net.advance_to(Duration::from_millis(1));
            let got = rx.receive().unwrap();
            assert_eq!(got.as_slice()[36..38], 4791u16.to_be_bytes());
            assert_eq!(got.icrc_checked(), marked);
            wire::FrameRepr::parse_verified(got.as_slice(), &wire::uet::UetConfig::default()).unwrap();
        }
    }
}
