//! `softrdma stat` for the provider: a fabric hands its endpoints' nodes to a [`StatSink`] from
//! its progress calls (manual progress: the program's own calls) whenever the sink says it is
//! due, and once more as an endpoint closes, with that endpoint's last counters (`fabric.rs`).
//! The sink that writes them (JSON, in the stat directory) is `softrdma-stat`'s, which the C
//! library installs (`Fabric::set_stat_sink`): the engine itself needs no JSON.

use ses::{EpType, Profile};

use super::info::Info;
use crate::datapath::Datapath;
use crate::uet::UetNode;

/// Where a fabric publishes its endpoints' counters.
pub trait StatSink {
    /// Whether to publish now; asked at every progress call, so cheap.
    fn due(&mut self) -> bool;
    /// Publishes the counters of `nodes`, every open endpoint of the fabric (and one closing).
    fn publish(&mut self, nodes: &mut [StatNode<'_>]);
}

/// One endpoint as a [`StatSink`] sees it.
pub struct StatNode<'a> {
    /// The endpoint's name in its fabric: `ep0 rdm hpc` (its index, type and profile).
    pub name: &'a str,
    /// Its node: frames, PDS, SES and TSS counters, PDCs.
    pub node: &'a mut UetNode<Box<dyn Datapath>>,
}

/// The name of a fabric's endpoint number `index` opened with `info`.
pub(super) fn endpoint_name(index: usize, info: &Info) -> String {
    let ep_type = match info.ep_type {
        EpType::Rdm => "rdm",
        EpType::Dgram => "dgram",
    };
    let profile = match info.profile {
        Profile::AiBase => "ai_base",
        Profile::AiFull => "ai_full",
        Profile::Hpc => "hpc",
    };
    format!("ep{index} {ep_type} {profile}")
}
