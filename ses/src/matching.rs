//! Receive matching (`../shared/spec/uet-libfabric.md`: separate receive queues for tagged and
//! untagged messages; unexpected messages must be handled).
//!
//! Untagged receives are taken in posted order. A tagged receive matches a message whose tag equals
//! its tag in every bit its ignore mask leaves clear; a receive naming a source also matches the
//! sender (fabric address and initiator ID). A message that matches nothing is kept as unexpected
//! (up to a byte budget); a receive posted later takes the oldest unexpected message it matches.

use std::collections::VecDeque;

use crate::key::{JobScope, Memory};

/// Who sent a message: the fabric endpoint and the `initiator` field of its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source<A> {
    /// Fabric address.
    pub fep: A,
    /// Initiator ID (e.g. the sender's rank, its AV index).
    pub initiator: u32,
}

/// What a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvSpec<A> {
    /// `Some((tag, ignore))` for a tagged receive.
    pub tag: Option<(u64, u64)>,
    /// Only from this sender.
    pub src: Option<Source<A>>,
    /// Which JobIDs' messages the buffer is exposed to (`fi_recv`: any; `fi_recvmsg` with an AV
    /// auth key: that key's JobID).
    pub job: JobScope,
}

impl<A> RecvSpec<A> {
    /// An untagged receive for any sender and any JobID.
    pub const fn any() -> RecvSpec<A> {
        RecvSpec { tag: None, src: None, job: JobScope::Any }
    }

    /// A tagged receive (`ignore`: the bits that need not match) for any sender and JobID.
    pub const fn tagged(tag: u64, ignore: u64) -> RecvSpec<A> {
        RecvSpec { tag: Some((tag, ignore)), src: None, job: JobScope::Any }
    }
}

/// A posted receive buffer.
#[derive(Debug)]
pub(crate) struct Posted<A> {
    pub(crate) spec: RecvSpec<A>,
    /// Where the message goes: the endpoint's own buffer, or the caller's memory.
    pub(crate) buf: Box<dyn Memory>,
    pub(crate) context: u64,
}

/// The message-side facts matching looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MsgInfo<A> {
    pub(crate) src: Source<A>,
    pub(crate) tag: Option<u64>,
    pub(crate) job_id: u32,
}

/// Tag equality under an ignore mask.
pub const fn tag_matches(want: u64, ignore: u64, got: u64) -> bool {
    (want ^ got) & !ignore == 0
}

impl<A: PartialEq + Copy> RecvSpec<A> {
    pub(crate) fn accepts(&self, m: &MsgInfo<A>) -> bool {
        let tag_ok = match (self.tag, m.tag) {
            (None, None) => true,
            (Some((want, ignore)), Some(got)) => tag_matches(want, ignore, got),
            _ => false,
        };
        let job_ok = match self.job {
            JobScope::Any => true,
            JobScope::Job(j) => j == m.job_id,
        };
        tag_ok && job_ok && self.src.is_none_or(|s| s == m.src)
    }
}

/// Posted receives, tagged and untagged in separate queues.
#[derive(Debug)]
pub(crate) struct Queues<A> {
    untagged: VecDeque<Posted<A>>,
    tagged: VecDeque<Posted<A>>,
}

impl<A: PartialEq + Copy> Queues<A> {
    pub(crate) fn new() -> Queues<A> {
        Queues { untagged: VecDeque::new(), tagged: VecDeque::new() }
    }

    pub(crate) fn post(&mut self, p: Posted<A>) {
        if p.spec.tag.is_some() { self.tagged.push_back(p) } else { self.untagged.push_back(p) }
    }

    /// Takes the first posted receive that accepts the message.
    pub(crate) fn take(&mut self, m: &MsgInfo<A>) -> Option<Posted<A>> {
        let q = if m.tag.is_some() { &mut self.tagged } else { &mut self.untagged };
        let i = q.iter().position(|p| p.spec.accepts(m))?;
        q.remove(i)
    }

    /// Posted receives waiting.
    pub(crate) fn len(&self) -> usize {
        self.untagged.len() + self.tagged.len()
    }

    /// Removes the receive posted with `context` (cancel).
    pub(crate) fn cancel(&mut self, context: u64) -> Option<Posted<A>> {
        for q in [&mut self.untagged, &mut self.tagged] {
            if let Some(i) = q.iter().position(|p| p.context == context) {
                return q.remove(i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posted(tag: Option<(u64, u64)>, src: Option<Source<u8>>, context: u64) -> Posted<u8> {
        Posted { spec: RecvSpec { tag, src, job: JobScope::Any }, buf: Box::new(Vec::new()), context }
    }

    #[test]
    fn wildcards_sources_and_posted_order() {
        let a = Source { fep: 1u8, initiator: 10 };
        let b = Source { fep: 2u8, initiator: 20 };
        let mut q = Queues::new();
        q.post(posted(Some((0xAB00, 0x00FF)), None, 1)); // any low byte
        q.post(posted(Some((0xAB12, 0)), Some(b), 2)); // exact, from b only
        q.post(posted(None, None, 3));
        q.post(posted(None, Some(a), 4));
        // Tagged: the wildcard receive was posted first and takes 0xAB12 from a.
        assert_eq!(q.take(&MsgInfo { src: a, tag: Some(0xAB12), job_id: 1 }).map(|p| p.context), Some(1));
        // Now 0xAB12 from a matches nothing (receive 2 wants b); from b it matches receive 2.
        assert!(q.take(&MsgInfo { src: a, tag: Some(0xAB12), job_id: 1 }).is_none());
        assert!(
            q.take(&MsgInfo { src: b, tag: Some(0xAB13), job_id: 1 }).is_none(),
            "bit outside the mask differs"
        );
        assert_eq!(q.take(&MsgInfo { src: b, tag: Some(0xAB12), job_id: 1 }).map(|p| p.context), Some(2));
        // Untagged messages never take tagged receives and vice versa; posted order otherwise.
        assert_eq!(q.take(&MsgInfo { src: b, tag: None, job_id: 1 }).map(|p| p.context), Some(3));
        assert!(q.take(&MsgInfo { src: b, tag: None, job_id: 1 }).is_none());
        assert_eq!(q.take(&MsgInfo { src: a, tag: None, job_id: 1 }).map(|p| p.context), Some(4));
        assert_eq!(q.len(), 0);
        assert!(tag_matches(0, u64::MAX, 0x1234_5678));
    }

    #[test]
    fn a_buffer_bound_to_a_job_takes_only_that_jobs_messages() {
        let a = Source { fep: 1u8, initiator: 10 };
        let mut q = Queues::new();
        q.post(Posted {
            spec: RecvSpec { job: JobScope::Job(5), ..RecvSpec::any() },
            buf: Box::new(Vec::new()),
            context: 1,
        });
        q.post(Posted { spec: RecvSpec::any(), buf: Box::new(Vec::new()), context: 2 });
        // Job 6's message passes over the job-5 buffer and takes the any-JobID one.
        assert_eq!(q.take(&MsgInfo { src: a, tag: None, job_id: 6 }).map(|p| p.context), Some(2));
        assert!(q.take(&MsgInfo { src: a, tag: None, job_id: 6 }).is_none());
        assert_eq!(q.take(&MsgInfo { src: a, tag: None, job_id: 5 }).map(|p| p.context), Some(1));
    }
}
