//! Protection domains (verbs sections 5.2 and 9.2.2).
//!
//! A PD is an identifier plus a use count: every QP, SRQ, memory region and memory window
//! holds one reference on its PD ([`PdTable::acquire`] / [`PdTable::release`]), and
//! [`PdTable::dealloc`] refuses while references remain (verbs 9.2.2.2, inventory d13:
//! regions, shared regions, bound and invalidated windows, SRQs and QPs all count).

use crate::slab::Slab;
use iwarp_types::{PdId, VerbError};

struct Pd {
    users: u32,
    /// QPs (LLP streams) in the PD: more than one means every region of the PD is
    /// shared on multiple streams (RFC 5040 8.1.1 #7).
    qps: u32,
}

/// The bounded table of protection domains of one engine.
pub struct PdTable {
    pds: Slab<Pd>,
}

impl PdTable {
    /// A table of at most `max_pds` protection domains.
    pub fn new(max_pds: usize) -> PdTable {
        PdTable {
            pds: Slab::new(max_pds),
        }
    }

    /// Allocate PD: a new, unused PD.
    pub fn alloc(&mut self) -> Result<PdId, VerbError> {
        self.pds
            .insert(Pd { users: 0, qps: 0 })
            .map(PdId)
            .ok_or(VerbError::InsufficientResources)
    }

    /// Deallocate PD: fails with `InvalidPd` if it does not exist and with `PdInUse` while
    /// any object still refers to it (the PD is then unchanged).
    pub fn dealloc(&mut self, pd: PdId) -> Result<(), VerbError> {
        match self.pds.get(pd.0) {
            None => Err(VerbError::InvalidPd),
            Some(p) if p.users > 0 => Err(VerbError::PdInUse),
            Some(_) => {
                self.pds.remove(pd.0);
                Ok(())
            }
        }
    }

    /// True if `pd` exists.
    pub fn contains(&self, pd: PdId) -> bool {
        self.pds.get(pd.0).is_some()
    }

    /// Records one more object in `pd` (`InvalidPd` if it does not exist).
    pub fn acquire(&mut self, pd: PdId) -> Result<(), VerbError> {
        let p = self.pds.get_mut(pd.0).ok_or(VerbError::InvalidPd)?;
        p.users = p
            .users
            .checked_add(1)
            .ok_or(VerbError::InsufficientResources)?;
        Ok(())
    }

    /// Records that an object of `pd` went away. Unknown PDs and a zero count are ignored.
    pub fn release(&mut self, pd: PdId) {
        if let Some(p) = self.pds.get_mut(pd.0) {
            p.users = p.users.saturating_sub(1);
        }
    }

    /// Records a QP created in `pd` (after [`PdTable::acquire`]).
    pub fn add_qp(&mut self, pd: PdId) {
        if let Some(p) = self.pds.get_mut(pd.0) {
            p.qps = p.qps.saturating_add(1);
        }
    }

    /// Records a QP of `pd` destroyed.
    pub fn remove_qp(&mut self, pd: PdId) {
        if let Some(p) = self.pds.get_mut(pd.0) {
            p.qps = p.qps.saturating_sub(1);
        }
    }

    /// Number of QPs in `pd` (0 if it does not exist).
    pub fn qps(&self, pd: PdId) -> u32 {
        self.pds.get(pd.0).map_or(0, |p| p.qps)
    }

    /// Number of objects in `pd` (`None` if it does not exist).
    pub fn users(&self, pd: PdId) -> Option<u32> {
        self.pds.get(pd.0).map(|p| p.users)
    }

    /// Number of allocated PDs.
    pub fn len(&self) -> usize {
        self.pds.len()
    }

    /// True if no PD is allocated.
    pub fn is_empty(&self) -> bool {
        self.pds.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_bounded() {
        let mut t = PdTable::new(2);
        let a = t.alloc().unwrap();
        let b = t.alloc().unwrap();
        assert_ne!(a, b);
        assert_eq!(t.alloc(), Err(VerbError::InsufficientResources));
        assert_eq!(t.len(), 2);
        t.dealloc(a).unwrap();
        assert!(t.alloc().is_ok());
    }

    #[test]
    fn dealloc_in_use_fails_and_leaves_pd_unchanged() {
        let mut t = PdTable::new(4);
        let pd = t.alloc().unwrap();
        t.acquire(pd).unwrap();
        t.acquire(pd).unwrap();
        assert_eq!(t.dealloc(pd), Err(VerbError::PdInUse));
        assert_eq!(t.users(pd), Some(2));
        t.release(pd);
        assert_eq!(t.dealloc(pd), Err(VerbError::PdInUse));
        t.release(pd);
        assert_eq!(t.dealloc(pd), Ok(()));
        assert!(!t.contains(pd));
    }

    #[test]
    fn unknown_pd() {
        let mut t = PdTable::new(1);
        assert_eq!(t.dealloc(PdId(0)), Err(VerbError::InvalidPd));
        assert_eq!(t.acquire(PdId(77)), Err(VerbError::InvalidPd));
        let pd = t.alloc().unwrap();
        t.dealloc(pd).unwrap();
        assert_eq!(
            t.dealloc(pd),
            Err(VerbError::InvalidPd),
            "stale id after dealloc"
        );
        assert_eq!(t.acquire(pd), Err(VerbError::InvalidPd));
        t.release(pd); // ignored
        assert!(t.is_empty());
    }
}
