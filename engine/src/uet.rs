//! UET endpoints on the engine's datapaths: a [`ses::Endpoint`] addressed by IPv4 address, its
//! packets framed as Ethernet / IPv4 / UDP to port 4793 (uet-wire.md §1, "Decisions":
//! UDP encapsulation, the UDP source port carrying entropy) with a computed UDP checksum, so that
//! corruption on a simulated link is detected and dropped (issue 8: "compute and verify UDP
//! checksums on UET frames"). A received frame must be IPv4 to this node's address and UDP port
//! 4793 with a valid IPv4 checksum and a valid (or, from a kernel socket that already checked it,
//! absent) UDP checksum.

mod headers;

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use wire::ethernet::ethertype;
use wire::ipv4::PROTO_UDP;
use wire::uet::UetConfig;
use wire::uet::tss::TssRepr;
use wire::{EthernetAddress, EthernetRepr, FrameRepr, IpRepr, Ipv4Repr, UdpChecksum, UdpRepr, UdpTemplate};

use frame::Frame;

use crate::datapath::{Datapath, TxError};
use crate::progress::Sleep;
use headers::HeaderCache;
pub use headers::MAX_HEADERS;
use std::os::fd::BorrowedFd;

/// Ethernet + IPv4 + UDP.
use wire::frame::ETH_IPV4_UDP_LEN as HEADERS;

/// Counters of a [`UetNode`].
///
/// Every frame the node takes from its datapath is counted once: [`rx_other`](Self::rx_other),
/// [`rx_bad`](Self::rx_bad), [`rx_tss_drops`](Self::rx_tss_drops),
/// [`rx_trimmed`](Self::rx_trimmed), [`rx_trimmed_dropped`](Self::rx_trimmed_dropped) or
/// [`rx_frames`](Self::rx_frames) ([`rx_taken`](Self::rx_taken) sums them). The PDS and SES
/// counters then account for each of `rx_frames` (see `pds::Stats`, `ses::Stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Frames sent.
    pub tx_frames: u64,
    /// Frames the datapath had no room for when first offered (back-pressure): each, and the rest
    /// of its batch, waited in the node, and the SES made no more until they had gone.
    pub tx_stalls: u64,
    /// Frames the datapath could not send at all (dropped, counted by the datapath too).
    pub tx_failed: u64,
    /// Packets dropped because the destination's MAC is unknown.
    pub tx_unresolved: u64,
    /// Destinations whose headers were forgotten to make room ([`MAX_HEADERS`]).
    pub headers_evicted: u64,
    /// Frames received and handed to the SES.
    pub rx_frames: u64,
    /// Frames dropped: bad checksum, truncated, malformed UET (the PDS's `rx_malformed` too).
    pub rx_bad: u64,
    /// Frames that are not UET to this node (ignored).
    pub rx_other: u64,
    /// Frames the TSS refused (authentication, replay, old epoch, latch, no key), and clear UET
    /// frames arriving while the node is in a secure domain.
    pub rx_tss_drops: u64,
    /// Packets not sent because the TSS could not seal them (TSC exhausted, no key).
    pub tx_tss_refused: u64,
    /// Trimmed frames (DSCP [`TRIMMED_DSCP`]) handed to the PDS, which NACKs them as TRIMMED.
    pub rx_trimmed: u64,
    /// Trimmed frames that could not be read: sealed by TSS (the PDS header is ciphertext that can
    /// no longer be authenticated), or not UET.
    pub rx_trimmed_dropped: u64,
}

impl NodeStats {
    /// Frames taken from the datapath: every one, whatever became of it.
    pub fn rx_taken(&self) -> u64 {
        self.rx_other
            + self.rx_bad
            + self.rx_tss_drops
            + self.rx_trimmed
            + self.rx_trimmed_dropped
            + self.rx_frames
    }
}

/// The DSCPs (0-63) a [`UetNode`] puts in the IP headers of what it sends: `data` for the packets
/// that carry SES headers (requests and responses, RUDI and UUD included), `control` for the PDS's
/// own (ACK, NACK, CP CLOSE_REQ / CREDIT / CREDIT_REQ). Both 0 (CS0, best effort) by default: the
/// UEC reference provider's default for data; it sends ACKs as EF (46), which a caller chooses
/// with `control: 46`. The libfabric `tclass` values map to these in `provider::tclass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrafficClass {
    /// Requests and SES responses.
    pub data: u8,
    /// PDS control packets.
    pub control: u8,
}

/// The DSCP a switch gives the UET frames it trims (nicsim `LinkConfig::trim_dscp`). No source
/// fixes a value (UEC leaves it to configuration); this is the engine's.
pub const TRIMMED_DSCP: u8 = 0x21;

/// A UET endpoint on one datapath port.
#[derive(Debug)]
pub struct UetNode<D> {
    dp: D,
    ip: Ipv4Addr,
    ses: ses::Endpoint<Ipv4Addr>,
    /// Require a UDP checksum on received frames (simulated links, where nobody else checks).
    require_checksum: bool,
    stats: NodeStats,
    /// The Ethernet, IPv4 and UDP headers of each destination: its next-hop MAC resolved once (a
    /// lookup may read the kernel's ARP table), the ECN and checksum modes of the node; for the
    /// [`MAX_HEADERS`] destinations used last.
    headers: HeaderCache,
    /// The secure domain every packet is sealed in and opened from, when TSS is on.
    tss: Option<tss::SecureDomain>,
    /// Mark sent packets ECN-capable (ECT(0)), for congestion control.
    ecn: bool,
    /// The DSCP of the packets it sends (data, PDS control).
    dscp: TrafficClass,
    /// Frames taken and not yet delivered (kept between rounds for its capacity).
    rx_batch: Vec<(Frame, RxStep)>,
    /// Frames filled and not yet sent (likewise): destination, bytes written, DSCP, and the
    /// payload still to place after them.
    tx_batch: Vec<(Frame, Ipv4Addr, usize, u8, Bytes)>,
    /// Finished frames the datapath had no room for, in order (at most a batch): they go first,
    /// and the SES makes no more while any waits.
    pending: VecDeque<Frame>,
    /// Frames to the node's own address over a datapath that cannot send to itself (AF_XDP, the
    /// simulated network; the kernel loops a UDP socket's back), received in the next round.
    looped: VecDeque<Frame>,
}

/// The UDP source port for traffic to `dst`: 0xC000 | 14 bits of a hash, fixed per destination
/// (one path per peer: the entropy value of a flow).
pub fn entropy_port(src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    let v = (u64::from(src.to_bits()) << 32 | u64::from(dst.to_bits())).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    0xC000 | ((v >> 50) as u16 & 0x3FFF)
}

impl<D: Datapath> UetNode<D> {
    /// A node on `dp` (whose GID must be IPv4) running `ses`.
    pub fn new(
        dp: D,
        ses: ses::Endpoint<Ipv4Addr>,
        require_checksum: bool,
    ) -> Result<UetNode<D>, &'static str> {
        let ip = match dp.gid().to_canonical() {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(_) => return Err("UET nodes use IPv4 addresses"),
        };
        Ok(UetNode {
            dp,
            ip,
            ses,
            require_checksum,
            stats: NodeStats::default(),
            headers: HeaderCache::default(),
            tss: None,
            ecn: false,
            dscp: TrafficClass::default(),
            rx_batch: Vec::with_capacity(BATCH),
            tx_batch: Vec::with_capacity(BATCH),
            pending: VecDeque::new(),
            looped: VecDeque::new(),
        })
    }

    /// Marks every packet this node sends ECT(0) (RFC 3168), so congested switches mark CE
    /// instead of dropping; received CE marks are handed to the PDS (the M flag of its ACKs) in
    /// any case.
    pub fn set_ecn(&mut self, on: bool) {
        self.ecn = on;
        self.headers.clear();
    }

    /// Sends the node's packets with these DSCPs in their IP headers: `tc.data` for requests and
    /// SES responses, `tc.control` for the PDS's ACKs, NACKs and control packets (see
    /// [`TrafficClass`]). Refused (nothing changes) for a value above 63 or [`TRIMMED_DSCP`],
    /// which marks a trimmed frame.
    pub fn set_traffic_class(&mut self, tc: TrafficClass) -> Result<(), &'static str> {
        for d in [tc.data, tc.control] {
            if d > 63 {
                return Err("a DSCP value is 0 to 63");
            }
            if d == TRIMMED_DSCP {
                return Err("DSCP 0x21 marks trimmed UET frames");
            }
        }
        self.dscp = tc;
        Ok(())
    }

    /// The DSCPs of the packets it sends.
    pub fn traffic_class(&self) -> TrafficClass {
        self.dscp
    }

    /// Puts the node in a secure domain: every UET packet it sends is sealed (TSS header, AES-GCM,
    /// ICV) and only packets that open are delivered (`../shared/spec/uet-wire.md` §4; the AAD over
    /// UDP is the IP source and destination and the UDP ports, per the Decisions table). The IV's
    /// source is the domain's SSI, or this node's IPv4 address.
    pub fn enable_tss(&mut self, domain: tss::SecureDomain) {
        self.tss = Some(domain);
        self.headers.clear();
        // In a secure domain PDCs are established securely (0-RTT, pds::Establishment).
        self.ses.pds().set_secure(pds::Establishment::ZeroRtt);
    }

    /// The secure domain (its counters), when TSS is on.
    pub fn tss(&self) -> Option<&tss::SecureDomain> {
        self.tss.as_ref()
    }

    /// This node's address.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The SES endpoint.
    pub fn ses(&mut self) -> &mut ses::Endpoint<Ipv4Addr> {
        &mut self.ses
    }

    /// The datapath.
    pub fn datapath(&mut self) -> &mut D {
        &mut self.dp
    }

    /// Counters.
    pub fn stats(&self) -> NodeStats {
        NodeStats { headers_evicted: self.headers.evicted, ..self.stats }
    }

    /// Receives the waiting frames (up to [`RX_BUDGET`]: a flood leaves the rest for the next
    /// call, after the timers and transmissions), runs due timers and sends everything the SES
    /// has; true if anything moved.
    ///
    /// Frames go through in batches of up to [`BATCH`], a stage at a time: every frame of a batch
    /// is parsed and opened, then every one handed to the SES in arrival order; on the way out
    /// the SES fills a batch of frames, then every one is sealed and sent. The AEAD then runs
    /// back to back instead of between the protocol layers, which evict its code and data:
    /// sealing a packet took 18 % more AES time than in a plain loop one at a time, 5 % in
    /// batches (`perf write --transport rud --tss`, sampled).
    pub fn progress(&mut self) -> bool {
        let now = self.dp.now();
        let mut moved = false;
        let mut rx = std::mem::take(&mut self.rx_batch);
        let mut budget = RX_BUDGET;
        loop {
            while rx.len() < BATCH && budget > 0 {
                let Some(mut frame) = self.looped.pop_front().or_else(|| self.dp.receive()) else { break };
                let step = self.open(frame.as_mut_slice());
                rx.push((frame, step));
                budget -= 1;
            }
            if rx.is_empty() {
                break;
            }
            moved = true;
            // By reference: a step moved out of the batch is read back at once from where the
            // move just wrote it, which stalls on store forwarding.
            for (frame, step) in &rx {
                self.deliver(now, frame.as_slice(), step);
            }
            for (frame, _) in rx.drain(..) {
                self.dp.recycle(frame);
            }
        }
        self.rx_batch = rx;
        if self.ses.poll_timeout().is_some_and(|t| t <= now) {
            self.ses.handle_timeout(now);
        }
        moved |= self.send_pending();
        if self.pending.is_empty() {
            moved |= self.transmit_all(now);
        }
        self.dp.flush();
        moved
    }

    /// Sends what the SES has now (after an operation was posted), without receiving or running
    /// timers: the packet leaves at once and the caller gets back to its work; true if anything
    /// went.
    pub fn transmit(&mut self) -> bool {
        let now = self.dp.now();
        let mut moved = self.send_pending();
        if self.pending.is_empty() {
            moved |= self.transmit_all(now);
        }
        self.dp.flush();
        moved
    }

    /// The next deadline of the protocol cores, or now while frames wait for room in the datapath.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if !self.pending.is_empty() || !self.looped.is_empty() {
            return Some(self.dp.now());
        }
        self.ses.poll_timeout()
    }

    /// Offers the frames the datapath handed back, in order, until it refuses one; true if any
    /// went.
    fn send_pending(&mut self) -> bool {
        let mut moved = false;
        while let Some(frame) = self.pending.pop_front() {
            match self.dp.transmit(frame) {
                Ok(()) => self.stats.tx_frames += 1,
                Err(TxError::Full(frame)) => {
                    self.pending.push_front(frame);
                    break;
                }
                Err(TxError::Failed(_)) => self.stats.tx_failed += 1,
            }
            moved = true;
        }
        moved
    }

    /// The first stage of taking a frame: Ethernet, IP and UDP are checked and a sealed datagram
    /// is opened in place; returns what the second stage ([`deliver`](Self::deliver)) does with
    /// it. Every drop is counted here.
    fn open(&mut self, f: &mut [u8]) -> RxStep {
        // Ethernet, IP and UDP only: the SES parses the UET headers (after the TSS opens them).
        let r = match FrameRepr::parse_udp(f) {
            Ok(r) => r,
            Err(_)
                if wire::frame::identify(f, &UetConfig::default())
                    == Some(wire::frame::Encapsulation::UetUdp) =>
            {
                self.stats.rx_bad += 1;
                return RxStep::Drop;
            }
            Err(_) => {
                self.stats.rx_other += 1;
                return RxStep::Drop;
            }
        };
        let (IpRepr::V4(ip), udp) = (r.ip, r.udp) else {
            self.stats.rx_other += 1;
            return RxStep::Drop;
        };
        if ip.dst_addr != self.ip || udp.dst_port != wire::uet::UDP_PORT {
            self.stats.rx_other += 1;
            return RxStep::Drop;
        }
        if ip.dscp_ecn >> 2 == TRIMMED_DSCP {
            // Trimmed by a switch (no UDP checksum): what is left from the PDS header on, readable
            // only in the clear.
            if self.tss.is_some() {
                self.stats.rx_trimmed_dropped += 1;
                return RxStep::Drop;
            }
            return RxStep::Trimmed { src: ip.src_addr.to_bits(), body: r.payload };
        }
        // In a secure domain the ICV protects the datagram, and it is sent without a UDP checksum.
        if self.require_checksum && self.tss.is_none() && udp.checksum == UdpChecksum::Zero {
            self.stats.rx_bad += 1;
            return RxStep::Drop;
        }
        let (src, dst, ce) = (ip.src_addr, ip.dst_addr, ip.dscp_ecn & 3 == 3);
        let (sport, dport) = (udp.src_port, udp.dst_port);
        let payload = r.payload;
        let at = payload.start;
        let Some(d) = self.tss.as_mut() else {
            return RxStep::Deliver { src: src.to_bits(), body: payload, ce };
        };
        let body = &mut f[payload];
        let sealed = body.first().is_some_and(|b| b >> 3 == wire::uet::tss::TYPE_TSS);
        let Some(hdr) = sealed.then(|| TssRepr::parse(body).ok()).flatten() else {
            self.stats.rx_tss_drops += 1;
            return RxStep::Drop;
        };
        let hl = hdr.buffer_len();
        let prefix = aad_prefix(src, dst, sport, dport);
        let source = hdr.ssi.unwrap_or(src.to_bits());
        match d.open(source, &prefix, &hdr, &mut body[hl..]) {
            Ok(n) => RxStep::Deliver { src: src.to_bits(), body: at + hl..at + hl + n, ce },
            Err(_) => {
                self.stats.rx_tss_drops += 1;
                RxStep::Drop
            }
        }
    }

    /// The second stage: hands an opened (or clear) datagram to the SES, a trimmed one to the PDS.
    fn deliver(&mut self, now: Duration, f: &[u8], step: &RxStep) {
        match *step {
            RxStep::Drop => {}
            RxStep::Trimmed { src, ref body } => {
                if self.ses.pds().handle_trimmed(now, Ipv4Addr::from_bits(src), &f[body.clone()]).is_ok() {
                    self.stats.rx_trimmed += 1;
                } else {
                    self.stats.rx_trimmed_dropped += 1;
                }
            }
            RxStep::Deliver { src, ref body, ce } => {
                match self.ses.handle_packet_ecn(now, Ipv4Addr::from_bits(src), &f[body.clone()], ce) {
                    Ok(()) => self.stats.rx_frames += 1,
                    Err(_) => self.stats.rx_bad += 1,
                }
            }
        }
    }

    /// Sends everything the SES has, a batch at a time: the SES fills up to [`BATCH`] frames with
    /// headers, then each gets its payload (sealed into it in a secure domain, else copied), its
    /// Ethernet, IP and UDP headers, and is sent, in order.
    fn transmit_all(&mut self, now: Duration) -> bool {
        let mut moved = false;
        let (hl, icv) = self.tss.as_ref().map_or((0, 0), |d| (d.header_len(), tss::aead::ICV_LEN));
        let mut tx = std::mem::take(&mut self.tx_batch);
        loop {
            while tx.len() < BATCH {
                let mut frame = self.dp.alloc();
                let cap = frame.buffer_mut().len();
                let room = &mut frame.buffer_mut()[HEADERS + hl..cap.saturating_sub(icv).max(HEADERS + hl)];
                let Some((t, tail)) = self.ses.poll_transmit_split(now, room) else {
                    self.dp.recycle(frame);
                    break;
                };
                let dscp = if t.control { self.dscp.control } else { self.dscp.data };
                tx.push((frame, t.dst, t.len, dscp, tail));
            }
            // A batch the SES could not fill leaves it with nothing more to send (sending does
            // not call back into it): no round after it.
            let drained = tx.len() < BATCH;
            moved |= !tx.is_empty();
            for (frame, dst, len, dscp, tail) in tx.drain(..) {
                self.send(frame, (dst, dscp), len, &tail, hl, icv);
            }
            // A full datapath: the SES makes no more frames until the waiting ones have gone.
            if drained || !self.pending.is_empty() {
                break;
            }
        }
        self.tx_batch = tx;
        moved
    }

    /// Places `tail` after the `len` UET bytes written after the headers of `frame`: in a secure
    /// domain by sealing the two, the `len` bytes in place and `tail` straight from where it lies
    /// (the message) into the frame, else by copying it. Then writes its Ethernet, IP and UDP
    /// headers to `dst` and sends it; a frame that cannot go is counted and recycled. A frame the
    /// datapath has no room for waits, in order, with those after it.
    fn send(
        &mut self,
        mut frame: Frame,
        (dst, dscp): (Ipv4Addr, u8),
        len: usize,
        tail: &[u8],
        hl: usize,
        icv: usize,
    ) {
        let sealed = self.tss.is_some();
        let tos = dscp << 2 | if self.ecn { ECT0 } else { 0 };
        let Some(headers) = headers_to(&mut self.headers, &mut self.dp, self.ip, dst, tos, sealed) else {
            self.stats.tx_unresolved += 1;
            self.dp.recycle(frame);
            return;
        };
        let mut uet_len = len + tail.len();
        if let Some(d) = self.tss.as_mut() {
            // The AAD holds the source port the peer will see: a kernel UDP socket sends from
            // its own port, not the entropy port of the frame.
            let sport = self.dp.udp_src_port().unwrap_or_else(|| entropy_port(self.ip, dst));
            let prefix = aad_prefix(self.ip, dst, sport, wire::uet::UDP_PORT);
            let buf = frame.buffer_mut();
            // The AEAD seals the headers in place and the payload from the message in one pass,
            // but a first piece that ends inside a 16-byte block makes it finish that block a
            // byte at a time and then hash it alone (about 15 ns a packet at 56 header bytes):
            // the payload's first bytes (at most 15) join the headers, and the rest is sealed
            // from a block boundary.
            let pad = (len.wrapping_neg() % 16).min(tail.len());
            let (head, rest) = buf[HEADERS + hl..].split_at_mut(len + pad);
            head[len..].copy_from_slice(&tail[..pad]);
            let tail = &tail[pad..];
            // The IV's source is the SSI when the header carries one (as the receiver reads it).
            let source = d.ssi().unwrap_or(self.ip.to_bits());
            // One seal for every packet: a control packet's tail is empty and gets only the ICV.
            let Ok(hdr) = d.seal_scatter(source, &prefix, head, tail, &mut rest[..tail.len() + icv]) else {
                self.stats.tx_tss_refused += 1;
                self.dp.recycle(frame);
                return;
            };
            hdr.emit(&mut buf[HEADERS..HEADERS + hl]).expect("the domain's header length");
            uet_len += hl + icv;
        } else {
            wire::copy_payload(&mut frame.buffer_mut()[HEADERS + len..HEADERS + uet_len], tail);
        }
        let Ok(n) = headers.write(frame.buffer_mut(), uet_len) else {
            self.dp.recycle(frame);
            return;
        };
        frame.set_len(n);
        if dst == self.ip && self.dp.udp_src_port().is_none() {
            // To itself (an MPI rank's one-sided operation on its own window): received next.
            self.looped.push_back(frame);
            self.stats.tx_frames += 1;
            return;
        }
        if !self.pending.is_empty() {
            self.pending.push_back(frame);
            return;
        }
        match self.dp.transmit(frame) {
            Ok(()) => self.stats.tx_frames += 1,
            Err(TxError::Full(frame)) => {
                self.stats.tx_stalls += 1;
                self.pending.push_back(frame);
            }
            Err(TxError::Failed(_)) => self.stats.tx_failed += 1,
        }
    }
}

impl<D: Datapath> Sleep for UetNode<D> {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.dp.wait_fd()
    }

    fn tx_blocked(&self) -> bool {
        !self.pending.is_empty() || self.dp.tx_waiting()
    }

    fn next_work_in(&self) -> Option<Duration> {
        // A round sends everything the SES has (or stops at a full datapath, whose descriptor
        // turning writable ends the sleep): what is left is its timers, and a datapath's retry.
        let ses = self.ses.poll_timeout().map(|t| t.saturating_sub(self.dp.now()));
        ses.into_iter().chain(self.dp.flush_retry_in()).min()
    }
}

/// The headers of frames to `dst`: remembered, or built (its MAC resolved) now, with this TOS byte
/// (DSCP and ECN), for `sealed` datagrams or clear ones. By reference: a template copied out per packet was
/// read back at once while its stores drained.
fn headers_to<'a, D: Datapath>(
    headers: &'a mut HeaderCache,
    dp: &mut D,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tos: u8,
    sealed: bool,
) -> Option<&'a UdpTemplate> {
    headers.get((dst, tos), || {
        // Never waits: a neighbour not known yet is asked for, and this packet dropped. The node's
        // own address is its own MAC's (the frame is looped back, `UetNode::send`).
        let mac = if dst == src { dp.mac() } else { dp.resolve_now(IpAddr::V4(dst))? };
        // Sealed datagrams go without a UDP checksum (RFC 768 allows it over IPv4): the ICV
        // already covers every byte a checksum would, and the receiver checks it first.
        let checksum = if sealed { UdpChecksum::Zero } else { UdpChecksum::Computed };
        Some(udp_template(dp.mac(), mac, src, dst, tos, checksum))
    })
}

/// Frames a [`UetNode`] takes or sends per stage (see [`UetNode::progress`]).
pub const BATCH: usize = 32;

/// Frames a [`UetNode`] takes per [`UetNode::progress`] call at most (as the RoCE device's), so
/// that its timers and transmissions run during a flood.
pub const RX_BUDGET: usize = 8 * BATCH;

/// What the second receive stage does with a frame. Sources are kept as `u32` (4-byte aligned):
/// an `Ipv4Addr` (byte-aligned) shared a word with `ce` and was copied into the batch with a load
/// spanning both stores (a store-forwarding stall per frame).
#[derive(Debug, Clone, PartialEq, Eq)]
enum RxStep {
    /// Nothing: dropped (and counted) by the first.
    Drop,
    /// A trimmed datagram from `src`: `body` is what is left from the PDS header on.
    Trimmed { src: u32, body: Range<usize> },
    /// The UET datagram from `src` in `body` (opened, in a secure domain); `ce`: the IP header
    /// carried ECN-CE.
    Deliver { src: u32, body: Range<usize>, ce: bool },
}

/// The TSS AAD prefix over UDP (`../shared/spec/uet-wire.md`, choices where no source says): IP
/// source ‖ IP destination ‖ UDP source port ‖ UDP destination port.
pub fn aad_prefix(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> [u8; 12] {
    // Two whole words (as `tss::aead::iv` builds the IV): the AAD is read back at once.
    let addrs = u64::from(src.to_bits()) << 32 | u64::from(dst.to_bits());
    let ports = u32::from(sport) << 16 | u32::from(dport);
    let mut p = [0u8; 12];
    p[..8].copy_from_slice(&addrs.to_be_bytes());
    p[8..].copy_from_slice(&ports.to_be_bytes());
    p
}

/// The ECN codepoint ECT(0).
const ECT0: u8 = 0b10;

/// Writes Ethernet, IPv4 and UDP headers in front of the `uet_len` bytes at `buf[HEADERS..]`, with
/// the UDP checksum computed.
pub fn write_headers(
    buf: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    uet_len: usize,
) -> wire::Result<()> {
    udp_template(src_mac, dst_mac, src, dst, 0, UdpChecksum::Computed).write(buf, uet_len).map(|_| ())
}

/// The headers of UET frames from `src` to `dst`: Ethernet, IPv4 with this TOS byte (DSCP and
/// ECN), UDP from the flow's entropy port to 4793 with this checksum mode.
fn udp_template(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    tos: u8,
    checksum: UdpChecksum,
) -> UdpTemplate {
    let eth = EthernetRepr {
        dst_addr: EthernetAddress(dst_mac),
        src_addr: EthernetAddress(src_mac),
        vlan_tags: [None; 2],
        ethertype: ethertype::IPV4,
    };
    let ip = Ipv4Repr {
        dscp_ecn: tos,
        ident: 0,
        flags_frag: 0x4000,
        ttl: 64,
        protocol: PROTO_UDP,
        src_addr: src,
        dst_addr: dst,
        options: &[],
        payload_len: 0,
    };
    let udp = UdpRepr { src_port: entropy_port(src, dst), dst_port: wire::uet::UDP_PORT, checksum };
    UdpTemplate::new(&eth, &IpRepr::V4(ip), &udp).expect("untagged Ethernet, IPv4 without options")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::sim::SimNet;
    use nicsim::LinkConfig;
    use ses::{Addr, Config, Opts, RecvSpec, Status};

    #[test]
    fn two_nodes_over_nicsim_with_corruption_dropped_by_the_udp_checksum() {
        let link = LinkConfig { corrupt: 0.2, ..LinkConfig::default() };
        let (net, a, b) = SimNet::pair(5, link, link);
        let cfg = Config { max_payload: 1000, ..Config::default() };
        let mut na = UetNode::new(a, ses::Endpoint::new(cfg, 1), true).unwrap();
        let mut nb = UetNode::new(b, ses::Endpoint::new(cfg, 2), true).unwrap();
        let dst = Addr { fep: nb.ip(), pid_on_fep: 0, resource_index: 0 };
        nb.ses().post_recv(RecvSpec::any(), 10_000, 7);
        let msg: Vec<u8> = (0..9000u32).map(|i| (i * 7) as u8).collect();
        na.ses().send(dst, &msg, None, Opts { context: 1, ..Opts::default() }).unwrap();
        struct Two {
            net: SimNet,
            a: UetNode<crate::datapath::sim::SimPort>,
            b: UetNode<crate::datapath::sim::SimPort>,
        }
        impl nicsim::System for Two {
            type Error = std::convert::Infallible;
            fn pass(&mut self) -> Result<bool, Self::Error> {
                Ok(self.a.progress() | self.b.progress())
            }
            fn next_event(&self) -> Option<Duration> {
                [self.net.next_event(), self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
            }
            fn now(&self) -> Duration {
                self.net.now()
            }
            fn advance_to(&mut self, t: Duration) {
                self.net.advance_to(t);
            }
        }
        let mut two = Two { net, a: na, b: nb };
        let (mut sent, mut got) = (None, None);
        let Ok(_) = nicsim::run_until(&mut two, Duration::from_secs(10), |t| {
            sent = sent.take().or_else(|| t.a.ses().poll_completion());
            got = got.take().or_else(|| t.b.ses().poll_completion());
            sent.is_some() && got.is_some()
        });
        let Two { a: na, b: nb, .. } = two;
        assert_eq!(sent.map(|c| c.status), Some(Status::Ok));
        let got = got.unwrap();
        assert_eq!((got.status, got.data), (Status::Ok, msg));
        let bad = na.stats().rx_bad + nb.stats().rx_bad;
        assert!(bad > 0, "some corrupt frames were seen and dropped");
        assert_eq!(na.stats().tx_unresolved, 0);
    }

    #[test]
    fn a_node_reaches_its_own_address_over_a_datapath_without_loopback() {
        // The simulated port (as AF_XDP) cannot send to itself: the frame is looped back.
        let (net, a, _b) = SimNet::pair(5, LinkConfig::default(), LinkConfig::default());
        let mut na = UetNode::new(a, ses::Endpoint::new(Config::default(), 1), true).unwrap();
        let me = Addr { fep: na.ip(), pid_on_fep: 0, resource_index: 0 };
        na.ses().post_recv(RecvSpec::any(), 100, 7);
        na.ses().send(me, b"to myself", None, Opts { context: 1, ..Opts::default() }).unwrap();
        let mut done = Vec::new();
        for _ in 0..100 {
            na.progress();
            net.advance_to(na.poll_timeout().unwrap_or(net.now()).max(net.now()));
            while let Some(c) = na.ses().poll_completion() {
                done.push((c.context, c.status, c.data));
            }
            if done.len() == 2 {
                break;
            }
        }
        done.sort_by_key(|d| d.0);
        assert_eq!(done, [(1, Status::Ok, Vec::new()), (7, Status::Ok, b"to myself".to_vec())]);
        assert_eq!(na.stats().tx_unresolved, 0, "its own address needs no neighbour");
    }

    #[test]
    fn progress_takes_at_most_rx_budget_frames_per_call() {
        let (net, a, mut b) = SimNet::pair(5, LinkConfig::default(), LinkConfig::default());
        let mut na = UetNode::new(a, ses::Endpoint::new(Config::default(), 1), true).unwrap();
        // A flood of requests for no PDC (each answered INV_DPDCID), more than a call's budget.
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 2), na.ip());
        let flood = 3 * RX_BUDGET + 10;
        for i in 0..flood {
            let r = wire::uet::pds::RequestRepr {
                mode: wire::uet::pds::Mode::Rud,
                next_hdr: wire::uet::pds::NextHeader::ReqStd,
                flags: 0,
                clear_psn_offset: 0,
                psn: i as u32,
                spdcid: 3,
                dpdcid: 9,
                cc: None,
            };
            let mut f = b.alloc();
            let n = r.emit(&mut f.buffer_mut()[HEADERS..]).unwrap();
            let dst_mac = b.resolve(IpAddr::V4(dst)).unwrap();
            write_headers(f.buffer_mut(), b.mac(), dst_mac, src, dst, n).unwrap();
            f.set_len(HEADERS + n);
            b.transmit(f).unwrap();
        }
        net.advance_to(Duration::from_millis(1));
        assert!(na.progress());
        assert_eq!(na.stats().rx_frames, RX_BUDGET as u64, "one call takes one budget");
        assert!(na.stats().tx_frames > 0, "and sends the answers before taking more");
        while na.progress() {}
        assert_eq!(na.stats().rx_frames, flood as u64, "later calls take the rest");
        let p = *na.ses().pds().stats();
        assert_eq!((p.rx_unknown_pdc, p.rx_refused()), (flood as u64, flood as u64), "each refused once");
    }

    #[test]
    fn headers_parse_back_with_a_valid_checksum() {
        let mut buf = vec![0u8; HEADERS + 16];
        let pds =
            wire::uet::pds::UudRepr { next_hdr: wire::uet::pds::NextHeader::None, flags: 0, reserved: 0 };
        let n = pds.emit(&mut buf[HEADERS..]).unwrap();
        buf.truncate(HEADERS + n);
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        write_headers(&mut buf, [2; 6], [4; 6], s, d, n).unwrap();
        let r = FrameRepr::parse_with(&buf, &UetConfig::default()).unwrap();
        assert_eq!(r.udp().unwrap().checksum, UdpChecksum::Computed);
        assert!(r.uet().is_some());
        buf[HEADERS + 1] ^= 1;
        assert_eq!(
            FrameRepr::parse_with(&buf, &UetConfig::default()).err(),
            Some(wire::Error::BadChecksum("UDP"))
        );
    }
}
