//! `softrdma run`: executes an unmodified libibverbs program over softrdma ([`softrdma::run`]).

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::process::ExitCode;

use clap::Args;
use softrdma::fi_provider;
use softrdma::run::{Backend, EXIT_FAILED, Request};
use std::path::Path;

/// Options of `softrdma run`.
#[derive(Args)]
#[command(after_help = "\
Example, a bandwidth test between two hosts (or network namespaces) joined through veth0:
  server:  softrdma run --dev veth0 -- ib_write_bw -d softrdma_veth0 -x 1
  client:  softrdma run --dev veth0 -- ib_write_bw -d softrdma_veth0 -x 1 10.0.0.1
and rdma-core's examples take -g 1: softrdma run --dev veth0 -- ibv_rc_pingpong -g 1 [10.0.0.1]

The program sees one device, softrdma_IFACE: GID 1 is its IPv4 address (RoCEv2), as rdma_rxe
numbers it; GID 0 (rxe's IPv6 link-local one) is the IPv4 GID too, as RoCEv2 runs over IPv4 here. The library is
libsoftrdma_ibverbs.so beside softrdma (or in deps/ beside it), or SOFTRDMA_LIB; build it with
`cargo build --release -p softrdma-ibverbs`.

Exit status: the program's (softrdma run becomes the program); 125 if softrdma run itself fails,
126 if the program cannot be executed, 127 if it is not found.")]
pub(crate) struct RunArgs {
    /// Datapath of the device: kernel UDP sockets, or AF_XDP on queue 0 of --dev (root, or
    /// CAP_NET_ADMIN + CAP_BPF + CAP_NET_RAW).
    #[arg(long, value_parser = super::args::backend_parser(&["udp", "afxdp"]), default_value = "udp")]
    backend: Backend,
    /// Interface the device uses; it is named softrdma_IFACE [default: the interface of --local;
    /// without --local, the one interface besides loopback that is up and has an IPv4 address].
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// IPv4 address of --dev the device uses (its RoCEv2 GID) [default: the interface's first].
    #[arg(long, value_name = "IP")]
    local: Option<Ipv4Addr>,
    /// UDP port of the device's RoCEv2 traffic (stock RoCEv2 peers use 4791).
    #[arg(long, default_value_t = 4791, value_name = "N")]
    udp_port: u16,
    /// UET JobID of the job, for the libfabric provider (SOFTRDMA_JOB_ID) [default: the
    /// environment's SOFTRDMA_JOB_ID if set, else the user's (UID + 1: every program of the user
    /// under softrdma run is in one job); a given or assigned JobID is printed in the first line].
    #[arg(long, value_name = "N")]
    job_id: Option<u32>,
    /// Offer only the libfabric provider (FI_PROVIDER_PATH), not the verbs library (LD_PRELOAD).
    /// For libfabric programs over AF_XDP: libfabric's own verbs provider opens every verbs
    /// device it finds at start-up, and the preloaded one would take queue 0 of --dev, which the
    /// softrdma provider's endpoint needs.
    #[arg(long)]
    no_verbs: bool,
    /// Do not show the device in /dev/infiniband and /sys/class/infiniband (the private mount
    /// namespace softrdma run otherwise gives the program; see docs/run.md).
    #[arg(long)]
    no_device_files: bool,
    /// The program to run and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM [ARGS]")]
    command: Vec<OsString>,
}

/// Runs the program; returns only when it could not be run.
pub(crate) fn run_program(a: RunArgs) -> ExitCode {
    let inherited = std::env::var_os(softrdma::run::JOB_ID_ENV).is_some_and(|v| !v.is_empty());
    let job_id = match softrdma::run::job_id(a.job_id, inherited, softrdma::run::user_job_seed) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("softrdma run: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let req = Request {
        backend: a.backend,
        dev: a.dev,
        local: a.local,
        udp_port: a.udp_port,
        job_id,
        command: a.command,
    };
    let library = || {
        let exe = std::env::current_exe().map_err(|e| format!("where is softrdma itself: {e}"))?;
        let dir = exe.parent().ok_or("softrdma's own path has no directory")?;
        softrdma::run::find_library(std::env::var_os(softrdma::run::LIB_ENV).as_deref(), dir)
    };
    let ports = softrdma::devinfo::host_ports();
    let preload = std::env::var_os("LD_PRELOAD");
    let mut plan =
        match softrdma::run::plan(&req, &ports, softrdma::run::interface_exists, library, preload.as_deref())
        {
            Ok(p) => p,
            Err(e) => {
                eprintln!("softrdma run: {e}");
                return ExitCode::from(EXIT_FAILED);
            }
        };
    if a.no_verbs {
        plan.env.retain(|(k, _)| k != "LD_PRELOAD");
    }
    // libfabric programs find the provider through FI_PROVIDER_PATH (when it was built).
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
    if let Some(lib) = exe_dir.as_deref().and_then(fi_provider::find) {
        match fi_provider::link_dir(&std::env::temp_dir(), &lib) {
            Ok(dir) => {
                let existing = std::env::var_os("FI_PROVIDER_PATH");
                let path = fi_provider::provider_path(&dir, existing.as_deref());
                plan.env.push(("FI_PROVIDER_PATH".to_string(), path));
            }
            Err(e) => eprintln!("softrdma run: the libfabric provider is not offered: {e}"),
        }
    }
    if let Some(j) = job_id {
        eprintln!("softrdma run: JobID {j}");
    }
    if !a.no_verbs && !a.no_device_files {
        show_device(&plan);
    }
    let (e, status) = softrdma::run::exec(&plan);
    eprintln!("softrdma run: {e}");
    ExitCode::from(status)
}

/// Lays the device out in /dev and /sys for the program ([`softrdma::view`]); says so when it
/// cannot, and the program runs anyway.
fn show_device(plan: &softrdma::run::Plan) {
    let var = |k: &str| plan.env.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.to_str());
    let (Some(dev), Some(local)) = (var("SOFTRDMA_DEV"), var("SOFTRDMA_LOCAL").and_then(|l| l.parse().ok()))
    else {
        return;
    };
    if let Err(e) = softrdma::view::make(dev, local) {
        eprintln!(
            "softrdma run: the device is not shown in /dev/infiniband and /sys/class/infiniband ({e}): \
             programs that look for it there (UCX) will not list it; the verbs work as before \
             (--no-device-files skips this)"
        );
    }
}
