//! Rights combinations: verbs figure 18 (regions) and figure 20 (windows on regions).

use iwarp_types::Access;

/// Every bit a region may carry.
const MR_BITS: Access = Access(
    Access::LOCAL_READ.0
        | Access::LOCAL_WRITE.0
        | Access::REMOTE_READ.0
        | Access::REMOTE_WRITE.0
        | Access::MW_BIND.0,
);

/// The remote rights, the only ones a window carries.
const REMOTE: Access = Access(Access::REMOTE_READ.0 | Access::REMOTE_WRITE.0);

/// Verbs figure 18: at least one local right, Remote Write only with Local Write, Remote
/// Read only with Local Read, no unknown bit.
pub fn region_access_valid(access: Access) -> bool {
    if !MR_BITS.contains(access) {
        return false;
    }
    if !access.intersects(Access::LOCAL_READ | Access::LOCAL_WRITE) {
        return false;
    }
    if access.contains(Access::REMOTE_WRITE) && !access.contains(Access::LOCAL_WRITE) {
        return false;
    }
    if access.contains(Access::REMOTE_READ) && !access.contains(Access::LOCAL_READ) {
        return false;
    }
    true
}

/// Figure 18 plus the Remote Access Flag: remote rights need the flag.
pub fn region_access_allowed(access: Access, remote_access_flag: bool) -> bool {
    region_access_valid(access) && (remote_access_flag || !access.has_remote())
}

/// A window's requested rights are well formed: at least one remote right, nothing else.
pub fn window_access_valid(access: Access) -> bool {
    access.has_remote() && REMOTE.contains(access)
}

/// Verbs figure 20: a window's Remote Write needs the region's Local Write, its Remote
/// Read the region's Local Read. The region's own remote rights do not matter.
pub fn window_access_compatible(mr: Access, mw: Access) -> bool {
    (!mw.contains(Access::REMOTE_WRITE) || mr.contains(Access::LOCAL_WRITE))
        && (!mw.contains(Access::REMOTE_READ) || mr.contains(Access::LOCAL_READ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LR: Access = Access::LOCAL_READ;
    const LW: Access = Access::LOCAL_WRITE;
    const RR: Access = Access::REMOTE_READ;
    const RW: Access = Access::REMOTE_WRITE;
    const N: Access = Access::NONE;

    #[test]
    fn figure_18() {
        let rows = [
            (N, N, false),
            (N, RR, false),
            (N, RW, false),
            (N, RR | RW, false),
            (LR, N, true),
            (LR, RR, true),
            (LR, RW, false),
            (LR, RR | RW, false),
            (LW, N, true),
            (LW, RR, false),
            (LW, RW, true),
            (LW, RR | RW, false),
            (LR | LW, N, true),
            (LR | LW, RR, true),
            (LR | LW, RW, true),
            (LR | LW, RR | RW, true),
        ];
        for (local, remote, ok) in rows {
            assert_eq!(
                region_access_valid(local | remote),
                ok,
                "{local:?} {remote:?}"
            );
        }
        assert!(region_access_valid(LR | Access::MW_BIND));
        assert!(
            !region_access_valid(Access::MW_BIND),
            "bind alone has no local right"
        );
        assert!(!region_access_valid(LR | Access(1 << 9)), "unknown bit");
    }

    #[test]
    fn remote_access_flag() {
        assert!(region_access_allowed(LR | RR, true));
        assert!(!region_access_allowed(LR | RR, false));
        assert!(region_access_allowed(LR | LW, false));
    }

    #[test]
    fn figure_20() {
        let rows = [
            (LR, RW, false),
            (LR, RR, true),
            (LR, RR | RW, false),
            (LW, RW, true),
            (LW, RR, false),
            (LW, RR | RW, false),
            (LR | LW, RW, true),
            (LR | LW, RR, true),
            (LR | LW, RR | RW, true),
            (N, RW, false),
            (N, RR, false),
        ];
        for (mr, mw, ok) in rows {
            let got = window_access_valid(mw) && window_access_compatible(mr, mw);
            assert_eq!(got, ok, "{mr:?} {mw:?}");
        }
        assert!(!window_access_valid(N), "any region -> no rights: invalid");
        assert!(!window_access_valid(RR | LR), "local rights on a window");
    }
}
