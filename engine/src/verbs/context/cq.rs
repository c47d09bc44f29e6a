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

    /// Resizes a CQ to `depth` entries (`ibv_resize_cq`), as rxe does: any depth from the number
    /// of completions it holds up, so none is lost; fewer is `InvalidAttr`, as 0 is. The
    /// completions keep their order, and an overrun CQ stays overrun.
    pub fn resize_cq(&mut self, cq: Cq, depth: usize) -> Result<(), VerbsError> {
        let c = self.cq_mut(cq)?;
        if depth == 0 {
            return Err(VerbsError::InvalidAttr("cq depth"));
        }
        if depth < c.entries.len() {
            return Err(VerbsError::InvalidAttr("cq depth below the completions it holds"));
        }
        c.depth = depth;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::sim::SimNet;
    use crate::roce::types::{WcOpcode, WcStatus};
    use std::net::{IpAddr, Ipv4Addr};

    fn wc(wr_id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Recv,
            byte_len: 8,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: 17,
            src_qp: 18,
            src_gid: None,
            solicited: false,
        }
    }

    fn ids(c: &mut Context, cq: Cq) -> Vec<u64> {
        let mut out = Vec::new();
        c.poll_cq(cq, &mut out, usize::MAX).unwrap();
        out.iter().map(|w| w.wr_id).collect()
    }

    #[test]
    fn resize_keeps_every_completion_and_refuses_fewer_entries_than_held() {
        let net = SimNet::new(1);
        let a = net.add_port("a", IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))).unwrap();
        let mut c = Context::open(a);
        let cq = c.create_cq(4).unwrap();
        for i in 0..3 {
            assert_eq!(c.cq_mut(cq).unwrap().push(wc(i)), None);
        }
        // Below the three held, and 0: refused, nothing changed.
        assert_eq!(
            c.resize_cq(cq, 2),
            Err(VerbsError::InvalidAttr("cq depth below the completions it holds"))
        );
        assert_eq!(c.resize_cq(cq, 0), Err(VerbsError::InvalidAttr("cq depth")));
        assert_eq!(c.cq_mut(cq).unwrap().depth, 4);
        // Grown: room for five more without an overrun.
        c.resize_cq(cq, 8).unwrap();
        for i in 3..8 {
            c.cq_mut(cq).unwrap().push(wc(i));
        }
        assert!(!c.cq_mut(cq).unwrap().overrun);
        assert_eq!(ids(&mut c, cq), (0..8).collect::<Vec<_>>());
        // Shrunk to exactly what it holds: the next completion overruns it.
        for i in 8..10 {
            c.cq_mut(cq).unwrap().push(wc(i));
        }
        c.resize_cq(cq, 2).unwrap();
        c.cq_mut(cq).unwrap().push(wc(10));
        assert_eq!(c.poll_cq(cq, &mut Vec::new(), 16), Err(VerbsError::CqOverrun));
        // A destroyed CQ is a bad handle.
        let other = c.create_cq(1).unwrap();
        c.destroy_cq(other).unwrap();
        assert_eq!(c.resize_cq(other, 4), Err(VerbsError::InvalidHandle("CQ")));
    }
}
