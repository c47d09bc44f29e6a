//! Devices and contexts: the device list, open/close, the device, port, GID and P_Key queries,
//! and asynchronous events.

use crate::abi::*;
use crate::config::{self, DevInfo, GID_TABLE_LEN};
use crate::errno;
use crate::handles::Ctx;
use engine::datapath::link::{Backend, Link, Protocol, RxIcrc, XdpMode, XdpQueue};
use engine::verbs::{AsyncEvent, Context, Device};
use engine::verbs::{LIMITS, MAX_MSG_SIZE};
use std::ffi::{c_char, c_int, c_void};
use std::mem::offset_of;
use std::sync::{Mutex, OnceLock};

/// A device the library presents: rdma-core's `struct ibv_device` first, so the pointer programs
/// hold is this.
#[repr(C)]
pub(crate) struct SoftDevice {
    ibv: ibv_device,
    pub(crate) info: DevInfo,
}

/// The devices, found once per process from the environment.
fn devices() -> &'static [SoftDevice] {
    static LIST: OnceLock<Vec<SoftDevice>> = OnceLock::new();
    LIST.get_or_init(|| {
        init_log();
        let infos = config::devices().unwrap_or_else(|e| {
            eprintln!("softrdma: {}", e.0);
            Vec::new()
        });
        infos
            .into_iter()
            .map(|info| {
                // SAFETY: all-zero is a valid `ibv_device` (no ops, empty names).
                let mut ibv: ibv_device = unsafe { std::mem::zeroed() };
                ibv.node_type = IBV_NODE_CA;
                ibv.transport_type = IBV_TRANSPORT_IB;
                copy_str(&mut ibv.name, &info.name);
                // Under `softrdma run`'s view of /sys and /dev (crate::sysfs) the device has a
                // uverbs entry, and its paths are a kernel device's; without the view, paths that
                // say they are none.
                match crate::sysfs::uverbs_of(&info.name) {
                    Some(uv) => {
                        let sys = crate::sysfs::SYS_ROOT;
                        copy_str(&mut ibv.dev_name, &uv);
                        copy_str(&mut ibv.dev_path, &format!("{sys}/class/infiniband_verbs/{uv}"));
                        copy_str(&mut ibv.ibdev_path, &format!("{sys}/class/infiniband/{}", info.name));
                    }
                    None => {
                        copy_str(&mut ibv.dev_name, &format!("uverbs_{}", info.iface));
                        copy_str(&mut ibv.dev_path, &format!("/nonexistent/softrdma/{}", info.iface));
                        copy_str(&mut ibv.ibdev_path, &format!("/nonexistent/softrdma/{}", info.name));
                    }
                }
                SoftDevice { ibv, info }
            })
            .collect()
    })
}

/// Logs to stderr as `SOFTRDMA_LOG` asks (tracing's env-filter syntax, as the `softrdma` tool
/// reads it), once, when the program first looks for devices; a bad filter is said and ignored.
fn init_log() {
    let Ok(filter) = std::env::var("SOFTRDMA_LOG") else { return };
    match tracing_subscriber::EnvFilter::try_new(&filter) {
        Ok(f) => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let _ = tracing_subscriber::fmt()
                .with_env_filter(f)
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .try_init();
        }
        Err(e) => eprintln!("softrdma: SOFTRDMA_LOG={filter:?}: {e}"),
    }
}

fn copy_str(dst: &mut [c_char], s: &str) {
    let n = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
}

/// `ibv_get_device_list`.
///
/// # Safety
/// As `ibv_get_device_list`'s callers promise:
/// - `num_devices` is null or a valid `c_int` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let list = devices();
    // SAFETY: `calloc` has no precondition; it checks `n + 1` times the size for overflow, and
    // the result is checked for null below.
    let arr = unsafe { libc::calloc(list.len() + 1, size_of::<*mut ibv_device>()) }.cast::<*mut ibv_device>();
    if arr.is_null() {
        return errno::null(libc::ENOMEM);
    }
    for (i, d) in list.iter().enumerate() {
        // SAFETY: the array just allocated has `n + 1` pointer slots, suitably aligned by
        // `calloc`, and `i < n`.
        unsafe { *arr.add(i) = std::ptr::addr_of!(d.ibv).cast_mut() };
    }
    if !num_devices.is_null() {
        // SAFETY: `num_devices` is not null (checked), and ibv_get_device_list(3) takes it as a
        // writable `int`.
        unsafe { *num_devices = list.len() as c_int };
    }
    arr
}

/// `ibv_free_device_list`.
///
/// # Safety
/// As `ibv_free_device_list`'s callers promise:
/// - `list` is null or a list `ibv_get_device_list` returned, not freed before and not used
///   after.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: `list` is null or the `calloc`ed array of `ibv_get_device_list`, freed once
    // (ibv_free_device_list(3)); `free(NULL)` does nothing.
    unsafe { libc::free(list.cast()) };
}

/// The device behind a program's pointer.
///
/// # Safety
/// `d` is null or from `ibv_get_device_list`.
unsafe fn soft(d: *mut ibv_device) -> Option<&'static SoftDevice> {
    // SAFETY: every device pointer handed out is the first field of a `SoftDevice` in the static list.
    (!d.is_null()).then(|| unsafe { &*d.cast::<SoftDevice>() })
}

/// `ibv_get_device_name`.
///
/// # Safety
/// As `ibv_get_device_name`'s callers promise:
/// - `device` is null or an entry of this library's `ibv_get_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    // SAFETY: `device` is null or an entry of this library's `ibv_get_device_list` (the verbs'
    // contract).
    match unsafe { soft(device) } {
        Some(d) => d.ibv.name.as_ptr(),
        None => errno::null(libc::EINVAL),
    }
}

/// `ibv_get_device_guid` (network byte order).
///
/// # Safety
/// As `ibv_get_device_guid`'s callers promise:
/// - `device` is null or an entry of this library's `ibv_get_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> __be64 {
    // SAFETY: `device` is null or an entry of this library's `ibv_get_device_list`.
    unsafe { soft(device) }.map_or(0, |d| d.info.guid().to_be())
}

/// `ibv_get_device_index`: the position in the list.
///
/// # Safety
/// As `ibv_get_device_index`'s callers promise:
/// - `device` is null or an entry of this library's `ibv_get_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    // SAFETY: `device` is null or an entry of this library's `ibv_get_device_list`.
    let Some(d) = (unsafe { soft(device) }) else {
        errno::set(libc::EINVAL);
        return -1;
    };
    devices().iter().position(|x| std::ptr::eq(x, d)).map_or(-1, |i| i as c_int)
}

/// The device's context on its datapath, opened by the engine's opener: RoCEv2 on the device's UDP
/// port, at the largest path MTU its interface carries (a single-buffer AF_XDP socket carries
/// less: the port reports what it does, see `ibv_query_port`).
fn open_datapath(info: &DevInfo) -> Result<Context, String> {
    let xdp = (info.backend == Backend::AfXdp).then(|| XdpQueue {
        dev: info.iface.clone(),
        queue: 0,
        mode: XdpMode::Generic,
        multi_buffer: true,
    });
    let rx_icrc = if info.verify_icrc { RxIcrc::Verify } else { RxIcrc::Trust };
    let mut link = Link::roce(info.backend, info.ip, xdp, info.active_mtu());
    link.protocol = Protocol::Roce { udp_port: info.udp_port, rx_icrc, mtu: info.active_mtu() };
    Context::open_link(&link).map(|(ctx, _)| ctx).map_err(|e| e.to_string())
}

/// Contexts open now: (device, context address, references). A device's datapath binds a socket
/// (UDP port 4791, an AF_XDP queue), so a process holds one context per device; a second
/// `ibv_open_device` of it, or librdmacm's use of it, shares that context.
static OPEN: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());

fn open_list() -> std::sync::MutexGuard<'static, Vec<(usize, usize, usize)>> {
    OPEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `ibv_open_device`: binds the device's datapath (a UDP socket, an AF_XDP socket) and starts its
/// progress thread. Opening a device the process has open already returns the same context (one
/// socket per port), which stays until every open is closed.
///
/// # Safety
/// As `ibv_open_device`'s callers promise:
/// - `device` is null or an entry of this library's `ibv_get_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    // SAFETY: `device` is null or an entry of this library's `ibv_get_device_list`; the static list
    // outlives every caller.
    let Some(d) = (unsafe { soft(device) }) else { return errno::null(libc::EINVAL) };
    match open_shared(d) {
        Ok(ctx) => ctx.ibv(),
        Err(e) => errno::null(e),
    }
}

/// The context of `d`, opened now or shared with an earlier open (one reference more).
pub(crate) fn open_shared(d: &'static SoftDevice) -> Result<&'static Ctx, c_int> {
    let mut list = open_list();
    let key = std::ptr::from_ref(d) as usize;
    if let Some(e) = list.iter_mut().find(|e| e.0 == key) {
        e.2 += 1;
        // SAFETY: the address is a live context leaked below; it leaves the list before it is freed.
        return Ok(unsafe { &*(e.1 as *const Ctx) });
    }
    let ctx = match open_datapath(&d.info) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("softrdma: cannot open {}: {e}", d.info.name);
            return Err(libc::ENODEV);
        }
    };
    let dev = Device::new(ctx).map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?;
    let async_fd =
        rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).map_err(|_| libc::EMFILE)?;
    // SAFETY: all-zero is a valid `verbs_context` (null ops, a zeroed pthread mutex is
    // PTHREAD_MUTEX_INITIALIZER on glibc).
    let mut v: verbs_context = unsafe { std::mem::zeroed() };
    v.sz = size_of::<verbs_context>();
    v.query_device_ex = Some(crate::device::query_device_ex);
    v.create_qp_ex = Some(crate::qp::create_qp_ex);
    v.create_cq_ex = Some(crate::cq_ex::create_cq_ex);
    v.advise_mr = Some(crate::mem::advise_mr);
    v.context.device = std::ptr::from_ref(&d.ibv).cast_mut();
    v.context.cmd_fd = -1;
    v.context.async_fd = rustix::fd::AsRawFd::as_raw_fd(&async_fd);
    v.context.num_comp_vectors = 1;
    // rdma-core's __VERBS_ABI_IS_EXTENDED: the inline wrappers look for extended ops in `v`.
    v.context.abi_compat = usize::MAX as *mut c_void;
    v.context.ops.poll_cq = Some(crate::cq::poll_cq);
    v.context.ops.req_notify_cq = Some(crate::cq::req_notify_cq);
    v.context.ops.post_send = Some(crate::qp::post_send);
    v.context.ops.post_recv = Some(crate::qp::post_recv);
    v.context.ops.post_srq_recv = Some(crate::srq_ah::post_srq_recv);
    let ctx = Box::leak(Box::new(Ctx { v, dev, info: &d.info, objects: Mutex::default(), async_fd }));
    crate::stat::opened(ctx);
    list.push((key, std::ptr::from_ref(ctx) as usize, 1));
    Ok(ctx)
}

/// The first device, opened or shared ([`open_shared`]) once for the process: the one librdmacm's
/// IDs use. Its reference is never dropped; at exit its connections are closed ([`cm_exit`]).
pub(crate) fn open_first() -> Result<&'static Ctx, c_int> {
    static CM: OnceLock<usize> = OnceLock::new();
    static OPENING: Mutex<()> = Mutex::new(());
    if let Some(&p) = CM.get() {
        // SAFETY: a context this library opened and never closes (the reference is kept).
        return Ok(unsafe { &*(p as *const Ctx) });
    }
    let _one = OPENING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&p) = CM.get() {
        // SAFETY: `CM` holds the address of a context `open_shared` leaked, whose reference this
        // function keeps and never drops, so it is never freed.
        return Ok(unsafe { &*(p as *const Ctx) });
    }
    let ctx = devices().first().ok_or(libc::ENODEV).and_then(open_shared)?;
    let _ = CM.set(std::ptr::from_ref(ctx) as usize);
    // SAFETY: `atexit` takes any `extern "C" fn()`; `cm_exit` catches panics, so none unwinds into
    // the C library's exit.
    unsafe { libc::atexit(cm_exit) };
    Ok(ctx)
}

/// At exit: the rdma_cm connections the program left are closed (DREQ), and the process answers
/// its peers for up to a second more (their DREQs, our DREQs' DREPs), as the kernel's rdma_cm does
/// for a process that exits; a peer is not left retrying DREQs at a process that is gone.
extern "C" fn cm_exit() {
    // A panic must not unwind into the C library's exit (that aborts the process).
    if std::panic::catch_unwind(close_connections).is_err() {
        eprintln!("softrdma: closing the rdma_cm connections at exit failed");
    }
}

fn close_connections() {
    let Ok(ctx) = open_first() else { return };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    ctx.dev.lock().cm_shutdown();
    while std::time::Instant::now() < until {
        let mut dev = ctx.dev.lock();
        let _ = dev.progress();
        if dev.cm_settled() {
            return;
        }
        drop(dev);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `ibv_close_device`: when the last open of the device closes, stops the progress thread and
/// releases the datapath; objects still open on the context are released with it.
///
/// # Safety
/// As `ibv_close_device`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: `context` is null or a context this library opened and has not closed (the verbs'
    // contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    let at = std::ptr::from_ref(ctx) as usize;
    let mut list = open_list();
    let Some(i) = list.iter().position(|e| e.1 == at) else { return errno::fail(libc::EINVAL) };
    list[i].2 -= 1;
    if list[i].2 > 0 {
        return 0;
    }
    list.remove(i);
    drop(list);
    crate::stat::closing(ctx);
    // SAFETY: the context was leaked from a Box in `open_shared`; its last open is closed and it
    // left `OPEN` (under its lock), so no new reference is handed out, and the verbs' contract
    // forbids using a closed context or its objects.
    drop(unsafe { Box::from_raw(std::ptr::from_ref(ctx).cast_mut()) });
    0
}

fn device_attr(info: &DevInfo) -> ibv_device_attr {
    // SAFETY: all-zero is a valid `ibv_device_attr`.
    let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
    copy_str(&mut a.fw_ver, crate::sysfs::FW_VER);
    a.node_guid = info.guid().to_be();
    a.sys_image_guid = info.guid().to_be();
    a.max_mr_size = u64::MAX;
    a.page_size_cap = 0xffff_f000;
    a.vendor_id = 0xff_ffff;
    a.max_qp = 0xff_ffef;
    a.max_qp_wr = LIMITS.max_qp_wr as c_int;
    a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
    a.max_sge = LIMITS.max_sge as c_int;
    a.max_sge_rd = LIMITS.max_sge as c_int;
    a.max_cq = 0xffff;
    a.max_cqe = crate::cq::MAX_CQE;
    a.max_mr = 0xff_ffff;
    a.max_pd = 0xffff;
    a.max_qp_rd_atom = c_int::from(LIMITS.max_rd_atomic);
    a.max_qp_init_rd_atom = c_int::from(LIMITS.max_rd_atomic);
    a.max_res_rd_atom = c_int::from(LIMITS.max_rd_atomic) * 1024;
    a.atomic_cap = IBV_ATOMIC_HCA;
    a.max_ah = 0xffff;
    a.max_srq = 0xffff;
    a.max_srq_wr = LIMITS.max_srq_wr as c_int;
    a.max_srq_sge = LIMITS.max_sge as c_int;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = 1;
    a
}

/// `ibv_query_device`.
///
/// # Safety
/// As `ibv_query_device`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `device_attr_out` is null or a valid `ibv_device_attr` (writable where it is an out
///   parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    device_attr_out: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    if device_attr_out.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // SAFETY: `device_attr_out`, not null (checked), is a writable `ibv_device_attr`
    // (ibv_query_device(3)).
    unsafe { device_attr_out.write(device_attr(ctx.info)) };
    0
}

/// `verbs_context.query_device_ex`: [`device_attr_ex`], cut to the caller's size.
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library: the inline `ibv_query_device_ex`
    // reaches this op only through the context's `verbs_context`, which this library filled.
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    // SAFETY: `input` is null or points at the caller's `ibv_query_device_ex_input` (the inline
    // wrapper passes its own), whose `comp_mask` is its first field.
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return errno::fail(libc::EINVAL);
    }
    if attr.is_null() || attr_size < size_of::<ibv_device_attr>() {
        return errno::fail(libc::EINVAL);
    }
    let ex = device_attr_ex(ctx.info);
    // SAFETY: the inline `ibv_query_device_ex` passes the caller's structure and its size, so
    // `attr` has `attr_size` writable bytes; at most that many (and no more than our structure)
    // are copied from `ex`, a local that cannot overlap the caller's memory. An older caller's
    // shorter structure gets the fields it has (its size covers `orig_attr`, checked).
    unsafe {
        std::ptr::copy_nonoverlapping(
            std::ptr::from_ref(&ex).cast::<u8>(),
            attr.cast::<u8>(),
            attr_size.min(size_of::<ibv_device_attr_ex>()),
        );
    }
    0
}

/// What `ibv_query_device_ex` answers: the basic attributes, the same capability flags in
/// `device_cap_flags_ex` and the port count in `phys_port_cnt_ex` (as the kernel reports both),
/// rxe's on-demand paging caps; every other extended capability zero (not supported).
fn device_attr_ex(info: &DevInfo) -> ibv_device_attr_ex {
    // SAFETY: all-zero is a valid `ibv_device_attr_ex` (integers and plain structures of them).
    let mut ex: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
    ex.orig_attr = device_attr(info);
    ex.device_cap_flags_ex = u64::from(ex.orig_attr.device_cap_flags);
    ex.phys_port_cnt_ex = u32::from(ex.orig_attr.phys_port_cnt);
    ex.odp_caps = ODP_CAPS;
    ex
}

/// On-demand paging as rxe reports it (Linux 6.15 and later): explicit regions, not implicit
/// ones (`ibv_reg_mr`'s documentation says why), RC SEND, RECV, WRITE, READ, atomics and SRQ
/// receives, UD SEND, RECV and SRQ receives.
const ODP_CAPS: ibv_odp_caps = ibv_odp_caps {
    general_caps: IBV_ODP_SUPPORT as u64,
    per_transport_caps: ibv_odp_caps__bindgen_ty_1 {
        rc_odp_caps: IBV_ODP_SUPPORT_SEND
            | IBV_ODP_SUPPORT_RECV
            | IBV_ODP_SUPPORT_WRITE
            | IBV_ODP_SUPPORT_READ
            | IBV_ODP_SUPPORT_ATOMIC
            | IBV_ODP_SUPPORT_SRQ_RECV,
        uc_odp_caps: 0,
        ud_odp_caps: IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV,
    },
};

/// `ibv_query_port` (the exported, compatible one: the inline wrapper zeroes a full
/// `ibv_port_attr` and passes it; the fields up to `flags` are the compatible structure's).
///
/// # Safety
/// As `ibv_query_port`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `port_attr` is null or a writable `struct ibv_port_attr` (the inline wrapper's) or the older
///   `struct _compat_ibv_port_attr`, whose fields end before `port_cap_flags2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut c_void,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    if port_num != 1 || port_attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let mtu = {
        let c = ctx.dev.lock();
        if ctx.info.active_mtu().bytes() <= c.port_mtu().bytes() {
            ctx.info.active_mtu()
        } else {
            c.port_mtu()
        }
    };
    let up = std::fs::read_to_string(format!("/sys/class/net/{}/operstate", ctx.info.iface))
        .map_or(true, |s| s.trim() != "down");
    // SAFETY: all-zero is a valid `ibv_port_attr`.
    let mut a: ibv_port_attr = unsafe { std::mem::zeroed() };
    a.state = if up { IBV_PORT_ACTIVE } else { IBV_PORT_DOWN };
    a.max_mtu = crate::qp::ibv_mtu_of(mtu);
    a.active_mtu = crate::qp::ibv_mtu_of(mtu);
    a.gid_tbl_len = GID_TABLE_LEN as c_int;
    a.max_msg_sz = MAX_MSG_SIZE as u32;
    a.pkey_tbl_len = 1;
    a.max_vl_num = 1;
    a.active_width = 1;
    a.active_speed = 1;
    a.phys_state = if up { 5 } else { 3 };
    a.link_layer = IBV_LINK_LAYER_ETHERNET as u8;
    // SAFETY: the exported `ibv_query_port` takes rdma-core's `struct _compat_ibv_port_attr`, the
    // fields of `ibv_port_attr` before `port_cap_flags2` (the inline wrapper passes a whole
    // `ibv_port_attr`): `port_attr`, not null (checked), has that many writable bytes; `a` is a
    // local, so the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            std::ptr::addr_of!(a).cast::<u8>(),
            port_attr.cast::<u8>(),
            offset_of!(ibv_port_attr, port_cap_flags2),
        )
    };
    0
}

/// `ibv_query_gid`: 0 on success, -1 with `errno` for an index outside the table.
///
/// # Safety
/// As `ibv_query_gid`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `gid` is null or a valid `ibv_gid` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let ctx = unsafe { Ctx::from(context) };
    let g = ctx.and_then(|c| usize::try_from(index).ok().and_then(|i| c.info.gid(i)));
    let Some(g) = g.filter(|_| port_num == 1 && !gid.is_null()) else {
        errno::set(libc::EINVAL);
        return -1;
    };
    // SAFETY: `gid`, not null (checked), is a writable `union ibv_gid` (ibv_query_gid(3)).
    unsafe { (*gid).raw = g };
    0
}

/// `_ibv_query_gid_ex` (behind the inline `ibv_query_gid_ex`).
///
/// # Safety
/// As `_ibv_query_gid_ex`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `entry` is null or a valid `ibv_gid_entry` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    if port_num != 1 || flags != 0 || entry.is_null() || entry_size < size_of::<ibv_gid_entry>() {
        return errno::fail(libc::EINVAL);
    }
    let Some(g) = ctx.info.gid(gid_index as usize) else { return errno::fail(libc::EINVAL) };
    let e = ibv_gid_entry {
        gid: ibv_gid { raw: g },
        gid_index,
        port_num,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: ctx.info.ifindex,
    };
    // SAFETY: `entry`, not null, has `entry_size >= size_of::<ibv_gid_entry>()` writable bytes
    // (both checked against the inline wrapper's size); its alignment is the caller's structure's.
    unsafe { entry.write(e) };
    0
}

/// `_ibv_query_gid_table` (behind the inline `ibv_query_gid_table`): the entries written.
///
/// # Safety
/// As `_ibv_query_gid_table`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `entries` is null or a valid `ibv_gid_entry` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    if entries.is_null()
        || flags != 0
        || entry_size < size_of::<ibv_gid_entry>()
        || max_entries < GID_TABLE_LEN
    {
        return -(errno::fail(libc::EINVAL) as isize);
    }
    for i in 0..GID_TABLE_LEN {
        // SAFETY: the caller's array holds `max_entries >= GID_TABLE_LEN` (checked) entries of
        // `entry_size` bytes (ibv_query_gid_table(3)), so entry `i < GID_TABLE_LEN` is inside it.
        let e = unsafe { entries.cast::<u8>().add(i * entry_size).cast::<ibv_gid_entry>() };
        // SAFETY: the call's contract is this function's: `context` as the caller passed it, `e`
        // writable for `entry_size >= size_of::<ibv_gid_entry>()` bytes (checked above, and inside
        // the caller's array by the line before).
        let r = unsafe { _ibv_query_gid_ex(context, 1, i as u32, e, 0, entry_size) };
        if r != 0 {
            return -(r as isize);
        }
    }
    GID_TABLE_LEN as isize
}

/// `ibv_query_gid_type` (rdma-core's private export, used by `ibv_devinfo`): every GID is RoCEv2.
///
/// # Safety
/// As `ibv_query_gid_type`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `gid_type` is null or a valid `u32` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut u32,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else { return errno::fail(libc::EINVAL) };
    if port_num != 1 || ctx.info.gid(index as usize).is_none() || gid_type.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // SAFETY: `gid_type`, not null (checked), is rdma-core's writable `uint32_t` out parameter;
    // 1 is IBV_GID_TYPE_SYSFS_ROCE_V2.
    unsafe { *gid_type = 1 };
    0
}

/// `ibv_query_pkey`: one entry, the default P_Key 0xffff.
///
/// # Safety
/// As `ibv_query_pkey`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `pkey` is null or a valid `__be16` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut __be16,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    if unsafe { Ctx::from(context) }.is_none() || port_num != 1 || index != 0 || pkey.is_null() {
        errno::set(libc::EINVAL);
        return -1;
    }
    // SAFETY: `pkey`, not null (checked), is a writable `__be16` (ibv_query_pkey(3)).
    unsafe { *pkey = 0xffffu16.to_be() };
    0
}

/// `ibv_get_pkey_index`.
///
/// # Safety
/// As `ibv_get_pkey_index`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(context: *mut ibv_context, port_num: u8, pkey: __be16) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    if unsafe { Ctx::from(context) }.is_none() || port_num != 1 {
        return -errno::fail(libc::EINVAL);
    }
    if u16::from_be(pkey) & 0x7fff == 0x7fff { 0 } else { -errno::fail(libc::ENOENT) }
}

/// `ibv_get_async_event`: blocks until the device has an event (the first is the port's state
/// at open, `IBV_EVENT_PORT_ACTIVE`).
///
/// # Safety
/// As `ibv_get_async_event`'s callers promise:
/// - `context` is null or a context this library opened and has not closed.
/// - `event` is null or a valid `ibv_async_event` (writable where it is an out parameter).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: `context` is null or a live context of this library (the verbs' contract).
    let Some(ctx) = (unsafe { Ctx::from(context) }) else {
        errno::set(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        errno::set(libc::EINVAL);
        return -1;
    }
    loop {
        let ev = ctx.dev.lock().poll_async_event();
        if let Some(ev) = ev {
            // SAFETY: `ibv_async_event` is a union of pointers and an int, and an enum that is a
            // `c_uint` alias here: all-zero is a valid value.
            let mut e: ibv_async_event = unsafe { std::mem::zeroed() };
            let objects = ctx.objects();
            match ev {
                AsyncEvent::QpFatal(qp) => {
                    e.event_type = IBV_EVENT_QP_FATAL;
                    e.element.qp = objects.qps.get(&qp).map_or(std::ptr::null_mut(), |&p| p as *mut ibv_qp);
                }
                AsyncEvent::SrqLimitReached(srq) => {
                    e.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
                    e.element.srq =
                        objects.srqs.get(&srq).map_or(std::ptr::null_mut(), |&p| p as *mut ibv_srq);
                }
                AsyncEvent::PortActive => {
                    e.event_type = IBV_EVENT_PORT_ACTIVE;
                    e.element.port_num = 1;
                }
                AsyncEvent::PortError => {
                    e.event_type = IBV_EVENT_PORT_ERR;
                    e.element.port_num = 1;
                }
            }
            // SAFETY: `event`, not null (checked), is a writable `ibv_async_event`
            // (ibv_get_async_event(3)); `write` does not read the old contents.
            unsafe { event.write(e) };
            return 0;
        }
        ctx.dev.release();
        // The engine has no descriptor for its events: look again in a while.
        let _ = engine::progress::wait_readable(&ctx.async_fd, Some(std::time::Duration::from_millis(10)));
    }
}

/// `ibv_ack_async_event`: nothing to release.
///
/// # Safety
/// None beyond the C ABI: no pointer argument is read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}
