//! A context on a real datapath, opened by the engine's one opener ([`Link::open`]).

use super::Context;
use crate::datapath::Datapath;
use crate::datapath::link::{Link, OnDatapath, OpenError, Opened, Protocol};

/// A context on the datapath [`Link::open`] hands over.
struct OpenContext;

impl OnDatapath for OpenContext {
    type Output = (Context, Opened);
    fn on<D: Datapath + Send + 'static>(self, dp: D, opened: Opened) -> (Context, Opened) {
        (Context::open(dp), opened)
    }
}

impl Context {
    /// Opens the device behind the real datapath `link` describes (its netdev MTU checked, its
    /// decorators in place), with what the opener found: whether the datapath carries the link's
    /// path MTU ([`Opened::short_of`]), its capture log. Peers are taken to receive RoCEv2 on the
    /// link's UDP port unless an address vector says otherwise ([`Context::set_peer_udp_port`]).
    pub fn open_link(link: &Link) -> Result<(Context, Opened), OpenError> {
        let (mut ctx, opened) = link.open(OpenContext)?;
        if let Protocol::Roce { udp_port, .. } = link.protocol {
            ctx.set_peer_udp_port(udp_port);
        }
        Ok((ctx, opened))
    }
}
