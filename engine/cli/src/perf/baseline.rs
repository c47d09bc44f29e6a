//! The physical-limit baseline for `softrdma perf`: the same bytes pushed through one TX step
//! (headers + copy from memory into a frame + ICRC) and one RX step (ICRC check + copy from the frame
//! into memory) in a plain loop on one thread, with the same page-aligned buffers the engine uses.

use engine::roce::Path;
use frame::{AlignedBuf, Frame};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wire::ib::icrc;
use wire::ib::{BthRepr, Opcode, RethRepr, RoceRepr};

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
}

impl Baseline {
    /// Payload bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Moves `messages` messages of `size` bytes in `mtu`-byte packets through the TX and RX steps.
/// `misalign` shifts the destination buffer by that many bytes (to probe the memcpy cliff of
/// `../shared/notes/performance.md`).
pub fn run(size: usize, mtu: usize, messages: u64, misalign: usize) -> Baseline {
    let path = Path {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        src_port: 0xC000,
        dst_port: wire::ROCEV2_UDP_PORT,
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    };
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
    Baseline { bytes: size as u64 * messages, packets, elapsed, intact }
}

#[cfg(test)]
mod tests {
    #[test]
    fn moves_the_bytes() {
        let b = super::run(10_000, 4096, 3, 0);
        assert_eq!((b.bytes, b.packets, b.intact), (30_000, 9, true));
        assert!(super::run(5000, 1024, 2, 17).intact);
        assert!(b.bytes_per_sec() > 0.0);
    }
}
