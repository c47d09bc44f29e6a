//! Protection domains and memory regions: regions the device allocates, regions on the
//! application's own memory, and a table whose keys come from a seed for reproducible runs.

use super::{Context, Mr, Pd, check_mr_access};
use crate::roce::MemTable;
use crate::roce::types::{Access, Sge};
use crate::verbs::VerbsError;
use frame::UserBuf;

impl Context {
    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> Pd {
        self.pds.push(true);
        Pd(self.pds.len() as u32 - 1)
    }

    pub(super) fn pd_ok(&self, pd: Pd) -> Result<(), VerbsError> {
        match self.pds.get(pd.0 as usize) {
            Some(true) => Ok(()),
            _ => Err(VerbsError::InvalidHandle("PD")),
        }
    }

    /// Frees a protection domain with no regions or QPs.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), VerbsError> {
        self.pd_ok(pd)?;
        if self.mem.pd_in_use(pd.0)
            || self.qps.iter().flatten().any(|e| e.qp.pd() == pd.0)
            || self.srqs.iter().flatten().any(|s| s.pd == pd.0)
            || self.ahs.iter().flatten().any(|a| a.pd == pd.0)
        {
            return Err(VerbsError::Busy("PD"));
        }
        self.pds[pd.0 as usize] = false;
        Ok(())
    }

    /// Registers `length` bytes of zeroed, page-aligned memory (`ibv_reg_mr`).
    pub fn reg_mr(&mut self, pd: Pd, length: usize, access: Access) -> Result<Mr, VerbsError> {
        self.pd_ok(pd)?;
        check_mr_access(access)?;
        let (key, addr) = self.mem.register(pd.0, length, access).ok_or(VerbsError::OutOfResources)?;
        Ok(Mr { lkey: key, rkey: key, addr, length })
    }

    /// Registers the application's own memory (`ibv_reg_mr`, `ibv_reg_mr_iova2`): SGEs and peers
    /// name its bytes by the virtual addresses `iova..iova + len` (pass the buffer's address for
    /// `ibv_reg_mr`). The memory stays the application's: see [`UserBuf`] for the contract.
    pub fn reg_user_mr(&mut self, pd: Pd, buf: UserBuf, iova: u64, access: Access) -> Result<Mr, VerbsError> {
        self.pd_ok(pd)?;
        check_mr_access(access)?;
        let length = buf.len();
        let key = self.mem.register_user(pd.0, buf, iova, access).ok_or(VerbsError::OutOfResources)?;
        Ok(Mr { lkey: key, rkey: key, addr: iova, length })
    }

    /// Reregisters a region in place (`ibv_rereg_mr`): moves it to `pd`, onto the application's
    /// bytes `memory` (a [`UserBuf`] and the IOVA that names it), and to the rights `access`, each
    /// when given. New bytes come with new keys, as a deregistration followed by a registration
    /// would give: a peer that kept the old R_Key is refused from now on (NAK remote access
    /// error); a change of PD or rights alone keeps the keys (as rxe), and the old rights or PD are
    /// refused the same way. `mr` is updated (keys, address, length); on an error nothing changes.
    pub fn rereg_mr(
        &mut self,
        mr: &mut Mr,
        pd: Option<Pd>,
        memory: Option<(UserBuf, u64)>,
        access: Option<Access>,
    ) -> Result<(), VerbsError> {
        if let Some(pd) = pd {
            self.pd_ok(pd)?;
        }
        if let Some(access) = access {
            check_mr_access(access)?;
        }
        let placed = memory.as_ref().map(|(buf, iova)| (*iova, buf.len()));
        let key =
            self.mem.reregister(mr.lkey, pd.map(|p| p.0), memory, access).map_err(VerbsError::Memory)?;
        (mr.lkey, mr.rkey) = (key, key);
        if let Some((addr, length)) = placed {
            (mr.addr, mr.length) = (addr, length);
        }
        Ok(())
    }

    /// Checks that `sge` names bytes of a live region of `pd` that grants `need`: what
    /// `ibv_advise_mr` validates before it would prefetch them.
    pub fn check_sge(&self, pd: Pd, sge: &Sge, need: Access) -> Result<(), VerbsError> {
        self.pd_ok(pd)?;
        self.mem.check_local(pd.0, sge, need).map_err(VerbsError::Memory)
    }

    /// Deregisters a region; later use of its keys fails.
    pub fn dereg_mr(&mut self, mr: &Mr) -> Result<(), VerbsError> {
        self.mem.deregister(mr.lkey).map_err(VerbsError::Memory)
    }

    /// The region's memory.
    pub fn mr_bytes(&self, mr: &Mr) -> Result<&[u8], VerbsError> {
        self.mem.bytes(mr.lkey).map_err(VerbsError::Memory)
    }

    /// The region's memory, writable.
    pub fn mr_bytes_mut(&mut self, mr: &Mr) -> Result<&mut [u8], VerbsError> {
        self.mem.bytes_mut(mr.lkey).map_err(VerbsError::Memory)
    }

    /// Draws this device's memory keys and addresses from `seed` instead of the OS
    /// ([`MemTable::seeded`]), for a simulation that must repeat byte for byte. Refused once a
    /// region is registered (its key and address would not come from the seed).
    pub fn seed_memory(&mut self, seed: u64) -> Result<(), VerbsError> {
        if !self.mem.is_fresh() {
            return Err(VerbsError::Busy("memory table"));
        }
        self.mem = MemTable::seeded(seed);
        Ok(())
    }
}
