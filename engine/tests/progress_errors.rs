//! `Context::progress` when the datapath refuses a frame for good (TxError::Failed).

use engine::datapath::sim::{SimNet, SimPort};
use engine::datapath::{Datapath, TxError};
use engine::simpair::{PairConfig, connect};
use engine::verbs::{Access, Context, QpInitAttr, SendWr, Sge, VerbsError, WrOpcode};
use frame::Frame;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A simulated port whose transmissions all fail, counting its flushes.
struct FailingTx {
    inner: SimPort,
    flushes: Arc<AtomicU32>,
}

impl Datapath for FailingTx {
    fn now(&self) -> Duration {
        self.inner.now()
    }
    fn mac(&self) -> [u8; 6] {
        self.inner.mac()
    }
    fn gid(&self) -> IpAddr {
        self.inner.gid()
    }
    fn resolve(&self, ip: IpAddr) -> Option<[u8; 6]> {
        self.inner.resolve(ip)
    }
    fn alloc(&mut self) -> Frame {
        self.inner.alloc()
    }
    fn transmit(&mut self, frame: Frame) -> Result<(), TxError> {
        self.inner.recycle(frame);
        Err(TxError::Failed("no route"))
    }
    fn receive(&mut self) -> Option<Frame> {
        self.inner.receive()
    }
    fn recycle(&mut self, frame: Frame) {
        self.inner.recycle(frame);
    }
    fn flush(&mut self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.inner.flush();
    }
}

#[test]
fn progress_still_flushes_after_a_datapath_error() {
    let (_net, pa, pb) = SimNet::pair(1, Default::default(), Default::default());
    let peer = Context::open(pb);
    let flushes = Arc::new(AtomicU32::new(0));
    let mut ctx = Context::open(FailingTx { inner: pa, flushes: Arc::clone(&flushes) });
    let pd = ctx.alloc_pd();
    let cq = ctx.create_cq(16).unwrap();
    let qp = ctx.create_qp(pd, &QpInitAttr::rc(cq)).unwrap();
    connect(&mut ctx, qp, 0x11, peer.gid(), 0, 0, &PairConfig::default()).unwrap();
    let mr = ctx.reg_mr(pd, 4096, Access::LOCAL_WRITE).unwrap();
    let sge = Sge { addr: mr.addr, length: 64, lkey: mr.lkey };
    ctx.post_send(qp, &[SendWr::new(1, WrOpcode::Send, vec![sge])]).unwrap();
    assert_eq!(ctx.progress(), Err(VerbsError::Datapath("no route")));
    assert_eq!(flushes.load(Ordering::Relaxed), 1, "the round ended without flushing the datapath");
}
