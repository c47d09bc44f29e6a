//! The XDP program that sends RoCEv2 to the AF_XDP socket and everything else to the kernel, loaded
//! with raw `bpf()` system calls (no clang, libbpf or nightly toolchain), and attached through a BPF
//! link, so it goes away when the process exits, normally or not.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError, Weak};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, works on any driver (veth included).
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `BPF_F_XDP_HAS_FRAGS` (`prog_flags` of `BPF_PROG_LOAD`, Linux 5.18+): the program handles
/// multi-buffer frames. Without it the kernel linearizes such frames in generic mode and a driver
/// refuses the program (or drops the frames) once they can be longer than a page.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// A `union bpf_attr`, zeroed, 128 bytes (more than any command here uses).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32_at(mut self, off: usize, v: u32) -> Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64_at(mut self, off: usize, v: u64) -> Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: `attr` is a live, writable, 8-byte aligned 128-byte buffer laid out as the kernel's
    // `union bpf_attr` for `cmd` (unused bytes zero); the size passed is its size; the kernel reads
    // and may write only within it and keeps no pointer after the call. Pointers stored inside it
    // (instructions, license, key, value) point at memory the caller keeps alive across the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn owned(fd: i64) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf() call that creates a new descriptor, so it
    // is open and owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Creates an XSKMAP with `entries` slots (one per RX queue).
fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new().u32_at(0, BPF_MAP_TYPE_XSKMAP).u32_at(4, 4).u32_at(8, 4).u32_at(12, entries);
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Puts socket `xsk` in slot `queue` of `map`.
fn map_set(map: &OwnedFd, queue: u32, xsk: i32) -> io::Result<()> {
    let key = queue;
    let value = xsk as u32;
    let mut a = Attr::new()
        .u32_at(0, map.as_raw_fd() as u32)
        .u64_at(8, &key as *const u32 as u64)
        .u64_at(16, &value as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
}

/// `struct bpf_insn`: code, dst (low nibble) and src (high nibble) registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0x0F);
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program: pass anything but IPv4 (IHL 5) UDP to port `udp_port` to the kernel; redirect the
/// rest to the XSKMAP slot of its RX queue (falling back to the kernel if the slot is empty).
/// It reads only the first 42 bytes, between `data` and `data_end`: on a multi-buffer frame that is
/// the first buffer's linear part, which holds the headers (a frame whose linear part is shorter
/// goes to the kernel, like any too-short frame).
pub(crate) fn program(map_fd: i32, udp_port: u16) -> Vec<[u8; 8]> {
    const MOV64_X: u8 = 0xbf;
    const MOV64_K: u8 = 0xb7;
    const ADD64_K: u8 = 0x07;
    const LDXW: u8 = 0x61;
    const LDXH: u8 = 0x69;
    const LDXB: u8 = 0x71;
    const JGT_X: u8 = 0x2d;
    const JNE_K: u8 = 0x55;
    const LD_DW: u8 = 0x18;
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    const XDP_PASS: i32 = 2;
    const BPF_FUNC_REDIRECT_MAP: i32 = 51;
    const PASS: i16 = 20;
    let to_pass = |pc: i16| PASS - (pc + 1);
    // Loads read network-order bytes in host (little-endian) order.
    let ipv4 = i32::from(u16::from_le_bytes(0x0800u16.to_be_bytes()));
    let port = i32::from(u16::from_le_bytes(udp_port.to_be_bytes()));
    vec![
        insn(MOV64_X, 6, 1, 0, 0),                  // 0: r6 = ctx
        insn(LDXW, 2, 6, 0, 0),                     // 1: r2 = data
        insn(LDXW, 3, 6, 4, 0),                     // 2: r3 = data_end
        insn(MOV64_X, 4, 2, 0, 0),                  // 3: r4 = data
        insn(ADD64_K, 4, 0, 0, 42),                 // 4: r4 += Ethernet + IPv4 + UDP
        insn(JGT_X, 4, 3, to_pass(5), 0),           // 5: too short -> pass
        insn(LDXH, 5, 2, 12, 0),                    // 6: EtherType
        insn(JNE_K, 5, 0, to_pass(7), ipv4),        // 7
        insn(LDXB, 5, 2, 14, 0),                    // 8: version and IHL
        insn(JNE_K, 5, 0, to_pass(9), 0x45),        // 9
        insn(LDXB, 5, 2, 23, 0),                    // 10: protocol
        insn(JNE_K, 5, 0, to_pass(11), 17),         // 11
        insn(LDXH, 5, 2, 36, 0),                    // 12: UDP destination port
        insn(JNE_K, 5, 0, to_pass(13), port),       // 13
        insn(LDXW, 2, 6, 16, 0),                    // 14: r2 = rx_queue_index
        insn(LD_DW, 1, 1, 0, map_fd),               // 15: r1 = map (BPF_PSEUDO_MAP_FD)
        insn(0, 0, 0, 0, 0),                        // 16: second half of the 64-bit load
        insn(MOV64_K, 3, 0, 0, XDP_PASS),           // 17: flags: XDP_PASS if the slot is empty
        insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP), // 18
        insn(EXIT, 0, 0, 0, 0),                     // 19
        insn(MOV64_K, 0, 0, 0, XDP_PASS),           // 20: pass
        insn(EXIT, 0, 0, 0, 0),                     // 21
    ]
}

/// Loads the program for `map` and attaches it to `ifindex` with a BPF link (`flags`: SKB or DRV
/// mode), marked as handling multi-buffer frames when `frags` (for a socket bound with
/// `XDP_USE_SG`). Returns the program and link descriptors; dropping the link detaches the program.
fn load_and_attach(
    map: &OwnedFd,
    ifindex: u32,
    udp_port: u16,
    flags: u32,
    frags: bool,
) -> io::Result<(OwnedFd, OwnedFd)> {
    let insns = program(map.as_raw_fd(), udp_port);
    let license = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let mut a = Attr::new()
        .u32_at(0, BPF_PROG_TYPE_XDP)
        .u32_at(4, insns.len() as u32)
        .u64_at(8, insns.as_ptr() as u64)
        .u64_at(16, license.as_ptr() as u64)
        .u32_at(24, 1)
        .u32_at(28, log.len() as u32)
        .u64_at(32, log.as_mut_ptr() as u64)
        .u32_at(44, if frags { BPF_F_XDP_HAS_FRAGS } else { 0 })
        .u32_at(68, BPF_XDP);
    let prog = match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => owned(fd),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(0);
            let msg = String::from_utf8_lossy(&log[..end]).into_owned();
            return Err(io::Error::new(e.kind(), format!("loading the XDP program: {e}; verifier: {msg}")));
        }
    };
    let mut l = Attr::new()
        .u32_at(0, prog.as_raw_fd() as u32)
        .u32_at(4, ifindex)
        .u32_at(8, BPF_XDP)
        .u32_at(12, flags);
    let link = bpf(BPF_LINK_CREATE, &mut l).map(owned).map_err(|e| {
        // veth (and drivers like it) refuse a program that does not handle multi-buffer frames
        // when the interface's MTU needs them.
        let hint = if e.raw_os_error() == Some(libc::ERANGE) && !frags {
            " (the interface's MTU is too large for single-buffer XDP in this mode)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("attaching the XDP program: {e}{hint}"))
    })?;
    Ok((prog, link))
}

/// The XDP program, its XSKMAP and the BPF link attaching it to an interface. An interface takes
/// one program per mode, so the sockets of every queue a process opens on it share one attachment,
/// each in its queue's map slot; the program goes when the last of them is dropped.
pub(crate) struct Attachment {
    // Dropped in this order: the link (detaching the program), the program, the map.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
}

/// What an attachment is for: interface index, UDP port, mode flags, multi-buffer.
type Key = (u32, u16, u32, bool);

/// This process's live attachments.
static ATTACHED: Mutex<Vec<(Key, Weak<Attachment>)>> = Mutex::new(Vec::new());

impl Attachment {
    /// The attachment of this process for `ifindex` steering `udp_port` (mode `flags`, multi-buffer
    /// when `frags`): the live one if a socket of another queue holds it, else a new one (see
    /// [`load_and_attach`]). One for other settings on the same interface fails as attaching a
    /// second program does.
    pub(crate) fn shared(
        ifindex: u32,
        udp_port: u16,
        flags: u32,
        frags: bool,
    ) -> io::Result<Arc<Attachment>> {
        let key = (ifindex, udp_port, flags, frags);
        let mut all = ATTACHED.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|(_, a)| a.strong_count() > 0);
        if let Some(live) = all.iter().find(|(k, _)| *k == key).and_then(|(_, a)| a.upgrade()) {
            return Ok(live);
        }
        let map = create_xskmap(64)?;
        let (prog, link) = load_and_attach(&map, ifindex, udp_port, flags, frags)?;
        let new = Arc::new(Attachment { _link: link, _prog: prog, map });
        all.push((key, Arc::downgrade(&new)));
        Ok(new)
    }

    /// Frames arriving on `queue` go to the AF_XDP socket `xsk` (closing the socket takes it out).
    pub(crate) fn set(&self, queue: u32, xsk: i32) -> io::Result<()> {
        map_set(&self.map, queue, xsk)
    }
}
