//! `ibv_post_send` allocates nothing once warmed up (issue 57, acceptance 3): a counting global
//! allocator counts the allocations the posting thread makes inside each post, for RDMA WRITEs with
//! inline data (read from the SGE addresses) and with a registered SGE, on a loopback RC QP pair
//! over the UDP backend on `lo` (127.0.57.9). The first post sizes the send queue's ring and its
//! inline buffers to the queue's depth, as rxe's ring is sized at creation; every later post, in
//! four rounds that fill the queue, must allocate 0 times, however many requests are outstanding
//! when it comes (which depends on how fast the engine runs).

#![allow(unsafe_code)]

use softrdma_ibverbs::abi::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting what the thread that set `COUNTING` allocates.
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call goes to `System` unchanged; counting only reads a thread-local flag without
// a destructor and bumps an atomic, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract for `dealloc`: `p` came from `alloc` with `l`, i.e. from `System`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

unsafe extern "C" {
    fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device;
    fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context;
    fn ibv_query_gid(context: *mut ibv_context, port_num: u8, index: c_int, gid: *mut ibv_gid) -> c_int;
    fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd;
    fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr;
    fn ibv_create_cq(
        context: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> *mut ibv_cq;
    fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int;
}

const DEPTH: u32 = 64;
const INLINE: usize = 64;
const SGE: usize = 4096;

struct Setup {
    ctx: *mut ibv_context,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    src: *mut ibv_mr,
    dst: *mut ibv_mr,
}

/// A device on `lo` and an RC QP connected to a second QP of the same device.
///
/// # Safety
/// Calls the library as a libibverbs program does; the environment must name `lo`.
unsafe fn setup(src: &mut [u8], dst: &mut [u8]) -> Setup {
    // SAFETY: the libibverbs contract, kept by every call below: live objects of this library,
    // attribute structures that live across the call, buffers that outlive their registration
    // (the test's own, alive until it ends).
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        assert!(!list.is_null() && n >= 1, "no softrdma device on lo");
        let ctx = ibv_open_device(*list);
        assert!(!ctx.is_null(), "ibv_open_device");
        let mut gid: ibv_gid = std::mem::zeroed();
        assert_eq!(ibv_query_gid(ctx, 1, 1, &mut gid), 0, "ibv_query_gid");
        let pd = ibv_alloc_pd(ctx);
        let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_int;
        let src = ibv_reg_mr(pd, src.as_mut_ptr().cast(), src.len(), access);
        let dst = ibv_reg_mr(pd, dst.as_mut_ptr().cast(), dst.len(), access);
        let cq = ibv_create_cq(ctx, 4 * DEPTH as c_int, std::ptr::null_mut(), std::ptr::null_mut(), 0);
        assert!(!pd.is_null() && !src.is_null() && !dst.is_null() && !cq.is_null(), "pd, mr, cq");
        let mut init: ibv_qp_init_attr = std::mem::zeroed();
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = IBV_QPT_RC;
        init.cap = ibv_qp_cap {
            max_send_wr: DEPTH,
            max_recv_wr: 1,
            max_send_sge: 2,
            max_recv_sge: 1,
            max_inline_data: INLINE as u32,
        };
        let a = ibv_create_qp(pd, &mut init);
        let b = ibv_create_qp(pd, &mut init);
        assert!(!a.is_null() && !b.is_null(), "ibv_create_qp");
        for (qp, dest) in [(a, (*b).qp_num), (b, (*a).qp_num)] {
            let mut attr: ibv_qp_attr = std::mem::zeroed();
            attr.qp_state = IBV_QPS_INIT;
            attr.port_num = 1;
            attr.qp_access_flags = access as u32;
            let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
            assert_eq!(ibv_modify_qp(qp, &mut attr, mask as c_int), 0, "RESET->INIT");
            attr.qp_state = IBV_QPS_RTR;
            attr.path_mtu = IBV_MTU_1024;
            attr.dest_qp_num = dest;
            attr.rq_psn = 0;
            attr.max_dest_rd_atomic = 1;
            attr.min_rnr_timer = 12;
            attr.ah_attr.is_global = 1;
            attr.ah_attr.grh.dgid = gid;
            attr.ah_attr.grh.sgid_index = 1;
            attr.ah_attr.grh.hop_limit = 64;
            attr.ah_attr.port_num = 1;
            let mask = IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER;
            assert_eq!(ibv_modify_qp(qp, &mut attr, mask as c_int), 0, "INIT->RTR");
            attr.qp_state = IBV_QPS_RTS;
            attr.timeout = 14;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            attr.sq_psn = 0;
            attr.max_rd_atomic = 1;
            let mask = IBV_QP_STATE
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_SQ_PSN
                | IBV_QP_MAX_QP_RD_ATOMIC;
            assert_eq!(ibv_modify_qp(qp, &mut attr, mask as c_int), 0, "RTR->RTS");
        }
        Setup { ctx, cq, qp: a, src, dst }
    }
}

/// Posts one signaled RDMA WRITE of `len` bytes from `src + off` to `dst + off` (inline: the data
/// read from the SGE's address at post time) through the `ibv_post_send` the program's inline
/// wrapper calls, and returns the allocations the post made.
///
/// # Safety
/// `s` is a live setup whose regions hold `off + len` bytes.
unsafe fn post(s: &Setup, wr_id: u64, off: usize, len: usize, inline: bool) -> usize {
    // SAFETY: `s.src` and `s.dst` are live registrations of at least `off + len` bytes (the
    // caller's contract), so their addresses plus `off` stay inside them.
    let (src, dst) = unsafe { ((*s.src).addr as u64 + off as u64, (*s.dst).addr as u64 + off as u64) };
    // SAFETY: as above, the registrations are live.
    let (lkey, rkey) = unsafe { ((*s.src).lkey, (*s.dst).rkey) };
    let mut sge = ibv_sge { addr: src, length: len as u32, lkey };
    // SAFETY: all-zero is a valid `ibv_send_wr` (integers, null pointers, unions of integers).
    let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | if inline { IBV_SEND_INLINE } else { 0 };
    wr.wr.rdma = ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: dst, rkey };
    let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
    // SAFETY: `s.ctx` is the live context of `s.qp`, whose ops table this library filled.
    let post_send = unsafe { (*s.ctx).ops.post_send }.expect("ops.post_send");
    let mut rc = 0;
    // SAFETY: ibv_post_send(3)'s contract: a live QP, a request list of one whose SGE names
    // registered memory (and, inline, readable bytes), and a writable `bad`.
    let n = allocations(|| rc = unsafe { post_send(s.qp, &mut wr, &mut bad) });
    assert_eq!(rc, 0, "ibv_post_send {wr_id}");
    n
}

/// Polls `s.cq` until `want` successful completions came.
///
/// # Safety
/// `s` is a live setup.
unsafe fn drain(s: &Setup, want: usize) {
    // SAFETY: `s.ctx` is the live context of `s.cq`, whose ops table this library filled.
    let poll_cq = unsafe { (*s.ctx).ops.poll_cq }.expect("ops.poll_cq");
    // SAFETY: all-zero is a valid `ibv_wc` (integers and a union of integers).
    let mut wc: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
    let (mut got, start) = (0, Instant::now());
    while got < want {
        // SAFETY: ibv_poll_cq(3)'s contract: a live CQ and room for 16 completions.
        let n = unsafe { poll_cq(s.cq, 16, wc.as_mut_ptr()) };
        assert!(n >= 0, "ibv_poll_cq: {n}");
        for w in &wc[..n as usize] {
            assert_eq!(w.status, IBV_WC_SUCCESS, "completion {} failed", w.wr_id);
        }
        got += n as usize;
        assert!(start.elapsed() < Duration::from_secs(30), "{got} of {want} completions after 30 s");
    }
}

#[test]
fn ibv_post_send_allocates_nothing_after_warm_up_inline_or_sge() {
    // SAFETY: this test binary runs this one test, so no other thread reads the environment yet.
    unsafe {
        std::env::set_var("SOFTRDMA_BACKEND", "udp");
        std::env::set_var("SOFTRDMA_DEV", "lo");
        // An address of its own on `lo` (port 4791 there is this test's alone).
        std::env::set_var("SOFTRDMA_LOCAL", "127.0.57.9");
    }
    let per = DEPTH as usize / 2;
    let mut src: Vec<u8> = (0..per * SGE).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut dst = vec![0u8; per * SGE];
    // SAFETY: the buffers outlive everything posted on them (this test waits for every completion).
    let s = unsafe { setup(&mut src, &mut dst) };
    let rounds = 4;
    let (mut first, mut counts) = (None, Vec::new());
    for round in 0..rounds {
        let (mut inline, mut sge) = (0, 0);
        for k in 0..per {
            let id = (round * DEPTH as usize + 2 * k) as u64;
            // SAFETY: the regions hold `per * SGE` bytes, past `k * SGE + SGE`.
            unsafe {
                let n = post(&s, id, k * SGE, INLINE, true);
                match first {
                    None => first = Some(n),
                    Some(_) => inline += n,
                }
                sge += post(&s, id + 1, k * SGE + INLINE, SGE - INLINE, false);
            }
        }
        // SAFETY: `s` is live.
        unsafe { drain(&s, 2 * per) };
        counts.push((inline, sge));
    }
    let first = first.expect("posted");
    eprintln!(
        "allocations in the first post: {first}; in {per} inline and {per} SGE posts per round after it: {counts:?}"
    );
    assert_eq!(dst, src, "the WRITEs delivered every byte");
    assert!(first <= DEPTH as usize + 4, "the first post made {first} allocations");
    for (round, &(inline, sge)) in counts.iter().enumerate() {
        assert_eq!((inline, sge), (0, 0), "allocations in round {round} (inline, sge) after the first post");
    }
}
