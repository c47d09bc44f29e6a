//! Memory keys and registered regions (`../shared/spec/uet-libfabric.md` "Memory keys" and
//! "JobID ... and authorization").
//!
//! A key is 64 bits: the RKEY in bits 0-47, IDEMPOTENT_SAFE in bit 63, OPTIMIZED in bit 62 (the
//! mapping's table 2-13 was not available; these positions are softrdma's choice, defined here
//! only). A region is exposed to one JobID or to any JobID.

use ahash::AHashMap as HashMap;

use wire::uet::ses::ReturnCode;

/// Bits of the key that hold the RKEY.
pub const RKEY_MASK: u64 = (1 << 48) - 1;
/// The region may be the target of idempotent (RUDI) operations.
pub const IDEMPOTENT_SAFE: u64 = 1 << 63;
/// The region may be addressed with the optimized non-matching header.
pub const OPTIMIZED: u64 = 1 << 62;
/// RKEYs with this bit belong to the endpoint itself (rendezvous sends expose their buffers under
/// them); users cannot register them.
pub const INTERNAL: u64 = 1 << 47;

/// The RKEY of a key.
pub const fn rkey(key: u64) -> u64 {
    key & RKEY_MASK
}

/// Remote access rights of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access {
    /// Peers may read it.
    pub remote_read: bool,
    /// Peers may write it.
    pub remote_write: bool,
}

impl Access {
    /// Read and write.
    pub const ALL: Access = Access { remote_read: true, remote_write: true };
}

/// Which JobIDs may touch a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobScope {
    /// Any JobID (`fi_mr_regattr` with auth_key_size 0).
    Any,
    /// Only this one.
    Job(u32),
}

/// The bytes of a region: the endpoint's own (`Vec<u8>`) or memory the application registered in
/// place, which the runtime wraps (this crate never touches memory it was not given as a slice).
pub trait Memory: std::fmt::Debug + Send {
    /// The bytes, for one copy out.
    fn bytes(&self) -> &[u8];
    /// The bytes, for one copy in or one atomic.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// What a receive's completion hands back as its data: the endpoint's own buffer; nothing
    /// for the caller's memory (the bytes are where the caller put the receive).
    fn into_vec(self: Box<Self>) -> Vec<u8> {
        Vec::new()
    }
}

impl Memory for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
    fn into_vec(self: Box<Self>) -> Vec<u8> {
        *self
    }
}

/// A registered region: its bytes, rights and JobID scope.
#[derive(Debug)]
pub struct Region {
    /// The memory.
    pub data: Box<dyn Memory>,
    /// Remote rights.
    pub access: Access,
    /// JobIDs allowed.
    pub scope: JobScope,
    /// The key's flags (IDEMPOTENT_SAFE, OPTIMIZED) as registered.
    pub flags: u64,
    /// Remote accesses completed on it (writes, reads, atomics), for counters bound to it.
    pub accesses: u64,
    /// The address requests name its first byte by: 0 when they give offsets into it, the
    /// buffer's own address when they give virtual addresses (libfabric's FI_MR_VIRT_ADDR).
    pub base: u64,
}

/// Why a key could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyError {
    /// The key uses bits outside RKEY and the two flags.
    Malformed,
    /// The RKEY is registered already.
    InUse,
    /// The RKEY is in the endpoint's internal range ([`INTERNAL`]).
    Reserved,
}

/// Whether `key` is one a user may register: nothing outside the RKEY and the two flags, and not
/// in the endpoint's internal range.
pub fn check_user_key(key: u64) -> Result<(), KeyError> {
    if key & !(RKEY_MASK | IDEMPOTENT_SAFE | OPTIMIZED) != 0 {
        return Err(KeyError::Malformed);
    }
    if key & INTERNAL != 0 {
        return Err(KeyError::Reserved);
    }
    Ok(())
}

/// The regions of an endpoint, by RKEY.
#[derive(Debug, Default)]
pub struct Regions {
    map: HashMap<u64, Region>,
}

/// What a remote access wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    Read,
    Write,
}

impl Regions {
    /// Registers `data` under `key` (a user-provided key; the flag bits are kept with the region).
    pub fn register(
        &mut self,
        key: u64,
        data: impl Memory + 'static,
        access: Access,
        scope: JobScope,
    ) -> Result<(), KeyError> {
        self.register_at(key, data, access, scope, 0)
    }

    /// [`register`](Self::register) for requests that name the region's bytes from `base` on
    /// (a request's address `base + n` is byte `n`; below `base` is BAD_ADDR).
    pub fn register_at(
        &mut self,
        key: u64,
        data: impl Memory + 'static,
        access: Access,
        scope: JobScope,
        base: u64,
    ) -> Result<(), KeyError> {
        check_user_key(key)?;
        if self.map.contains_key(&rkey(key)) {
            return Err(KeyError::InUse);
        }
        let data = Box::new(data);
        let flags = key & !RKEY_MASK;
        self.map.insert(rkey(key), Region { data, access, scope, flags, accesses: 0, base });
        Ok(())
    }

    /// Registers an internal region (key in the [`INTERNAL`] range; replaces one left over).
    pub(crate) fn register_internal(&mut self, key: u64, data: Vec<u8>, access: Access, scope: JobScope) {
        let region = Region { data: Box::new(data), access, scope, flags: 0, accesses: 0, base: 0 };
        self.map.insert(rkey(key), region);
    }

    /// Removes a region, returning it.
    pub fn deregister(&mut self, key: u64) -> Option<Region> {
        self.map.remove(&rkey(key))
    }

    /// A region.
    pub fn get(&self, key: u64) -> Option<&Region> {
        self.map.get(&rkey(key))
    }

    /// A region, writable by the local side.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut Region> {
        self.map.get_mut(&rkey(key))
    }

    /// Checks a remote access of `len` bytes at address `addr` by `job_id`, `idempotent` if it
    /// came over RUDI (the region must then be registered IDEMPOTENT_SAFE): the offset into the
    /// region (`addr` less its [`Region::base`]), or the SES return code if refused (BAD_MKEY,
    /// BAD_JOB_ID, PERM_VIOLATION, BAD_ADDR).
    pub(crate) fn check(
        &self,
        key: u64,
        job_id: u32,
        addr: u64,
        len: u64,
        want: Want,
        idempotent: bool,
    ) -> Result<u64, ReturnCode> {
        let r = self.get(key).ok_or(ReturnCode::BadMkey)?;
        if let JobScope::Job(j) = r.scope {
            if j != job_id {
                return Err(ReturnCode::BadJobId);
            }
        }
        let allowed = match want {
            Want::Read => r.access.remote_read,
            Want::Write => r.access.remote_write,
        };
        if !allowed || (idempotent && r.flags & IDEMPOTENT_SAFE == 0) {
            return Err(ReturnCode::PermViolation);
        }
        let offset = addr.checked_sub(r.base).ok_or(ReturnCode::BadAddr)?;
        match offset.checked_add(len) {
            Some(end) if end <= r.data.bytes().len() as u64 => Ok(offset),
            _ => Err(ReturnCode::BadAddr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_in_order() {
        let mut r = Regions::default();
        let key = 0x1234 | IDEMPOTENT_SAFE;
        r.register(key, vec![0; 100], Access { remote_read: true, remote_write: false }, JobScope::Job(7))
            .unwrap();
        assert_eq!(r.register(0x1234, Vec::new(), Access::ALL, JobScope::Any), Err(KeyError::InUse));
        assert_eq!(r.register(1 << 50, Vec::new(), Access::ALL, JobScope::Any), Err(KeyError::Malformed));
        assert_eq!(r.register(INTERNAL | 5, Vec::new(), Access::ALL, JobScope::Any), Err(KeyError::Reserved));
        assert_eq!(r.get(0x1234).unwrap().flags, IDEMPOTENT_SAFE);
        assert_eq!(r.check(0x99, 7, 0, 1, Want::Read, false), Err(ReturnCode::BadMkey));
        assert_eq!(r.check(key, 8, 0, 1, Want::Read, false), Err(ReturnCode::BadJobId));
        assert_eq!(r.check(key, 7, 0, 1, Want::Write, false), Err(ReturnCode::PermViolation));
        assert_eq!(r.check(key, 7, 90, 11, Want::Read, false), Err(ReturnCode::BadAddr));
        assert_eq!(r.check(key, 7, u64::MAX, 2, Want::Read, false), Err(ReturnCode::BadAddr));
        assert_eq!(r.check(key, 7, 90, 10, Want::Read, false), Ok(90));
        assert_eq!(r.check(key, 7, 90, 10, Want::Read, true), Ok(90));
        r.register(0x99, vec![0; 10], Access::ALL, JobScope::Any).unwrap();
        assert_eq!(r.check(0x99, 7, 0, 1, Want::Write, true), Err(ReturnCode::PermViolation));
        assert!(r.deregister(key).is_some());
        assert_eq!(r.check(key, 7, 0, 1, Want::Read, false), Err(ReturnCode::BadMkey));
    }

    #[test]
    fn regions_at_a_base_take_addresses_from_it() {
        // FI_MR_VIRT_ADDR: requests name bytes by the buffer's address.
        let mut r = Regions::default();
        let base = 0x7f00_0000_1000;
        r.register_at(9, vec![0; 64], Access::ALL, JobScope::Any, base).unwrap();
        assert_eq!(r.check(9, 1, base, 64, Want::Write, false), Ok(0));
        assert_eq!(r.check(9, 1, base + 60, 4, Want::Read, false), Ok(60));
        assert_eq!(r.check(9, 1, base - 1, 1, Want::Read, false), Err(ReturnCode::BadAddr), "below it");
        assert_eq!(r.check(9, 1, base + 61, 4, Want::Read, false), Err(ReturnCode::BadAddr), "past it");
        assert_eq!(r.check(9, 1, 0, 1, Want::Read, false), Err(ReturnCode::BadAddr), "an offset");
        assert_eq!(r.register_at(9, Vec::new(), Access::ALL, JobScope::Any, 0), Err(KeyError::InUse));
    }
}
