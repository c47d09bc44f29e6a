//! The path MTU of an InfiniBand port or QP (`ibv_mtu`): the five sizes of
//! payload a RoCEv2 packet may carry.

/// Path MTU (`ibv_mtu`): 256..4096 bytes of payload per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    /// Bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Mtu::Mtu256 => 256,
            Mtu::Mtu512 => 512,
            Mtu::Mtu1024 => 1024,
            Mtu::Mtu2048 => 2048,
            Mtu::Mtu4096 => 4096,
        }
    }

    /// The MTU of `bytes`, if it is one of the five.
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        Some(match bytes {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }

    /// The largest MTU whose packets fit a netdev MTU, as rxe picks it (netdev MTU minus 80 bytes of
    /// IP, UDP, BTH and ICRC, roce-wire.md §1.8), or `None` below 336.
    pub fn for_netdev(netdev_mtu: u32) -> Option<Mtu> {
        [Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512, Mtu::Mtu256]
            .into_iter()
            .find(|m| m.bytes() + 80 <= netdev_mtu)
    }
}
