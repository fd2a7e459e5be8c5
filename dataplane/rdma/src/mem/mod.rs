//! The STag table: memory regions (MRs) and memory windows (MWs) of one engine, verbs
//! section 7, RFC 5040 section 8.1.1.
//!
//! - `stag`: how STag indices are chosen (seeded, hard to predict, never 0).
//! - [`rights`]: the rights combinations of verbs figures 18 and 20.
//! - `mr`: region verbs (register, reregister, shared, allocate, query, deallocate);
//!   `fastreg`: the Fast-Register WR.
//! - `mw`: window verbs (allocate, query, Bind as a WR "type 2" and as a verb "type 1").
//! - `check`: data-path validation of local SGEs and inbound tagged accesses.
//! - `invalidate`: local and remote invalidation.
//! - `stag0`: the STag of zero (privileged "physical" addressing of caller arenas).
//! - `at`: registration at a given STag (replicas of another engine's objects).
//!
//! A region is `[region_offset, region_offset + len)` of a caller arena ([`RegionId`]);
//! tagged offsets run from `base_to` (the VA for VA-based regions, 0 for zero-based ones).
//! Every check returns the arena [`Placement`] of the first byte, so the caller never
//! does address arithmetic on untrusted values itself.
//!
//! Each region and window holds one use of its PD in the [`PdTable`](crate::pd::PdTable)
//! that is passed to the verbs that create and destroy them.

mod at;
mod check;
mod fastreg;
mod invalidate;
mod mr;
mod mw;
pub mod rights;
mod stag;
mod stag0;

pub use check::{term_code_read_source, term_code_tagged_sink};
pub use stag0::{resolve_stag0, stag0_addr, stag0_placement, STAG0_MAX_OFFSET, STAG0_OFFSET_BITS};

use std::cell::Cell;

use iwarp_types::{Access, PdId, QpId, RegionId, SendOp, Stag};
use stag::StagSpace;

/// `MemTable::free_pos` of a slot that is in use.
const NOT_FREE: u32 = u32::MAX;

/// Entries of the memo of recent index lookups (direct-mapped on the index's low bits).
const LOCATE_MEMO_LEN: usize = 64;

/// One remembered `StagSpace::locate` answer: `index` names (`slot`, `generation`).
/// Index 0 never names anything, so the all-zero entry matches no lookup.
#[derive(Clone, Copy, Default)]
struct Located {
    index: u32,
    slot: u32,
    generation: u32,
}

/// Construction parameters of a [`MemTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemConfig {
    /// Maximum number of STags (regions plus windows), at most 2^22.
    pub max_entries: usize,
    /// Secret seed of the STag index permutation (from the engine configuration).
    pub seed: u64,
}

/// Register Non-Shared MR / Reregister inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrAttr {
    /// Protection domain.
    pub pd: PdId,
    /// Caller arena holding the region.
    pub region: RegionId,
    /// Offset of the region's first byte in the arena.
    pub region_offset: u64,
    /// Length in bytes (> 0).
    pub len: u64,
    /// Virtual address of the first byte (VA-based regions; ignored when zero-based).
    pub va: u64,
    /// Tagged offsets start at 0 instead of `va`.
    pub zero_based: bool,
    /// Rights (verbs figure 18), plus [`Access::MW_BIND`].
    pub access: Access,
    /// The consumer's STag key.
    pub key: u8,
    /// Remote rights may be granted to this STag now or by a later Fast-Register.
    pub remote_access_flag: bool,
}

/// Register Shared MR inputs (the memory is that of the existing region).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedMrAttr {
    /// Protection domain of the new STag.
    pub pd: PdId,
    /// Virtual address of the first byte (VA-based; ignored when zero-based).
    pub va: u64,
    /// Tagged offsets start at 0.
    pub zero_based: bool,
    /// Rights of the new STag.
    pub access: Access,
    /// Key of the new STag.
    pub key: u8,
    /// Remote Access Flag of the new STag.
    pub remote_access_flag: bool,
}

/// Fast-Register work request inputs (the fields of `SendOp::FastReg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastRegAttr {
    /// The STag (index from Allocate NS MR STag or an earlier registration; new key).
    pub stag: Stag,
    /// Caller arena.
    pub region: RegionId,
    /// Offset of the first byte in the arena.
    pub region_offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Virtual address of the first byte (ignored when zero-based).
    pub va: u64,
    /// Rights.
    pub access: Access,
    /// Zero-based tagged offsets.
    pub zero_based: bool,
}

/// Bind Memory Window inputs (the fields of `SendOp::Bind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwBind {
    /// The window (its index; the key is the new key).
    pub mw: Stag,
    /// The region (all 32 bits checked).
    pub mr: Stag,
    /// Tagged offset, in the region's address space, of the window's first byte.
    pub to: u64,
    /// Window length in bytes.
    pub len: u64,
    /// Remote Read and/or Remote Write.
    pub access: Access,
    /// The window's own tagged offsets start at 0.
    pub zero_based: bool,
}

impl FastRegAttr {
    /// The Fast-Register inputs of a `SendOp::FastReg` work request.
    pub fn from_op(op: &SendOp) -> Option<FastRegAttr> {
        match *op {
            SendOp::FastReg {
                stag,
                region,
                region_offset,
                len,
                va,
                access,
                zero_based,
            } => Some(FastRegAttr {
                stag,
                region,
                region_offset,
                len,
                va,
                access,
                zero_based,
            }),
            _ => None,
        }
    }
}

impl MwBind {
    /// The Bind inputs of a `SendOp::Bind` work request.
    pub fn from_op(op: &SendOp) -> Option<MwBind> {
        match *op {
            SendOp::Bind {
                mw,
                mr,
                to,
                len,
                access,
                zero_based,
            } => Some(MwBind {
                mw,
                mr,
                to,
                len,
                access,
                zero_based,
            }),
            _ => None,
        }
    }
}

/// How a window is bound and where it is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MwType {
    /// Bound by a verb ([`MemTable::bind_mw_type1`]); valid on every QP of its PD;
    /// cannot be invalidated (only re-bound or deallocated).
    Type1,
    /// The verbs-spec window: bound by a Bind WR and then valid only on that QP.
    Type2,
}

/// State of an STag (verbs 7.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StagState {
    /// Usable for data transfer.
    Valid,
    /// Allocated but not usable (only the index is meaningful).
    Invalid,
}

/// Query MR output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrInfo {
    /// The key, when Valid.
    pub key: Option<u8>,
    /// Valid or Invalid.
    pub state: StagState,
    /// Protection domain.
    pub pd: PdId,
    /// Shared (Register Shared MR was used on it or created it).
    pub shared: bool,
    /// Remote Access Flag.
    pub remote_access_flag: bool,
    /// Rights.
    pub access: Access,
    /// Caller arena.
    pub region: RegionId,
    /// Offset of the first byte in the arena.
    pub region_offset: u64,
    /// Length in bytes (0 for an STag never registered).
    pub len: u64,
    /// Tagged offset of the first byte.
    pub base_to: u64,
    /// Zero-based.
    pub zero_based: bool,
    /// Largest length a Fast-Register may use (the "PBL size").
    pub max_len: u64,
    /// Number of windows bound to this region.
    pub mws_bound: u32,
}

/// Query MW output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwInfo {
    /// The key, when Valid (bound).
    pub key: Option<u8>,
    /// Valid (bound) or Invalid.
    pub state: StagState,
    /// Protection domain.
    pub pd: PdId,
    /// Window type.
    pub kind: MwType,
    /// Remote rights (none when Invalid).
    pub access: Access,
    /// The QP a type-2 window is bound to.
    pub qp: Option<QpId>,
    /// The region it is bound in.
    pub mr: Option<Stag>,
    /// Tagged offset of the first byte (when bound).
    pub base_to: u64,
    /// Length (when bound).
    pub len: u64,
}

/// Where a validated access lands: `offset` is the arena offset of the first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    /// Caller arena.
    pub region: RegionId,
    /// Offset of the first byte inside the arena.
    pub offset: u64,
}

impl Placement {
    /// The answer for zero-length accesses, which are never checked (verbs 7.6.3): no
    /// byte may be read or written through it.
    pub const EMPTY: Placement = Placement {
        region: RegionId(0),
        offset: 0,
    };
}

/// What an inbound tagged message does with the STag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemoteOp {
    /// Sink of an RDMA Write or of an RDMA Read Response (needs Remote Write).
    Write,
    /// Source of an RDMA Read Request (needs Remote Read).
    Read,
}

/// Why an inbound tagged access was refused (inventory 5.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemoteAccessError {
    /// STag 0, unknown, Invalid, or the key does not match.
    InvalidStag,
    /// Outside the region or window.
    BaseBounds,
    /// The region or window lacks the remote right.
    AccessRights,
    /// Region of another PD, or window bound to another QP (type 2) / PD (type 1).
    NotAssociated,
    /// Tagged offset plus length wraps past 2^64 - 1.
    Wrap,
}

/// A region's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mr {
    pub(crate) pd: PdId,
    pub(crate) key: u8,
    pub(crate) valid: bool,
    pub(crate) shared: bool,
    pub(crate) remote_access_flag: bool,
    pub(crate) access: Access,
    pub(crate) region: RegionId,
    pub(crate) region_offset: u64,
    pub(crate) len: u64,
    pub(crate) base_to: u64,
    pub(crate) zero_based: bool,
    pub(crate) max_len: u64,
    pub(crate) mws_bound: u32,
}

/// A bound window's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MwBinding {
    /// Type 2 only: the QP that bound it.
    pub(crate) qp: Option<QpId>,
    /// The region's STag.
    pub(crate) mr: Stag,
    pub(crate) region: RegionId,
    pub(crate) region_offset: u64,
    pub(crate) base_to: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
}

/// A window's fields; Valid exactly when bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mw {
    pub(crate) pd: PdId,
    pub(crate) key: u8,
    pub(crate) kind: MwType,
    pub(crate) binding: Option<MwBinding>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Mr(Mr),
    Mw(Mw),
}

impl Entry {
    pub(crate) fn pd(&self) -> PdId {
        match self {
            Entry::Mr(m) => m.pd,
            Entry::Mw(w) => w.pd,
        }
    }
}

struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The bounded STag table of regions and windows.
pub struct MemTable {
    space: StagSpace,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Per slot: its position in `free`, or `NOT_FREE` (so registration at a given STag
    /// takes its slot out of `free` in O(1)).
    free_pos: Vec<u32>,
    /// Bumped by every change to an existing entry (each `entry_mut` / `remove`): while
    /// it stands still, everything resolved through the table resolves the same way.
    epoch: u64,
    /// Recent answers of the (fixed, keyed) inverse permutation: a tagged stream names
    /// the same few STags segment after segment. The permutation never changes, so an
    /// entry never goes stale; the slot's current generation is still checked each time.
    memo: [Cell<Located>; LOCATE_MEMO_LEN],
    /// Memory windows in the table (kept by `insert`, `insert_at` and `remove`): the
    /// walks over the table for windows are skipped while there is none.
    mws: usize,
}

impl MemTable {
    /// A table of `cfg.max_entries` STags whose indices are chosen by `cfg.seed`.
    pub fn new(cfg: MemConfig) -> MemTable {
        let (space, free, generations) = StagSpace::new(cfg.seed, cfg.max_entries);
        let slots = generations.into_iter().map(|generation| Slot {
            generation,
            entry: None,
        });
        let mut free_pos = vec![NOT_FREE; free.len()];
        for (pos, &s) in free.iter().enumerate() {
            free_pos[s as usize] = pos as u32;
        }
        MemTable {
            space,
            slots: slots.collect(),
            free,
            free_pos,
            mws: 0,
            epoch: 0,
            memo: std::array::from_fn(|_| Cell::new(Located::default())),
        }
    }

    /// The (slot, generation) an index names: [`StagSpace::locate`] through the memo.
    #[inline]
    fn locate(&self, index: u32) -> Option<(u32, u32)> {
        let cell = &self.memo[index as usize % LOCATE_MEMO_LEN];
        let m = cell.get();
        if m.index == index && index != 0 {
            return Some((m.slot, m.generation));
        }
        let (slot, generation) = self.space.locate(index)?;
        cell.set(Located {
            index,
            slot,
            generation,
        });
        Some((slot, generation))
    }

    /// The change counter: equal epochs mean no entry was changed or removed in between
    /// (invalidate, deregister, reregister, rebind, Fast-Register, ...), so a source
    /// resolved at one epoch still resolves to the same place at the other.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Number of STags allocated.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// True if no STag is allocated.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Maximum number of STags.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Stores `entry` under a fresh index; returns the index.
    pub(crate) fn insert(&mut self, entry: Entry) -> Option<u32> {
        let s = *self.free.last()?;
        let slot = self.slots.get_mut(s as usize)?;
        let index = match self.space.index(s, slot.generation) {
            Some(i) => i,
            None => {
                // This generation maps to index 0 (or ran off the end): skip it.
                slot.generation = self.space.next_generation(s, slot.generation);
                self.space.index(s, slot.generation)?
            }
        };
        self.free.pop();
        self.free_pos[s as usize] = NOT_FREE;
        self.mws += usize::from(matches!(entry, Entry::Mw(_)));
        slot.entry = Some(entry);
        Some(index)
    }

    /// True if the STag index names a region or window (in any state; the key is not
    /// checked).
    pub fn stag_in_use(&self, index: u32) -> bool {
        self.entry(index).is_some()
    }

    /// The entry an STag index names (the key is not checked here).
    #[inline]
    pub(crate) fn entry(&self, index: u32) -> Option<&Entry> {
        let (s, g) = self.locate(index)?;
        let slot = self.slots.get(s as usize)?;
        if slot.generation != g {
            return None;
        }
        slot.entry.as_ref()
    }

    /// The entry an STag index names, mutably (counts as a change: bumps the epoch).
    pub(crate) fn entry_mut(&mut self, index: u32) -> Option<&mut Entry> {
        self.epoch = self.epoch.wrapping_add(1);
        let (s, g) = self.locate(index)?;
        let slot = self.slots.get_mut(s as usize)?;
        if slot.generation != g {
            return None;
        }
        slot.entry.as_mut()
    }

    /// Frees the index; it will not name anything again until its slot cycles through
    /// all its generations.
    pub(crate) fn remove(&mut self, index: u32) -> Option<Entry> {
        self.epoch = self.epoch.wrapping_add(1);
        let (s, g) = self.locate(index)?;
        let slot = self.slots.get_mut(s as usize)?;
        if slot.generation != g {
            return None;
        }
        let entry = slot.entry.take()?;
        self.mws -= usize::from(matches!(entry, Entry::Mw(_)));
        slot.generation = self.space.next_generation(s, g);
        self.free_pos[s as usize] = self.free.len() as u32;
        self.free.push(s);
        Some(entry)
    }

    /// The region an index names.
    pub(crate) fn mr(&self, index: u32) -> Option<&Mr> {
        match self.entry(index)? {
            Entry::Mr(m) => Some(m),
            Entry::Mw(_) => None,
        }
    }

    /// The region an index names, mutably.
    pub(crate) fn mr_mut(&mut self, index: u32) -> Option<&mut Mr> {
        match self.entry_mut(index)? {
            Entry::Mr(m) => Some(m),
            Entry::Mw(_) => None,
        }
    }

    /// The window an index names.
    pub(crate) fn mw(&self, index: u32) -> Option<&Mw> {
        match self.entry(index)? {
            Entry::Mw(w) => Some(w),
            Entry::Mr(_) => None,
        }
    }

    /// The window an index names, mutably.
    pub(crate) fn mw_mut(&mut self, index: u32) -> Option<&mut Mw> {
        match self.entry_mut(index)? {
            Entry::Mw(w) => Some(w),
            Entry::Mr(_) => None,
        }
    }

    /// Iterates over every allocated entry (bounded by `max_entries`).
    /// Memory windows in the table.
    pub(crate) fn mw_count(&self) -> usize {
        self.mws
    }

    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().filter_map(|s| s.entry.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use iwarp_types::VerbError;

    #[test]
    fn table_is_bounded_and_frees() {
        let (mut pds, mut t, pd) = setup(3);
        let a = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
        t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
        t.alloc_mw(&mut pds, pd, MwType::Type2).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)),
            Err(VerbError::InsufficientResources)
        );
        assert_eq!(
            t.alloc_mw(&mut pds, pd, MwType::Type2),
            Err(VerbError::InsufficientResources)
        );
        assert_eq!(pds.users(pd), Some(3), "failed allocations take no PD use");
        t.dealloc_stag(&mut pds, a).unwrap();
        assert_eq!(t.capacity(), 3);
        assert!(t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).is_ok());
    }

    #[test]
    fn indices_are_never_zero_and_hard_to_predict() {
        let (mut pds, mut t, pd) = setup(256);
        let mut idx = Vec::new();
        for _ in 0..200 {
            let s = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
            assert_ne!(s.index(), 0);
            idx.push(s.index());
        }
        let sequential = idx
            .windows(2)
            .filter(|w| w[1].wrapping_sub(w[0]) == 1)
            .count();
        assert!(
            sequential < 3,
            "consecutive allocations are not sequential: {sequential}"
        );
        let spread = idx.iter().max().unwrap() - idx.iter().min().unwrap();
        assert!(
            spread > 1 << 20,
            "sparse over the 24-bit space: {spread:#x}"
        );
        let mut sorted = idx.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), idx.len(), "distinct");
    }

    #[test]
    fn two_seeds_give_different_indices() {
        let run = |seed| {
            let mut pds = crate::pd::PdTable::new(2);
            let pd = pds.alloc().unwrap();
            let mut t = MemTable::new(MemConfig {
                max_entries: 64,
                seed,
            });
            (0..8)
                .map(|_| {
                    t.reg_mr(&mut pds, &attr(pd, 0, 8), Some(64))
                        .unwrap()
                        .index()
                })
                .collect::<Vec<_>>()
        };
        assert_ne!(run(1), run(2));
        assert_eq!(run(3), run(3), "deterministic for one seed");
    }

    #[test]
    fn a_freed_index_does_not_name_the_next_object() {
        let (mut pds, mut t, pd) = setup(1);
        let a = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
        t.dealloc_stag(&mut pds, a).unwrap();
        let b = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
        assert_ne!(a.index(), b.index(), "same slot, next generation");
        assert_eq!(t.query_mr(a), Err(VerbError::InvalidStag));
        assert!(t.query_mr(b).is_ok());
    }

    #[test]
    fn work_request_inputs() {
        let bind = SendOp::Bind {
            mw: Stag(0x100),
            mr: Stag(0x200),
            to: 3,
            len: 4,
            access: Access::REMOTE_READ,
            zero_based: true,
        };
        let b = MwBind::from_op(&bind).unwrap();
        assert_eq!(
            (b.mw, b.mr, b.to, b.len, b.zero_based),
            (Stag(0x100), Stag(0x200), 3, 4, true)
        );
        assert_eq!(FastRegAttr::from_op(&bind), None);
        let fr = SendOp::FastReg {
            stag: Stag(0x300),
            region: RegionId(2),
            region_offset: 5,
            len: 6,
            va: 7,
            access: Access::LOCAL_READ,
            zero_based: false,
        };
        let f = FastRegAttr::from_op(&fr).unwrap();
        assert_eq!(
            (f.stag, f.region, f.region_offset, f.len, f.va),
            (Stag(0x300), RegionId(2), 5, 6, 7)
        );
        assert_eq!(MwBind::from_op(&SendOp::Send), None);
    }

    #[test]
    fn epoch_moves_on_every_change_and_only_then() {
        let (mut pds, mut t, pd) = setup(8);
        let a = t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap();
        let e0 = t.epoch();
        t.reg_mr(&mut pds, &attr(pd, 64, 64), Some(4096)).unwrap();
        let sge = iwarp_types::Sge {
            addr: 0,
            length: 8,
            lkey: a,
        };
        t.resolve_local(pd, &sge, Access::LOCAL_READ).unwrap();
        t.query_mr(a).unwrap();
        assert_eq!(t.epoch(), e0, "new STags and lookups change nothing");
        t.invalidate_local(QP, pd, a).unwrap();
        let e1 = t.epoch();
        assert_ne!(e1, e0, "invalidate");
        t.dealloc_stag(&mut pds, a).unwrap();
        assert_ne!(t.epoch(), e1, "deallocate");
    }

    #[test]
    fn memoized_lookups_agree_with_the_permutation() {
        let (mut pds, mut t, pd) = setup(512);
        let stags: Vec<Stag> = (0..300)
            .map(|_| t.reg_mr(&mut pds, &attr(pd, 0, 64), Some(4096)).unwrap())
            .collect();
        // Many indices share a memo entry: every order of lookups gives the same answers.
        for round in 0..3 {
            for (i, s) in stags.iter().enumerate() {
                let s = if round == 1 { stags[299 - i] } else { *s };
                assert!(t.entry(s.index()).is_some());
                assert_eq!(t.locate(s.index()), t.space.locate(s.index()));
            }
        }
        let mut x = 0x1234_5678u32;
        for _ in 0..2000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let i = x >> 8;
            assert_eq!(t.locate(i), t.space.locate(i), "index {i:#x}");
        }
        // A freed STag stays dead even though its lookup is remembered.
        t.dealloc_stag(&mut pds, stags[5]).unwrap();
        assert!(t.entry(stags[5].index()).is_none());
        assert_eq!(t.query_mr(stags[5]), Err(VerbError::InvalidStag));
        assert!(t.entry(stags[6].index()).is_some());
    }

    #[test]
    fn unknown_indices_are_absent() {
        let (_pds, t, _pd) = setup(4);
        for i in [0u32, 1, 2, 0xff_ffff, 0x12_3456] {
            assert!(t.entry(i).is_none());
        }
    }
}
