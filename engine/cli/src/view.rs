//! The device as the system shows a kernel one, in the program's own view: before `softrdma run`
//! executes the program it gives itself a private mount namespace (as root; otherwise inside a new
//! user namespace, where the kernel allows unprivileged ones) and lays out there
//! - `/dev/infiniband/uverbs<N>`: a character device the program may open read and write (a bind
//!   of `/dev/null`: middleware checks it is there, the verbs go through the preloaded library);
//! - `/sys/class/infiniband/softrdma_<iface>/...` and `/sys/class/infiniband_verbs/uverbs<N>/...`:
//!   read-only files with what the library's verbs answer ([`softrdma_ibverbs::sysfs`]).
//!
//! `/dev` and `/sys/class` (or `/dev/infiniband` and `/sys/class/infiniband*` where they exist) are
//! covered by a tmpfs in which every entry of the original is bound back (directories recursively,
//! with whatever is mounted on them; device nodes and files one by one; symbolic links copied), so
//! the rest of `/dev` and `/sys` stays as it was. The mounts propagate to no other namespace
//! (`/` is made a slave first), and nothing is written to any file system: other processes see
//! nothing. Devices that appear in `/dev` after the program started do not show in its copy.
//!
//! Where no mount namespace can be made (no root and no unprivileged user namespaces), or a mount
//! fails, [`make`] says why and changes nothing; the program still runs over the preloaded
//! library, and only what looks for the files (UCX's device list) does not find the device.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use softrdma_ibverbs::sysfs::{self, Entry};

/// What [`make`] laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// `uverbs<N>`.
    pub uverbs: String,
    /// Whether the namespace is a user namespace's (the process was not root).
    pub user_namespace: bool,
}

/// The first `N` no `uverbs<N>` of the system uses, in `/dev/infiniband` or sysfs.
fn free_uverbs() -> u32 {
    (0..)
        .find(|n| {
            !Path::new(&format!("/dev/infiniband/uverbs{n}")).exists()
                && !Path::new(&format!("/sys/class/infiniband_verbs/uverbs{n}")).exists()
        })
        .unwrap_or(0)
}

/// Enters a private mount namespace whose mounts reach no other one.
fn private_namespace() -> Result<bool, String> {
    let root = nix::unistd::geteuid().is_root();
    if root {
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    } else {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).map_err(|e| {
            format!(
                "unshare(CLONE_NEWUSER | CLONE_NEWNS): {e} (not root, and no unprivileged user namespaces)"
            )
        })?;
        // The same IDs inside as outside.
        let write = |f: &str, s: String| std::fs::write(f, s).map_err(|e| format!("{f}: {e}"));
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    }
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_SLAVE, None::<&str>)
        .map_err(|e| format!("making / a slave mount: {e}"))?;
    Ok(!root)
}

/// One entry of a directory about to be covered.
enum Orig {
    Dir,
    Link(PathBuf),
    Other,
}

fn entries_of(dir: &Path) -> Result<Vec<(OsString, Orig)>, String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = e.path();
        let ft = e.file_type().map_err(|e| format!("{}: {e}", path.display()))?;
        let kind = if ft.is_symlink() {
            Orig::Link(std::fs::read_link(&path).map_err(|e| format!("{}: {e}", path.display()))?)
        } else if ft.is_dir() {
            Orig::Dir
        } else {
            Orig::Other
        };
        out.push((e.file_name(), kind));
    }
    Ok(out)
}

fn bind(src: &Path, dst: &Path) -> Result<(), String> {
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        .map_err(|e| format!("binding {} on {}: {e}", src.display(), dst.display()))
}

/// Recreates in `new` (an empty directory of the tmpfs) every entry of the original directory,
/// reached through `orig` (`/proc/self/fd/N/...`, the original as it was before it was covered):
/// `merge` names the directories whose entries are bound one by one instead of the whole
/// (those the tree adds to).
fn replicate(orig: &Path, listed: Vec<(OsString, Orig)>, new: &Path, merge: &[&str]) -> Result<(), String> {
    for (name, kind) in listed {
        let (src, dst) = (orig.join(&name), new.join(&name));
        match kind {
            Orig::Link(target) => {
                std::os::unix::fs::symlink(&target, &dst).map_err(|e| format!("{}: {e}", dst.display()))?
            }
            Orig::Dir if merge.iter().any(|m| name == **m) => {
                std::fs::create_dir(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
                replicate(&src, entries_of(&src)?, &dst, &[])?;
            }
            Orig::Dir => {
                std::fs::create_dir(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
                bind(&src, &dst)?;
            }
            Orig::Other => {
                std::fs::File::create(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
                bind(&src, &dst)?;
            }
        }
    }
    Ok(())
}

/// Covers `dir` with a tmpfs holding everything it held (`merge` as [`replicate`]), then runs
/// `add` to put the new entries in; on any failure the tmpfs goes again and `dir` is as it was.
fn cover(
    dir: &str,
    flags: MsFlags,
    merge: &[&str],
    add: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let listed = entries_of(Path::new(dir))?;
    let fd = std::fs::File::open(dir).map_err(|e| format!("{dir}: {e}"))?;
    let orig = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    mount(Some("tmpfs"), dir, Some("tmpfs"), flags, Some("mode=0755"))
        .map_err(|e| format!("mounting a tmpfs on {dir}: {e}"))?;
    let done = replicate(&orig, listed, Path::new(dir), merge).and_then(|()| add());
    if done.is_err() {
        let _ = umount2(dir, MntFlags::MNT_DETACH);
    }
    done
}

fn write_tree(root: &Path, tree: &[Entry]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for e in tree {
        match e {
            Entry::Dir(p) => {
                let d = root.join(p);
                if !d.is_dir() {
                    std::fs::create_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                }
            }
            Entry::File(p, s) => {
                let f = root.join(p);
                std::fs::write(&f, s).map_err(|e| format!("{}: {e}", f.display()))?;
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444))
                    .map_err(|e| format!("{}: {e}", f.display()))?;
            }
            Entry::Link(p, t) => {
                let l = root.join(p);
                std::os::unix::fs::symlink(t, &l).map_err(|e| format!("{}: {e}", l.display()))?;
            }
        }
    }
    Ok(())
}

/// Lays out the device on `iface` (address `ip`) in a private mount namespace of this process,
/// which the program then inherits through `exec`. An error says why nothing was laid out.
pub fn make(iface: &str, ip: Ipv4Addr) -> Result<Made, String> {
    let n = free_uverbs();
    let null = nix::sys::stat::stat("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    let dev = (nix::sys::stat::major(null.st_rdev) as u32, nix::sys::stat::minor(null.st_rdev) as u32);
    let up = std::fs::read_to_string(format!("/sys/class/net/{iface}/operstate"))
        .map_or(true, |s| s.trim() != "down");
    let tree = sysfs::device_tree(iface, ip, n, dev, up);
    let user_namespace = private_namespace()?;
    let quiet = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    let uverbs = format!("uverbs{n}");
    // /dev/infiniband, or /dev itself when there is none.
    let node = |dir: &Path| -> Result<(), String> {
        let path = dir.join(&uverbs);
        std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        bind(Path::new("/dev/null"), &path)
    };
    let had_ib = Path::new("/dev/infiniband").is_dir();
    if had_ib {
        cover("/dev/infiniband", quiet, &[], || node(Path::new("/dev/infiniband")))?;
    } else {
        cover("/dev", quiet, &[], || {
            std::fs::create_dir("/dev/infiniband").map_err(|e| format!("/dev/infiniband: {e}"))?;
            node(Path::new("/dev/infiniband"))
        })?;
    }
    let sys_class = format!("{}/class", sysfs::SYS_ROOT);
    let dev_cover = if had_ib { "/dev/infiniband" } else { "/dev" };
    let sys = cover(&sys_class, quiet | MsFlags::MS_NODEV, &["infiniband", "infiniband_verbs"], || {
        write_tree(Path::new(sysfs::SYS_ROOT), &tree)?;
        let abi = format!("{sys_class}/infiniband_verbs/abi_version");
        if !Path::new(&abi).exists() {
            write_tree(Path::new("/"), &[Entry::File(abi, format!("{}\n", sysfs::UVERBS_ABI))])?;
        }
        // Read-only, as sysfs is to the program for these files.
        mount(
            None::<&str>,
            sys_class.as_str(),
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | quiet | MsFlags::MS_NODEV,
            None::<&str>,
        )
        .map_err(|e| format!("making {sys_class} read-only: {e}"))
    });
    if let Err(e) = sys {
        // Half a device is none: the node goes too.
        let _ = umount2(dev_cover, MntFlags::MNT_DETACH);
        return Err(e);
    }
    Ok(Made { uverbs, user_namespace })
}
