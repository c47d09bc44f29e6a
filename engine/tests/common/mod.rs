//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod incast;
pub mod responder;

/// SplitMix64: the tests' seeded generator.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every completion waiting on side a's (or b's) CQ of a pair.
pub fn drain(p: &mut engine::simpair::SimPair, on_a: bool) -> Vec<engine::verbs::WorkCompletion> {
    let mut v = Vec::new();
    if on_a {
        p.a.poll_cq(p.cq_a, &mut v, 1000).unwrap();
    } else {
        p.b.poll_cq(p.cq_b, &mut v, 1000).unwrap();
    }
    v
}

/// The impairment matrix the engine's RC, UC and UD sweeps run: `nicsim::impairments` on the
/// default 1 us cable, its clean line named "loss 0%" and its reorder window 20 us (as the engine's
/// sweeps always had); without the "all" line, which the RC sweep runs with its own mix.
pub fn matrix() -> Vec<(&'static str, nicsim::LinkConfig)> {
    nicsim::impairments(nicsim::LinkConfig::default())
        .into_iter()
        .filter(|&(name, _)| name != "all")
        .map(|(name, link)| match name {
            "clean" => ("loss 0%", link),
            "reorder 20%" => {
                (name, nicsim::LinkConfig { reorder_window: std::time::Duration::from_micros(20), ..link })
            }
            _ => (name, link),
        })
        .collect()
}

/// One line of [`matrix`] by name.
pub fn line(name: &str) -> nicsim::LinkConfig {
    matrix().into_iter().find(|&(n, _)| n == name).map(|(_, l)| l).expect("a line of the matrix")
}

/// Runs a pair for `d` of virtual time.
pub fn run_for(p: &mut engine::simpair::SimPair, d: std::time::Duration) {
    let end = p.net.now() + d;
    p.run_until(end, |_| false).unwrap();
}

/// An SGE of `len` bytes at `off` in a region.
pub fn sge(mr: &engine::verbs::Mr, off: u64, len: u32) -> engine::verbs::Sge {
    engine::verbs::Sge { addr: mr.addr + off, length: len, lkey: mr.lkey }
}
