//! The 52-byte address message of rdma-core's ibv_*_pingpong (`"%04x:%06x:%06x:%s"`) and the
//! closing "done", as `softrdma pingpong` parses them from a peer: nothing may panic, and what
//! parses re-emits to a message that parses to the same address.

use softrdma::pingpong::{Dest, MSG_LEN, is_done};

pub fn run(data: &[u8]) {
    // The side reads exactly MSG_LEN bytes; any length still must not panic.
    for m in [data, &data[..data.len().min(MSG_LEN)]] {
        if let Some(d) = Dest::from_wire(m) {
            assert!(d.qpn <= 0xFF_FFFF && d.psn <= 0xFF_FFFF);
            assert_eq!(Dest::from_wire(&d.to_wire()), Some(d));
        }
    }
    let _ = is_done(&data[..data.len().min(5)]);
}
