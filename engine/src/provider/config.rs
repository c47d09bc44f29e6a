//! The provider's configuration variables and service file (`../shared/spec/uet-libfabric.md`
//! "Configuration (environment)"). Malformed values and files are refused with the variable, the
//! value and the reason (never silently replaced by a default).

use std::collections::HashSet;

/// A service of the service file: a name and its range of resource indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Up to 64 characters.
    pub name: String,
    /// First resource index.
    pub start_index: u16,
    /// How many indices (at least 1; `start_index + num_indices <= 4096`).
    pub num_indices: u16,
}

/// The services known without a service file; a file's entry of the same name replaces one.
pub fn predefined_services() -> Vec<Service> {
    vec![Service { name: "default".into(), start_index: 0, num_indices: 16 }]
}

/// Why the configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A variable's value is malformed or out of range.
    BadValue {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// The service file could not be read.
    ServiceFileUnreadable {
        /// Its path.
        path: String,
        /// The I/O error.
        error: String,
    },
    /// A line of the service file is malformed.
    ServiceFile {
        /// Its path.
        path: String,
        /// Line number (1-based).
        line: usize,
        /// What is wrong.
        why: &'static str,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::BadValue { var, value, why } => write!(f, "{var}={value:?}: {why}"),
            ConfigError::ServiceFileUnreadable { path, error } => write!(f, "service file {path}: {error}"),
            ConfigError::ServiceFile { path, line, why } => {
                write!(f, "service file {path}, line {line}: {why}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// The provider's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Services: the predefined ones, overridden and extended by `UET_PROVIDER_SERVICE_PATH`.
    pub services: Vec<Service>,
    /// `UET_PROVIDER_MAX_EAGER_SIZE`: eager bytes with a rendezvous request.
    pub max_eager: usize,
    /// `UET_PROVIDER_MSG_RENDEZVOUS_SIZE`: untagged sends from this size use rendezvous (HPC) or
    /// deferrable sends (AI Full).
    pub msg_rendezvous_size: usize,
    /// `UET_PROVIDER_TAG_RENDEZVOUS_SIZE`: the same for tagged sends.
    pub tag_rendezvous_size: usize,
    /// `UET_PROVIDER_DEF_DATA_TC`: default data traffic class (DSCP, 0-63).
    pub def_data_tc: u8,
    /// `UET_PROVIDER_INITIATOR_ID`: the initiator ID used with the fallback JobID.
    pub initiator_id: Option<u32>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        let s = ses::Config::default();
        ProviderConfig {
            services: predefined_services(),
            max_eager: s.max_eager,
            msg_rendezvous_size: s.msg_rendezvous_size,
            tag_rendezvous_size: s.tag_rendezvous_size,
            def_data_tc: 0,
            initiator_id: None,
        }
    }
}

fn number(var: &'static str, value: &str) -> Result<u64, ConfigError> {
    let bad = |why| ConfigError::BadValue { var, value: value.into(), why };
    let v = value.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.map_err(|_| bad("not a non-negative integer (decimal or 0x hex)"))
}

fn size(var: &'static str, value: &str) -> Result<usize, ConfigError> {
    match number(var, value)? {
        0 => Err(ConfigError::BadValue { var, value: value.into(), why: "must be at least 1" }),
        n if n > 1 << 32 => Err(ConfigError::BadValue { var, value: value.into(), why: "larger than 4 GiB" }),
        n => Ok(n as usize),
    }
}

impl ProviderConfig {
    /// From the process environment.
    pub fn from_env() -> Result<ProviderConfig, ConfigError> {
        ProviderConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// From any source of variables (`get(name)`), e.g. a map in tests.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<ProviderConfig, ConfigError> {
        let mut c = ProviderConfig::default();
        if let Some(v) = get("UET_PROVIDER_MAX_EAGER_SIZE") {
            c.max_eager = size("UET_PROVIDER_MAX_EAGER_SIZE", &v)?;
        }
        if let Some(v) = get("UET_PROVIDER_MSG_RENDEZVOUS_SIZE") {
            c.msg_rendezvous_size = size("UET_PROVIDER_MSG_RENDEZVOUS_SIZE", &v)?;
        }
        if let Some(v) = get("UET_PROVIDER_TAG_RENDEZVOUS_SIZE") {
            c.tag_rendezvous_size = size("UET_PROVIDER_TAG_RENDEZVOUS_SIZE", &v)?;
        }
        if let Some(v) = get("UET_PROVIDER_DEF_DATA_TC") {
            let n = number("UET_PROVIDER_DEF_DATA_TC", &v)?;
            if n > 63 {
                let why = "a DSCP value is 0 to 63";
                return Err(ConfigError::BadValue { var: "UET_PROVIDER_DEF_DATA_TC", value: v, why });
            }
            c.def_data_tc = n as u8;
        }
        if let Some(v) = get("UET_PROVIDER_INITIATOR_ID") {
            let n = number("UET_PROVIDER_INITIATOR_ID", &v)?;
            let id = u32::try_from(n).map_err(|_| ConfigError::BadValue {
                var: "UET_PROVIDER_INITIATOR_ID",
                value: v.clone(),
                why: "an initiator ID is 32 bits",
            })?;
            c.initiator_id = Some(id);
        }
        if let Some(path) = get("UET_PROVIDER_SERVICE_PATH") {
            let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::ServiceFileUnreadable {
                path: path.clone(),
                error: e.to_string(),
            })?;
            let file = parse_service_file(&text).map_err(|(line, why)| ConfigError::ServiceFile {
                path: path.clone(),
                line,
                why,
            })?;
            for s in file {
                c.services.retain(|p| p.name != s.name);
                c.services.push(s);
            }
        }
        Ok(c)
    }

    /// The service of this name.
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }
}

/// Parses a service file: one service per line, `service_name start_index num_indices`; blank
/// lines and lines starting with `#` are skipped. Errors carry the 1-based line number.
pub fn parse_service_file(text: &str) -> Result<Vec<Service>, (usize, &'static str)> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, start, count] = fields[..] else {
            return Err((n, "expected three fields: service_name start_index num_indices"));
        };
        if name.len() > 64 {
            return Err((n, "a service name is at most 64 characters"));
        }
        let start: u16 = start.parse().map_err(|_| (n, "start_index is not a number 0-4095"))?;
        let count: u16 = count.parse().map_err(|_| (n, "num_indices is not a number 1-4096"))?;
        if count == 0 {
            return Err((n, "num_indices must be at least 1"));
        }
        if u32::from(start) + u32::from(count) > 4096 {
            return Err((n, "start_index + num_indices exceeds 4096"));
        }
        if !names.insert(name.to_string()) {
            return Err((n, "service name listed twice"));
        }
        out.push(Service { name: name.into(), start_index: start, num_indices: count });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn variables_parse_and_malformed_ones_are_refused() {
        let c = ProviderConfig::from_vars(vars(&[
            ("UET_PROVIDER_MAX_EAGER_SIZE", "2048"),
            ("UET_PROVIDER_MSG_RENDEZVOUS_SIZE", "0x10000"),
            ("UET_PROVIDER_TAG_RENDEZVOUS_SIZE", "32768"),
            ("UET_PROVIDER_DEF_DATA_TC", "26"),
            ("UET_PROVIDER_INITIATOR_ID", "42"),
        ]))
        .unwrap();
        assert_eq!(
            (c.max_eager, c.msg_rendezvous_size, c.tag_rendezvous_size, c.def_data_tc, c.initiator_id),
            (2048, 65536, 32768, 26, Some(42))
        );
        for (var, value) in [
            ("UET_PROVIDER_MAX_EAGER_SIZE", "big"),
            ("UET_PROVIDER_MAX_EAGER_SIZE", "0"),
            ("UET_PROVIDER_MSG_RENDEZVOUS_SIZE", "-5"),
            ("UET_PROVIDER_TAG_RENDEZVOUS_SIZE", "99999999999"),
            ("UET_PROVIDER_DEF_DATA_TC", "64"),
            ("UET_PROVIDER_INITIATOR_ID", "0x100000000"),
        ] {
            let e = ProviderConfig::from_vars(vars(&[(var, value)])).unwrap_err();
            assert!(matches!(e, ConfigError::BadValue { var: v, .. } if v == var), "{var}={value}: {e}");
        }
        let e = ProviderConfig::from_vars(vars(&[("UET_PROVIDER_SERVICE_PATH", "/nonexistent/services")]));
        assert!(matches!(e, Err(ConfigError::ServiceFileUnreadable { .. })));
    }

    #[test]
    fn service_files() {
        let ok = "# comment\n\nmpi 16 64\ndefault 100 4\n";
        let s = parse_service_file(ok).unwrap();
        assert_eq!(s[0], Service { name: "mpi".into(), start_index: 16, num_indices: 64 });
        let long = format!("{} 0 1", "x".repeat(65));
        for (text, line, why) in [
            ("mpi 16\n", 1, "expected three fields"),
            ("a 1 1\nmpi 16 64 9\n", 2, "expected three fields"),
            ("mpi x 4\n", 1, "start_index"),
            ("mpi 4 0\n", 1, "at least 1"),
            ("mpi 4000 97\n", 1, "exceeds 4096"),
            ("mpi 1 1\nmpi 2 1\n", 2, "twice"),
            (long.as_str(), 1, "64 characters"),
        ] {
            let (l, w) = parse_service_file(text).unwrap_err();
            assert_eq!(l, line, "{text:?}");
            assert!(w.contains(why), "{text:?}: {w}");
        }
        // A file's entry replaces the predefined one of the same name.
        let dir = std::env::temp_dir().join(format!("softrdma-services-{}", std::process::id()));
        std::fs::write(&dir, ok).unwrap();
        let c =
            ProviderConfig::from_vars(vars(&[("UET_PROVIDER_SERVICE_PATH", dir.to_str().unwrap())])).unwrap();
        assert_eq!(c.service("default").unwrap().start_index, 100);
        assert_eq!(c.service("mpi").unwrap().num_indices, 64);
        std::fs::write(&dir, "mpi 1\n").unwrap();
        let e = ProviderConfig::from_vars(vars(&[("UET_PROVIDER_SERVICE_PATH", dir.to_str().unwrap())]));
        assert!(matches!(e, Err(ConfigError::ServiceFile { line: 1, .. })), "{e:?}");
        std::fs::remove_file(&dir).unwrap();
    }
}
