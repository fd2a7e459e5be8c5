//! Set-up helpers shared by client and server: preallocated maps from engine handles
//! (QP, connection) to the app's own indices, and a set of CQs sized for a number of
//! QPs within the engine's per-CQ limit.

use iwarp_rdma::Rnic;
use iwarp_types::{CqId, SgList, Sge, VerbError};

use crate::spec::SetupError;

/// The empty SGL, copied by [`one_sge`].
const EMPTY_SGL: SgList = SgList::new();

/// An SGL of one element, built inline (one per posted WR on the data path;
/// `SgList::single` is an out-of-line call in another crate).
#[inline]
pub(crate) fn one_sge(sge: Sge) -> SgList {
    let mut l = EMPTY_SGL;
    // An empty list always has room for one element.
    let _ = l.push(sge);
    l
}

/// A map from a 32-bit handle whose low bits name a slot (`slot(handle) < capacity`) to
/// a `u32`; the full handle is compared, so a stale handle of a reused slot misses.
/// All storage is allocated at construction.
pub(crate) struct SlotMap {
    entries: Vec<Option<(u32, u32)>>,
    slot: fn(u32) -> usize,
}

impl SlotMap {
    pub(crate) fn new(capacity: usize, slot: fn(u32) -> usize) -> SlotMap {
        SlotMap {
            entries: vec![None; capacity],
            slot,
        }
    }

    /// False if the handle's slot is outside the map (nothing stored).
    pub(crate) fn insert(&mut self, handle: u32, value: u32) -> bool {
        match self.entries.get_mut((self.slot)(handle)) {
            Some(e) => {
                *e = Some((handle, value));
                true
            }
            None => false,
        }
    }

    #[inline]
    pub(crate) fn get(&self, handle: u32) -> Option<u32> {
        match self.entries.get((self.slot)(handle)) {
            Some(Some((h, v))) if *h == handle => Some(*v),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, handle: u32) -> Option<u32> {
        let e = self.entries.get_mut((self.slot)(handle))?;
        match *e {
            Some((h, v)) if h == handle => {
                *e = None;
                Some(v)
            }
            _ => None,
        }
    }
}

/// Slot of a QP handle (`generation << 24 | slot + 1`, see `iwarp-rdma`).
pub(crate) fn qp_slot(h: u32) -> usize {
    ((h & 0x00ff_ffff) as usize).wrapping_sub(1)
}

/// Slot of a connection id (the engine's connection-table index).
pub(crate) fn conn_slot(h: u32) -> usize {
    iwarp_engine::conn_table::slot_of(iwarp_types::ConnId(h))
}

/// CQs for `users` QPs of `per_user` entries each, as few as the per-CQ limit allows;
/// QP `i` reports to `cq_for(i)`.
pub(crate) struct CqSet {
    cqs: Vec<CqId>,
    per_cq: u32,
}

impl CqSet {
    pub(crate) fn create(rnic: &mut Rnic, users: u32, per_user: u32) -> Result<CqSet, SetupError> {
        let max = rnic.limits().max_cqe.max(1);
        let per_user = per_user.max(1);
        if per_user > max {
            return Err(SetupError::Verb {
                what: "create_cq (depth above the engine's CQ limit)",
                err: VerbError::CqTooLarge,
            });
        }
        let per_cq = (max / per_user).clamp(1, users.max(1));
        let n = users.max(1).div_ceil(per_cq);
        let mut set = CqSet {
            cqs: Vec::with_capacity(n as usize),
            per_cq,
        };
        for _ in 0..n {
            match rnic.create_cq(per_cq * per_user) {
                Ok((cq, _)) => set.cqs.push(cq),
                Err(err) => {
                    set.destroy(rnic);
                    return Err(SetupError::Verb {
                        what: "create_cq",
                        err,
                    });
                }
            }
        }
        Ok(set)
    }

    #[inline]
    pub(crate) fn cq_for(&self, user: u32) -> CqId {
        let i = (user / self.per_cq) as usize;
        self.cqs[i.min(self.cqs.len() - 1)]
    }

    pub(crate) fn cqs(&self) -> &[CqId] {
        &self.cqs
    }

    pub(crate) fn destroy(&mut self, rnic: &mut Rnic) {
        for cq in self.cqs.drain(..) {
            let _ = rnic.destroy_cq(cq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_rdma::{RnicConfig, RnicLimits};

    #[test]
    fn slot_map_rejects_stale_handles() {
        let mut m = SlotMap::new(4, qp_slot);
        assert!(m.insert(1, 10));
        assert!(m.insert((1 << 24) | 2, 11));
        assert!(!m.insert(9, 12));
        assert_eq!(m.get(1), Some(10));
        assert_eq!(m.get((5 << 24) | 1), None);
        assert_eq!(m.get(0), None);
        assert_eq!(m.remove(1), Some(10));
        assert_eq!(m.get(1), None);
        assert_eq!(m.get((1 << 24) | 2), Some(11));
    }

    #[test]
    fn cq_set_splits_within_the_limit() {
        let limits = RnicLimits {
            max_cqe: 100,
            ..RnicLimits::default()
        };
        let mut r = Rnic::new(RnicConfig { limits, seed: 1 });
        let mut s = CqSet::create(&mut r, 10, 30).unwrap();
        assert_eq!(s.cqs().len(), 4);
        assert_eq!(s.cq_for(0), s.cq_for(2));
        assert_ne!(s.cq_for(2), s.cq_for(3));
        assert_eq!(s.cq_for(9), s.cqs()[3]);
        s.destroy(&mut r);
        assert!(CqSet::create(&mut r, 1, 101).is_err());
    }
}
