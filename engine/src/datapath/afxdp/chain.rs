//! Multi-buffer AF_XDP (`XDP_USE_SG`, Linux 6.6+): a packet longer than one UMEM chunk travels as
//! a chain of descriptors, every one but the last with `XDP_PKT_CONTD` in `options`
//! (`Documentation/networking/af_xdp.rst`, "Multi-Buffer Support"). On TX the application writes
//! the chain; on RX the kernel does, and only ever puts whole packets on the RX ring. This is the
//! logic of both, over byte slices and flags: no socket, no UMEM, testable on its own.

use frame::{FRAME_CAPACITY, Frame, FramePool};

/// `XDP_PKT_CONTD`: the packet goes on in the next descriptor (`options` of RX and TX descriptors).
pub(crate) const XDP_PKT_CONTD: u32 = libc::XDP_PKT_CONTD;

/// Descriptors a frame of `len` bytes takes on TX with at most `room` bytes each (0 for an empty
/// frame or no room: such a frame cannot be sent).
pub(crate) fn tx_parts(len: usize, room: usize) -> usize {
    if room == 0 { 0 } else { len.div_ceil(room) }
}

/// The pieces of a frame of `len` bytes, at most `room` bytes each, in order: the byte range of
/// each and its `options` (`XDP_PKT_CONTD` on all but the last). None for an empty frame.
pub(crate) fn tx_pieces(len: usize, room: usize) -> impl Iterator<Item = (std::ops::Range<usize>, u32)> {
    let n = tx_parts(len, room);
    (0..n).map(move |i| {
        let start = i * room;
        let end = (start + room).min(len);
        (start..end, if i + 1 < n { XDP_PKT_CONTD } else { 0 })
    })
}

/// What one received descriptor made of the packet being reassembled.
#[derive(Debug)]
pub(crate) enum RxStep {
    /// The packet goes on in the next descriptor.
    More,
    /// The packet is whole: `parts` descriptors.
    Done {
        /// The packet.
        frame: Frame,
        /// Descriptors it came in.
        parts: u32,
    },
    /// The packet is dropped: longer than a [`Frame`] holds, or a descriptor outside the UMEM.
    /// Its frame goes back to the pool.
    Dropped(Frame),
}

/// A received packet being put together from its descriptors, across calls (the RX ring holds
/// whole packets, but nothing here relies on it: a chain cut by an empty ring goes on at the next
/// call).
#[derive(Debug, Default)]
pub(crate) struct RxChain {
    /// The frame being filled, from the packet's first descriptor.
    frame: Option<Frame>,
    /// Descriptors taken for this packet so far.
    parts: u32,
    /// The packet does not fit a frame (or a descriptor was bad): the rest of its descriptors
    /// are taken and thrown away, and the packet dropped at its last.
    broken: bool,
}

impl RxChain {
    /// Takes one descriptor: its bytes (`None` for a descriptor outside the UMEM) and whether
    /// `XDP_PKT_CONTD` is set. The frame of a new packet comes from `pool`.
    pub(crate) fn push(&mut self, bytes: Option<&[u8]>, contd: bool, pool: &mut FramePool) -> RxStep {
        let frame = self.frame.get_or_insert_with(|| pool.get());
        self.parts = self.parts.saturating_add(1);
        if !self.broken {
            let at = frame.len();
            match bytes {
                Some(b) if b.len() <= FRAME_CAPACITY - at => {
                    frame.buffer_mut()[at..at + b.len()].copy_from_slice(b);
                    frame.set_len(at + b.len());
                }
                _ => self.broken = true,
            }
        }
        if contd {
            return RxStep::More;
        }
        let parts = std::mem::take(&mut self.parts);
        let broken = std::mem::take(&mut self.broken);
        match self.frame.take() {
            Some(frame) if !broken => RxStep::Done { frame, parts },
            Some(frame) => RxStep::Dropped(frame),
            // Unreachable: the frame was put in place above.
            None => RxStep::More,
        }
    }

    /// Whether a packet is half taken (its last descriptor not seen yet).
    #[cfg(test)]
    pub(crate) fn in_progress(&self) -> bool {
        self.frame.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `packet` as descriptors of at most `room` bytes, the way the kernel would.
    fn feed(chain: &mut RxChain, pool: &mut FramePool, packet: &[u8], room: usize) -> Vec<RxStep> {
        tx_pieces(packet.len(), room)
            .map(|(r, opt)| chain.push(Some(&packet[r]), opt & XDP_PKT_CONTD != 0, pool))
            .collect()
    }

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn tx_pieces_cover_the_frame_in_order() {
        assert_eq!(tx_parts(0, 4096), 0);
        assert_eq!(tx_parts(100, 0), 0);
        assert_eq!(tx_pieces(0, 4096).count(), 0);
        assert_eq!(tx_pieces(4096, 4096).collect::<Vec<_>>(), vec![(0..4096, 0)]);
        assert_eq!(tx_pieces(60, 4096).collect::<Vec<_>>(), vec![(0..60, 0)]);
        // A RoCE WRITE FIRST with a 4096-byte payload: Eth + IPv4 + UDP + BTH + RETH + ICRC.
        let len = 14 + 20 + 8 + 12 + 16 + 4096 + 4;
        assert_eq!(tx_pieces(len, 4096).collect::<Vec<_>>(), vec![(0..4096, XDP_PKT_CONTD), (4096..len, 0)]);
        assert_eq!(tx_parts(len, 4096), 2);
        assert_eq!(tx_parts(FRAME_CAPACITY, 4096), 2);
        let p: Vec<_> = tx_pieces(10_000, 3000).collect();
        assert_eq!(p.len(), 4);
        assert!(p.windows(2).all(|w| w[0].0.end == w[1].0.start));
        assert!(p[..3].iter().all(|(r, o)| r.len() == 3000 && *o == XDP_PKT_CONTD));
        assert_eq!(p[3], (9000..10_000, 0));
    }

    #[test]
    fn single_descriptor_packets_pass_through() {
        let (mut c, mut pool) = (RxChain::default(), FramePool::default());
        for n in [1, 60, 3840] {
            let pkt = bytes(n);
            match c.push(Some(&pkt), false, &mut pool) {
                RxStep::Done { frame, parts } => {
                    assert_eq!(frame.as_slice(), &pkt[..]);
                    assert_eq!(parts, 1);
                }
                s => panic!("{s:?}"),
            }
            assert!(!c.in_progress());
        }
    }

    #[test]
    fn chains_reassemble_into_one_frame() {
        let (mut c, mut pool) = (RxChain::default(), FramePool::default());
        // Copy mode leaves 4096 - 256 (XDP_PACKET_HEADROOM) bytes a chunk for data.
        for (n, room, parts) in
            [(4170, 3840, 2), (FRAME_CAPACITY, 3840, 3), (FRAME_CAPACITY, 4096, 2), (500, 1, 500)]
        {
            let pkt = bytes(n);
            let mut steps = feed(&mut c, &mut pool, &pkt, room);
            let last = steps.pop();
            assert!(steps.iter().all(|s| matches!(s, RxStep::More)), "{steps:?}");
            match last {
                Some(RxStep::Done { frame, parts: p }) => {
                    assert_eq!(frame.as_slice(), &pkt[..], "{n} bytes in pieces of {room}");
                    assert_eq!(p, parts);
                    pool.put(frame);
                }
                s => panic!("{s:?}"),
            }
            assert!(!c.in_progress());
        }
    }

    #[test]
    fn a_chain_longer_than_a_frame_is_dropped_and_the_next_packet_is_whole() {
        let (mut c, mut pool) = (RxChain::default(), FramePool::default());
        for n in [FRAME_CAPACITY + 1, 9000, 64 * 1024] {
            let mut steps = feed(&mut c, &mut pool, &bytes(n), 3840);
            assert!(matches!(steps.pop(), Some(RxStep::Dropped(_))), "{n}");
            assert!(steps.iter().all(|s| matches!(s, RxStep::More)));
            assert!(!c.in_progress());
            let pkt = bytes(4170);
            match feed(&mut c, &mut pool, &pkt, 3840).pop() {
                Some(RxStep::Done { frame, parts: 2 }) => assert_eq!(frame.as_slice(), &pkt[..]),
                s => panic!("{s:?}"),
            }
        }
        // One descriptor longer than a frame, on its own.
        assert!(matches!(c.push(Some(&bytes(FRAME_CAPACITY + 1)), false, &mut pool), RxStep::Dropped(_)));
    }

    #[test]
    fn a_bad_descriptor_drops_its_packet_only() {
        let (mut c, mut pool) = (RxChain::default(), FramePool::default());
        assert!(matches!(c.push(Some(&bytes(100)), true, &mut pool), RxStep::More));
        assert!(c.in_progress());
        assert!(matches!(c.push(None, true, &mut pool), RxStep::More));
        assert!(matches!(c.push(Some(&bytes(100)), false, &mut pool), RxStep::Dropped(_)));
        assert!(matches!(c.push(None, false, &mut pool), RxStep::Dropped(_)));
        let pkt = bytes(300);
        match c.push(Some(&pkt), false, &mut pool) {
            RxStep::Done { frame, parts: 1 } => assert_eq!(frame.as_slice(), &pkt[..]),
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn a_chain_cut_between_calls_goes_on() {
        let (mut c, mut pool) = (RxChain::default(), FramePool::default());
        let pkt = bytes(7000);
        let pieces: Vec<_> = tx_pieces(pkt.len(), 3840).collect();
        assert!(matches!(c.push(Some(&pkt[pieces[0].0.clone()]), true, &mut pool), RxStep::More));
        // ... an empty ring, another call ...
        assert!(c.in_progress());
        match c.push(Some(&pkt[pieces[1].0.clone()]), false, &mut pool) {
            RxStep::Done { frame, parts: 2 } => assert_eq!(frame.as_slice(), &pkt[..]),
            s => panic!("{s:?}"),
        }
    }
}
