//! Unmodified libfabric programs over softrdma's provider (issue 32): Debian's `libfabric-bin`
//! tools under `softrdma run` (which points `FI_PROVIDER_PATH` at `libsoftrdma-fi.so`), between
//! two network namespaces joined by a veth (MTU 9000). `fi_info` lists the three UET profiles on
//! FI_EP_RDM and FI_EP_DGRAM and narrows them by endpoint type; `fi_pingpong` runs its default
//! size sweep with data checks (`-c`) on both endpoint types, over kernel UDP and over AF_XDP,
//! clear and sealed by TSS (a shared key file, `SOFTRDMA_TSS_KEY_FILE`). No JobID variable is set:
//! both sides run with the JobID `softrdma run` assigns (the user's), which it prints. Needs root, iproute2 and
//! `libfabric-bin` (`scripts/setup.sh`): without them the test says so and skips, except under
//! CI (CI=true), where it fails.

mod common;

use common::netns::Netns;
use common::proc::{Running, listens};
use std::time::{Duration, Instant};

/// The namespaces' network: the server (namespace a) is `.1`, the client (b) `.2`.
const NET: &str = "10.95.0";

fn can_run(name: &str) -> bool {
    common::proc::can_run_tools(name, &["fi_info", "fi_pingpong"], "libfabric-bin")
}

/// `ARGS` under `softrdma run --backend BACKEND --no-verbs` in namespace `ns`, with the `env`
/// variables and no JobID variable: the JobID is the one `softrdma run` assigns. Without `--no-verbs`, libfabric's verbs provider would
/// open the preloaded verbs library's device at start-up, which over AF_XDP takes the queue the
/// provider needs.
fn spawn_on(n: &Netns, ns: char, backend: &str, env: &[&str], args: &[&str]) -> Running {
    let (name, dev) = if ns == 'a' { (&n.a, &n.va) } else { (&n.b, &n.vb) };
    let mut full = vec!["run", "--backend", backend, "--dev", dev, "--no-verbs", "--", "env"];
    full.extend(env);
    full.extend(args);
    Running::new(n.spawn(name, &full))
}

/// [`spawn_on`] over kernel UDP.
fn spawn(n: &Netns, ns: char, args: &[&str]) -> Running {
    spawn_on(n, ns, "udp", &[], args)
}

/// The secure domain's key for both sides (a file of mode 600, which the provider requires), as
/// `SOFTRDMA_TSS_KEY_FILE=...`; each process takes the next epoch from the file beside it.
fn tss_key() -> String {
    use std::os::unix::fs::PermissionsExt;
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fabric-tss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("key");
    std::fs::write(&path, "3c".repeat(32)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    format!("SOFTRDMA_TSS_KEY_FILE={}", path.display())
}

/// (fabric, endpoint type) of every offer `fi_info` printed for provider softrdma, each of whose
/// domains must be `nic` (one interface, one NIC; the profile is the fabric).
fn offers(out: &str, nic: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut cur: Option<(bool, String)> = None;
    for line in out.lines().map(str::trim) {
        if let Some(p) = line.strip_prefix("provider: ") {
            cur = Some((p == "softrdma", String::new()));
        } else if let (Some(f), Some((true, fab))) = (line.strip_prefix("fabric: "), cur.as_mut()) {
            *fab = f.to_string();
        } else if let (Some(d), Some((true, _))) = (line.strip_prefix("domain: "), cur.as_ref()) {
            assert_eq!(d, nic, "the domain is the interface:\n{out}");
        } else if let (Some(t), Some((true, fab))) = (line.strip_prefix("type: "), cur.as_ref()) {
            v.push((fab.clone(), t.to_string()));
        }
    }
    v
}

#[test]
fn fi_info_lists_the_three_profiles_and_narrows_them() {
    if !can_run("fi_info_lists_the_three_profiles_and_narrows_them") {
        return;
    }
    let n = Netns::new('i', NET);
    let end = || Instant::now() + Duration::from_secs(30);
    let all = spawn(&n, 'a', &["fi_info", "-p", "softrdma"]).finish(end());
    assert!(all.ok(), "{}", all.describe("fi_info -p softrdma"));
    let got = offers(&all.stdout(), &n.va);
    let domains = ["uet_hpc", "uet_ai_full", "uet_ai_base"];
    for d in domains {
        for t in ["FI_EP_RDM", "FI_EP_DGRAM"] {
            assert!(got.contains(&(d.to_string(), t.to_string())), "{d} {t} missing from:\n{}", all.stdout());
        }
    }
    assert_eq!(got.len(), 6, "no other offers (no utility provider layered over ours):\n{}", all.stdout());
    for t in ["FI_EP_RDM", "FI_EP_DGRAM"] {
        let one = spawn(&n, 'a', &["fi_info", "-p", "softrdma", "-t", t]).finish(end());
        assert!(one.ok(), "{}", one.describe("fi_info -t"));
        let got = offers(&one.stdout(), &n.va);
        assert_eq!(got.len(), 3, "{t}:\n{}", one.stdout());
        assert!(got.iter().all(|(_, ty)| ty == t), "{t}:\n{}", one.stdout());
    }
    // Capabilities per profile (fabric): tagged messages on HPC and AI Full only; RMA and atomics
    // on every RDM profile (fi_info's hints accept FI_MR_ENDPOINT, as UET binds regions).
    let v = spawn(&n, 'a', &["fi_info", "-p", "softrdma", "-t", "FI_EP_RDM", "-v"]).finish(end());
    let text = v.stdout();
    let caps_of = |dom: &str| {
        let at = text.find(&format!("name: {dom}")).expect("domain in the verbose listing");
        let start = text[..at].rfind("---").unwrap_or(0);
        text[start..at].lines().find(|l| l.trim_start().starts_with("caps:")).unwrap_or_default().to_string()
    };
    assert!(
        caps_of("uet_hpc").contains("FI_TAGGED") && caps_of("uet_ai_full").contains("FI_TAGGED"),
        "{text}"
    );
    assert!(
        !caps_of("uet_ai_base").contains("FI_TAGGED") && caps_of("uet_ai_base").contains("FI_MSG"),
        "{text}"
    );
    for d in domains {
        assert!(caps_of(d).contains("FI_RMA") && caps_of(d).contains("FI_ATOMIC"), "{d}:\n{text}");
    }
    assert!(text.contains("mr_mode: [ FI_MR_ENDPOINT ]"), "{text}");
}

#[test]
fn fi_pingpong_runs_its_size_sweep_over_rdm_and_dgram_on_udp_and_afxdp_clear_and_sealed() {
    if !can_run("fi_pingpong_runs_its_size_sweep_over_rdm_and_dgram_on_udp_and_afxdp_clear_and_sealed") {
        return;
    }
    let key = tss_key();
    let n = Netns::new('f', NET);
    let server_ip = format!("{NET}.1");
    // (endpoint type, the sizes of the default sweep it runs: a datagram is one packet)
    let sweeps =
        [("rdm", &["64", "256", "1k", "4k", "64k", "1m"][..]), ("dgram", &["64", "256", "1k", "4k"][..])];
    let runs = ["udp", "afxdp"].into_iter().flat_map(|b| sweeps.map(|s| (b, s)));
    for (tss, (backend, (ep, sizes))) in
        [&[][..], &[key.as_str()][..]].into_iter().flat_map(|t| runs.clone().map(move |r| (t, r)))
    {
        let sealed = if tss.is_empty() { "clear" } else { "sealed by TSS" };
        let mut server = spawn_on(&n, 'a', backend, tss, &["fi_pingpong", "-p", "softrdma", "-e", ep, "-c"]);
        let until = Instant::now() + Duration::from_secs(20);
        while !listens(server.child.id(), 47592) && !server.exited() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let client =
            spawn_on(&n, 'b', backend, tss, &["fi_pingpong", "-p", "softrdma", "-e", ep, "-c", &server_ip]);
        let end = Instant::now() + Duration::from_secs(120);
        let (c, s) = (client.finish(end), server.finish(end));
        assert!(
            c.ok() && s.ok(),
            "fi_pingpong -e {ep} over {backend}, {sealed}:\n{}\n{}",
            c.describe("client"),
            s.describe("server")
        );
        let rows: Vec<String> = c
            .stdout()
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|w| w.chars().next().is_some_and(|ch| ch.is_ascii_digit()))
            .collect();
        assert_eq!(rows, sizes, "-e {ep} over {backend}, {sealed}: the sweep's rows:\n{}", c.stdout());
        assert!(
            c.stdout().lines().skip(1).all(|l| l.contains("=10")),
            "every size acked 10:\n{}",
            c.stdout()
        );
        let err = String::from_utf8_lossy(&c.output.stderr).into_owned();
        assert!(err.starts_with("softrdma run: JobID "), "the JobID softrdma run assigned:\n{err}");
    }
}
