//! Invalidation (verbs 7.8, 7.10.4, 7.10.6.3; RFC 5040 section 5.3): Invalidate Local
//! STag and RDMA Read with Invalidate (local), Send with Invalidate (remote).
//!
//! Rules shared by both: STag 0, unknown indices, shared regions and type-1 windows
//! cannot be invalidated; the key must match a Valid STag (an Invalid one may be
//! invalidated again, only its index counts); a region needs the QP's PD and no bound
//! window; a bound (type-2) window needs the QP it is bound to, an unbound one the PD.
//! On success the STag is Invalid, a window is unbound from its region and stays in the
//! invalidating QP's PD (which is necessarily its own), a region keeps its PD, Remote
//! Access Flag and maximum length.

use super::{Entry, MemTable, MwType};
use iwarp_types::{PdId, QpId, Stag, TermCode, WcStatus};

/// Why an invalidation was refused, before being told in local or remote terms.
/// Who invalidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// A local WR (Invalidate Local STag, Read with Invalidate).
    Local,
    /// The peer, on a stream alone in its PD.
    Remote,
    /// The peer, on a stream whose PD holds other streams.
    SharedStream,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// Unknown, STag 0, or key mismatch.
    Invalid,
    /// Shared region, type-1 window, or region with bound windows.
    CannotInvalidate,
    /// Region of another PD, window bound to another QP or in another PD.
    NotAssociated,
    /// Remote invalidation of an STag without remote rights.
    AccessRights,
}

impl MemTable {
    /// Invalidate Local STag, or the sink of an RDMA Read with Invalidate, on QP `qp` of
    /// `pd`. Completion statuses: `InvalidStag` (STag 0, unknown, key, shared region,
    /// type-1 window, region with bound windows), `InvalidPd` (region of another PD,
    /// window bound to another QP).
    pub fn invalidate_local(&mut self, qp: QpId, pd: PdId, stag: Stag) -> Result<(), WcStatus> {
        self.invalidate(qp, pd, stag, Scope::Local)
            .map_err(|r| match r {
                Refusal::NotAssociated => WcStatus::InvalidPd,
                _ => WcStatus::InvalidStag,
            })
    }

    /// Invalidation requested by an incoming Send with Invalidate on QP `qp` of `pd`
    /// (the caller has checked that the QP has a remote right enabled). Refusals carry the
    /// Terminate code of verbs figure 23 (all RDMAP Remote Protection codes of RFC 5040):
    /// 0x0100 invalid STag, 0x0102 no remote right, 0x0103 not associated with this
    /// stream, 0x0109 cannot be invalidated (shared region, type-1 window, region with
    /// bound windows). The receive then completes with `InvalidateStagInvalid`.
    pub fn invalidate_remote(&mut self, qp: QpId, pd: PdId, stag: Stag) -> Result<(), TermCode> {
        self.invalidate_remote_on_stream(qp, pd, stag, false)
    }

    /// [`MemTable::invalidate_remote`] on a stream whose PD holds other streams too
    /// (`multi_stream_pd`): a region is then shared on multiple streams and may not be
    /// remotely invalidated (RFC 5040 8.1.1 #7, 5.3: 0x0109). Windows bound to the QP are
    /// single-stream and unaffected.
    pub fn invalidate_remote_on_stream(
        &mut self,
        qp: QpId,
        pd: PdId,
        stag: Stag,
        multi_stream_pd: bool,
    ) -> Result<(), TermCode> {
        let remote = if multi_stream_pd {
            Scope::SharedStream
        } else {
            Scope::Remote
        };
        self.invalidate(qp, pd, stag, remote).map_err(|r| match r {
            Refusal::Invalid => TermCode::RDMAP_INVALID_STAG,
            Refusal::AccessRights => TermCode::RDMAP_ACCESS_RIGHTS,
            Refusal::NotAssociated => TermCode::RDMAP_STAG_NOT_ASSOCIATED,
            Refusal::CannotInvalidate => TermCode::RDMAP_PROT_CANNOT_INVALIDATE,
        })
    }

    fn invalidate(&mut self, qp: QpId, pd: PdId, stag: Stag, scope: Scope) -> Result<(), Refusal> {
        let remote = scope != Scope::Local;
        let index = stag.index();
        match *self.entry(index).ok_or(Refusal::Invalid)? {
            Entry::Mr(m) => {
                if m.shared {
                    return Err(Refusal::CannotInvalidate);
                }
                if m.valid && m.key != stag.key() {
                    return Err(Refusal::Invalid);
                }
                if m.pd != pd {
                    return Err(Refusal::NotAssociated);
                }
                let has_remote = if m.valid {
                    m.access.has_remote()
                } else {
                    m.remote_access_flag
                };
                if remote && !has_remote {
                    return Err(Refusal::AccessRights);
                }
                if m.mws_bound > 0 || scope == Scope::SharedStream {
                    return Err(Refusal::CannotInvalidate);
                }
                if let Some(m) = self.mr_mut(index) {
                    m.valid = false;
                }
            }
            Entry::Mw(w) => {
                if w.kind == MwType::Type1 {
                    return Err(Refusal::CannotInvalidate);
                }
                match w.binding {
                    Some(b) => {
                        if w.key != stag.key() {
                            return Err(Refusal::Invalid);
                        }
                        if b.qp != Some(qp) {
                            return Err(Refusal::NotAssociated);
                        }
                    }
                    None if w.pd != pd => return Err(Refusal::NotAssociated),
                    None => {}
                }
                self.unbind_mw(index);
                if let Some(w) = self.mw_mut(index) {
                    w.pd = pd;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{MrAttr, MwBind, RemoteAccessError, RemoteOp, StagState};
    use super::*;
    use crate::pd::PdTable;
    use iwarp_types::{Access, VerbError};

    fn region(pds: &mut PdTable, t: &mut MemTable, pd: PdId, access: Access) -> Stag {
        let a = MrAttr {
            access,
            key: 0x21,
            va: 0x1000,
            ..attr(pd, 0, 0x100)
        };
        t.reg_mr(pds, &a, Some(4096)).unwrap()
    }

    fn code(c: Result<(), TermCode>) -> u16 {
        c.unwrap_err().as_u16()
    }

    #[test]
    fn local_invalidate_region() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd, LR | LW | RW);
        assert_eq!(
            t.invalidate_local(QP, pd, m.with_key(0)),
            Err(WcStatus::InvalidStag)
        );
        assert_eq!(t.invalidate_local(QP, pd, m), Ok(()));
        let q = t.query_mr(m).unwrap();
        assert_eq!(
            (q.state, q.pd, q.remote_access_flag, q.max_len),
            (StagState::Invalid, pd, true, 0x100)
        );
        assert_eq!(
            t.resolve_remote(QP, pd, m, 0x1000, 4, RemoteOp::Write),
            Err(RemoteAccessError::InvalidStag),
            "no access through an Invalid STag"
        );
        assert_eq!(
            t.invalidate_local(QP, pd, m.with_key(0x99)),
            Ok(()),
            "again, any key"
        );
        assert_eq!(pds.dealloc(pd), Err(VerbError::PdInUse), "keeps its PD");
    }

    #[test]
    fn local_invalidate_errors() {
        let (mut pds, mut t, pd) = setup(16);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd, LR | LW | BIND);
        let sh = t.reg_shared_mr(&mut pds, m, &shared_attr(pd)).unwrap();
        let b = region(&mut pds, &mut t, pd, LR | LW | BIND);
        let w = t
            .alloc_mw(&mut pds, pd, super::super::MwType::Type2)
            .unwrap();
        t.bind_mw(QP, pd, true, &bind(w, b, 0x1000, 8, RW)).unwrap();
        let w1 = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        let other = region(&mut pds, &mut t, pd2, LR);
        let cases = [
            (QP, pd, Stag::ZERO, WcStatus::InvalidStag),
            (QP, pd, Stag(0x0011_2200), WcStatus::InvalidStag),
            (QP, pd, m, WcStatus::InvalidStag),
            (QP, pd, sh, WcStatus::InvalidStag),
            (QP, pd, b, WcStatus::InvalidStag),
            (QP, pd, w1, WcStatus::InvalidStag),
            (QP, pd, w.with_key(1), WcStatus::InvalidStag),
            (QpId(2), pd, w, WcStatus::InvalidPd),
            (QP, pd, other, WcStatus::InvalidPd),
        ];
        for (qp, p, s, e) in cases {
            assert_eq!(t.invalidate_local(qp, p, s), Err(e), "{s:?}");
        }
        assert_eq!(t.query_mr(b).unwrap().state, StagState::Valid);
        assert_eq!(t.query_mw(w).unwrap().state, StagState::Valid);
    }

    #[test]
    fn local_invalidate_window_unbinds_and_allows_rebind() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd, LR | LW | BIND);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        t.bind_mw(QP, pd, true, &bind(w.with_key(7), m, 0x1000, 8, RW))
            .unwrap();
        assert_eq!(t.mws_bound_to_qp(QP), 1);
        assert_eq!(t.invalidate_local(QP, pd, w.with_key(7)), Ok(()));
        assert_eq!(t.mws_bound_to_qp(QP), 0);
        assert_eq!(t.query_mr(m).unwrap().mws_bound, 0);
        let q = t.query_mw(w).unwrap();
        assert_eq!((q.state, q.pd, q.qp), (StagState::Invalid, pd, None));
        assert_eq!(
            t.resolve_remote(QP, pd, w.with_key(7), 0x1000, 1, RemoteOp::Write),
            Err(RemoteAccessError::InvalidStag)
        );
        // An Invalid window: only the PD counts.
        assert_eq!(t.invalidate_local(QpId(5), pd, w), Ok(()));
        assert_eq!(
            t.invalidate_local(QpId(5), pd2, w),
            Err(WcStatus::InvalidPd)
        );
        // It can be bound again, also from another QP, with a new key.
        let b = MwBind {
            mw: w.with_key(8),
            ..bind(w, m, 0x1000, 8, RW)
        };
        assert_eq!(t.bind_mw(QpId(5), pd, true, &b), Ok(()));
        assert_eq!(t.mws_bound_to_qp(QpId(5)), 1);
        // And now the region with the bound window cannot be invalidated.
        assert_eq!(
            t.invalidate_local(QpId(5), pd, m),
            Err(WcStatus::InvalidStag)
        );
    }

    #[test]
    fn remote_invalidate_codes() {
        let (mut pds, mut t, pd) = setup(16);
        let pd2 = pds.alloc().unwrap();
        let local_only = region(&mut pds, &mut t, pd, LR | LW);
        let m = region(&mut pds, &mut t, pd, LR | LW | RW | BIND);
        let sh_src = region(&mut pds, &mut t, pd, LR | LW | RR);
        let sh = t.reg_shared_mr(&mut pds, sh_src, &shared_attr(pd)).unwrap();
        let other = region(&mut pds, &mut t, pd2, LR | RR);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        t.bind_mw(QP, pd, true, &bind(w, m, 0x1000, 8, RW)).unwrap();
        let w1 = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        t.bind_mw_type1(pd, &bind(w1, m, 0x1000, 8, RW)).unwrap();
        assert_eq!(code(t.invalidate_remote(QP, pd, Stag::ZERO)), 0x0100);
        assert_eq!(code(t.invalidate_remote(QP, pd, Stag(0x0fed_cb00))), 0x0100);
        assert_eq!(code(t.invalidate_remote(QP, pd, m.with_key(0))), 0x0100);
        assert_eq!(code(t.invalidate_remote(QP, pd, w.with_key(9))), 0x0100);
        assert_eq!(code(t.invalidate_remote(QP, pd, local_only)), 0x0102);
        assert_eq!(code(t.invalidate_remote(QP, pd, other)), 0x0103);
        assert_eq!(code(t.invalidate_remote(QpId(2), pd, w)), 0x0103);
        assert_eq!(code(t.invalidate_remote(QP, pd, sh)), 0x0109);
        assert_eq!(
            code(t.invalidate_remote(QP, pd, m)),
            0x0109,
            "region with bound windows"
        );
        assert_eq!(code(t.invalidate_remote(QpId(2), pd, w1)), 0x0109, "type 1");
        assert_eq!(
            t.query_mr(local_only).unwrap().state,
            StagState::Valid,
            "unchanged"
        );
        // Window first, then the region becomes invalidatable once no window is bound.
        assert_eq!(t.invalidate_remote(QP, pd, w), Ok(()));
        t.bind_mw_type1(
            pd,
            &MwBind {
                len: 0,
                ..bind(w1, m, 0, 0, RW)
            },
        )
        .unwrap();
        assert_eq!(t.invalidate_remote(QP, pd, m), Ok(()));
        assert_eq!(t.query_mr(m).unwrap().state, StagState::Invalid);
        // Invalid region with the Remote Access Flag: may be invalidated again.
        assert_eq!(t.invalidate_remote(QP, pd, m.with_key(0x55)), Ok(()));
    }

    #[test]
    fn remote_invalidate_fast_registered_region() {
        let (mut pds, mut t, pd) = setup(8);
        let s = t.alloc_mr_stag(&mut pds, pd, 64, true).unwrap();
        let f = fr(s.with_key(3), 0, 64, LR | LW | RW);
        t.fast_reg(pd, true, &f, Some(64)).unwrap();
        assert_eq!(t.invalidate_remote(QP, pd, s.with_key(3)), Ok(()));
        assert_eq!(t.query_mr(s).unwrap().state, StagState::Invalid);
        // Re-registration after remote invalidation.
        assert_eq!(
            t.fast_reg(pd, true, &fr(s.with_key(4), 0, 32, LR | RR), Some(64)),
            Ok(())
        );
        // An Invalid region without the Remote Access Flag has no remote right.
        let n = t.alloc_mr_stag(&mut pds, pd, 64, false).unwrap();
        assert_eq!(code(t.invalidate_remote(QP, pd, n)), 0x0102);
    }
}
