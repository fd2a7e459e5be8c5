//! Registration at a given STag: the replicas of another engine's regions and windows.
//!
//! A daemon that runs one engine per core replicates every region, Allocate-NS-MR STag
//! and window on every engine under the same STag: the first engine allocates it as
//! usual, the others call the `*_at` verbs with the STag it chose. Each does the same
//! validation as its usual verb and then stores the object under exactly that index and
//! key.
//!
//! An index names one (slot, generation) pair of this table's keyed permutation. The
//! slot must be free: its generation is set to the named one and the slot leaves the
//! free list, so the usual allocator never hands the index out while it is in use, and
//! after Deallocate the slot moves on to its next generation as usual. With the same
//! seed and size as the first engine's table (and every allocation made there), a
//! replica's slots mirror the first engine's, so a `*_at` call never collides. With
//! another seed, two live indices may fall in one slot and the second is refused
//! (`InsufficientResources`); nothing is ever stored under a wrong index.
//!
//! Reregister needs no `*_at` form: it keeps the index and takes the key from its
//! attributes, so the same call gives the same STag on every engine.

use super::{Entry, MemTable, MrAttr, MwType, NOT_FREE};
use crate::pd::PdTable;
use iwarp_types::{PdId, Stag, VerbError};

impl MemTable {
    /// The (slot, generation) index `index` names, if the slot is free. `InvalidStag`
    /// for index 0 (or one outside the 24-bit space), `InsufficientResources` if the
    /// slot holds an object (this index or another of the same slot).
    pub(super) fn vacant(&self, index: u32) -> Result<(u32, u32), VerbError> {
        let (s, g) = self.locate(index).ok_or(VerbError::InvalidStag)?;
        let slot = self.slots.get(s as usize).ok_or(VerbError::InvalidStag)?;
        if slot.entry.is_some() {
            return Err(VerbError::InsufficientResources);
        }
        Ok((s, g))
    }

    /// Stores `entry` under `index` (whose slot [`MemTable::vacant`] accepts); returns
    /// the index.
    pub(super) fn insert_at(&mut self, index: u32, entry: Entry) -> Option<u32> {
        let (s, g) = self.vacant(index).ok()?;
        let pos = *self.free_pos.get(s as usize)?;
        if pos == NOT_FREE || self.free.get(pos as usize) != Some(&s) {
            return None;
        }
        self.free.swap_remove(pos as usize);
        if let Some(&moved) = self.free.get(pos as usize) {
            self.free_pos[moved as usize] = pos;
        }
        self.free_pos[s as usize] = NOT_FREE;
        self.mws += usize::from(matches!(entry, Entry::Mw(_)));
        let slot = &mut self.slots[s as usize];
        slot.generation = g;
        slot.entry = Some(entry);
        Some(index)
    }

    /// Register Non-Shared MR under exactly `stag` (index and key), whose key must be
    /// `attr.key` (else `InvalidStag`). The errors of [`MemTable::reg_mr`], then
    /// `InvalidStag` (index 0) and `InsufficientResources` (its slot in use: this index
    /// or, with another seed than the first engine's, another); an error consumes
    /// nothing.
    pub fn reg_mr_at(
        &mut self,
        pds: &mut PdTable,
        stag: Stag,
        attr: &MrAttr,
        region_len: Option<u64>,
    ) -> Result<Stag, VerbError> {
        if stag.key() != attr.key {
            return Err(VerbError::InvalidStag);
        }
        self.reg_mr_in(pds, Some(stag.index()), attr, region_len)
    }

    /// Allocate Non-Shared MR STag under exactly `stag` (its key is kept, though an
    /// Invalid STag's key means nothing until a Fast-Register sets one). Errors as
    /// [`MemTable::reg_mr_at`].
    pub fn alloc_mr_stag_at(
        &mut self,
        pds: &mut PdTable,
        stag: Stag,
        pd: PdId,
        max_len: u64,
        remote_access_flag: bool,
    ) -> Result<Stag, VerbError> {
        self.alloc_mr_stag_in(pds, Some(stag), pd, max_len, remote_access_flag)
    }

    /// Allocate MW under exactly `stag` (key kept, as [`MemTable::alloc_mr_stag_at`]).
    /// Errors: `InvalidPd`, then as [`MemTable::reg_mr_at`].
    pub fn alloc_mw_at(
        &mut self,
        pds: &mut PdTable,
        stag: Stag,
        pd: PdId,
        kind: MwType,
    ) -> Result<Stag, VerbError> {
        self.alloc_mw_in(pds, Some(stag), pd, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{MemConfig, RemoteOp};
    use super::*;

    /// A second table (and PD table) as a replica engine would have: same PD id.
    fn replica(max_entries: usize, seed: u64) -> (PdTable, MemTable, PdId) {
        let mut pds = PdTable::new(8);
        let pd = pds.alloc().unwrap();
        (pds, MemTable::new(MemConfig { max_entries, seed }), pd)
    }

    /// The free list and its position index agree, and list exactly the empty slots.
    fn assert_free_list_consistent(t: &MemTable) {
        let mut listed = vec![false; t.slots.len()];
        for (pos, &s) in t.free.iter().enumerate() {
            assert_eq!(t.free_pos[s as usize], pos as u32);
            assert!(!listed[s as usize], "slot {s} listed twice");
            listed[s as usize] = true;
        }
        for (s, slot) in t.slots.iter().enumerate() {
            assert_eq!(slot.entry.is_none(), listed[s], "slot {s}");
            if !listed[s] {
                assert_eq!(t.free_pos[s], NOT_FREE);
            }
        }
    }

    #[test]
    fn each_kind_replicates_with_the_same_stag_and_attributes() {
        let (mut pa, mut a, pd) = setup(16);
        let (mut pb, mut b, pdb) = replica(16, 0x5eed);
        assert_eq!(pd, pdb);
        let ma = MrAttr {
            key: 0x5a,
            va: 0x1000,
            ..attr(pd, 8, 48)
        };
        let mr = a.reg_mr(&mut pa, &ma, Some(64)).unwrap();
        let fr_stag = a.alloc_mr_stag(&mut pa, pd, 32, true).unwrap();
        let mw = a.alloc_mw(&mut pa, pd, MwType::Type2).unwrap();
        assert_eq!(b.reg_mr_at(&mut pb, mr, &ma, Some(64)), Ok(mr));
        assert_eq!(
            b.alloc_mr_stag_at(&mut pb, fr_stag, pd, 32, true),
            Ok(fr_stag)
        );
        assert_eq!(b.alloc_mw_at(&mut pb, mw, pd, MwType::Type2), Ok(mw));
        assert_eq!(b.query_mr(mr), a.query_mr(mr));
        assert_eq!(b.query_mr(fr_stag), a.query_mr(fr_stag));
        assert_eq!(b.query_mw(mw), a.query_mw(mw));
        assert_eq!((b.len(), pb.users(pd)), (3, Some(3)));
        for t in [&a, &b] {
            assert!(t.stag_in_use(mr.index()) && t.stag_in_use(mw.index()));
            let p = t.resolve_remote(QP, pd, mr, 0x1008, 8, RemoteOp::Write);
            assert_eq!(p.map(|p| p.offset), Ok(16));
        }
        // The replicas work like the originals: Fast-Register, Bind, rereg, invalidate.
        for (t, pds) in [(&mut a, &mut pa), (&mut b, &mut pb)] {
            t.fast_reg(pd, true, &fr(fr_stag.with_key(7), 0, 32, LR | LW), Some(64))
                .unwrap();
            t.bind_mw(QP, pd, true, &bind(mw.with_key(9), mr, 0x1000, 16, RR))
                .unwrap();
            let again = MrAttr { key: 0x11, ..ma };
            assert_eq!(
                t.rereg_mr(pds, mr, &again, Some(64)),
                Err(VerbError::MwStillBound)
            );
            t.invalidate_local(QP, pd, mw.with_key(9)).unwrap();
            assert_eq!(t.rereg_mr(pds, mr, &again, Some(64)), Ok(mr.with_key(0x11)));
        }
        assert_eq!(b.query_mr(fr_stag), a.query_mr(fr_stag));
        assert_eq!(b.query_mw(mw), a.query_mw(mw));
        assert_eq!(b.query_mr(mr), a.query_mr(mr));
        assert_free_list_consistent(&b);
    }

    #[test]
    fn the_same_validation_as_the_usual_verbs_and_errors_consume_nothing() {
        let (mut pa, mut a, pd) = setup(8);
        let (mut pb, mut b, _) = replica(8, 0x5eed);
        let mr = a.reg_mr(&mut pa, &attr(pd, 0, 8), Some(64)).unwrap();
        let bad = [
            (attr(PdId(99), 0, 8), Some(64), VerbError::InvalidPd),
            (attr(pd, 60, 8), Some(64), VerbError::InvalidLength),
            (attr(pd, 0, 8), None, VerbError::InvalidLength),
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
                    key: 1,
                    ..attr(pd, 0, 8)
                },
                Some(64),
                VerbError::InvalidStag,
            ),
        ];
        for (at, rl, e) in bad {
            assert_eq!(b.reg_mr_at(&mut pb, mr, &at, rl), Err(e), "{at:?}");
        }
        assert_eq!(
            b.alloc_mr_stag_at(&mut pb, mr, PdId(99), 8, false),
            Err(VerbError::InvalidPd)
        );
        assert_eq!(
            b.alloc_mr_stag_at(&mut pb, mr, pd, 0, false),
            Err(VerbError::InvalidLength)
        );
        assert_eq!(
            b.alloc_mw_at(&mut pb, mr, PdId(99), MwType::Type1),
            Err(VerbError::InvalidPd)
        );
        assert!(b.is_empty());
        assert_eq!(pb.users(pd), Some(0));
        assert_free_list_consistent(&b);
        assert_eq!(b.reg_mr_at(&mut pb, mr, &attr(pd, 0, 8), Some(64)), Ok(mr));
    }

    #[test]
    fn index_zero_and_taken_indices_are_refused() {
        let (mut pds, mut t, pd) = setup(4);
        let a = attr(pd, 0, 8);
        assert_eq!(
            t.reg_mr_at(&mut pds, Stag::ZERO, &a, Some(64)),
            Err(VerbError::InvalidStag)
        );
        assert_eq!(
            t.alloc_mw_at(&mut pds, Stag(0x7f), pd, MwType::Type2),
            Err(VerbError::InvalidStag),
            "index 0 with a key"
        );
        let s = t.reg_mr(&mut pds, &a, Some(64)).unwrap();
        let taken = [
            t.reg_mr_at(&mut pds, s, &a, Some(64)),
            t.alloc_mr_stag_at(&mut pds, s.with_key(3), pd, 8, false),
            t.alloc_mw_at(&mut pds, s, pd, MwType::Type1),
        ];
        assert!(taken
            .iter()
            .all(|r| *r == Err(VerbError::InsufficientResources)));
        // Another generation of the same slot is taken too while the slot is in use.
        let (slot, g) = t.space.locate(s.index()).unwrap();
        let mut g2 = t.space.next_generation(slot, g);
        let other = loop {
            match t.space.index(slot, g2) {
                Some(i) => break i,
                None => g2 = t.space.next_generation(slot, g2),
            }
        };
        assert_ne!((g2, other), (g, s.index()));
        assert_eq!(
            t.alloc_mw_at(&mut pds, Stag::new(other, 0), pd, MwType::Type2),
            Err(VerbError::InsufficientResources)
        );
        assert_eq!((t.len(), pds.users(pd)), (1, Some(1)));
        assert!(!t.stag_in_use(other) && !t.stag_in_use(0));
        assert_free_list_consistent(&t);
    }

    #[test]
    fn deallocate_then_register_again_at_the_same_stag() {
        let (mut pa, mut a, pd) = setup(4);
        let (mut pb, mut b, _) = replica(4, 0x5eed);
        let s = a.alloc_mw(&mut pa, pd, MwType::Type1).unwrap();
        b.alloc_mw_at(&mut pb, s, pd, MwType::Type1).unwrap();
        b.dealloc_stag(&mut pb, s).unwrap();
        assert!(!b.stag_in_use(s.index()));
        assert_eq!(b.query_mw(s), Err(VerbError::InvalidStag));
        assert_eq!(pb.users(pd), Some(0));
        assert_eq!(
            b.dealloc_stag(&mut pb, s),
            Err(VerbError::InvalidStag),
            "once only"
        );
        assert_eq!(b.reg_mr_at(&mut pb, s, &attr(pd, 0, 8), Some(64)), Ok(s));
        assert!(b.query_mr(s).is_ok(), "now a region");
        assert_free_list_consistent(&b);
        // After deallocation the usual allocator moves the slot on: never the old index.
        b.dealloc_stag(&mut pb, s).unwrap();
        for _ in 0..4 {
            let n = b.alloc_mw(&mut pb, pd, MwType::Type2).unwrap();
            assert_ne!(n.index(), s.index());
        }
    }

    #[test]
    fn a_mirror_never_collides_and_fills_exactly() {
        // The first engine allocates and frees in a pattern; the replica (same seed and
        // size) follows with `*_at` and Deallocate. Every call succeeds on both.
        const N: usize = 64;
        let (mut pa, mut a, pd) = setup(N);
        let (mut pb, mut b, _) = replica(N, 0x5eed);
        let mut live: Vec<Stag> = Vec::new();
        let mut x = 7u32;
        for step in 0..2000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            if live.len() < N && (x >> 28) < 10 {
                let s = match step % 3 {
                    0 => a.reg_mr(&mut pa, &attr(pd, 0, 8), Some(64)),
                    1 => a.alloc_mr_stag(&mut pa, pd, 8, false),
                    _ => a.alloc_mw(&mut pa, pd, MwType::Type2),
                }
                .unwrap();
                let r = match step % 3 {
                    0 => b.reg_mr_at(&mut pb, s, &attr(pd, 0, 8), Some(64)),
                    1 => b.alloc_mr_stag_at(&mut pb, s, pd, 8, false),
                    _ => b.alloc_mw_at(&mut pb, s, pd, MwType::Type2),
                };
                assert_eq!(r, Ok(s), "step {step}");
                live.push(s);
            } else if !live.is_empty() {
                let s = live.swap_remove(x as usize % live.len());
                a.dealloc_stag(&mut pa, s).unwrap();
                b.dealloc_stag(&mut pb, s).unwrap();
            }
        }
        assert_free_list_consistent(&b);
        assert_eq!(b.len(), live.len());
        // The replica's own allocator fills exactly the rest, never a live index.
        for _ in live.len()..N {
            let s = b.alloc_mw(&mut pb, pd, MwType::Type2).unwrap();
            assert!(live.iter().all(|l| l.index() != s.index()));
            live.push(s);
        }
        assert_eq!(
            b.alloc_mw(&mut pb, pd, MwType::Type2),
            Err(VerbError::InsufficientResources)
        );
        assert_free_list_consistent(&b);
    }

    #[test]
    fn another_seed_may_refuse_but_never_aliases() {
        const N: usize = 32;
        let (mut pa, mut a, pd) = setup(N);
        let (mut pb, mut b, _) = replica(N, 0xdead_beef);
        let mut placed = Vec::new();
        for _ in 0..N {
            let s = a.reg_mr(&mut pa, &attr(pd, 0, 8), Some(64)).unwrap();
            match b.reg_mr_at(&mut pb, s, &attr(pd, 0, 8), Some(64)) {
                Ok(got) => {
                    assert_eq!(got, s);
                    placed.push(s);
                }
                Err(e) => assert_eq!(e, VerbError::InsufficientResources),
            }
        }
        assert!(!placed.is_empty());
        for s in &placed {
            assert!(b.query_mr(*s).is_ok());
        }
        let mut own = Vec::new();
        while let Ok(s) = b.alloc_mw(&mut pb, pd, MwType::Type2) {
            assert!(placed.iter().all(|p| p.index() != s.index()));
            own.push(s);
        }
        assert_eq!(placed.len() + own.len(), N, "every free slot is usable");
        assert_free_list_consistent(&b);
    }
}
