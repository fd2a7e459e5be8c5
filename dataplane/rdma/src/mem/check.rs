//! Data-path checks: local SGEs (verbs 7.4.1, 7.6.3, 8.1.3.2) and inbound tagged accesses
//! (verbs 7.6.3, 7.10.6.2; RFC 5040 section 7.2; inventory 5.7), each answering with the
//! arena [`Placement`] of the first byte or the precise reason for refusal.
//!
//! Check order, as in siw and inventory 5.7: STag (exists, Valid, key), association
//! (PD, or the QP for a type-2 window), rights, wrap, bounds. Wrap is tested before
//! bounds because a wrapping range is also out of bounds and would otherwise never be
//! reported as such. Zero-length accesses are not checked at all.

use super::{Entry, MemTable, Placement, RemoteAccessError, RemoteOp};
use iwarp_types::{Access, PdId, QpId, RegionId, SgList, Sge, Stag, TermCode, WcStatus};

/// Why a range does not fit an extent.
enum Reject {
    Wrap,
    Bounds,
}

/// Places `[to, to + len)` inside the extent `[base_to, base_to + extent_len)` mapped at
/// `region_offset` of `region`.
fn place(
    base_to: u64,
    extent_len: u64,
    region: RegionId,
    region_offset: u64,
    to: u64,
    len: u64,
) -> Result<Placement, Reject> {
    let end = to.checked_add(len).ok_or(Reject::Wrap)?;
    let extent_end = base_to.checked_add(extent_len).ok_or(Reject::Bounds)?;
    if to < base_to || end > extent_end {
        return Err(Reject::Bounds);
    }
    let offset = region_offset
        .checked_add(to - base_to)
        .ok_or(Reject::Bounds)?;
    Ok(Placement { region, offset })
}

impl MemTable {
    /// Validates a local SGE of a WR on a QP of `pd` (for receives from an SRQ: the SRQ's
    /// PD) needing the local rights `need` (`LOCAL_READ` for Send/Write sources,
    /// `LOCAL_WRITE` for receive sinks, `NONE` for RDMA Read sinks, whose local rights
    /// are not checked). Only regions are allowed. Completion statuses: `InvalidStag`
    /// (STag 0, unknown, window, Invalid, key), `InvalidPd`, `AccessViolation`,
    /// `WrapError`, `BaseBounds`.
    pub fn resolve_local(&self, pd: PdId, sge: &Sge, need: Access) -> Result<Placement, WcStatus> {
        if sge.length == 0 {
            return Ok(Placement::EMPTY);
        }
        let m = self.mr(sge.lkey.index()).ok_or(WcStatus::InvalidStag)?;
        if !m.valid || m.key != sge.lkey.key() {
            return Err(WcStatus::InvalidStag);
        }
        if m.pd != pd {
            return Err(WcStatus::InvalidPd);
        }
        if !m.access.contains(need) {
            return Err(WcStatus::AccessViolation);
        }
        place(
            m.base_to,
            m.len,
            m.region,
            m.region_offset,
            sge.addr,
            sge.length as u64,
        )
        .map_err(|r| match r {
            Reject::Wrap => WcStatus::WrapError,
            Reject::Bounds => WcStatus::BaseBounds,
        })
    }

    /// [`MemTable::resolve_local`] over every SGE of `sgl`; the first failure wins.
    pub fn check_sgl(&self, pd: PdId, sgl: &SgList, need: Access) -> Result<(), WcStatus> {
        for sge in sgl.as_slice() {
            self.resolve_local(pd, sge, need)?;
        }
        Ok(())
    }

    /// Validates an inbound tagged access of `len` bytes at `to` through `stag`, arriving
    /// on QP `qp` of `pd`. Regions: the PD must match and the region's rights count.
    /// Type-2 windows: the QP must match; type-1 windows: the PD must match; only the
    /// window's rights count, never the region's. The QP's own inbound Read/Write
    /// enables are the caller's to check.
    pub fn resolve_remote(
        &self,
        qp: QpId,
        pd: PdId,
        stag: Stag,
        to: u64,
        len: u64,
        op: RemoteOp,
    ) -> Result<Placement, RemoteAccessError> {
        if len == 0 {
            return Ok(Placement::EMPTY);
        }
        let need = match op {
            RemoteOp::Write => Access::REMOTE_WRITE,
            RemoteOp::Read => Access::REMOTE_READ,
        };
        let entry = self
            .entry(stag.index())
            .ok_or(RemoteAccessError::InvalidStag)?;
        let placed = match entry {
            Entry::Mr(m) => {
                if !m.valid || m.key != stag.key() {
                    return Err(RemoteAccessError::InvalidStag);
                }
                if m.pd != pd {
                    return Err(RemoteAccessError::NotAssociated);
                }
                if !m.access.contains(need) {
                    return Err(RemoteAccessError::AccessRights);
                }
                place(m.base_to, m.len, m.region, m.region_offset, to, len)
            }
            Entry::Mw(w) => {
                let b = w.binding.ok_or(RemoteAccessError::InvalidStag)?;
                if w.key != stag.key() {
                    return Err(RemoteAccessError::InvalidStag);
                }
                let associated = match b.qp {
                    Some(bound) => bound == qp,
                    None => w.pd == pd,
                };
                if !associated {
                    return Err(RemoteAccessError::NotAssociated);
                }
                if !b.access.contains(need) {
                    return Err(RemoteAccessError::AccessRights);
                }
                place(b.base_to, b.len, b.region, b.region_offset, to, len)
            }
        };
        placed.map_err(|r| match r {
            Reject::Wrap => RemoteAccessError::Wrap,
            Reject::Bounds => RemoteAccessError::BaseBounds,
        })
    }
}

/// The Terminate code for a refused RDMA Write or Read Response sink (DDP tagged buffer
/// errors, RFC 5041 section 7.2: 0x1100 / 0x1101 / 0x1102 / 0x1103). DDP has no code for
/// missing rights: verbs figure 24 (#18 "Tagged Access Rights violation") gives 0x1102,
/// and a tagged segment's error belongs to the DDP layer (RFC 5040 figure 10 keeps the
/// RDMAP Remote Protection codes such as 0x0102 for Read Requests and Send with
/// Invalidate), so 0x1102 it is. (siw sends 0x1100.)
pub fn term_code_tagged_sink(e: RemoteAccessError) -> TermCode {
    match e {
        RemoteAccessError::InvalidStag => TermCode::DDP_TAGGED_INVALID_STAG,
        RemoteAccessError::BaseBounds => TermCode::DDP_TAGGED_BASE_BOUNDS,
        RemoteAccessError::NotAssociated => TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
        RemoteAccessError::Wrap => TermCode::DDP_TAGGED_TO_WRAP,
        RemoteAccessError::AccessRights => TermCode::DDP_TAGGED_STAG_NOT_ASSOCIATED,
    }
}

/// The Terminate code for a refused RDMA Read Request source (RDMAP Remote Protection
/// errors, RFC 5040 figure 9, verbs figure 24: 0x0100 to 0x0104).
pub fn term_code_read_source(e: RemoteAccessError) -> TermCode {
    match e {
        RemoteAccessError::InvalidStag => TermCode::RDMAP_INVALID_STAG,
        RemoteAccessError::BaseBounds => TermCode::RDMAP_BASE_BOUNDS,
        RemoteAccessError::AccessRights => TermCode::RDMAP_ACCESS_RIGHTS,
        RemoteAccessError::NotAssociated => TermCode::RDMAP_STAG_NOT_ASSOCIATED,
        RemoteAccessError::Wrap => TermCode::RDMAP_TO_WRAP,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{MrAttr, MwBind, MwType};
    use super::*;
    use crate::pd::PdTable;
    use RemoteAccessError as E;

    fn sge(lkey: Stag, addr: u64, length: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    /// Region [0x1000, 0x1100) at arena offset 64 of region 3, key 0x11.
    fn region(pds: &mut PdTable, t: &mut MemTable, pd: PdId, access: Access) -> Stag {
        let a = MrAttr {
            va: 0x1000,
            key: 0x11,
            access,
            region: RegionId(3),
            ..attr(pd, 64, 0x100)
        };
        t.reg_mr(pds, &a, Some(4096)).unwrap()
    }

    #[test]
    fn local_success_gives_the_arena_offset() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd, LR | LW);
        let p = t.resolve_local(pd, &sge(m, 0x1010, 16), LR).unwrap();
        assert_eq!(
            p,
            Placement {
                region: RegionId(3),
                offset: 64 + 0x10
            }
        );
        // The very last byte, and the whole region.
        assert!(t.resolve_local(pd, &sge(m, 0x10ff, 1), LW).is_ok());
        assert!(t.resolve_local(pd, &sge(m, 0x1000, 0x100), LW).is_ok());
        assert!(t
            .resolve_local(pd, &sge(m, 0x1000, 0x100), Access::NONE)
            .is_ok());
    }

    #[test]
    fn local_errors_in_order() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd, LR);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let inv = t.alloc_mr_stag(&mut pds, pd, 64, false).unwrap();
        let cases = [
            (pd, sge(Stag::ZERO, 0, 4), LR, WcStatus::InvalidStag),
            (pd, sge(Stag(0x00ab_cd00), 0, 4), LR, WcStatus::InvalidStag),
            (pd, sge(w, 0, 4), LR, WcStatus::InvalidStag),
            (pd, sge(inv, 0, 4), LR, WcStatus::InvalidStag),
            (
                pd,
                sge(m.with_key(0x12), 0x1000, 4),
                LR,
                WcStatus::InvalidStag,
            ),
            (pd2, sge(m, 0x1000, 4), LR, WcStatus::InvalidPd),
            (pd, sge(m, 0x1000, 4), LW, WcStatus::AccessViolation),
            (pd, sge(m, u64::MAX - 1, 4), LR, WcStatus::WrapError),
            (pd, sge(m, 0xfff, 4), LR, WcStatus::BaseBounds),
            (pd, sge(m, 0x10fd, 4), LR, WcStatus::BaseBounds),
            // PD before rights before bounds.
            (pd2, sge(m, 0, 4), LW, WcStatus::InvalidPd),
            (pd, sge(m, 0, 4), LW, WcStatus::AccessViolation),
        ];
        for (p, s, need, e) in cases {
            assert_eq!(t.resolve_local(p, &s, need), Err(e), "{s:?} {need:?}");
        }
    }

    #[test]
    fn zero_length_is_never_checked() {
        let (_pds, t, pd) = setup(8);
        let garbage = sge(Stag(0xdead_beef), u64::MAX, 0);
        assert_eq!(t.resolve_local(pd, &garbage, LW), Ok(Placement::EMPTY));
        let r = t.resolve_remote(QP, pd, Stag(0xdead_beef), u64::MAX, 0, RemoteOp::Read);
        assert_eq!(r, Ok(Placement::EMPTY));
    }

    #[test]
    fn sgl_first_failure_wins() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd, LR | LW);
        let good = sge(m, 0x1000, 8);
        let l = SgList::from_slice(&[good, sge(m, 0x2000, 8), sge(Stag::ZERO, 0, 8)]).unwrap();
        assert_eq!(t.check_sgl(pd, &l, LR), Err(WcStatus::BaseBounds));
        assert_eq!(
            t.check_sgl(pd, &SgList::from_slice(&[good, good]).unwrap(), LW),
            Ok(())
        );
        assert_eq!(t.check_sgl(pd, &SgList::new(), LW), Ok(()));
    }

    #[test]
    fn remote_region_checks() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd, LR | LW | RW);
        let ok = t
            .resolve_remote(QP, pd, m, 0x1080, 0x80, RemoteOp::Write)
            .unwrap();
        assert_eq!(
            ok,
            Placement {
                region: RegionId(3),
                offset: 64 + 0x80
            }
        );
        assert_eq!(
            t.resolve_remote(QpId(9), pd, m, 0x1080, 1, RemoteOp::Write)
                .map(|p| p.offset),
            Ok(64 + 0x80),
            "any QP of the PD"
        );
        let inv = t.alloc_mr_stag(&mut pds, pd, 64, true).unwrap();
        let cases = [
            (pd, Stag::ZERO, 0x1000, 4, RemoteOp::Write, E::InvalidStag),
            (
                pd,
                Stag(0x0012_3400),
                0x1000,
                4,
                RemoteOp::Write,
                E::InvalidStag,
            ),
            (pd, inv, 0, 4, RemoteOp::Write, E::InvalidStag),
            (
                pd,
                m.with_key(0),
                0x1000,
                4,
                RemoteOp::Write,
                E::InvalidStag,
            ),
            (pd2, m, 0x1000, 4, RemoteOp::Write, E::NotAssociated),
            (pd, m, 0x1000, 4, RemoteOp::Read, E::AccessRights),
            (pd, m, u64::MAX, 2, RemoteOp::Write, E::Wrap),
            (pd, m, 0x0fff, 2, RemoteOp::Write, E::BaseBounds),
            (pd, m, 0x10ff, 2, RemoteOp::Write, E::BaseBounds),
            (pd, m, 0x1000, 0x101, RemoteOp::Write, E::BaseBounds),
            // Association before rights before bounds.
            (pd2, m, 0, 4, RemoteOp::Read, E::NotAssociated),
            (pd, m, 0, 4, RemoteOp::Read, E::AccessRights),
        ];
        for (p, s, to, len, op, e) in cases {
            assert_eq!(
                t.resolve_remote(QP, p, s, to, len, op),
                Err(e),
                "{s:?} {to:#x} {len}"
            );
        }
    }

    #[test]
    fn local_only_region_is_not_remotely_accessible() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd, LR | LW);
        for op in [RemoteOp::Read, RemoteOp::Write] {
            assert_eq!(
                t.resolve_remote(QP, pd, m, 0x1000, 1, op),
                Err(E::AccessRights)
            );
        }
    }

    #[test]
    fn remote_window_checks() {
        let (mut pds, mut t, pd) = setup(16);
        let pd2 = pds.alloc().unwrap();
        // The region itself has no remote right: only the window's rights count.
        let m = region(&mut pds, &mut t, pd, LR | LW | BIND);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        let wk = w.with_key(0x33);
        let b = MwBind {
            mw: wk,
            mr: m,
            to: 0x1040,
            len: 0x40,
            access: RW,
            zero_based: true,
        };
        t.bind_mw(QP, pd, true, &b).unwrap();
        let p = t
            .resolve_remote(QP, pd, wk, 0x10, 0x30, RemoteOp::Write)
            .unwrap();
        assert_eq!(
            p,
            Placement {
                region: RegionId(3),
                offset: 64 + 0x40 + 0x10
            }
        );
        let cases = [
            (QP, pd, w.with_key(0), 0, 4, RemoteOp::Write, E::InvalidStag),
            (QpId(2), pd, wk, 0, 4, RemoteOp::Write, E::NotAssociated),
            (QpId(2), pd2, wk, 0, 4, RemoteOp::Write, E::NotAssociated),
            (QP, pd, wk, 0, 4, RemoteOp::Read, E::AccessRights),
            (QP, pd, wk, u64::MAX - 2, 4, RemoteOp::Write, E::Wrap),
            (QP, pd, wk, 0x3d, 4, RemoteOp::Write, E::BaseBounds),
            (QP, pd, wk, 0x40, 1, RemoteOp::Write, E::BaseBounds),
        ];
        for (qp, p, s, to, len, op, e) in cases {
            assert_eq!(
                t.resolve_remote(qp, p, s, to, len, op),
                Err(e),
                "{qp:?} {to:#x}"
            );
        }
        // The region's STag still refuses remote access.
        assert_eq!(
            t.resolve_remote(QP, pd, m, 0x1040, 4, RemoteOp::Write),
            Err(E::AccessRights)
        );
        // An unbound window is an invalid STag.
        let w2 = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(
            t.resolve_remote(QP, pd, w2, 0, 4, RemoteOp::Write),
            Err(E::InvalidStag)
        );
    }

    #[test]
    fn type1_window_is_checked_by_pd() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let m = region(&mut pds, &mut t, pd, LR | LW | BIND);
        let w = t.alloc_mw(&mut pds, pd, MwType::Type1).unwrap();
        let b = MwBind {
            mw: w,
            mr: m,
            to: 0x1000,
            len: 0x10,
            access: RR,
            zero_based: false,
        };
        t.bind_mw_type1(pd, &b).unwrap();
        for qp in [QpId(1), QpId(2), QpId(3)] {
            assert!(t
                .resolve_remote(qp, pd, w, 0x1000, 0x10, RemoteOp::Read)
                .is_ok());
        }
        assert_eq!(
            t.resolve_remote(QP, pd2, w, 0x1000, 4, RemoteOp::Read),
            Err(E::NotAssociated)
        );
    }

    #[test]
    fn deallocated_stag_stops_access_at_once() {
        let (mut pds, mut t, pd) = setup(8);
        let m = region(&mut pds, &mut t, pd, LR | LW | RW);
        assert!(t
            .resolve_remote(QP, pd, m, 0x1000, 4, RemoteOp::Write)
            .is_ok());
        t.dealloc_stag(&mut pds, m).unwrap();
        assert_eq!(
            t.resolve_remote(QP, pd, m, 0x1000, 4, RemoteOp::Write),
            Err(E::InvalidStag)
        );
        assert_eq!(
            t.resolve_local(pd, &sge(m, 0x1000, 4), LR),
            Err(WcStatus::InvalidStag)
        );
    }

    #[test]
    fn term_codes() {
        let sink = [
            (E::InvalidStag, 0x1100),
            (E::BaseBounds, 0x1101),
            (E::NotAssociated, 0x1102),
            (E::Wrap, 0x1103),
            (E::AccessRights, 0x1102),
        ];
        for (e, code) in sink {
            assert_eq!(term_code_tagged_sink(e).as_u16(), code, "{e:?}");
        }
        let source = [
            (E::InvalidStag, 0x0100),
            (E::BaseBounds, 0x0101),
            (E::AccessRights, 0x0102),
            (E::NotAssociated, 0x0103),
            (E::Wrap, 0x0104),
        ];
        for (e, code) in source {
            assert_eq!(term_code_read_source(e).as_u16(), code, "{e:?}");
        }
    }
}
