//! The RoCE core's value types: access flags, scatter/gather entries, work requests, work
//! completions and QP attributes (named after libibverbs' `ibv_*` types). The verbs API re-exports
//! them as its own.

use std::net::IpAddr;

use wire::ib::Mtu;

/// Memory region and QP access flags (`ibv_access_flags`, same bit values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(pub u32);

impl Access {
    /// No access beyond local read.
    pub const NONE: Access = Access(0);
    /// The local HCA may write (receive buffers, READ and atomic results).
    pub const LOCAL_WRITE: Access = Access(1);
    /// Remote peers may RDMA WRITE.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Remote peers may RDMA READ.
    pub const REMOTE_READ: Access = Access(4);
    /// Remote peers may run atomics.
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// Every `ibv_access_flags` flag above; not [`REMOTE_INVALIDATE`](Self::REMOTE_INVALIDATE).
    pub const ALL: Access = Access(15);
    /// A peer's SEND_WITH_INV may invalidate the region's R_Key. Not an `ibv_access_flags` bit:
    /// rxe lets a peer invalidate only fast-registration MRs and memory windows, never an
    /// `ibv_reg_mr` region, so here a region must ask for it (default off).
    pub const REMOTE_INVALIDATE: Access = Access(1 << 31);

    /// True if every flag of `other` is set.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// A scatter/gather element: `length` bytes at virtual address `addr` of the region `lkey` names.
/// Laid out as libibverbs' `struct ibv_sge`, so that the C library borrows a program's SGE list
/// as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Sge {
    /// Virtual address inside the region.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the region.
    pub lkey: u32,
}

/// SGEs a queue entry holds in place: lists this long or shorter cost no allocation when posted.
const INLINE_SGES: usize = 2;

/// A work request's scatter/gather list as its queue entry keeps it: up to [`INLINE_SGES`] in
/// place, so that posting the usual one- or two-element request allocates nothing; longer lists
/// on the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SgList {
    /// The first `len` elements.
    Inline { len: u8, sges: [Sge; INLINE_SGES] },
    /// A longer list.
    Heap(Box<[Sge]>),
}

impl SgList {
    /// A copy of `sges`.
    pub(crate) fn new(sges: &[Sge]) -> SgList {
        if sges.len() <= INLINE_SGES {
            let mut inline = [Sge { addr: 0, length: 0, lkey: 0 }; INLINE_SGES];
            inline[..sges.len()].copy_from_slice(sges);
            SgList::Inline { len: sges.len() as u8, sges: inline }
        } else {
            SgList::Heap(sges.into())
        }
    }

    /// The elements.
    pub(crate) fn as_slice(&self) -> &[Sge] {
        match self {
            SgList::Inline { len, sges } => &sges[..usize::from(*len)],
            SgList::Heap(v) => v,
        }
    }
}

/// Send work request flags (`ibv_send_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendFlags(pub u32);

impl SendFlags {
    /// No flags: no completion unless the request fails (on a QP created with `sq_sig_all = false`).
    pub const NONE: SendFlags = SendFlags(0);
    /// Wait for earlier READs and atomics to complete before starting.
    pub const FENCE: SendFlags = SendFlags(1);
    /// Generate a completion.
    pub const SIGNALED: SendFlags = SendFlags(2);
    /// Set the solicited event bit.
    pub const SOLICITED: SendFlags = SendFlags(4);
    /// Copy the data at post time (up to `max_inline_data`); the lkeys are not checked.
    pub const INLINE: SendFlags = SendFlags(8);

    /// True if every flag of `other` is set.
    pub const fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for SendFlags {
    type Output = SendFlags;
    fn bitor(self, o: SendFlags) -> SendFlags {
        SendFlags(self.0 | o.0)
    }
}

/// What a send work request does (`ibv_wr_opcode` with its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrOpcode {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm {
        /// Immediate data, as the receiver sees it.
        imm: u32,
    },
    /// SEND that invalidates a remote key at the receiver.
    SendWithInv {
        /// The receiver's R_Key to invalidate.
        invalidate_rkey: u32,
    },
    /// RDMA WRITE.
    RdmaWrite {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data (consumes a receive request at the target).
    RdmaWriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local scatter list.
    RdmaRead {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// 64-bit compare and swap; the original value lands in the local 8-byte SGE.
    AtomicCmpAndSwp {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to compare with.
        compare: u64,
        /// Value to store if equal.
        swap: u64,
    },
    /// 64-bit fetch and add; the original value lands in the local 8-byte SGE.
    AtomicFetchAndAdd {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
        /// Value to add.
        add: u64,
    },
}

impl WrOpcode {
    /// The completion opcode of this request.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            WrOpcode::Send | WrOpcode::SendWithImm { .. } | WrOpcode::SendWithInv { .. } => WcOpcode::Send,
            WrOpcode::RdmaWrite { .. } | WrOpcode::RdmaWriteWithImm { .. } => WcOpcode::RdmaWrite,
            WrOpcode::RdmaRead { .. } => WcOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp { .. } => WcOpcode::CompSwap,
            WrOpcode::AtomicFetchAndAdd { .. } => WcOpcode::FetchAdd,
        }
    }
}

/// An address handle: where UD sends go (an index into the device's table of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ah(u32);

impl Ah {
    /// The handle of entry `index` of a device's table (the runtime that keeps the table makes
    /// them; a handle names nothing until it does).
    pub const fn from_index(index: u32) -> Ah {
        Ah(index)
    }

    /// The entry of the device's table this handle names.
    pub const fn index(self) -> u32 {
        self.0
    }
}

/// Where a UD send goes (`ibv_send_wr.wr.ud`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Address handle of the destination port.
    pub ah: Ah,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key; with the top bit set, the QP's own Q_Key is sent instead (IBTA).
    pub remote_qkey: u32,
}

/// A send work request (`ibv_send_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation and operands.
    pub opcode: WrOpcode,
    /// Local data (gathered for SEND/WRITE, scattered for READ and atomics).
    pub sg_list: Vec<Sge>,
    /// Flags.
    pub flags: SendFlags,
    /// The destination of a send on a UD QP (`None` on RC and UC).
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled request with no UD destination.
    pub fn new(wr_id: u64, opcode: WrOpcode, sg_list: Vec<Sge>) -> SendWr {
        SendWr { wr_id, opcode, sg_list, flags: SendFlags::SIGNALED, ud: None }
    }

    /// The request with its SGE list borrowed, as the core reads it.
    pub fn borrowed(&self) -> SendRef<'_> {
        SendRef {
            wr_id: self.wr_id,
            opcode: self.opcode,
            sg_list: &self.sg_list,
            flags: self.flags,
            ud: self.ud,
        }
    }
}

/// A send work request whose SGE list is borrowed (the caller's own list, as `ibv_post_send`
/// gets it): what a post reads. The queue entry copies the SGEs in place, so posting one
/// allocates nothing (see [`QueuePair::post_send_ref`](crate::QueuePair::post_send_ref)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRef<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Operation and operands.
    pub opcode: WrOpcode,
    /// Local data (gathered for SEND/WRITE, scattered for READ and atomics).
    pub sg_list: &'a [Sge],
    /// Flags.
    pub flags: SendFlags,
    /// The destination of a send on a UD QP (`None` on RC and UC).
    pub ud: Option<UdDest>,
}

/// Where the bytes of an INLINE request come from; they are copied once, at post time, into
/// memory the queue entry keeps (reused from request to request).
pub enum InlineData<'a> {
    /// Gathered from registered memory through the request's SGEs.
    Sges,
    /// `len` bytes that `fill` writes into the slice it is given (exactly `len` long): memory
    /// that no region names, such as the SGE addresses of an inline `ibv_post_send`. The
    /// request's own SGE list is then ignored for the data.
    Fill {
        /// Bytes of data.
        len: usize,
        /// Writes them.
        fill: &'a mut dyn FnMut(&mut [u8]),
    },
}

impl std::fmt::Debug for InlineData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InlineData::Sges => f.write_str("Sges"),
            InlineData::Fill { len, .. } => f.debug_struct("Fill").field("len", len).finish_non_exhaustive(),
        }
    }
}

/// A receive work request (`ibv_recv_wr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where incoming SEND data goes.
    pub sg_list: Vec<Sge>,
}

/// Completion status (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Local length error: a received message is longer than the receive buffers.
    LocLenErr,
    /// Local QP operation error.
    LocQpOpErr,
    /// Local protection error: an SGE no longer names a usable region.
    LocProtErr,
    /// Flushed because the QP went to the error state.
    WrFlushErr,
    /// The responder rejected the request as invalid (NAK 0x61).
    RemInvReqErr,
    /// The responder found a bad R_Key, range or access right (NAK 0x62).
    RemAccessErr,
    /// The responder could not complete the operation (NAK 0x63).
    RemOpErr,
    /// Transport retries exhausted (timeouts or PSN sequence errors).
    RetryExcErr,
    /// RNR retries exhausted.
    RnrRetryExcErr,
}

/// Completion opcode (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A send request completed.
    Send,
    /// An RDMA WRITE completed.
    RdmaWrite,
    /// An RDMA READ completed.
    RdmaRead,
    /// A compare and swap completed.
    CompSwap,
    /// A fetch and add completed.
    FetchAdd,
    /// A SEND arrived.
    Recv,
    /// An RDMA WRITE with immediate data arrived.
    RecvRdmaWithImm,
}

/// A work completion (`ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkCompletion {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode (for flushed receives: `Recv`).
    pub opcode: WcOpcode,
    /// Bytes transferred (received bytes for receives, the message length for sends/READ/atomics).
    pub byte_len: u32,
    /// Immediate data of SEND_WITH_IMM or WRITE_WITH_IMM.
    pub imm_data: Option<u32>,
    /// The R_Key a SEND_WITH_INV invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (receives; from the DETH on UD).
    pub src_qp: u32,
    /// The sender's GID as an IP address (UD receives, whose buffer starts with the 40-byte GRH area).
    pub src_gid: Option<IpAddr>,
    /// The SEND carried the solicited-event bit (receives).
    pub solicited: bool,
}

/// Transport service of a QP (`ibv_qp_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected: SEND and WRITE, no ACKs, a gap loses the message.
    Uc,
    /// Unreliable datagram: single-packet SENDs to any QP with the right Q_Key.
    Ud,
}

/// QP states (`ibv_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    /// Created or reset.
    Reset,
    /// Initialised: receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Error: everything outstanding is flushed.
    Error,
}

/// Where the peer is (`ibv_ah_attr` for RoCEv2): its GID and, optionally, its MAC (otherwise the
/// device resolves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressVector {
    /// Destination GID as an IP address (an IPv4 address stands for the GID `::ffff:a.b.c.d`).
    pub dgid: IpAddr,
    /// Destination MAC, if known.
    pub dmac: Option<[u8; 6]>,
    /// IP traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (0: derive the UDP source port from the QP numbers, as rxe does).
    pub flow_label: u32,
    /// softrdma extension: the UDP port the peer receives RoCEv2 on (`None`: 4791, as every RoCEv2
    /// peer, or the port the device's peers agree on, `Context::set_peer_udp_port`). Two softrdma
    /// processes may use another port; they tell each other which, or agree on one.
    pub udp_dport: Option<u16>,
}

impl AddressVector {
    /// A peer at `dgid`, TTL 64, traffic class 0.
    pub fn new(dgid: IpAddr) -> AddressVector {
        AddressVector { dgid, dmac: None, traffic_class: 0, hop_limit: 64, flow_label: 0, udp_dport: None }
    }

    /// The UDP destination port of frames to this peer (4791 unless `udp_dport` says otherwise).
    pub fn dst_port(&self) -> u16 {
        self.udp_dport.unwrap_or(wire::ROCEV2_UDP_PORT)
    }
}

/// QP capacities (`ibv_qp_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send request.
    pub max_inline_data: u32,
}

impl Default for QpCap {
    fn default() -> Self {
        QpCap { max_send_wr: 128, max_recv_wr: 128, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 256 }
    }
}

/// Attributes for `modify_qp` (`ibv_qp_attr`); a transition reads the ones it needs and rejects a
/// missing one with [`QpError::MissingAttr`](crate::QpError::MissingAttr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttr {
    /// Remote access the responder allows (RESET -> INIT; RC and UC).
    pub qp_access_flags: Option<Access>,
    /// Q_Key (RESET -> INIT; UD).
    pub qkey: Option<u32>,
    /// Path MTU (INIT -> RTR).
    pub path_mtu: Option<Mtu>,
    /// Remote QP number (INIT -> RTR).
    pub dest_qp_num: Option<u32>,
    /// First expected receive PSN (INIT -> RTR).
    pub rq_psn: Option<u32>,
    /// Address vector (INIT -> RTR).
    pub ah_attr: Option<AddressVector>,
    /// READs/atomics the responder accepts at once (INIT -> RTR).
    pub max_dest_rd_atomic: Option<u8>,
    /// RNR NAK timer code 0..=31 (INIT -> RTR).
    pub min_rnr_timer: Option<u8>,
    /// First send PSN (RTR -> RTS).
    pub sq_psn: Option<u32>,
    /// Local ACK timeout: 4.096 us x 2^timeout, 0 = none (RTR -> RTS).
    pub timeout: Option<u8>,
    /// Retries after timeouts or sequence errors, 0..=7 (RTR -> RTS).
    pub retry_cnt: Option<u8>,
    /// RNR retries, 0..=7, 7 = forever (RTR -> RTS).
    pub rnr_retry: Option<u8>,
    /// READs/atomics the requester issues at once (RTR -> RTS).
    pub max_rd_atomic: Option<u8>,
    /// softrdma extension, no verbs equivalent (RTR -> RTS, optional): the retry budget after
    /// timeouts and sequence errors, replacing `retry_cnt`'s 0..=7 (`u32::MAX` retries forever,
    /// which is what rxe does for `retry_cnt = 7`). For links lossier than real fabrics.
    pub max_retries: Option<u32>,
    /// softrdma extension, no verbs equivalent (RTR -> RTS, optional, RC): how the requester limits
    /// the PSNs it has unacknowledged. `None`: [`SendWindow::Adaptive`] with
    /// [`SendWindow::DEFAULT_MIN`], or [`SendWindow::Fixed`] on a QP that runs DCQCN (its rate
    /// control paces it). Purely sender-side: the wire format is rxe's either way.
    pub send_window: Option<SendWindow>,
}

/// The RC requester's limit on unacknowledged PSNs (the [`QpAttr::send_window`] extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendWindow {
    /// rxe's: always up to 128 unacknowledged PSNs (`RXE_MAX_UNACKED_PSNS`).
    Fixed,
    /// A window that adapts to loss, as TCP's congestion window (AIMD): it starts at 128 PSNs,
    /// halves (at most once per round of loss) on a PSN sequence NAK or a lost READ/atomic
    /// response, falls to `min` on a retransmission timeout, and grows back (doubling per round
    /// trip up to half the window at the loss, then one PSN per window acknowledged) to 128. It
    /// never goes below `min` (at least 1) nor above 128, so on a path that loses nothing it stays
    /// at 128 and the requester behaves as [`SendWindow::Fixed`]; once the responder is seen to keep
    /// the packets that follow a lost one (softrdma's does, rxe's does not), the cap is 256.
    Adaptive {
        /// The smallest window, in PSNs.
        min: u8,
    },
    /// [`SendWindow::Adaptive`] with the cap at 256 from the start, for a responder known to keep
    /// the packets that follow a lost one (a softrdma peer, as `softrdma perf`'s exchange knows):
    /// the window slow-starts from 128 to 256 without waiting for a loss to show it. Against a
    /// responder that does not keep them (rxe), a loss then resends up to 256 packets.
    AdaptiveWide {
        /// The smallest window, in PSNs.
        min: u8,
    },
}

impl SendWindow {
    /// The adaptive window's default floor.
    pub const DEFAULT_MIN: u8 = 4;
}

/// Largest message (rxe's `RXE_PORT_MAX_MSG_SZ`, roce-wire.md §1.8).
pub const MAX_MSG_SIZE: u64 = 0x80_0000;

/// The device limits the engine enforces (`ibv_query_device`'s, as `softrdma devinfo` prints them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest message (`max_msg_sz`).
    pub max_msg_sz: u64,
    /// Work requests per send or receive queue (`max_qp_wr`).
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request (`max_sge`).
    pub max_sge: u32,
    /// Bytes of inline data per send (`max_inline_data`).
    pub max_inline_data: u32,
    /// Outstanding READs and atomics per QP, either way (`max_qp_rd_atom`, `max_qp_init_rd_atom`).
    pub max_rd_atomic: u8,
    /// Work requests per SRQ (`max_srq_wr`).
    pub max_srq_wr: u32,
}

/// What this engine enforces.
pub const LIMITS: DeviceLimits = DeviceLimits {
    max_msg_sz: MAX_MSG_SIZE,
    max_qp_wr: 16384,
    max_sge: 32,
    max_inline_data: 4096,
    max_rd_atomic: 128,
    max_srq_wr: 16384,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sg_lists_keep_every_element_in_place_or_on_the_heap() {
        let sges: Vec<Sge> =
            (0..5).map(|i| Sge { addr: 0x1000 * i, length: i as u32 + 1, lkey: 7 }).collect();
        for n in 0..=sges.len() {
            let list = SgList::new(&sges[..n]);
            assert_eq!(list.as_slice(), &sges[..n]);
            assert_eq!(matches!(list, SgList::Inline { .. }), n <= INLINE_SGES, "{n} SGEs");
        }
    }
}
