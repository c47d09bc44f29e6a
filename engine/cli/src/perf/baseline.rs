//! The physical-limit baselines for `softrdma perf`. Bandwidth: the same bytes pushed through one TX
//! step (headers + copy from memory into a frame + ICRC) and one RX step (ICRC check + copy from the
//! frame into memory) in a plain loop on one thread, with the same page-aligned buffers the engine
//! uses. Latency: the frames of one round trip (the request and, on RC, its ACK) built with headers
//! and ICRC, then parsed and verified, in a plain loop on one thread.

use engine::roce::Path;
use frame::{AlignedBuf, Frame};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wire::FrameRepr;
use wire::ib::icrc;
use wire::ib::{AethRepr, BthRepr, Opcode, RethRepr, RoceRepr};
use wire::uet::UetConfig;

/// Result of a baseline run.
#[derive(Debug, Clone, Copy)]
pub struct Baseline {
    /// Payload bytes moved.
    pub bytes: u64,
    /// Packets built and checked.
    pub packets: u64,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// Whether the destination holds the source bytes afterwards (checked outside the timing).
    pub intact: bool,
    /// Threads that ran it at once, each on its own share of the bytes (`perf --threads`).
    pub threads: usize,
}

impl Baseline {
    /// Payload bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The path of the baselines' frames, from address 1 to address 2 (or back).
fn path(reverse: bool) -> Path {
    let (a, b) =
        (([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1)), ([2, 0, 0, 0, 0, 2], Ipv4Addr::new(10, 0, 0, 2)));
    let (src, dst) = if reverse { (b, a) } else { (a, b) };
    Path {
        src_mac: src.0,
        dst_mac: dst.0,
        src_ip: IpAddr::V4(src.1),
        dst_ip: IpAddr::V4(dst.1),
        src_port: 0xC000,
        dst_port: wire::ROCEV2_UDP_PORT,
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    }
}

/// Moves `messages` messages of `size` bytes in `mtu`-byte packets through the TX and RX steps.
/// `misalign` shifts the destination buffer by that many bytes (to probe the memcpy cliff of
/// `../shared/notes/performance.md`).
pub fn run(size: usize, mtu: usize, messages: u64, misalign: usize) -> Baseline {
    let path = path(false);
    let mut src = AlignedBuf::zeroed(size.max(1));
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = (i * 7 + i / 251) as u8;
    }
    let mut dst = AlignedBuf::zeroed(size.max(1) + misalign);
    let mut frame = Frame::new();
    let ip_at = 14;
    // The same prebuilt headers a QP uses.
    let template = path.template();
    let start = Instant::now();
    let mut packets = 0u64;
    for m in 0..messages {
        let mut off = 0usize;
        loop {
            let n = (size - off).min(mtu);
            let first = off == 0;
            let last = off + n >= size;
            let opcode = match (first, last) {
                (true, true) => Opcode(0x0A),
                (true, false) => Opcode(0x06),
                (false, false) => Opcode(0x07),
                (false, true) => Opcode(0x08),
            };
            let mut bth = BthRepr::new(opcode, 0x11, (m as u32).wrapping_add(off as u32) & 0xFF_FFFF);
            bth.ack_req = last;
            let mut pkt = RoceRepr::new(bth, &[]);
            if first {
                pkt.reth = Some(RethRepr { va: 0x1000, rkey: 1, dma_len: size as u32 });
            }
            let hdr = path.header_len() + pkt.header_len();
            // TX: headers, copy, ICRC.
            let len = template
                .emit(frame.buffer_mut(), &pkt, n, |b| {
                    b.copy_from_slice(&src.as_slice()[off..off + n]);
                    Ok(())
                })
                .unwrap_or(0);
            frame.set_len(len);
            // RX: ICRC check, copy.
            let f = frame.as_slice();
            if icrc::verify(&f[ip_at..]).is_ok() {
                dst.as_mut_slice()[misalign + off..misalign + off + n].copy_from_slice(&f[hdr..hdr + n]);
            }
            packets += 1;
            off += n;
            if last {
                break;
            }
        }
    }
    let elapsed = start.elapsed();
    let intact = messages == 0 || dst.as_slice()[misalign..misalign + size] == src.as_slice()[..size];
    Baseline { bytes: size as u64 * messages, packets, elapsed, intact, threads: 1 }
}

/// Result of a latency baseline run.
#[derive(Debug, Clone, Copy)]
pub struct RoundTrip {
    /// Time per round trip: the median of 16 batches' averages.
    pub per_trip: Duration,
    /// Round trips run.
    pub trips: u64,
    /// Whether every request arrived parsed and verified with its payload, and every ACK too.
    pub intact: bool,
}

/// Runs `trips` round trips of a SEND_ONLY of `size` bytes (at most one packet's worth) and, with
/// `ack`, its ACK: each frame built with headers, payload and ICRC, then parsed with its ICRC
/// verified, the payload copied out.
pub fn round_trip(size: usize, trips: u64, ack: bool) -> RoundTrip {
    let (req_t, ack_t) = (path(false).template(), path(true).template());
    let src: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![0u8; size];
    let (mut req, mut rsp) = (Frame::new(), Frame::new());
    let cfg = UetConfig::default();
    let batches = 16u64;
    let per_batch = trips.div_ceil(batches).max(1);
    let (mut ok, mut times) = (0u64, Vec::with_capacity(batches as usize));
    for b in 0..batches {
        let start = Instant::now();
        for i in b * per_batch..(b + 1) * per_batch {
            let psn = i as u32 & 0xFF_FFFF;
            let mut bth = BthRepr::new(Opcode(0x04), 0x11, psn);
            bth.ack_req = ack;
            let len = req_t
                .emit(req.buffer_mut(), &RoceRepr::new(bth, &[]), size, |b| {
                    b.copy_from_slice(&src);
                    Ok(())
                })
                .unwrap_or(0);
            req.set_len(len);
            let Some(r) =
                FrameRepr::parse_verified(req.as_slice(), &cfg).ok().and_then(|f| f.roce().cloned())
            else {
                continue;
            };
            if r.payload.len() != size {
                continue;
            }
            dst.copy_from_slice(r.payload);
            if !ack {
                ok += 1;
                continue;
            }
            let mut a = RoceRepr::new(BthRepr::new(Opcode(0x11), 0x12, r.bth.psn), &[]);
            a.aeth = Some(AethRepr::ack(0x1F, psn));
            let len = ack_t.emit(rsp.buffer_mut(), &a, 0, |_| Ok(())).unwrap_or(0);
            rsp.set_len(len);
            let parsed = FrameRepr::parse_verified(rsp.as_slice(), &cfg).ok().and_then(|f| f.roce().cloned());
            ok += u64::from(parsed.is_some_and(|r| r.aeth.is_some() && r.bth.psn == psn));
        }
        times.push(start.elapsed() / per_batch as u32);
    }
    times.sort();
    let trips = per_batch * batches;
    RoundTrip { per_trip: times[times.len() / 2], trips, intact: ok == trips && dst == src }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_round_trip_builds_and_checks_both_frames() {
        for (size, ack) in [(64, true), (0, true), (1000, false)] {
            let r = super::round_trip(size, 100, ack);
            assert!(r.intact && r.trips >= 100 && r.per_trip > std::time::Duration::ZERO, "{size} {ack}");
        }
    }

    #[test]
    fn moves_the_bytes() {
        let b = super::run(10_000, 4096, 3, 0);
        assert_eq!((b.bytes, b.packets, b.intact), (30_000, 9, true));
        assert!(super::run(5000, 1024, 2, 17).intact);
        assert!(b.bytes_per_sec() > 0.0);
    }
}
