//! Memory region verbs (verbs 7.3, 7.7, 7.9, 9.2.6): Register, Reregister, Register
//! Shared, Allocate Non-Shared MR STag, Fast-Register, Query MR and Deallocate STag.
//!
//! Verb errors leave the table unchanged (verbs 8.3.1), except Reregister, which
//! deallocates the region on errors other than InvalidStag and MwStillBound (7.3.2.3).

use super::rights::region_access_allowed;
use super::{Entry, MemTable, Mr, MrAttr, MrInfo, SharedMrAttr, StagState};
use crate::pd::PdTable;
use iwarp_types::{Access, PdId, RegionId, Stag, VerbError};

/// The region described by `a` fits its arena and its address space.
fn check_attr(pds: &PdTable, a: &MrAttr, region_len: Option<u64>) -> Result<(), VerbError> {
    if !pds.contains(a.pd) {
        return Err(VerbError::InvalidPd);
    }
    if !region_access_allowed(a.access, a.remote_access_flag) {
        return Err(VerbError::InvalidAccessRights);
    }
    check_extent(a.region_offset, a.len, region_len).map_err(|_| VerbError::InvalidLength)?;
    if !a.zero_based && a.va.checked_add(a.len).is_none() {
        return Err(VerbError::InvalidVa);
    }
    Ok(())
}

/// Non-empty `[offset, offset + len)` inside an existing arena of `region_len` bytes.
pub(crate) fn check_extent(offset: u64, len: u64, region_len: Option<u64>) -> Result<(), ()> {
    let end = offset.checked_add(len).ok_or(())?;
    match region_len {
        Some(arena) if len > 0 && end <= arena => Ok(()),
        _ => Err(()),
    }
}

fn mr_from_attr(a: &MrAttr) -> Mr {
    Mr {
        pd: a.pd,
        key: a.key,
        valid: true,
        shared: false,
        remote_access_flag: a.remote_access_flag,
        access: a.access,
        region: a.region,
        region_offset: a.region_offset,
        len: a.len,
        base_to: if a.zero_based { 0 } else { a.va },
        zero_based: a.zero_based,
        max_len: a.len,
        mws_bound: 0,
    }
}

impl MemTable {
    /// Stores a new entry holding one use of `pd`, under a fresh index or under index
    /// `at` (see [`MemTable::vacant`] for its errors).
    pub(crate) fn insert_with_pd(
        &mut self,
        pds: &mut PdTable,
        at: Option<u32>,
        entry: Entry,
    ) -> Result<u32, VerbError> {
        if self.len() >= self.capacity() {
            return Err(VerbError::InsufficientResources);
        }
        if let Some(index) = at {
            self.vacant(index)?;
        }
        pds.acquire(entry.pd())?;
        let placed = match at {
            None => self.insert(entry),
            Some(index) => self.insert_at(index, entry),
        };
        match placed {
            Some(index) => Ok(index),
            None => {
                pds.release(entry.pd());
                Err(VerbError::InsufficientResources)
            }
        }
    }

    /// Register Non-Shared MR: a Valid region with the consumer's key. `region_len` is
    /// the length of the caller arena `attr.region` (`None` if it does not exist).
    /// Errors: `InvalidPd`, `InvalidAccessRights` (figure 18, or remote rights without
    /// the Remote Access Flag), `InvalidLength` (zero, overflowing or outside the arena),
    /// `InvalidVa` (VA + length overflows), `InsufficientResources`.
    pub fn reg_mr(
        &mut self,
        pds: &mut PdTable,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        self.reg_mr_in(pds, None, attr, region_len)
    }

    /// [`MemTable::reg_mr`] under a fresh index or under index `at`.
    pub(super) fn reg_mr_in(
        &mut self,
        pds: &mut PdTable,
        at: Option<u32>,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        check_attr(pds, attr, region_len)?;
        let index = self.insert_with_pd(pds, at, Entry::Mr(mr_from_attr(attr)))?;
        Ok(Stag::new(index, attr.key))
    }

    /// Reregister Non-Shared MR: the region of index `stag.index()` (Valid or Invalid)
    /// gets `attr` and keeps its index; returns the STag with the new key. `InvalidStag`
    /// (not a non-shared region) and `MwStillBound` leave it unchanged; any other error
    /// deallocates it (verbs 7.3.2.3).
    pub fn rereg_mr(
        &mut self,
        pds: &mut PdTable,
        stag: Stag,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        let index = stag.index();
        let old = *self.mr(index).ok_or(VerbError::InvalidStag)?;
        if old.shared {
            return Err(VerbError::InvalidStag);
        }
        if old.mws_bound > 0 {
            return Err(VerbError::MwStillBound);
        }
        if let Err(e) = check_attr(pds, attr, region_len) {
            self.remove(index);
            pds.release(old.pd);
            return Err(e);
        }
        if attr.pd != old.pd {
            pds.acquire(attr.pd)?;
            pds.release(old.pd);
        }
        if let Some(m) = self.mr_mut(index) {
            *m = mr_from_attr(attr);
        }
        Ok(Stag::new(index, attr.key))
    }

    /// Register Shared MR: a new Valid STag on the memory of the Valid region `stag`
    /// (all 32 bits must match). Both become Shared for good. Errors: `InvalidStag`,
    /// `InvalidPd`, `InvalidAccessRights`, `InvalidVa`, `InsufficientResources`.
    pub fn reg_shared_mr(
        &mut self,
        pds: &mut PdTable,
        stag: Stag,
        attr: &SharedMrAttr,
    ) -> Result<Stag, VerbError> {
        let src = *self.mr(stag.index()).ok_or(VerbError::InvalidStag)?;
        if !src.valid || src.key != stag.key() {
            return Err(VerbError::InvalidStag);
        }
        if !pds.contains(attr.pd) {
            return Err(VerbError::InvalidPd);
        }
        if !region_access_allowed(attr.access, attr.remote_access_flag) {
            return Err(VerbError::InvalidAccessRights);
        }
        if !attr.zero_based && attr.va.checked_add(src.len).is_none() {
            return Err(VerbError::InvalidVa);
        }
        let mr = Mr {
            pd: attr.pd,
            key: attr.key,
            valid: true,
            shared: true,
            remote_access_flag: attr.remote_access_flag,
            access: attr.access,
            region: src.region,
            region_offset: src.region_offset,
            len: src.len,
            base_to: if attr.zero_based { 0 } else { attr.va },
            zero_based: attr.zero_based,
            max_len: src.len,
            mws_bound: 0,
        };
        let index = self.insert_with_pd(pds, None, Entry::Mr(mr))?;
        if let Some(m) = self.mr_mut(stag.index()) {
            m.shared = true;
        }
        Ok(Stag::new(index, attr.key))
    }

    /// Allocate Non-Shared MR STag: an Invalid region STag (key 0) for a later
    /// Fast-Register of at most `max_len` bytes. Errors: `InvalidPd`, `InvalidLength`
    /// (zero), `InsufficientResources`.
    pub fn alloc_mr_stag(
        &mut self,
        pds: &mut PdTable,
        pd: PdId,
        max_len: u64,
        remote_access_flag: bool,
    ) -> Result<Stag, VerbError> {
        self.alloc_mr_stag_in(pds, None, pd, max_len, remote_access_flag)
    }

    /// [`MemTable::alloc_mr_stag`] under a fresh index (key 0) or under STag `at`.
    pub(super) fn alloc_mr_stag_in(
        &mut self,
        pds: &mut PdTable,
        at: Option<Stag>,
        pd: PdId,
        max_len: u64,
        remote_access_flag: bool,
    ) -> Result<Stag, VerbError> {
        if !pds.contains(pd) {
            return Err(VerbError::InvalidPd);
        }
        if max_len == 0 {
            return Err(VerbError::InvalidLength);
        }
        let key = at.map_or(0, Stag::key);
        let mr = Mr {
            pd,
            key,
            valid: false,
            shared: false,
            remote_access_flag,
            access: Access::NONE,
            region: RegionId(0),
            region_offset: 0,
            len: 0,
            base_to: 0,
            zero_based: false,
            max_len,
            mws_bound: 0,
        };
        let index = self.insert_with_pd(pds, at.map(Stag::index), Entry::Mr(mr))?;
        Ok(Stag::new(index, key))
    }

    /// Query MR by STag index (the key is ignored). `InvalidStag` for windows, STag 0 and
    /// unknown indices.
    pub fn query_mr(&self, stag: Stag) -> Result<MrInfo, VerbError> {
        let m = self.mr(stag.index()).ok_or(VerbError::InvalidStag)?;
        Ok(MrInfo {
            key: m.valid.then_some(m.key),
            state: if m.valid {
                StagState::Valid
            } else {
                StagState::Invalid
            },
            pd: m.pd,
            shared: m.shared,
            remote_access_flag: m.remote_access_flag,
            access: m.access,
            region: m.region,
            region_offset: m.region_offset,
            len: m.len,
            base_to: m.base_to,
            zero_based: m.zero_based,
            max_len: m.max_len,
            mws_bound: m.mws_bound,
        })
    }

    /// Deallocate STag (region or window) by index, without checking state or key: all
    /// access ends at once and the PD loses a use. `InvalidStag` if unknown or STag 0,
    /// `MwStillBound` for a region with bound windows. A bound window is unbound.
    pub fn dealloc_stag(&mut self, pds: &mut PdTable, stag: Stag) -> Result<(), VerbError> {
        let index = stag.index();
        let entry = *self.entry(index).ok_or(VerbError::InvalidStag)?;
        match entry {
            Entry::Mr(m) if m.mws_bound > 0 => return Err(VerbError::MwStillBound),
            Entry::Mr(_) => {}
            Entry::Mw(w) => {
                if let Some(b) = w.binding {
                    self.unbind_from_mr(b.mr);
                }
            }
        }
        self.remove(index);
        pds.release(entry.pd());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::MwType;
    use super::*;

    #[test]
    fn reg_mr_valid_and_query() {
        let (mut pds, mut t, pd) = setup(8);
        let a = MrAttr {
            va: 0x1000,
            key: 0x5a,
            ..attr(pd, 100, 50)
        };
        let s = t.reg_mr(&mut pds, &a, Some(4096)).unwrap();
        assert_eq!(s.key(), 0x5a, "the consumer's key");
        let q = t.query_mr(s.with_key(0)).unwrap();
        assert_eq!(q.key, Some(0x5a));
        assert_eq!(q.state, StagState::Valid);
        assert_eq!(
            (q.pd, q.len, q.base_to, q.region_offset),
            (pd, 50, 0x1000, 100)
        );
        assert!(!q.shared);
        assert_eq!(pds.users(pd), Some(1));
    }

    #[test]
    fn reg_mr_errors_consume_nothing() {
        let (mut pds, mut t, pd) = setup(8);
        let cases = [
            (
                MrAttr {
                    pd: PdId(999),
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidPd,
            ),
            (
                MrAttr {
                    access: RW,
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidAccessRights,
            ),
            (
                MrAttr {
                    access: LR | RW,
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidAccessRights,
            ),
            (
                MrAttr {
                    access: LR | RR,
                    remote_access_flag: false,
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidAccessRights,
            ),
            (attr(pd, 0, 0), Some(64), VerbError::InvalidLength),
            (attr(pd, 60, 8), Some(64), VerbError::InvalidLength),
            (
                attr(pd, u64::MAX, 8),
                Some(u64::MAX),
                VerbError::InvalidLength,
            ),
            (attr(pd, 0, 8), None, VerbError::InvalidLength),
            (
                MrAttr {
                    va: u64::MAX - 3,
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidVa,
            ),
        ];
        for (a, rl, e) in cases {
            assert_eq!(t.reg_mr(&mut pds, &a, rl), Err(e), "{a:?}");
        }
        assert!(t.is_empty());
        assert_eq!(pds.users(pd), Some(0));
        // Zero-based ignores the VA.
        let zb = MrAttr {
            va: u64::MAX,
            zero_based: true,
            ..attr(pd, 0, 8)
        };
        let s = t.reg_mr(&mut pds, &zb, Some(64)).unwrap();
        assert_eq!(t.query_mr(s).unwrap().base_to, 0);
        // The last byte of the arena is usable.
        assert!(t.reg_mr(&mut pds, &attr(pd, 56, 8), Some(64)).is_ok());
    }

    #[test]
    fn pd_in_use_while_regions_exist() {
        let (mut pds, mut t, pd) = setup(8);
        let s = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        assert_eq!(pds.dealloc(pd), Err(VerbError::PdInUse));
        t.dealloc_stag(&mut pds, s).unwrap();
        assert_eq!(pds.dealloc(pd), Ok(()));
    }

    #[test]
    fn rereg_keeps_index_changes_key_and_pd() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let s = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        let a2 = MrAttr {
            key: 0x77,
            access: LR,
            ..attr(pd2, 16, 32)
        };
        let s2 = t.rereg_mr(&mut pds, s, &a2, Some(64)).unwrap();
        assert_eq!(s2, s.with_key(0x77));
        let q = t.query_mr(s2).unwrap();
        assert_eq!((q.pd, q.len, q.access, q.region_offset), (pd2, 32, LR, 16));
        assert_eq!((pds.users(pd), pds.users(pd2)), (Some(0), Some(1)));
        // Reregister of an Invalid region is allowed.
        t.invalidate_local(iwarp_types::QpId(1), pd2, s2).unwrap();
        assert!(t.rereg_mr(&mut pds, s2, &attr(pd2, 0, 8), Some(64)).is_ok());
    }

    #[test]
    fn rereg_errors() {
        let (mut pds, mut t, pd) = setup(8);
        assert_eq!(
            t.rereg_mr(&mut pds, Stag(0x100), &attr(pd, 0, 8), Some(64)),
            Err(VerbError::InvalidStag)
        );
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(
            t.rereg_mr(&mut pds, w, &attr(pd, 0, 8), Some(64)),
            Err(VerbError::InvalidStag),
            "a window STag"
        );
        let s = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        let shared = t.reg_shared_mr(&mut pds, s, &shared_attr(pd)).unwrap();
        assert_eq!(
            t.rereg_mr(&mut pds, shared, &attr(pd, 0, 8), Some(64)),
            Err(VerbError::InvalidStag),
            "a shared region"
        );
        // Bound windows: unchanged.
        let m = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        t.bind_mw(QP, pd, true, &bind(w, m, 0, 8, RR)).unwrap();
        assert_eq!(
            t.rereg_mr(&mut pds, m, &attr(pd, 0, 8), Some(64)),
            Err(VerbError::MwStillBound)
        );
        assert!(t.query_mr(m).is_ok());
        // Other errors deallocate.
        let d = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        let before = pds.users(pd).unwrap();
        assert_eq!(
            t.rereg_mr(&mut pds, d, &attr(pd, 0, 0), Some(64)),
            Err(VerbError::InvalidLength)
        );
        assert_eq!(t.query_mr(d), Err(VerbError::InvalidStag), "deallocated");
        assert_eq!(pds.users(pd), Some(before - 1));
    }

    #[test]
    fn shared_regions() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let s = t
            .reg_mr(
                &mut pds,
                &MrAttr {
                    key: 3,
                    ..attr(pd, 8, 16)
                },
                Some(64),
            )
            .unwrap();
        let sa = SharedMrAttr {
            va: 0x9000,
            zero_based: false,
            ..shared_attr(pd2)
        };
        let n = t.reg_shared_mr(&mut pds, s, &sa).unwrap();
        assert_ne!(n.index(), s.index());
        let q = t.query_mr(n).unwrap();
        assert!(q.shared);
        assert_eq!(
            (q.pd, q.region_offset, q.len, q.base_to),
            (pd2, 8, 16, 0x9000)
        );
        assert!(t.query_mr(s).unwrap().shared, "source converted");
        assert_eq!(pds.users(pd2), Some(1));

        assert_eq!(
            t.reg_shared_mr(&mut pds, s.with_key(4), &sa),
            Err(VerbError::InvalidStag),
            "key must match"
        );
        assert_eq!(
            t.reg_shared_mr(
                &mut pds,
                s,
                &SharedMrAttr {
                    pd: PdId(999),
                    ..sa
                }
            ),
            Err(VerbError::InvalidPd)
        );
        assert_eq!(
            t.reg_shared_mr(&mut pds, s, &SharedMrAttr { access: RR, ..sa }),
            Err(VerbError::InvalidAccessRights)
        );
        assert_eq!(
            t.reg_shared_mr(
                &mut pds,
                s,
                &SharedMrAttr {
                    va: u64::MAX - 2,
                    ..sa
                }
            ),
            Err(VerbError::InvalidVa)
        );
        let inv = t.alloc_mr_stag(&mut pds, pd, 64, false).unwrap();
        assert_eq!(
            t.reg_shared_mr(&mut pds, inv, &sa),
            Err(VerbError::InvalidStag),
            "Invalid"
        );
        // Deallocating one shared STag leaves the other.
        t.dealloc_stag(&mut pds, s).unwrap();
        assert!(t.query_mr(n).is_ok());
    }

    #[test]
    fn dealloc_rules() {
        let (mut pds, mut t, pd) = setup(8);
        assert_eq!(
            t.dealloc_stag(&mut pds, Stag(0)),
            Err(VerbError::InvalidStag)
        );
        let m = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(64)).unwrap();
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        t.bind_mw(QP, pd, true, &bind(w, m, 0, 8, RW)).unwrap();
        assert_eq!(t.dealloc_stag(&mut pds, m), Err(VerbError::MwStillBound));
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 1);
        // Deallocating ignores key and state.
        assert_eq!(t.dealloc_stag(&mut pds, w.with_key(0xee)), Ok(()));
        assert_eq!(
            t.query_mr(m).unwrap().mws_bound,
            0,
            "the window was unbound"
        );
        assert_eq!(t.dealloc_stag(&mut pds, m.with_key(0xee)), Ok(()));
        assert_eq!(t.dealloc_stag(&mut pds, m), Err(VerbError::InvalidStag));
        assert_eq!(pds.users(pd), Some(0));
    }

    #[test]
    fn query_mr_refuses_windows_and_zero() {
        let (mut pds, mut t, pd) = setup(8);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(t.query_mr(w), Err(VerbError::InvalidStag));
        assert_eq!(t.query_mr(Stag::ZERO), Err(VerbError::InvalidStag));
    }
}
