//! Shared test fixtures for the STag table.

use super::{FastRegAttr, MemConfig, MemTable, MrAttr, MwBind, SharedMrAttr};
use crate::pd::PdTable;
use iwarp_types::{Access, PdId, QpId, RegionId, Stag};

/// Short names for the rights, as the verbs figures write them.
pub(crate) const LR: Access = Access::LOCAL_READ;
pub(crate) const LW: Access = Access::LOCAL_WRITE;
pub(crate) const RR: Access = Access::REMOTE_READ;
pub(crate) const RW: Access = Access::REMOTE_WRITE;
pub(crate) const BIND: Access = Access::MW_BIND;

/// The QP most tests bind windows on.
pub(crate) const QP: QpId = QpId(1);

/// A PD table with one PD and an STag table of `max_entries`.
pub(crate) fn setup(max_entries: usize) -> (PdTable, MemTable, PdId) {
    let mut pds = PdTable::new(8);
    let pd = pds.alloc().unwrap();
    let t = MemTable::new(MemConfig {
        max_entries,
        seed: 0x5eed,
    });
    (pds, t, pd)
}

/// A VA-based (VA 0) region of `len` bytes at `off` in region 1, every right,
/// Remote Access Flag set, key 0.
pub(crate) fn attr(pd: PdId, off: u64, len: u64) -> MrAttr {
    MrAttr {
        pd,
        region: RegionId(1),
        region_offset: off,
        len,
        va: 0,
        zero_based: false,
        access: Access::LOCAL_READ
            | Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::MW_BIND,
        key: 0,
        remote_access_flag: true,
    }
}

/// Register Shared MR attributes: zero-based, local rights, key 0x44.
pub(crate) fn shared_attr(pd: PdId) -> SharedMrAttr {
    SharedMrAttr {
        pd,
        va: 0,
        zero_based: true,
        access: Access::LOCAL_READ | Access::LOCAL_WRITE,
        key: 0x44,
        remote_access_flag: false,
    }
}

/// A VA-based bind of `[to, to + len)` of `mr` with `access`.
pub(crate) fn bind(mw: Stag, mr: Stag, to: u64, len: u64, access: Access) -> MwBind {
    MwBind {
        mw,
        mr,
        to,
        len,
        access,
        zero_based: false,
    }
}

/// A zero-based Fast-Register of `len` bytes at `off` of region 1.
pub(crate) fn fr(stag: Stag, off: u64, len: u64, access: Access) -> FastRegAttr {
    FastRegAttr {
        stag,
        region: RegionId(1),
        region_offset: off,
        len,
        va: 0,
        access,
        zero_based: true,
    }
}
