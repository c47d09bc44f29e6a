//! Handing frames to the datapath, shared by the QPs' and QP1's transmissions.

use super::VerbsError;
use super::stats::Stats;
use crate::datapath::{Datapath, TxError};
use frame::Frame;

/// Hands `frame` to the datapath: true if it took it; false if it handed it back, and then the
/// frame waits in `pending` (a stall, counted once per frame: `retry` says it was offered before).
pub(super) fn offer(
    dp: &mut dyn Datapath,
    stats: &mut Stats,
    pending: &mut Option<Frame>,
    frame: Frame,
    retry: bool,
) -> Result<bool, VerbsError> {
    let len = frame.len() as u64;
    match dp.transmit(frame) {
        Ok(()) => {
            stats.tx_frames += 1;
            stats.tx_bytes += len;
            Ok(true)
        }
        Err(TxError::Full(frame)) => {
            stats.tx_stalls += u64::from(!retry);
            *pending = Some(frame);
            Ok(false)
        }
        Err(TxError::Failed(why)) => {
            stats.tx_failed += 1;
            Err(VerbsError::Datapath(why))
        }
    }
}
