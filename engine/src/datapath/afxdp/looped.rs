//! Frames a port sends to its own address. An AF_XDP socket transmits on the wire, and the kernel
//! does not loop a frame back to the interface it leaves (a UDP socket's traffic to its own
//! address goes through the kernel's loopback instead): a frame for our own MAC and IPv4
//! address is kept here and handed to the port's receive path, as a NIC's loopback would. So an
//! address handle or a connection to the device's own GID (UCX probes GIDs with one) works on
//! AF_XDP as on UDP.

use frame::Frame;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// Frames waiting to be received at most (then the port hands the frame back as full: sent
/// again later, never dropped).
pub(crate) const CAP: usize = 1024;

/// Whether `frame` (Ethernet, IPv4) goes to `mac` and `ip`: the port's own.
pub(crate) fn is_to_self(frame: &[u8], mac: [u8; 6], ip: Ipv4Addr) -> bool {
    frame.len() >= 34
        && frame[..6] == mac
        && frame[12..14] == wire::ethernet::ethertype::IPV4.to_be_bytes()
        && frame[30..34] == ip.octets()
}

/// The frames sent to ourselves, in order.
#[derive(Debug, Default)]
pub(crate) struct Looped {
    q: VecDeque<Frame>,
    /// Frames looped back so far.
    pub(crate) count: u64,
}

impl Looped {
    /// Keeps `frame` for [`Looped::pop`], or hands it back when [`CAP`] frames wait.
    pub(crate) fn push(&mut self, frame: Frame) -> Result<(), Frame> {
        if self.q.len() >= CAP {
            return Err(frame);
        }
        self.q.push_back(frame);
        self.count += 1;
        Ok(())
    }

    /// The oldest frame waiting.
    pub(crate) fn pop(&mut self) -> Option<Frame> {
        self.q.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    fn eth_ipv4(dst_mac: [u8; 6], dst_ip: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&dst_mac);
        f[12..14].copy_from_slice(&wire::ethernet::ethertype::IPV4.to_be_bytes());
        f[14] = 0x45;
        f[30..34].copy_from_slice(&dst_ip.octets());
        f
    }

    #[test]
    fn only_frames_to_our_mac_and_address_loop_back() {
        assert!(is_to_self(&eth_ipv4(MAC, IP), MAC, IP));
        assert!(!is_to_self(&eth_ipv4([2, 0, 0, 0, 0, 2], IP), MAC, IP));
        assert!(!is_to_self(&eth_ipv4(MAC, Ipv4Addr::new(10, 0, 0, 2)), MAC, IP));
        let mut arp = eth_ipv4(MAC, IP);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!is_to_self(&arp, MAC, IP));
        assert!(!is_to_self(&eth_ipv4(MAC, IP)[..33], MAC, IP));
    }

    #[test]
    fn the_queue_keeps_order_and_hands_back_past_its_bound() {
        let mut l = Looped::default();
        for i in 0..CAP as u32 {
            assert!(l.push(Frame::from_bytes(&i.to_be_bytes())).is_ok());
        }
        assert!(l.push(Frame::from_bytes(&[9])).is_err());
        assert_eq!(l.pop().map(|f| f.as_slice().to_vec()), Some(0u32.to_be_bytes().to_vec()));
        assert_eq!(l.pop().map(|f| f.as_slice().to_vec()), Some(1u32.to_be_bytes().to_vec()));
        assert_eq!(l.count, CAP as u64);
    }
}
