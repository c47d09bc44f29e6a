//! Where `softrdma run` points libfabric: libfabric 1.17 loads external providers from the
//! directories of `FI_PROVIDER_PATH`, taking files named `lib<name>-fi.so`. Cargo names the
//! provider library `libsoftrdma_fi.so` (package `softrdma-fabric`), so a directory of this user's
//! (`$TMPDIR/softrdma-fi-<uid>/`) holds `libsoftrdma-fi.so`, a symbolic link to it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// File name cargo gives the provider library.
pub const FI_LIB: &str = "libsoftrdma_fi.so";
/// The name libfabric looks for.
pub const FI_LINK: &str = "libsoftrdma-fi.so";

/// The provider library of this build: the newer of `<exe_dir>/libsoftrdma_fi.so` and
/// `<exe_dir>/deps/libsoftrdma_fi.so` (as for the verbs library), absolute.
pub fn find(exe_dir: &Path) -> Option<PathBuf> {
    let modified = |c: &PathBuf| std::fs::metadata(c).and_then(|m| m.modified()).ok();
    [exe_dir.join(FI_LIB), exe_dir.join("deps").join(FI_LIB)]
        .into_iter()
        .filter(|c| c.is_file())
        .max_by_key(modified)
        .and_then(|c| c.canonicalize().ok())
}

/// A directory holding [`FI_LINK`] pointing at `lib`, under `base`, made (or updated) now.
pub fn link_dir(base: &Path, lib: &Path) -> Result<PathBuf, String> {
    let dir = base.join(format!("softrdma-fi-{}", rustix::process::getuid().as_raw()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let link = dir.join(FI_LINK);
    if std::fs::read_link(&link).ok().as_deref() != Some(lib) {
        // Replace atomically: a program starting now sees the old link or the new one.
        let tmp = dir.join(format!(".{FI_LINK}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(lib, &tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(dir)
}

/// `FI_PROVIDER_PATH` with `dir` first, then what `existing` held (libfabric splits it at colons).
pub fn provider_path(dir: &Path, existing: Option<&OsStr>) -> OsString {
    let mut out = dir.as_os_str().to_owned();
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        out.push(":");
        out.push(e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_named_for_libfabric_in_a_directory_of_its_own() {
        let base = std::env::temp_dir().join(format!("fi-provider-test-{}", std::process::id()));
        let lib = base.join("lib").join(FI_LIB);
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"").unwrap();
        let dir = link_dir(&base, &lib).unwrap();
        assert_eq!(std::fs::read_link(dir.join(FI_LINK)).unwrap(), lib);
        assert_eq!(link_dir(&base, &lib).unwrap(), dir, "again: the same directory, the link kept");
        assert_eq!(find(lib.parent().unwrap()), Some(lib.canonicalize().unwrap()));
        assert_eq!(
            provider_path(&dir, Some(OsStr::new("/x"))),
            OsString::from(format!("{}:/x", dir.display()))
        );
        assert_eq!(provider_path(&dir, Some(OsStr::new(""))), dir.as_os_str());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
