//! The control plane: in softrdma a configuration object plays the privileged entity of the UEC
//! mapping (`../shared/spec/uet-libfabric.md` "JobID ... and authorization", "Security (TSS) from
//! the provider's side"): it assigns JobIDs to processes (never taken from user space), enables
//! the fallback JobID, and assigns fabric addresses and PIDonFEP values to endpoints.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::errno::{FiErrno, FiError};

/// The fallback JobID (all 24 bits set).
pub const FALLBACK_JOB_ID: u32 = 16_777_215;

/// A security binding (uet-libfabric.md, "Security (TSS) from the provider's side"): the secure
/// domain every endpoint's packets are sealed in and opened from, with its key and the epoch to
/// start in. A key used before (by an earlier process) needs an epoch that process never
/// reached: (key, TSC) pairs must never repeat (see [`tss::SecureDomain::new`]).
#[derive(Clone)]
pub struct SecurityBinding {
    /// The secure domain (SDI, key mode, rekeying, replay window, SSI).
    pub config: tss::Config,
    /// The domain's key.
    pub key: [u8; 32],
    /// The epoch to start in.
    pub epoch: u16,
}

impl std::fmt::Debug for SecurityBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("SecurityBinding").field("config", &self.config).field("epoch", &self.epoch).finish()
    }
}

/// JobID assignments, address allocation and the security binding.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    jobs: HashMap<u32, Vec<u32>>,
    security: Option<SecurityBinding>,
    fallback: bool,
    subnet: [u8; 3],
    next_host: u8,
    next_pid: u16,
}

impl Default for ControlPlane {
    fn default() -> Self {
        ControlPlane::new()
    }
}

impl ControlPlane {
    /// No JobIDs assigned, fallback disabled; addresses from 10.88.0.1.
    pub fn new() -> ControlPlane {
        ControlPlane {
            jobs: HashMap::new(),
            security: None,
            fallback: false,
            subnet: [10, 88, 0],
            next_host: 1,
            next_pid: 1,
        }
    }

    /// Lets `process` use `job_id` (24 bits; the fallback value is not assignable).
    pub fn assign_job(&mut self, process: u32, job_id: u32) -> Result<(), FiError> {
        if job_id > 0xFF_FFFF || job_id == FALLBACK_JOB_ID {
            return Err(FiError::new(FiErrno::EINVAL, "a JobID is 24 bits, and 16777215 is the fallback"));
        }
        let v = self.jobs.entry(process).or_default();
        if !v.contains(&job_id) {
            v.push(job_id);
        }
        Ok(())
    }

    /// Withdraws a JobID from a process.
    pub fn revoke_job(&mut self, process: u32, job_id: u32) {
        if let Some(v) = self.jobs.get_mut(&process) {
            v.retain(|&j| j != job_id);
        }
    }

    /// Allows endpoints of processes without a JobID to use [`FALLBACK_JOB_ID`] (they then need
    /// `UET_PROVIDER_INITIATOR_ID`).
    pub fn enable_fallback(&mut self, on: bool) {
        self.fallback = on;
    }

    /// Whether the fallback JobID is enabled.
    pub fn fallback(&self) -> bool {
        self.fallback
    }

    /// The JobIDs a process may use, first assigned first.
    pub fn jobs_of(&self, process: u32) -> &[u32] {
        self.jobs.get(&process).map_or(&[], Vec::as_slice)
    }

    /// Whether `process` may use `job_id`.
    pub fn may_use(&self, process: u32, job_id: u32) -> bool {
        self.jobs_of(process).contains(&job_id)
    }

    /// Seals every endpoint opened from now on in `binding`'s secure domain (TSS), or none.
    pub fn bind_security(&mut self, binding: Option<SecurityBinding>) {
        self.security = binding;
    }

    /// The security binding endpoints get.
    pub fn security(&self) -> Option<&SecurityBinding> {
        self.security.as_ref()
    }

    /// A fresh fabric address and PIDonFEP for an endpoint.
    pub(crate) fn allocate(&mut self) -> Result<(Ipv4Addr, u16), FiError> {
        if self.next_host == 255 {
            return Err(FiError::new(FiErrno::EBUSY, "the control plane's address pool is used up"));
        }
        let [a, b, c] = self.subnet;
        let ip = Ipv4Addr::new(a, b, c, self.next_host);
        self.next_host += 1;
        let pid = self.next_pid & 0xFFF;
        self.next_pid += 1;
        Ok((ip, pid))
    }
}
