//! The ring the send queue keeps its WQEs in: a fixed array reused in place.
//!
//! Not a `VecDeque`: a `VecDeque` can only append a whole value, so posting a WR wrote
//! every WQE twice (a blank entry, then the WR into it: about 450 bytes for a 64-byte
//! WRITE, 3 % of the daemon's core at 64 B). Here a post writes the fields a fresh WQE
//! needs into a slot that already holds an old one, and nothing else.

use iwarp_types::SendWr;

use crate::ctx::Loc;
use crate::qp::sq::{SqEntry, SqPhase, BLANK_ENTRY};

/// WQEs oldest first, at most `capacity()` of them (the SQ depth the QP was created or
/// modified with: the caller checks it before `push`).
pub(crate) struct WqeRing {
    slots: Box<[SqEntry]>,
    /// Index of the oldest WQE in `slots`.
    head: usize,
    len: usize,
}

impl WqeRing {
    /// An empty ring with room for `capacity` WQEs.
    pub(crate) fn with_capacity(capacity: usize) -> WqeRing {
        WqeRing {
            slots: vec![BLANK_ENTRY; capacity].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    /// Slot index of the `i`-th oldest WQE (`i < capacity`).
    #[inline]
    fn slot(&self, i: usize) -> usize {
        let s = self.head + i;
        if s >= self.slots.len() {
            s - self.slots.len()
        } else {
            s
        }
    }

    /// WQEs held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True if no WQE is held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// WQEs it can hold.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Grows to hold at least `capacity` WQEs (a modify that deepens the SQ), keeping
    /// them in order. Never shrinks.
    pub(crate) fn grow_to(&mut self, capacity: usize) {
        if capacity <= self.slots.len() {
            return;
        }
        let mut slots = vec![BLANK_ENTRY; capacity].into_boxed_slice();
        for (i, s) in slots.iter_mut().take(self.len).enumerate() {
            *s = self.slots[self.slot(i)];
        }
        self.slots = slots;
        self.head = 0;
    }

    /// The `i`-th oldest WQE.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&SqEntry> {
        if i >= self.len {
            return None;
        }
        self.slots.get(self.slot(i))
    }

    /// The `i`-th oldest WQE, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut SqEntry> {
        if i >= self.len {
            return None;
        }
        let s = self.slot(i);
        self.slots.get_mut(s)
    }

    /// The oldest WQE.
    #[inline]
    pub(crate) fn front(&self) -> Option<&SqEntry> {
        self.get(0)
    }

    /// The WQEs, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &SqEntry> + '_ {
        (0..self.len).filter_map(move |i| self.get(i))
    }

    /// Removes the oldest WQE (its slot keeps the bytes until reused); false if empty.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> bool {
        if self.len == 0 {
            return false;
        }
        self.head = self.slot(1);
        self.len -= 1;
        true
    }

    /// Appends a fresh WQE for `wr` with sequence number `seq` ([`WqeRing::next_wr`],
    /// then [`WqeRing::commit`]). False (nothing written) if the ring is full.
    #[cfg(test)]
    pub(crate) fn push(&mut self, wr: &SendWr, seq: u64) -> bool {
        match self.next_wr() {
            Some(w) => *w = *wr,
            None => return false,
        }
        self.commit(seq)
    }

    /// The WR of the slot the next WQE goes in, to be written in place (it holds an old
    /// WR until then); None if the ring is full. Nothing is appended until
    /// [`WqeRing::commit`].
    #[inline]
    pub(crate) fn next_wr(&mut self) -> Option<&mut SendWr> {
        if self.len >= self.slots.len() {
            return None;
        }
        let s = self.slot(self.len);
        self.slots.get_mut(s).map(|e| &mut e.wr)
    }

    /// Appends the WQE whose WR [`WqeRing::next_wr`] wrote, with sequence number `seq`
    /// and the progress fields a new WQE starts from (`locs` of its SGEs back to
    /// [`Loc::EMPTY`]; the others are never read past the SGL). False if full.
    #[inline]
    pub(crate) fn commit(&mut self, seq: u64) -> bool {
        if self.len >= self.slots.len() {
            return false;
        }
        let s = self.slot(self.len);
        let Some(e) = self.slots.get_mut(s) else {
            return false;
        };
        e.seq = seq;
        e.phase = SqPhase::Posted;
        e.sent = 0;
        e.len = 0;
        e.msn = 0;
        let n = e.wr.sgl.len();
        for l in e.locs.iter_mut().take(n) {
            *l = Loc::EMPTY;
        }
        e.locs_epoch = None;
        e.reported = false;
        self.len += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qp::sq::tests::wr;
    use iwarp_types::SgList;

    /// Pushes past the end of the array wrap around; order, lookups and the full and
    /// empty answers hold at every fill level, and growing keeps the order.
    #[test]
    fn wraps_fills_empties_and_grows_in_order() {
        let mut r = WqeRing::with_capacity(3);
        let mut next = 0u64;
        let mut oldest = 0u64;
        for round in 0..10 {
            while r.push(&wr(next), next) {
                next += 1;
            }
            assert_eq!(r.len(), 3, "round {round}");
            assert!(!r.push(&wr(99), 99));
            for i in 0..3 {
                assert_eq!(r.get(i).map(|e| e.seq), Some(oldest + i as u64));
            }
            assert!(r.get(3).is_none());
            let pops = round % 3 + 1;
            for _ in 0..pops {
                assert!(r.pop_front());
                oldest += 1;
            }
            assert_eq!(
                r.front().map(|e| e.wr.wr_id),
                Some(oldest).filter(|_| pops < 3)
            );
        }
        assert!(r.iter().map(|e| e.seq).eq(oldest..next));
        while r.pop_front() {}
        assert!(r.is_empty() && r.front().is_none() && !r.pop_front());
        r.push(&wr(next), next);
        r.push(&wr(next + 1), next + 1);
        r.grow_to(8);
        assert_eq!(r.capacity(), 8);
        for i in 0..6 {
            assert!(r.push(&wr(next + 2 + i), next + 2 + i));
        }
        assert!(!r.push(&wr(0), 0));
        for i in 0..8 {
            assert_eq!(r.get(i).map(|e| e.seq), Some(next + i as u64));
        }
    }

    /// A reused slot starts over: whatever the old WQE left is reset.
    #[test]
    fn a_reused_slot_is_a_fresh_wqe() {
        let mut r = WqeRing::with_capacity(1);
        let mut w = wr(1);
        w.sgl = SgList::single(iwarp_types::Sge {
            addr: 0,
            length: 8,
            lkey: iwarp_types::Stag(5),
        });
        assert!(r.push(&w, 0));
        if let Some(e) = r.get_mut(0) {
            e.phase = SqPhase::AwaitAck;
            e.sent = 8;
            e.len = 8;
            e.msn = 3;
            e.locs[0] = Loc {
                region: iwarp_types::RegionId(7),
                offset: 64,
            };
            e.locs_epoch = Some(4);
            e.reported = true;
        }
        assert!(r.pop_front());
        assert!(r.push(&w, 1));
        let e = r.front().copied();
        assert!(e.is_some_and(|e| e.seq == 1
            && e.phase == SqPhase::Posted
            && (e.sent, e.len, e.msn) == (0, 0, 0)
            && e.locs[0] == Loc::EMPTY
            && e.locs_epoch.is_none()
            && !e.reported));
    }
}
