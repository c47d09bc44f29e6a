//! An endpoint's receives: posted into a buffer of the provider's or the program's memory, tagged
//! or not, from any sender or one; cancelled (`fi_cancel`); and multi-receive buffers
//! (`fi_recvmsg` with FI_MULTI_RECV), which take message after message, posted again after each
//! from where the last one ended.

use super::{Endpoint, EpInner, Multi, MultiRecv};
use crate::provider::UserMem;
use crate::provider::errno::{FiErrno, FiError};
use crate::provider::info::caps;
use crate::provider::objects::{FI_ADDR_UNSPEC, FiAddr};
use frame::UserBuf;
use ses::{JobScope, RecvSpec, Source};

impl EpInner {
    /// A multi-receive buffer's message: where it landed, and whether the buffer is released
    /// (less than its minimum left, or the receive failed or was cancelled); otherwise the
    /// rest is posted again for the next message. `None` for other receives.
    pub(super) fn multi_taken(&mut self, context: u64, len: usize, ok: bool) -> Option<(usize, bool)> {
        let m = self.multi.get_mut(&context)?;
        let at = m.taken;
        m.taken = (at + len).min(m.len);
        let rest = if ok && m.len - m.taken >= m.min.max(1) { (m.slice)(m.taken) } else { None };
        match rest {
            Some(buf) => {
                let spec = m.spec;
                self.node.ses().post_recv_into(spec, Box::new(UserMem(buf)), context);
                Some((at, false))
            }
            None => {
                self.multi.remove(&context);
                Some((at, true))
            }
        }
    }
}

impl Endpoint {
    fn recv_common(
        &self,
        buf: Box<dyn ses::Memory>,
        src: FiAddr,
        tag: Option<(u64, u64)>,
        av_job: bool,
        context: u64,
    ) -> Result<(), FiError> {
        let mut e = self.ep();
        if let Some((_, ignore)) = tag {
            e.check_caps(caps::TAGGED, "tagged receive")?;
            if ignore != 0 && e.info.caps & caps::TAG_WILDCARD == 0 {
                return Err(FiError::new(
                    FiErrno::EINVAL,
                    format!("{:?} supports exact-match tags only (ignore bits set)", e.info.profile),
                ));
            }
        }
        let source = if src == FI_ADDR_UNSPEC {
            None
        } else {
            let (a, _) = e.av_entry(src)?;
            Some(Source { fep: a.ip, initiator: a.initiator })
        };
        let job = if av_job { JobScope::Job(e.av_job(src)?) } else { JobScope::Any };
        e.node.ses().post_recv_into(RecvSpec { tag, src: source, job }, buf, context);
        Ok(())
    }

    /// `fi_recv`: a buffer of `len` bytes for any JobID; `src` [`FI_ADDR_UNSPEC`] or one sender.
    /// The completion carries the bytes.
    pub fn recv(&self, len: usize, src: FiAddr, context: u64) -> Result<(), FiError> {
        self.recv_common(Box::new(vec![0u8; len]), src, None, false, context)
    }

    /// `fi_recvmsg` with FI_AV_AUTH_KEY: only for messages of `src`'s auth key JobID.
    pub fn recvmsg_auth_key(&self, len: usize, src: FiAddr, context: u64) -> Result<(), FiError> {
        self.recv_common(Box::new(vec![0u8; len]), src, None, true, context)
    }

    /// `fi_trecv`: tag and ignore mask (AI Full refuses ignore bits: FI_EINVAL).
    pub fn trecv(&self, len: usize, src: FiAddr, tag: u64, ignore: u64, context: u64) -> Result<(), FiError> {
        self.recv_common(Box::new(vec![0u8; len]), src, Some((tag, ignore)), false, context)
    }

    /// `fi_recv` (`tag` `None`) or `fi_trecv` into the program's memory: the message lands
    /// there as it arrives, with no copy after, and the completion carries its length only
    /// (an empty [`CqEntry::buf`](crate::provider::CqEntry::buf)).
    pub fn recv_into(
        &self,
        buf: UserBuf,
        src: FiAddr,
        tag: Option<(u64, u64)>,
        context: u64,
    ) -> Result<(), FiError> {
        self.recv_common(Box::new(UserMem(buf)), src, tag, false, context)
    }

    /// `fi_cancel` of the receive posted with `context`: it completes at once with
    /// [`FiErrno::ECANCELED`] (its queue's error entry, an error on its counters); false if no
    /// receive with that context is waiting (a message has matched it, or it completed).
    pub fn cancel_recv(&self, context: u64) -> bool {
        let mut e = self.ep();
        if !e.node.ses().cancel_recv(context) {
            return false;
        }
        while let Some(c) = e.node.ses().poll_completion() {
            e.dispatch(c);
        }
        true
    }

    /// `fi_recvmsg` with FI_MULTI_RECV (untagged): the buffer takes message after message, each
    /// completing with its [`CqEntry::offset`](crate::provider::CqEntry::offset) in the buffer, until less than `m.min` bytes
    /// remain; that message's completion (or a failure's, or a cancel's) has
    /// [`cq_flags::MULTI_RECV`](crate::provider::cq_flags::MULTI_RECV), and the buffer is the program's again.
    pub fn recv_multi(&self, src: FiAddr, mut m: MultiRecv, context: u64) -> Result<(), FiError> {
        let Some(first) = (m.slice)(0) else {
            return Err(FiError::new(FiErrno::EINVAL, "a multi-receive buffer needs bytes"));
        };
        let mut e = self.ep();
        let source = if src == FI_ADDR_UNSPEC {
            None
        } else {
            let (a, _) = e.av_entry(src)?;
            Some(Source { fep: a.ip, initiator: a.initiator })
        };
        let spec = RecvSpec { tag: None, src: source, job: JobScope::Any };
        e.multi.insert(context, Multi { spec, len: m.len, taken: 0, min: m.min, slice: m.slice });
        e.node.ses().post_recv_into(spec, Box::new(UserMem(first)), context);
        Ok(())
    }
}
