//! Memory window verbs (verbs 7.10): Allocate MW, Query MW, Bind.
//!
//! A "type 2" window is the verbs-spec window: bound by a Bind WR on the SQ, then valid
//! only on that QP (its QP ID is recorded), invalidated by Invalidate Local STag, RDMA
//! Read with Invalidate or an incoming Send with Invalidate. A "type 1" window is bound
//! by a verb, is valid on every QP of its PD, may be re-bound in place (a zero-length
//! bind unbinds it) and cannot be invalidated (it may be in use on several streams,
//! RFC 5040 section 8.1.1 #7).

use super::rights::{window_access_compatible, window_access_valid};
use super::{Entry, MemTable, Mw, MwBind, MwBinding, MwInfo, MwType, StagState};
use crate::pd::PdTable;
use iwarp_types::{Access, PdId, QpId, Stag, VerbError, WcStatus};

impl MemTable {
    /// Allocate MW of `kind` in `pd`: an Invalid window STag (key 0). Errors:
    /// `InvalidPd`, `InsufficientResources`.
    pub fn alloc_mw(
        &mut self,
        pds: &mut PdTable,
        pd: PdId,
        kind: MwType,
    ) -> Result<Stag, VerbError> {
        self.alloc_mw_in(pds, None, pd, kind)
    }

    /// [`MemTable::alloc_mw`] under a fresh index (key 0) or under STag `at`.
    pub(super) fn alloc_mw_in(
        &mut self,
        pds: &mut PdTable,
        at: Option<Stag>,
        pd: PdId,
        kind: MwType,
    ) -> Result<Stag, VerbError> {
        if !pds.contains(pd) {
            return Err(VerbError::InvalidPd);
        }
        let key = at.map_or(0, Stag::key);
        let index = self.insert_with_pd(
            pds,
            at.map(Stag::index),
            Entry::Mw(Mw {
                pd,
                key,
                kind,
                binding: None,
            }),
        )?;
        Ok(Stag::new(index, key))
    }

    /// Query MW by STag index. `InvalidStag` for regions, STag 0 and unknown indices.
    pub fn query_mw(&self, stag: Stag) -> Result<MwInfo, VerbError> {
        let w = self.mw(stag.index()).ok_or(VerbError::InvalidStag)?;
        let b = w.binding;
        Ok(MwInfo {
            key: b.map(|_| w.key),
            state: if b.is_some() {
                StagState::Valid
            } else {
                StagState::Invalid
            },
            pd: w.pd,
            kind: w.kind,
            access: b.map_or(Access::NONE, |b| b.access),
            qp: b.and_then(|b| b.qp),
            mr: b.map(|b| b.mr),
            base_to: b.map_or(0, |b| b.base_to),
            len: b.map_or(0, |b| b.len),
        })
    }

    /// Bind Memory Window (an SQ WR) on QP `qp` of `pd`, whose Bind attribute is
    /// `qp_bind_enabled`. On success the type-2 window is Valid with the new key and
    /// bound to `qp`. Completion statuses, in check order: `MwBindError` (QP not
    /// bind-enabled, or region zero-based: figure 19), `InvalidWindow` (not a window),
    /// `StagNotInvalid` (already bound), `InvalidPd` (window or region of
    /// another PD), `InvalidRegion` (not a Valid region, key mismatch, STag 0),
    /// `AccessViolation` (region without MW_BIND, or figure 20), `InvalidAccessRights`
    /// (not a non-empty set of remote rights), `WrapError`, `BaseBounds`.
    ///
    /// A type-1 window may be bound by a WR too (rdma-core's `ibv_bind_mw` posts one, so
    /// that the bind completes in order on the send CQ): its binding is replaced as by
    /// [`MemTable::bind_mw_type1`], valid on every QP of `pd`, and the QP's Bind
    /// attribute is not needed (type 1 windows are bound by the verb's caller).
    pub fn bind_mw(
        &mut self,
        qp: QpId,
        pd: PdId,
        qp_bind_enabled: bool,
        b: &MwBind,
    ) -> Result<(), WcStatus> {
        if self
            .mw(b.mw.index())
            .is_some_and(|w| w.kind == MwType::Type1)
        {
            return self.bind(MwType::Type1, None, pd, b);
        }
        if !qp_bind_enabled {
            return Err(WcStatus::MwBindError);
        }
        self.bind(MwType::Type2, Some(qp), pd, b)
    }

    /// Bind a type-1 window by verb: valid afterwards on every QP of `pd` (which must be
    /// the window's and the region's PD). Re-binding a bound type-1 window replaces its
    /// binding; `len == 0` unbinds it. Errors: `InvalidStag` (window or region STag),
    /// `InvalidPd`, `InvalidAccessRights` (rights, figure 20, region without MW_BIND),
    /// `InvalidVa` (zero-based region), `InvalidLength` (bounds or wrap).
    pub fn bind_mw_type1(&mut self, pd: PdId, b: &MwBind) -> Result<(), VerbError> {
        if b.len == 0 {
            let w = self.mw(b.mw.index()).ok_or(VerbError::InvalidStag)?;
            if w.kind != MwType::Type1 {
                return Err(VerbError::InvalidStag);
            }
            if w.pd != pd {
                return Err(VerbError::InvalidPd);
            }
            self.unbind_mw(b.mw.index());
            return Ok(());
        }
        self.bind(MwType::Type1, None, pd, b).map_err(|s| match s {
            WcStatus::InvalidPd => VerbError::InvalidPd,
            WcStatus::AccessViolation | WcStatus::InvalidAccessRights => {
                VerbError::InvalidAccessRights
            }
            WcStatus::MwBindError => VerbError::InvalidVa,
            WcStatus::BaseBounds | WcStatus::WrapError => VerbError::InvalidLength,
            _ => VerbError::InvalidStag,
        })
    }

    fn bind(
        &mut self,
        kind: MwType,
        qp: Option<QpId>,
        pd: PdId,
        b: &MwBind,
    ) -> Result<(), WcStatus> {
        let w = *self.mw(b.mw.index()).ok_or(WcStatus::InvalidWindow)?;
        if w.kind != kind {
            return Err(WcStatus::InvalidWindow);
        }
        if kind == MwType::Type2 && w.binding.is_some() {
            return Err(WcStatus::StagNotInvalid);
        }
        if w.pd != pd {
            return Err(WcStatus::InvalidPd);
        }
        let mr = *self.mr(b.mr.index()).ok_or(WcStatus::InvalidRegion)?;
        if !mr.valid || mr.key != b.mr.key() {
            return Err(WcStatus::InvalidRegion);
        }
        if mr.pd != pd {
            return Err(WcStatus::InvalidPd);
        }
        if !mr.access.contains(Access::MW_BIND) {
            return Err(WcStatus::AccessViolation);
        }
        if mr.zero_based {
            return Err(WcStatus::MwBindError);
        }
        if !window_access_valid(b.access) {
            return Err(WcStatus::InvalidAccessRights);
        }
        if !window_access_compatible(mr.access, b.access) {
            return Err(WcStatus::AccessViolation);
        }
        let end = b.to.checked_add(b.len).ok_or(WcStatus::WrapError)?;
        let mr_end = mr.base_to.saturating_add(mr.len);
        if b.to < mr.base_to || end > mr_end {
            return Err(WcStatus::BaseBounds);
        }
        // In bounds: `b.to - mr.base_to < mr.len`, and the region fits its arena.
        let region_offset = mr.region_offset.saturating_add(b.to - mr.base_to);
        self.unbind_mw(b.mw.index());
        if let Some(m) = self.mr_mut(b.mr.index()) {
            m.mws_bound = m.mws_bound.saturating_add(1);
        }
        if let Some(w) = self.mw_mut(b.mw.index()) {
            w.key = b.mw.key();
            w.binding = Some(MwBinding {
                qp,
                mr: b.mr,
                region: mr.region,
                region_offset,
                base_to: if b.zero_based { 0 } else { b.to },
                len: b.len,
                access: b.access,
            });
        }
        Ok(())
    }

    /// Makes window `index` Invalid and releases its region, if it was bound.
    pub(crate) fn unbind_mw(&mut self, index: u32) {
        let Some(w) = self.mw_mut(index) else { return };
        if let Some(b) = w.binding.take() {
            self.unbind_from_mr(b.mr);
        }
    }

    /// One window fewer is bound to region `mr`.
    pub(crate) fn unbind_from_mr(&mut self, mr: Stag) {
        if let Some(m) = self.mr_mut(mr.index()) {
            m.mws_bound = m.mws_bound.saturating_sub(1);
        }
    }

    /// Number of (type-2) windows bound to `qp`: Destroy QP must fail while non-zero.
    /// Walks the whole table (bounded by `max_entries`; a control-path call) when it
    /// holds any window; O(1) when it holds none (QP churn without windows: destroying a
    /// QP used to walk 65,536 slots).
    pub fn mws_bound_to_qp(&self, qp: QpId) -> usize {
        if self.mw_count() == 0 {
            return 0;
        }
        self.entries()
            .filter(|e| matches!(e, Entry::Mw(w) if w.binding.is_some_and(|b| b.qp == Some(qp))))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{MrAttr, SharedMrAttr};
    use super::*;

    /// A VA-based region [0x1000, 0x1100) at arena offset 64, LR|LW|MW_BIND.
    fn region(pds: &mut PdTable, t: &mut MemTable, pd: PdId) -> Stag {
        let a = MrAttr {
            va: 0x1000,
            key: 0x11,
            ..attr(pd, 64, 0x100)
        };
        t.reg_mr(pds, &a, Some(4096)).unwrap()
    }

    #[test]
    fn the_table_counts_its_windows_so_qp_checks_skip_the_walk_without_any() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd);
        assert_eq!(t.mw_count(), 0, "a region is no window");
        assert_eq!(t.mws_bound_to_qp(QpId(1)), 0);
        let w1 = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let w2 = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        assert_eq!(t.mw_count(), 2);
        t.dealloc_stag(&mut pds, w1).unwrap();
        assert_eq!(t.mw_count(), 1);
        t.dealloc_stag(&mut pds, w2).unwrap();
        t.dealloc_stag(&mut pds, m).unwrap();
        assert_eq!(t.mw_count(), 0);
    }

    #[test]
    fn alloc_and_query() {
        let (mut pds, mut t, pd) = setup(8);
        assert_eq!(
            t.alloc_mw(&mut pds, PdId(99), MwType::Type2),
            Err(VerbError::InvalidPd)
        );
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let q = t.query_mw(w).unwrap();
        assert_eq!(
            (q.state, q.key, q.pd, q.kind),
            (StagState::Invalid, None, pd, MwType::Type2)
        );
        assert_eq!(pds.users(pd), Some(1));
        let m = region(&mut pds, &mut t, pd);
        assert_eq!(t.query_mw(m), Err(VerbError::InvalidStag), "a region");
        assert_eq!(t.query_mw(Stag::ZERO), Err(VerbError::InvalidStag));
    }

    #[test]
    fn bind_success_records_qp_key_and_placement() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let b = MwBind {
            zero_based: true,
            ..bind(w.with_key(0x99), m, 0x1010, 0x20, RR | RW)
        };
        assert_eq!(t.bind_mw(QP, pd, true, &b), Ok(()));
        let q = t.query_mw(w).unwrap();
        assert_eq!(
            (q.state, q.key, q.qp, q.mr),
            (StagState::Valid, Some(0x99), Some(QP), Some(m))
        );
        assert_eq!((q.access, q.base_to, q.len), (RR | RW, 0, 0x20));
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 1);
        assert_eq!(t.mws_bound_to_qp(QP), 1);
        assert_eq!(t.mws_bound_to_qp(QpId(77)), 0);
        let p = t.resolve_remote(QP, pd, w.with_key(0x99), 4, 8, super::super::RemoteOp::Read);
        assert_eq!(p.unwrap().offset, 64 + 0x10 + 4);
        assert_eq!(
            t.bind_mw(QP, pd, true, &b),
            Err(WcStatus::StagNotInvalid),
            "already bound"
        );
    }

    #[test]
    fn bind_errors() {
        let (mut pds, mut t, pd) = setup(16);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let w1 = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        let w_pd2 = t.alloc_mw(&mut pds, pd2, MwType::Type2).unwrap();
        let m_pd2 = region(&mut pds, &mut t, pd2);
        let nobind = t
            .reg_mr(
                &mut pds,
                &MrAttr {
                    access: LR | LW,
                    ..attr(pd, 0, 64)
                },
                Some(4096),
            )
            .unwrap();
        let zb = t
            .reg_mr(
                &mut pds,
                &MrAttr {
                    zero_based: true,
                    ..attr(pd, 0, 64)
                },
                Some(4096),
            )
            .unwrap();
        let ro = t
            .reg_mr(
                &mut pds,
                &MrAttr {
                    access: LR | BIND,
                    va: 0x1000,
                    ..attr(pd, 0, 64)
                },
                Some(4096),
            )
            .unwrap();
        let inv = t.alloc_mr_stag(&mut pds, pd, 64, true).unwrap();
        let ok = bind(w, m, 0x1000, 0x10, RW);
        let cases = [
            (false, ok, WcStatus::MwBindError),
            (
                true,
                MwBind {
                    mw: Stag(0x100),
                    ..ok
                },
                WcStatus::InvalidWindow,
            ),
            (true, MwBind { mw: m, ..ok }, WcStatus::InvalidWindow),
            (true, MwBind { mw: w_pd2, ..ok }, WcStatus::InvalidPd),
            (
                true,
                MwBind {
                    mr: Stag::ZERO,
                    ..ok
                },
                WcStatus::InvalidRegion,
            ),
            (true, MwBind { mr: w1, ..ok }, WcStatus::InvalidRegion),
            (
                true,
                MwBind {
                    mr: m.with_key(0x12),
                    ..ok
                },
                WcStatus::InvalidRegion,
            ),
            (true, MwBind { mr: inv, ..ok }, WcStatus::InvalidRegion),
            (true, MwBind { mr: m_pd2, ..ok }, WcStatus::InvalidPd),
            (
                true,
                MwBind {
                    mr: nobind,
                    to: 0,
                    ..ok
                },
                WcStatus::AccessViolation,
            ),
            (
                true,
                MwBind {
                    mr: zb,
                    to: 0,
                    ..ok
                },
                WcStatus::MwBindError,
            ),
            (
                true,
                MwBind {
                    access: Access::NONE,
                    ..ok
                },
                WcStatus::InvalidAccessRights,
            ),
            (
                true,
                MwBind {
                    access: RW | LR,
                    ..ok
                },
                WcStatus::InvalidAccessRights,
            ),
            (
                true,
                MwBind {
                    mr: ro,
                    access: RW,
                    ..ok
                },
                WcStatus::AccessViolation,
            ),
            (
                true,
                MwBind {
                    mr: ro,
                    access: RR | RW,
                    ..ok
                },
                WcStatus::AccessViolation,
            ),
            (
                true,
                MwBind {
                    to: u64::MAX - 4,
                    len: 8,
                    ..ok
                },
                WcStatus::WrapError,
            ),
            (true, MwBind { to: 0xfff, ..ok }, WcStatus::BaseBounds),
            (true, MwBind { to: 0x10f1, ..ok }, WcStatus::BaseBounds),
        ];
        for (enabled, b, e) in cases {
            assert_eq!(t.bind_mw(QP, pd, enabled, &b), Err(e), "{b:?}");
        }
        assert_eq!(
            t.bind_mw(QP, pd2, true, &ok),
            Err(WcStatus::InvalidPd),
            "QP of another PD"
        );
        assert_eq!(
            t.query_mw(w).unwrap().state,
            StagState::Invalid,
            "unchanged"
        );
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 0);
        // Exactly the region's last byte, and a read-only window on a read-only region.
        assert_eq!(
            t.bind_mw(QP, pd, true, &MwBind { to: 0x10f0, ..ok }),
            Ok(())
        );
        let w2 = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(
            t.bind_mw(QP, pd, true, &bind(w2, ro, 0x1000, 64, RR)),
            Ok(())
        );
    }

    #[test]
    fn windows_hold_their_pd_bound_or_invalidated() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        t.bind_mw(QP, pd, true, &bind(w, m, 0x1000, 8, RW)).unwrap();
        t.invalidate_local(QP, pd, w).unwrap();
        t.dealloc_stag(&mut pds, m).unwrap();
        assert_eq!(
            pds.dealloc(pd),
            Err(VerbError::PdInUse),
            "invalidated window"
        );
        t.dealloc_stag(&mut pds, w).unwrap();
        assert_eq!(pds.dealloc(pd), Ok(()));
    }

    #[test]
    fn many_windows_on_one_region_and_one_qp() {
        let (mut pds, mut t, pd) = setup(16);
        let m = region(&mut pds, &mut t, pd);
        for _ in 0..5 {
            let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
            t.bind_mw(QP, pd, true, &bind(w, m, 0x1000, 0x100, RW))
                .unwrap();
        }
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 5);
        assert_eq!(t.mws_bound_to_qp(QP), 5);
    }

    #[test]
    fn bind_to_a_shared_region() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd);
        let sa = SharedMrAttr {
            va: 0x8000,
            zero_based: false,
            access: LR | LW | BIND,
            ..shared_attr(pd)
        };
        let sh = t.reg_shared_mr(&mut pds, m, &sa).unwrap();
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(
            t.bind_mw(QP, pd, true, &bind(w, sh, 0x8000, 16, RR)),
            Ok(())
        );
    }

    #[test]
    fn type1_bind_rebind_unbind() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        let b = bind(w.with_key(5), m, 0x1000, 0x10, RW);
        assert_eq!(t.bind_mw_type1(pd, &b), Ok(()));
        let q = t.query_mw(w).unwrap();
        assert_eq!(
            (q.state, q.kind, q.qp, q.key),
            (StagState::Valid, MwType::Type1, None, Some(5))
        );
        assert_eq!(t.mws_bound_to_qp(QP), 0, "type 1 is not bound to a QP");
        // Re-bind replaces the binding without leaking the region count.
        let b2 = bind(w.with_key(6), m, 0x1020, 0x10, RR);
        assert_eq!(t.bind_mw_type1(pd, &b2), Ok(()));
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 1);
        assert_eq!(t.query_mw(w).unwrap().key, Some(6));
        // Unbind with a zero length.
        assert_eq!(t.bind_mw_type1(pd, &MwBind { len: 0, ..b2 }), Ok(()));
        assert_eq!(t.query_mw(w).unwrap().state, StagState::Invalid);
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 0);
    }

    #[test]
    fn type1_errors() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        let w2 = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let zb = t
            .reg_mr(
                &mut pds,
                &MrAttr {
                    zero_based: true,
                    ..attr(pd, 0, 64)
                },
                Some(4096),
            )
            .unwrap();
        let ok = bind(w, m, 0x1000, 0x10, RW);
        let cases = [
            (pd, MwBind { mw: w2, ..ok }, VerbError::InvalidStag),
            (
                pd,
                MwBind {
                    mw: w2,
                    len: 0,
                    ..ok
                },
                VerbError::InvalidStag,
            ),
            (pd2, ok, VerbError::InvalidPd),
            (pd2, MwBind { len: 0, ..ok }, VerbError::InvalidPd),
            (
                pd,
                MwBind {
                    mr: Stag(0x100),
                    ..ok
                },
                VerbError::InvalidStag,
            ),
            (
                pd,
                MwBind { access: LR, ..ok },
                VerbError::InvalidAccessRights,
            ),
            (
                pd,
                MwBind {
                    mr: zb,
                    to: 0,
                    ..ok
                },
                VerbError::InvalidVa,
            ),
            (pd, MwBind { to: 0x2000, ..ok }, VerbError::InvalidLength),
            (pd, MwBind { to: u64::MAX, ..ok }, VerbError::InvalidLength),
        ];
        for (p, b, e) in cases {
            assert_eq!(t.bind_mw_type1(p, &b), Err(e), "{b:?}");
        }
        // By a WR (rdma-core's ibv_bind_mw posts one): as by the verb, on any QP, the QP's
        // Bind attribute not needed; its errors are completion statuses.
        assert_eq!(
            t.bind_mw(QP, pd2, false, &ok),
            Err(WcStatus::InvalidPd),
            "by WR, another PD"
        );
        assert_eq!(t.bind_mw(QP, pd, false, &ok), Ok(()), "by WR");
        assert_eq!(t.query_mw(w).unwrap().state, StagState::Valid);
        assert_eq!(
            t.query_mw(w).unwrap().qp,
            None,
            "valid on every QP of the PD"
        );
        assert_eq!(t.bind_mw(QP, pd, false, &ok), Ok(()), "bound again");
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 1);
    }
}
