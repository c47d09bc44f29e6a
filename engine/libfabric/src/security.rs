//! The security binding (TSS) the environment hands the provider, as the UEC mapping's control
//! plane would: with it, every endpoint's packets are sealed in the secure domain and packets
//! that are not are dropped; without it, nothing is sealed.
//!
//! - `SOFTRDMA_TSS_KEY_FILE`: a file holding the secure domain's 32-byte key as 64 hexadecimal
//!   digits, readable by its owner only (a key others can read is refused). Unset: no TSS.
//! - `SOFTRDMA_TSS_SDI`: the secure domain index (24 bits; default 1).
//! - `SOFTRDMA_TSS_EPOCH`: the epoch to start in, for a launcher that hands them out; it must be
//!   above every epoch used with the key on this host. Unset: the one after the last used.
//! - `SOFTRDMA_TSS_EPOCH_FILE`: where the last epoch used with the key is recorded (default: the
//!   key file's path with `.epoch` appended), so that no process seals under a (key, TSC) pair an
//!   earlier one used ([`engine::provider::reserve_epoch`]).
//!
//! Keys are derived per source address (the cluster key mode): processes on several hosts (or
//! addresses) sharing a key and an epoch still never share a nonce space. Peers must start in
//! epochs no further apart than the domain's epoch lifetime (16).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use engine::provider::{SecurityBinding, reserve_epoch};

/// The binding `get` describes (see the module documentation), its epoch reserved; `None`
/// without a key file.
pub fn security_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<SecurityBinding>, String> {
    let Some(path) = get("SOFTRDMA_TSS_KEY_FILE").filter(|v| !v.is_empty()) else { return Ok(None) };
    let path = PathBuf::from(path);
    let key = read_key(&path)?;
    let sdi = match get("SOFTRDMA_TSS_SDI").filter(|v| !v.is_empty()) {
        None => 1,
        Some(v) => match v.trim().parse::<u32>() {
            Ok(s) if s < 1 << 24 => s,
            _ => return Err(format!("SOFTRDMA_TSS_SDI={v}: expected a secure domain index below 2^24")),
        },
    };
    let asked = match get("SOFTRDMA_TSS_EPOCH").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(
            v.trim().parse::<u16>().map_err(|_| format!("SOFTRDMA_TSS_EPOCH={v}: expected 0 to 65535"))?,
        ),
    };
    let state = match get("SOFTRDMA_TSS_EPOCH_FILE").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let mut p = path.clone().into_os_string();
            p.push(".epoch");
            PathBuf::from(p)
        }
    };
    let epoch = reserve_epoch(&state, asked)?;
    let config = tss::Config { sdi, mode: tss::KeyMode::Cluster, ..tss::Config::default() };
    Ok(Some(SecurityBinding { config, key, epoch }))
}

/// The key in `path`: 64 hexadecimal digits (surrounding white space ignored), in a file only its
/// owner can read.
fn read_key(path: &Path) -> Result<[u8; 32], String> {
    let at = |e: std::io::Error| format!("TSS key file {}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(at)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "TSS key file {}: others may read it (mode {:o}); chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        ));
    }
    let text = std::fs::read_to_string(path).map_err(at)?;
    let hex = text.trim();
    let bad = || format!("TSS key file {}: expected 64 hexadecimal digits (a 32-byte key)", path.display());
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn keys_sdis_and_epochs_from_the_environment() {
        let dir = std::env::temp_dir().join(format!("softrdma-fi-tss-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key");
        let write = |text: &str, mode: u32| {
            std::fs::write(&key, text).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let k = key.to_str().unwrap().to_string();
        let with = |vars: &[(&str, &str)]| {
            let m: HashMap<String, String> =
                vars.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
            security_from(|v| m.get(v).cloned())
        };
        assert!(with(&[]).unwrap().is_none(), "no key file, no TSS");
        write(&format!("{}\n", "ab".repeat(32)), 0o600);
        let b = with(&[("SOFTRDMA_TSS_KEY_FILE", &k)]).unwrap().unwrap();
        assert_eq!((b.key, b.epoch, b.config.sdi, b.config.mode), ([0xab; 32], 0, 1, tss::KeyMode::Cluster));
        let b = with(&[("SOFTRDMA_TSS_KEY_FILE", &k), ("SOFTRDMA_TSS_SDI", "7")]).unwrap().unwrap();
        assert_eq!((b.epoch, b.config.sdi), (1, 7), "the next process gets the next epoch");
        let e = with(&[("SOFTRDMA_TSS_KEY_FILE", &k), ("SOFTRDMA_TSS_EPOCH", "1")]).unwrap_err();
        assert!(e.contains("not fresh"), "{e}");
        let b = with(&[("SOFTRDMA_TSS_KEY_FILE", &k), ("SOFTRDMA_TSS_EPOCH", "9")]).unwrap().unwrap();
        assert_eq!(b.epoch, 9);
        assert!(with(&[("SOFTRDMA_TSS_KEY_FILE", &k), ("SOFTRDMA_TSS_SDI", "16777216")]).is_err());
        assert!(with(&[("SOFTRDMA_TSS_KEY_FILE", &k), ("SOFTRDMA_TSS_EPOCH", "-1")]).is_err());
        write(&"ab".repeat(32), 0o644);
        let e = with(&[("SOFTRDMA_TSS_KEY_FILE", &k)]).unwrap_err();
        assert!(e.contains("others may read it (mode 644)"), "{e}");
        for bad in ["ab".repeat(31), "zz".repeat(32), "é".repeat(32)] {
            write(&bad, 0o600);
            let e = with(&[("SOFTRDMA_TSS_KEY_FILE", &k)]).unwrap_err();
            assert!(e.contains("64 hexadecimal digits"), "{bad}: {e}");
        }
        let e = with(&[("SOFTRDMA_TSS_KEY_FILE", "/nonexistent/key")]).unwrap_err();
        assert!(e.contains("/nonexistent/key") && e.contains("No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
