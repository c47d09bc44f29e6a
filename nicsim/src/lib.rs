//! nicsim: a deterministic simulated Ethernet for softrdma.
//!
//! Virtual time (nothing sleeps or reads a clock), a seeded RNG, NIC ports joined by point-to-point
//! links or a learning switch, and per link direction: one-way latency, bandwidth with a tail-drop
//! queue, loss, reordering, duplication and bit corruption. A pcap tap records what ports send before
//! the links impair it. The same seed and the same calls give the same run, byte for byte.
//!
//! Driving it: ports [`Network::transmit`] at [`Network::now`]; [`Network::receive`] hands a port the
//! frames that have arrived by now; [`Network::next_event`] says when the next frame arrives and
//! [`Network::advance_to`] moves time forward. [`run_until`] and [`step`] do that for a [`System`] of
//! endpoints (the one loop of the tests, benches and `softrdma perf`); [`Pair`] is two endpoints on
//! a cable and [`impairments`] the matrix of link impairments the simulation tests sweep.

mod driver;
mod link;
mod network;
mod tap;

pub use driver::{Ends, Pair, System, run_until, step};
pub use link::{LinkConfig, LinkStats, QUEUE_BUCKET, impairments, jain, mark_ce, trim};
pub use network::{Error, Network, PortId, SwitchId};
pub use tap::{TapRecord, write_pcap};
