//! Epochs of a TSS key that never repeat: a process sealing with a key a process before it used
//! must start in an epoch that process never reached, or it would seal different packets under
//! (key, TSC) pairs already spent (`tss::SecureDomain::new`). Where the key comes from a file
//! rather than from a key manager that hands out epochs, a state file beside it records the last
//! epoch taken, under an exclusive lock, so that processes starting one after the other (or at
//! once) on the host each get an epoch of their own.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// Takes an epoch for a process: `asked` if given and above every epoch recorded in `state`,
/// else the one after the last recorded (0 for a new file); records it before returning. Refused
/// with the reason: an epoch already used, every epoch used (the key must be rotated), a state
/// file that cannot be read, locked or written, or that holds something other than an epoch.
pub fn reserve_epoch(state: &Path, asked: Option<u16>) -> Result<u16, String> {
    let at = |e: std::io::Error| format!("TSS epoch file {}: {e}", state.display());
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(state).map_err(at)?;
    // Held until `f` is dropped, after the new epoch is on disk.
    let mut f = Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| at(e.into()))?;
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(at)?;
    let last = match text.trim() {
        "" => None,
        t => Some(t.parse::<u16>().map_err(|_| {
            format!("TSS epoch file {}: {t:?} is not an epoch (0 to 65535)", state.display())
        })?),
    };
    let epoch = match (asked, last) {
        (Some(e), Some(l)) if e <= l => {
            return Err(format!(
                "TSS epoch {e} is not fresh for this key: epochs up to {l} were used (see {}); \
                 ask for a higher one or none",
                state.display()
            ));
        }
        (Some(e), _) => e,
        (None, None) => 0,
        (None, Some(l)) => l.checked_add(1).ok_or_else(|| {
            format!("every TSS epoch of this key is used (see {}): rotate the key", state.display())
        })?,
    };
    f.seek(SeekFrom::Start(0)).map_err(at)?;
    f.set_len(0).map_err(at)?;
    writeln!(f, "{epoch}").map_err(at)?;
    f.sync_all().map_err(at)?;
    Ok(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_only_move_forward_and_run_out() {
        let dir = std::env::temp_dir().join(format!("softrdma-epoch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("key.epoch");
        let _ = std::fs::remove_file(&state);
        assert_eq!(reserve_epoch(&state, None), Ok(0));
        assert_eq!(reserve_epoch(&state, None), Ok(1));
        let e = reserve_epoch(&state, Some(1)).unwrap_err();
        assert!(e.contains("epoch 1 is not fresh") && e.contains("up to 1"), "{e}");
        assert_eq!(reserve_epoch(&state, Some(40)), Ok(40));
        assert_eq!(reserve_epoch(&state, None), Ok(41));
        assert_eq!(reserve_epoch(&state, Some(u16::MAX)), Ok(u16::MAX));
        assert!(reserve_epoch(&state, None).unwrap_err().contains("rotate the key"));
        std::fs::write(&state, "x\n").unwrap();
        assert!(reserve_epoch(&state, None).unwrap_err().contains("\"x\" is not an epoch"));
        let e = reserve_epoch(&dir.join("no/such/dir"), None).unwrap_err();
        assert!(e.contains("No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
