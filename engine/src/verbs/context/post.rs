//! Posting work requests: sends (with a borrowed SGE list and inline data copied once, for the C
//! library), receives and SRQ receives.

use super::{AhState, Context, FIRST_QPN, Qp, Srq};
use crate::roce::types::{QpState, RecvWr, SendWr};
use crate::roce::{InlineData, MemTable, QueuePair, RecvWqe, SendRef};
use crate::verbs::VerbsError;

impl Context {
    /// Posts send requests (`ibv_post_send`). They are checked one by one; on the first bad one
    /// the call returns its index and error, and the ones before it stay posted.
    pub fn post_send(&mut self, qp: Qp, wrs: &[SendWr]) -> Result<(), (usize, VerbsError)> {
        let i = qp.0.wrapping_sub(FIRST_QPN) as usize;
        let Some(Some(e)) = self.qps.get_mut(i) else { return Err((0, VerbsError::InvalidHandle("QP"))) };
        self.sched.touch(i);
        let posted = wrs.iter().enumerate().try_for_each(|(n, wr)| {
            post_one(&mut e.qp, &self.ahs, &self.mem, wr.borrowed(), InlineData::Sges).map_err(|err| (n, err))
        });
        if e.qp.state() == QpState::Error {
            // Requests posted in the error state complete at once, with a flush error.
            self.flush_qp(i);
        }
        posted
    }

    /// Posts one send request whose SGE list is borrowed, an INLINE request's data taken from
    /// `inline` (see [`QueuePair::post_send_ref`]): the C library's `ibv_post_send`, which
    /// allocates nothing per request.
    pub fn post_send_ref(
        &mut self,
        qp: Qp,
        wr: SendRef<'_>,
        inline: InlineData<'_>,
    ) -> Result<(), VerbsError> {
        let i = qp.0.wrapping_sub(FIRST_QPN) as usize;
        let Some(Some(e)) = self.qps.get_mut(i) else { return Err(VerbsError::InvalidHandle("QP")) };
        self.sched.touch(i);
        let posted = post_one(&mut e.qp, &self.ahs, &self.mem, wr, inline);
        if e.qp.state() == QpState::Error {
            self.flush_qp(i);
        }
        posted
    }

    /// Posts receive requests (`ibv_post_recv`), with the same partial-failure rule as `post_send`.
    pub fn post_recv(&mut self, qp: Qp, wrs: &[RecvWr]) -> Result<(), (usize, VerbsError)> {
        let i = qp.0.wrapping_sub(FIRST_QPN) as usize;
        let Some(Some(e)) = self.qps.get_mut(i) else { return Err((0, VerbsError::InvalidHandle("QP"))) };
        self.sched.touch(i);
        let posted =
            wrs.iter().enumerate().try_for_each(|(n, wr)| e.qp.post_recv(wr).map_err(|err| (n, err.into())));
        if e.qp.state() == QpState::Error {
            self.flush_qp(i);
        }
        posted
    }

    /// Posts receive requests to an SRQ (`ibv_post_srq_recv`), with `post_recv`'s partial-failure
    /// rule.
    pub fn post_srq_recv(&mut self, srq: Srq, wrs: &[RecvWr]) -> Result<(), (usize, VerbsError)> {
        let s = self
            .srqs
            .get_mut(srq.0 as usize)
            .and_then(Option::as_mut)
            .ok_or((0, VerbsError::InvalidHandle("SRQ")))?;
        for (n, wr) in wrs.iter().enumerate() {
            if s.wqes.len() >= s.attr.max_wr as usize {
                return Err((n, VerbsError::QueueFull));
            }
            if wr.sg_list.len() > s.attr.max_sge as usize {
                return Err((n, VerbsError::TooManySge));
            }
            // The keys are checked at arrival, against the receiving QP's PD, as for a QP's own
            // receive queue (`QueuePair::post_recv`).
            if crate::roce::mem::sge_len(&wr.sg_list) >= 1 << 31 {
                return Err((n, VerbsError::InvalidWr("receive buffers of 2 GiB or more")));
            }
            s.wqes.push_back(RecvWqe::new(wr));
        }
        Ok(())
    }
}

/// One send request on `qp`: its UD address handle resolved in `ahs`, then the core's checks.
fn post_one(
    qp: &mut QueuePair,
    ahs: &[Option<AhState>],
    mem: &MemTable,
    wr: SendRef<'_>,
    inline: InlineData<'_>,
) -> Result<(), VerbsError> {
    let path = match wr.ud {
        Some(ud) => match ahs.get(ud.ah.index() as usize) {
            Some(Some(a)) if a.pd == qp.pd() => Some(&a.path),
            _ => return Err(VerbsError::InvalidHandle("AH")),
        },
        None => None,
    };
    Ok(qp.post_send_ref(wr, inline, mem, path)?)
}
