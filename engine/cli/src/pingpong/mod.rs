//! `softrdma pingpong {rc|uc|ud}`: wire- and exchange-compatible with rdma-core's `ibv_rc_pingpong`,
//! `ibv_uc_pingpong` and `ibv_ud_pingpong` (libibverbs/examples), so either side can be the stock tool.
//!
//! The exchange: TCP to port 18515; each side sends `"%04x:%06x:%06x:%s"` (LID, QPN, PSN, and the GID as
//! 32 hex digits in byte order) plus a NUL, 52 bytes; the client then sends `"done"` and a NUL. The
//! server connects its QP before it answers, the client after. Then each side keeps `rx_depth` receives
//! posted on one buffer and sends its next message once its previous send completed and a message
//! arrived; the client sends first. With `-c` each side checks what the tools check of every
//! receive: the first byte of each 4 KiB page is the zero the client put there. RC: RTR with
//! max_dest_rd_atomic 1 and min_rnr_timer 12, RTS with timeout 14, retry_cnt 7, rnr_retry 7; UD:
//! Q_Key 0x11111111 and a 40-byte GRH area in receive buffers.

mod cm;
mod exchange;
mod ping;
mod side;

pub use exchange::is_done;
pub use side::{Dest, MSG_LEN, Options, Outcome, UD_QKEY};

/// Runs one side; returns what it did, or why it failed.
pub fn run(o: &Options) -> Result<Outcome, String> {
    let (side, me, peer) = if o.cm { cm::connect(o)? } else { exchange::exchange(o)? };
    ping::ping(o, side, me, peer)
}
