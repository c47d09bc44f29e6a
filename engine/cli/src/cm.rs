//! The connection manager as the CLI's tools drive it (`pingpong --cm`, `perf --cm`): waiting for
//! an event while driving the engine, and closing the connections at the end as librdmacm's
//! programs do when they exit.

use crate::oob;
use engine::verbs::{CmChannel, CmEventKind, CmIdEvent, Context};
use std::time::{Duration, Instant};

/// Drives `ctx` until `want` arrives on `ch`. Events in `pass` are handed to `seen` and waited
/// past; any other event (a REJ, no answer), or the exchange timeout, is an error.
pub fn wait_for(
    ctx: &mut Context,
    ch: CmChannel,
    want: CmEventKind,
    pass: &[CmEventKind],
    mut seen: impl FnMut(&CmIdEvent),
) -> Result<CmIdEvent, String> {
    let give_up = Instant::now() + oob::exchange_timeout();
    loop {
        ctx.progress().map_err(|e| e.to_string())?;
        while let Some(ev) = ctx.cm_get_event(ch).map_err(|e| e.to_string())? {
            if ev.kind == want {
                return Ok(ev);
            }
            if pass.contains(&ev.kind) {
                seen(&ev);
                continue;
            }
            return Err(match ev.kind {
                CmEventKind::Rejected => {
                    format!("the server rejected the connection (IBTA reason {})", ev.status)
                }
                CmEventKind::Unreachable => "the peer did not answer the connection manager".to_string(),
                other => format!("connection manager: {other:?} while waiting for {want:?}"),
            });
        }
        if Instant::now() >= give_up {
            return Err(format!("connection manager: no {want:?} within {:?}", oob::exchange_timeout()));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Drives `ctx` until `want` arrives on `ch`; any other event is an error ([`wait_for`]).
pub fn wait(ctx: &mut Context, ch: CmChannel, want: CmEventKind) -> Result<CmIdEvent, String> {
    wait_for(ctx, ch, want, &[], |_| {})
}

/// Closes every connection of `ctx` (DREQ) and answers the peers' DREQs and DREPs for up to a
/// second, so neither side is left retrying DREQs at a process that is gone.
pub fn close(ctx: &mut Context) {
    ctx.cm_shutdown();
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && !ctx.cm_settled() {
        let _ = ctx.progress();
        std::thread::sleep(Duration::from_micros(200));
    }
}
