//! Regions registered on a domain rather than bound to one endpoint: what libfabric programs
//! that do not take FI_MR_ENDPOINT expect (`fi_mr_reg` on the domain, usable by peers at once). A
//! UET region belongs to an endpoint's SES (`../shared/spec/uet-libfabric.md`, "Keep a table of
//! registered memory regions ... per endpoint"), so a domain region is registered, under the same
//! key, with every endpoint the domain has and every one it opens later, each registration a view
//! of the same program memory; closing the region deregisters it everywhere.
//!
//! Keys are the program's (checked as UET keys: an RKEY plus the two flags) or, with
//! [`DomainKey::Provider`] (FI_MR_PROV_KEY), chosen here: unique in the domain, counting up from 1.
//! With a `base`, requests name the region's bytes by their virtual address (FI_MR_VIRT_ADDR).

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use ses::key::{INTERNAL, KeyError, RKEY_MASK};

use super::errno::{FiErrno, FiError};
use super::objects::EqEvent;
use frame::UserBuf;

/// Who picks a domain region's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainKey {
    /// The program (`requested_key`).
    User(u64),
    /// The provider (FI_MR_PROV_KEY).
    Provider,
}

/// What an endpoint of the domain does with a domain region (`endpoint.rs`).
pub(super) trait RegionSink {
    /// Registers `mem` under `key`.
    fn add_region(&self, r: &Spec, mem: UserBuf) -> Result<(), KeyError>;
    /// Deregisters `key`.
    fn remove_region(&self, key: u64);
    /// The endpoint's event queue, for FI_MR_COMPLETE.
    fn event(&self, e: EqEvent);
}

/// A domain region: where it is and how peers reach it.
pub(super) struct Spec {
    pub(super) key: u64,
    pub(super) access: ses::Access,
    pub(super) base: u64,
    /// A fresh view of the program's memory for one more endpoint.
    view: Box<dyn Fn() -> Option<UserBuf>>,
}

/// The endpoints and regions of a domain.
#[derive(Default)]
pub(super) struct DomainShared {
    endpoints: Vec<Weak<dyn RegionSink>>,
    regions: Vec<Rc<Spec>>,
    next_key: u64,
}

impl std::fmt::Debug for DomainShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainShared").field("regions", &self.regions.len()).finish_non_exhaustive()
    }
}

fn key_error(key: u64, e: KeyError) -> FiError {
    match e {
        KeyError::InUse => FiError::new(FiErrno::EBUSY, format!("key {key:#x} in use")),
        _ => FiError::new(FiErrno::EKEYREJECTED, format!("key {key:#x} not usable: {e:?}")),
    }
}

impl DomainShared {
    /// A new endpoint of the domain: it serves every region registered so far.
    pub(super) fn add_endpoint(&mut self, ep: Weak<dyn RegionSink>) -> Result<(), FiError> {
        if let Some(e) = ep.upgrade() {
            for r in &self.regions {
                let mem = (r.view)().ok_or_else(|| FiError::new(FiErrno::EINVAL, "empty region"))?;
                e.add_region(r, mem).map_err(|err| key_error(r.key, err))?;
            }
        }
        self.endpoints.retain(|e| e.strong_count() > 0);
        self.endpoints.push(ep);
        Ok(())
    }

    fn key_in_use(&self, key: u64) -> bool {
        self.regions.iter().any(|r| r.key & RKEY_MASK == key & RKEY_MASK)
    }
}

/// A region registered on a domain ([`super::Domain::mr_reg_domain`]).
#[derive(Debug)]
pub struct DomainRegion {
    key: u64,
    shared: Weak<RefCell<DomainShared>>,
}

impl DomainRegion {
    /// `fi_mr_key`: the key peers use.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// `fi_close`: deregisters it from every endpoint of the domain.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for DomainRegion {
    fn drop(&mut self) {
        let Some(s) = self.shared.upgrade() else { return };
        let mut s = s.borrow_mut();
        s.regions.retain(|r| r.key != self.key);
        for e in s.endpoints.iter().filter_map(Weak::upgrade) {
            e.remove_region(self.key);
        }
    }
}

/// Registers on the domain `shared`: see [`super::Domain::mr_reg_domain`].
pub(super) fn register(
    shared: &Rc<RefCell<DomainShared>>,
    view: impl Fn() -> Option<UserBuf> + 'static,
    access: ses::Access,
    key: DomainKey,
    base: u64,
) -> Result<DomainRegion, FiError> {
    let mut s = shared.borrow_mut();
    let key = match key {
        DomainKey::User(k) => {
            ses::key::check_user_key(k).map_err(|e| key_error(k, e))?;
            if s.key_in_use(k) {
                return Err(key_error(k, KeyError::InUse));
            }
            k
        }
        DomainKey::Provider => loop {
            s.next_key = (s.next_key + 1) % INTERNAL;
            let k = s.next_key;
            if k != 0 && !s.key_in_use(k) {
                break k;
            }
        },
    };
    let spec = Rc::new(Spec { key, access, base, view: Box::new(view) });
    let live: Vec<_> = s.endpoints.iter().filter_map(Weak::upgrade).collect();
    for (i, e) in live.iter().enumerate() {
        let added = (spec.view)()
            .ok_or_else(|| FiError::new(FiErrno::EINVAL, "an empty region"))
            .and_then(|mem| e.add_region(&spec, mem).map_err(|err| key_error(key, err)));
        if let Err(err) = added {
            for done in &live[..i] {
                done.remove_region(key);
            }
            return Err(err);
        }
    }
    for e in &live {
        e.event(EqEvent::MrComplete { key });
    }
    s.regions.push(spec);
    Ok(DomainRegion { key, shared: Rc::downgrade(shared) })
}
