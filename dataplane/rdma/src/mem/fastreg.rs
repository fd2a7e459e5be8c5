//! Fast-Register Non-Shared MR (verbs 7.3.2.5), an SQ work request: an Invalid region
//! STag becomes a Valid region in one step on the data path.

use super::mr::check_extent;
use super::rights::region_access_valid;
use super::{FastRegAttr, MemTable};
use iwarp_types::{PdId, WcStatus};

impl MemTable {
    /// Fast-Register (an SQ WR) on a QP of `pd`; `privileged` is the QP's
    /// STag0/Fast-Register attribute and `region_len` the arena length. The STag must
    /// be a non-shared region STag in the Invalid state (from Allocate NS MR STag, or a
    /// registration since invalidated). Completion statuses: `QpNotPrivileged`,
    /// `InvalidStag`, `StagNotInvalid`, `InvalidPd`, `InvalidAccessRights`,
    /// `InvalidLength` (zero, above the allocated size, or outside the arena),
    /// `WrapError` (VA + length overflows).
    pub fn fast_reg(
        &mut self,
        pd: PdId,
        privileged: bool,
        f: &FastRegAttr,
        region_len: Option<u64>,
    ) -> Result<(), WcStatus> {
        if !privileged {
            return Err(WcStatus::QpNotPrivileged);
        }
        let index = f.stag.index();
        let mr = self.mr(index).ok_or(WcStatus::InvalidStag)?;
        if mr.shared {
            return Err(WcStatus::InvalidStag);
        }
        if mr.valid {
            return Err(WcStatus::StagNotInvalid);
        }
        if mr.pd != pd {
            return Err(WcStatus::InvalidPd);
        }
        if !region_access_valid(f.access) || (f.access.has_remote() && !mr.remote_access_flag) {
            return Err(WcStatus::InvalidAccessRights);
        }
        if f.len > mr.max_len {
            return Err(WcStatus::InvalidLength);
        }
        check_extent(f.region_offset, f.len, region_len).map_err(|_| WcStatus::InvalidLength)?;
        if !f.zero_based && f.va.checked_add(f.len).is_none() {
            return Err(WcStatus::WrapError);
        }
        if let Some(m) = self.mr_mut(index) {
            m.key = f.stag.key();
            m.valid = true;
            m.access = f.access;
            m.region = f.region;
            m.region_offset = f.region_offset;
            m.len = f.len;
            m.base_to = if f.zero_based { 0 } else { f.va };
            m.zero_based = f.zero_based;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{MwType, StagState};
    use super::*;
    use iwarp_types::{Stag, VerbError};

    #[test]
    fn alloc_mr_stag_then_fast_reg() {
        let (mut pds, mut t, pd) = setup(8);
        assert_eq!(
            t.alloc_mr_stag(&mut pds, PdId(999), 64, true),
            Err(VerbError::InvalidPd)
        );
        assert_eq!(
            t.alloc_mr_stag(&mut pds, pd, 0, true),
            Err(VerbError::InvalidLength)
        );
        let s = t.alloc_mr_stag(&mut pds, pd, 64, true).unwrap();
        let q = t.query_mr(s).unwrap();
        assert_eq!((q.state, q.key, q.max_len), (StagState::Invalid, None, 64));
        let f = fr(s.with_key(0x42), 0, 64, LR | LW | RW);
        assert_eq!(t.fast_reg(pd, true, &f, Some(128)), Ok(()));
        let q = t.query_mr(s).unwrap();
        assert_eq!(
            (q.state, q.key, q.len, q.access),
            (StagState::Valid, Some(0x42), 64, f.access)
        );
        assert_eq!(
            t.fast_reg(pd, true, &f, Some(128)),
            Err(WcStatus::StagNotInvalid)
        );
    }

    #[test]
    fn fast_reg_errors() {
        let (mut pds, mut t, pd) = setup(8);
        let pd2 = pds.alloc().unwrap();
        let s = t.alloc_mr_stag(&mut pds, pd, 64, false).unwrap();
        let ok = fr(s, 0, 32, LR | LW);
        let cases = [
            (pd, false, ok, Some(128), WcStatus::QpNotPrivileged),
            (
                pd,
                true,
                fr(Stag(0), 0, 32, LR),
                Some(128),
                WcStatus::InvalidStag,
            ),
            (pd2, true, ok, Some(128), WcStatus::InvalidPd),
            (
                pd,
                true,
                fr(s, 0, 32, RW),
                Some(128),
                WcStatus::InvalidAccessRights,
            ),
            (
                pd,
                true,
                fr(s, 0, 32, LR | RR),
                Some(128),
                WcStatus::InvalidAccessRights,
            ),
            (
                pd,
                true,
                fr(s, 0, 65, LR),
                Some(128),
                WcStatus::InvalidLength,
            ),
            (
                pd,
                true,
                fr(s, 0, 0, LR),
                Some(128),
                WcStatus::InvalidLength,
            ),
            (
                pd,
                true,
                fr(s, 100, 32, LR),
                Some(128),
                WcStatus::InvalidLength,
            ),
            (pd, true, ok, None, WcStatus::InvalidLength),
            (
                pd,
                true,
                FastRegAttr {
                    va: u64::MAX,
                    zero_based: false,
                    ..ok
                },
                Some(128),
                WcStatus::WrapError,
            ),
        ];
        for (p, privileged, f, rl, e) in cases {
            assert_eq!(t.fast_reg(p, privileged, &f, rl), Err(e), "{f:?}");
        }
        assert_eq!(
            t.query_mr(s).unwrap().state,
            StagState::Invalid,
            "unchanged"
        );
        let w = t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(
            t.fast_reg(pd, true, &fr(w, 0, 8, LR), Some(128)),
            Err(WcStatus::InvalidStag)
        );
        let m = t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64)).unwrap();
        let sh = t.reg_shared_mr(&mut pds, m, &shared_attr(pd)).unwrap();
        t.invalidate_local(QP, pd, sh).unwrap_err();
        assert_eq!(
            t.fast_reg(pd, true, &fr(sh, 0, 8, LR), Some(128)),
            Err(WcStatus::InvalidStag)
        );
        // A registered region that was invalidated may be fast-registered again.
        let r = t.reg_mr(&mut pds, &attr(pd, 0, 16), Some(64)).unwrap();
        assert_eq!(
            t.fast_reg(pd, true, &fr(r, 0, 8, LR), Some(64)),
            Err(WcStatus::StagNotInvalid)
        );
        t.invalidate_local(QP, pd, r).unwrap();
        assert_eq!(
            t.fast_reg(pd, true, &fr(r.with_key(9), 0, 16, LR), Some(64)),
            Ok(())
        );
        assert_eq!(
            t.fast_reg(pd, true, &fr(r, 0, 17, LR), Some(64)),
            Err(WcStatus::StagNotInvalid)
        );
    }
}
