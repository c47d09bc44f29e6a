//! Completion queues and completion channels: creating and destroying them, arming and
//! reading their events, and polling completions.

use super::{CompChannel, Context, Cq};
use crate::roce::types::WorkCompletion;
use crate::verbs::VerbsError;
use crate::verbs::cq::{Channel, CqState};
use rustix::fd::BorrowedFd;

impl Context {
    /// Creates a completion queue of `depth` entries.
    pub fn create_cq(&mut self, depth: usize) -> Result<Cq, VerbsError> {
        self.create_cq_with_channel(depth, None)
    }

    /// Creates a completion queue whose notifications go to a completion channel.
    pub fn create_cq_with_channel(
        &mut self,
        depth: usize,
        channel: Option<CompChannel>,
    ) -> Result<Cq, VerbsError> {
        if depth == 0 {
            return Err(VerbsError::InvalidAttr("cq depth"));
        }
        if let Some(ch) = channel {
            self.channel(ch)?;
        }
        self.cqs.push(Some(CqState::new(depth, channel.map(|c| c.0))));
        Ok(Cq(self.cqs.len() as u32 - 1))
    }

    /// Creates a completion channel (`ibv_create_comp_channel`): an eventfd.
    pub fn create_comp_channel(&mut self) -> Result<CompChannel, VerbsError> {
        self.channels.push(Some(Channel::new()?));
        Ok(CompChannel(self.channels.len() as u32 - 1))
    }

    pub(super) fn channel(&mut self, ch: CompChannel) -> Result<&mut Channel, VerbsError> {
        self.channels
            .get_mut(ch.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::InvalidHandle("channel"))
    }

    /// The channel's file descriptor: readable while a CQ event waits (for epoll, poll, select).
    pub fn comp_channel_fd(&mut self, ch: CompChannel) -> Result<BorrowedFd<'_>, VerbsError> {
        Ok(self.channel(ch)?.fd())
    }

    /// Destroys a channel no CQ uses.
    pub fn destroy_comp_channel(&mut self, ch: CompChannel) -> Result<(), VerbsError> {
        self.channel(ch)?;
        if self.cqs.iter().flatten().any(|c| c.channel == Some(ch.0)) {
            return Err(VerbsError::Busy("completion channel"));
        }
        self.channels[ch.0 as usize] = None;
        Ok(())
    }

    /// Arms a CQ (`ibv_req_notify_cq`): the next completion (with `solicited_only`, the next
    /// solicited or failed one) signals its channel once.
    pub fn req_notify_cq(&mut self, cq: Cq, solicited_only: bool) -> Result<(), VerbsError> {
        let c = self.cq_mut(cq)?;
        if c.channel.is_none() {
            return Err(VerbsError::InvalidWr("the CQ has no completion channel"));
        }
        c.armed = Some(solicited_only);
        Ok(())
    }

    /// The next CQ with a notification on `ch` (`ibv_get_cq_event`, non-blocking: wait on
    /// [`comp_channel_fd`](Self::comp_channel_fd) first). Acknowledge it with `ack_cq_events`.
    pub fn get_cq_event(&mut self, ch: CompChannel) -> Result<Option<Cq>, VerbsError> {
        let Some(cq) = self.channel(ch)?.take() else { return Ok(None) };
        if let Some(Some(c)) = self.cqs.get_mut(cq as usize) {
            c.unacked += 1;
        }
        Ok(Some(Cq(cq)))
    }

    /// Acknowledges `n` events of a CQ (`ibv_ack_cq_events`); a CQ with unacknowledged events
    /// cannot be destroyed.
    pub fn ack_cq_events(&mut self, cq: Cq, n: u32) -> Result<(), VerbsError> {
        let c = self.cq_mut(cq)?;
        c.unacked = c.unacked.saturating_sub(n);
        Ok(())
    }

    pub(super) fn cq_mut(&mut self, cq: Cq) -> Result<&mut CqState, VerbsError> {
        self.cqs.get_mut(cq.0 as usize).and_then(Option::as_mut).ok_or(VerbsError::InvalidHandle("CQ"))
    }

    /// Destroys a CQ no QP uses and with every event acknowledged.
    pub fn destroy_cq(&mut self, cq: Cq) -> Result<(), VerbsError> {
        let c = self.cq_mut(cq)?;
        let (unacked, channel) = (c.unacked, c.channel);
        if unacked > 0 || self.qps.iter().flatten().any(|e| e.send_cq == cq.0 || e.recv_cq == cq.0) {
            return Err(VerbsError::Busy("CQ"));
        }
        if let Some(Some(ch)) = channel.and_then(|c| self.channels.get_mut(c as usize)) {
            ch.forget(cq.0);
        }
        self.cqs[cq.0 as usize] = None;
        Ok(())
    }

    /// Moves up to `max` completions into `out` (`ibv_poll_cq`); returns how many.
    pub fn poll_cq(
        &mut self,
        cq: Cq,
        out: &mut Vec<WorkCompletion>,
        max: usize,
    ) -> Result<usize, VerbsError> {
        let c = self.cq_mut(cq)?;
        if c.overrun {
            return Err(VerbsError::CqOverrun);
        }
        let n = max.min(c.entries.len());
        out.extend(c.entries.drain(..n));
        Ok(n)
    }
}
