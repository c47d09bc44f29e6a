//! Completion queues and completion channels (`ibv_create_comp_channel`, `ibv_req_notify_cq`,
//! `ibv_get_cq_event`, `ibv_ack_cq_events`).
//!
//! A channel is an eventfd: when a completion arrives at a CQ that was armed with
//! [`Context::req_notify_cq`](super::Context::req_notify_cq), the CQ is queued on its channel and the
//! eventfd becomes readable, so an application can wait for it with epoll, poll or select next to
//! its other descriptors.

use super::VerbsError;
use crate::roce::types::{WcStatus, WorkCompletion};
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::collections::VecDeque;

/// A completion channel's state; the CM's event channels are the same with events for items.
#[derive(Debug)]
pub(crate) struct Channel<T = u32> {
    fd: OwnedFd,
    /// CQs with an event not yet taken by `get_cq_event` (CM events not yet taken).
    pending: VecDeque<T>,
}

impl<T> Channel<T> {
    pub(crate) fn new() -> Result<Channel<T>, VerbsError> {
        // Blocking, as a kernel completion channel's descriptor is: a program decides with
        // O_NONBLOCK whether a read waits. The engine itself never reads it unless it is readable.
        let fd = eventfd(0, EventfdFlags::CLOEXEC).map_err(|_| VerbsError::OutOfResources)?;
        Ok(Channel { fd, pending: VecDeque::new() })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn signal(&mut self, item: T) {
        self.pending.push_back(item);
        // An eventfd counter only fails to take 1 at u64::MAX - 1: then it is readable anyway.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// The next CQ with an event; drains the eventfd once nothing is pending.
    pub(crate) fn take(&mut self) -> Option<T> {
        let item = self.pending.pop_front();
        if self.pending.is_empty() && self.readable() {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(&self.fd, &mut b);
        }
        item
    }

    /// Items waiting.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Drops the items `keep` refuses.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.pending.retain(keep);
        if self.pending.is_empty() && self.readable() {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(&self.fd, &mut b);
        }
    }

    /// Whether the eventfd's counter is above zero (so a read returns at once).
    fn readable(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
    }
}

impl Channel<u32> {
    pub(crate) fn forget(&mut self, cq: u32) {
        self.pending.retain(|&c| c != cq);
    }
}

/// A completion queue's state.
#[derive(Debug)]
pub(crate) struct CqState {
    pub(crate) depth: usize,
    pub(crate) entries: VecDeque<WorkCompletion>,
    pub(crate) overrun: bool,
    pub(crate) channel: Option<u32>,
    /// Armed by req_notify_cq: `Some(solicited_only)`.
    pub(crate) armed: Option<bool>,
    /// Events delivered by get_cq_event and not yet acknowledged.
    pub(crate) unacked: u32,
}

impl CqState {
    pub(crate) fn new(depth: usize, channel: Option<u32>) -> CqState {
        CqState { depth, entries: VecDeque::new(), overrun: false, channel, armed: None, unacked: 0 }
    }

    /// Adds a completion; returns the channel to signal if the CQ was armed for it. A full CQ is
    /// an overrun: the completion is lost and every later poll reports `CqOverrun`.
    pub(crate) fn push(&mut self, wc: WorkCompletion) -> Option<u32> {
        if self.entries.len() >= self.depth {
            self.overrun = true;
            return None;
        }
        let wake = match self.armed {
            Some(solicited_only) => !solicited_only || wc.solicited || wc.status != WcStatus::Success,
            None => false,
        };
        self.entries.push_back(wc);
        if wake {
            self.armed = None;
            self.channel
        } else {
            None
        }
    }
}

/// Signals channel `ch` for CQ `cq`.
pub(crate) fn signal(channels: &mut [Option<Channel>], ch: u32, cq: u32) {
    if let Some(Some(c)) = channels.get_mut(ch as usize) {
        c.signal(cq);
    }
}
