//! [`RegionTable`]: the arenas of every client, indexed by `RegionId`, shared by the
//! control thread (insert, remove) and every dataplane core (lookups, lock-free).
//!
//! A slot holds an `Arc<SharedMapping>` turned into a raw pointer and published with an
//! atomic store. A reader announces itself on its own reader counter (one cache line per
//! reader, [`MAX_READERS`] of them) before it loads a slot and leaves after its copy;
//! `remove` clears the slot, then waits until every reader counter has been seen at zero,
//! so no reader still uses the old pointer when the `Arc` is handed back (sequentially
//! consistent store/load on both sides: the reader's announce and the remover's clear
//! cannot both miss each other). The fast path is one uncontended atomic add and
//! subtract on the core's own line and one load: no lock, no allocation, no syscall.
//!
//! Sections: those two atomic operations are locked instructions, each a full barrier
//! that waits for the core's store buffer to drain (after a frame's copy, a wait): on a
//! core posting 64-byte WRITEs they took a tenth of its time. So a reader that owns a
//! section line of its own ([`MAX_SECTIONS`] of them, claimed by [`ShmMemory`]) may
//! announce itself once for a batch of accesses instead: entering adds one to its line
//! (odd: inside; a sequentially consistent add, the batch's only full barrier), each
//! access inside is one load of the slot, leaving adds one more with a release store
//! (even: outside). `remove`, after clearing the slot, waits for every line it sees odd
//! to change: a reader that entered before the clear leaves within its batch, one that
//! entered after it loads the cleared slot. A dataplane core's batch is one iteration of
//! its loop (bounded work, no waiting), so `remove` waits at most about one iteration.
//!
//! [`ShmMemory`]: crate::ShmMemory
//!
//! Logical contract (not memory safety): the control thread calls `remove` only after
//! every core acknowledged that no MR uses the region any more; an id may be reused by a
//! later `insert`.

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use iwarp_types::RegionId;

use crate::SharedMapping;

/// Default number of slots of a table.
pub const DEFAULT_TABLE_SLOTS: usize = 65536;
/// Reader counters of a table (readers beyond this share counters, which stays correct).
pub const MAX_READERS: usize = 128;

/// Section lines of a table: readers that announce themselves once per batch (more
/// readers than this announce every access, which stays correct).
pub const MAX_SECTIONS: usize = 128;

/// One reader counter on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct ReaderLine(AtomicU64);

/// A fixed-capacity table of shared mappings.
pub struct RegionTable {
    slots: Box<[AtomicPtr<SharedMapping>]>,
    readers: Box<[ReaderLine]>,
    next_reader: AtomicUsize,
    /// Section lines (odd: the owner is inside a batch), each owned by one reader.
    sections: Box<[ReaderLine]>,
    /// Which section lines are owned.
    section_owned: Box<[AtomicBool]>,
    /// Live entries and the next slot to try; only `insert` / `remove` take it.
    alloc: Mutex<(usize, usize)>,
}

impl std::fmt::Debug for RegionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionTable")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

impl Default for RegionTable {
    fn default() -> Self {
        RegionTable::new(DEFAULT_TABLE_SLOTS)
    }
}

impl RegionTable {
    /// An empty table of `capacity` slots (at least 1, at most `u32::MAX`).
    pub fn new(capacity: usize) -> RegionTable {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        RegionTable {
            slots: (0..capacity)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            readers: (0..MAX_READERS).map(|_| ReaderLine::default()).collect(),
            next_reader: AtomicUsize::new(0),
            sections: (0..MAX_SECTIONS).map(|_| ReaderLine::default()).collect(),
            section_owned: (0..MAX_SECTIONS).map(|_| AtomicBool::new(false)).collect(),
            alloc: Mutex::new((0, 0)),
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.alloc
            .lock()
            .map(|g| g.0)
            .unwrap_or_else(|p| p.into_inner().0)
    }

    /// True if no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Publishes `mapping` in a free slot (the lowest free one at or after the last
    /// allocated, wrapping); `None` if the table is full. Control thread.
    pub fn insert(&self, mapping: Arc<SharedMapping>) -> Option<RegionId> {
        let mut g = self.alloc.lock().unwrap_or_else(|p| p.into_inner());
        if g.0 >= self.slots.len() {
            return None;
        }
        let n = self.slots.len();
        for k in 0..n {
            let i = (g.1 + k) % n;
            if self.slots[i].load(Ordering::SeqCst).is_null() {
                let raw = Arc::into_raw(mapping).cast_mut();
                self.slots[i].store(raw, Ordering::SeqCst);
                g.0 += 1;
                g.1 = (i + 1) % n;
                return Some(RegionId(i as u32));
            }
        }
        None
    }

    /// Unpublishes `id` and returns its mapping once no reader can still use it (it waits
    /// for readers in flight, which only copy bytes). `None` if `id` is not live.
    /// Control thread; see the module documentation for when it may be called.
    pub fn remove(&self, id: RegionId) -> Option<Arc<SharedMapping>> {
        let mut g = self.alloc.lock().unwrap_or_else(|p| p.into_inner());
        let slot = self.slots.get(id.0 as usize)?;
        let raw = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        if raw.is_null() {
            return None;
        }
        g.0 -= 1;
        drop(g);
        for r in self.readers.iter() {
            while r.0.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        // A section entered before the swap (its add precedes the swap in the single
        // order of sequentially consistent operations) shows odd here or has moved on;
        // one entered after it loads the cleared slot.
        for line in self.sections.iter() {
            let seen = line.0.load(Ordering::SeqCst);
            if seen % 2 == 1 {
                while line.0.load(Ordering::SeqCst) == seen {
                    std::thread::yield_now();
                }
            }
        }
        // SAFETY: `raw` came from `Arc::into_raw` in `insert`; the slot no longer holds it
        // and every reader that loaded it has left (counters seen at zero after the
        // swap, every section open at the swap closed: their release stores were seen),
        // so this is the only owner of that strong count.
        Some(unsafe { Arc::from_raw(raw) })
    }

    /// The mapping of `id` (a new `Arc`), `None` if not live.
    pub fn get(&self, id: RegionId) -> Option<Arc<SharedMapping>> {
        self.with(0, id, |m| {
            let raw: *const SharedMapping = m;
            // SAFETY: `raw` is the pointer of a live `Arc` held by the slot, kept alive
            // while we are announced as a reader; adding a strong count is allowed.
            unsafe {
                Arc::increment_strong_count(raw);
                Arc::from_raw(raw)
            }
        })
    }

    /// A reader counter index for a new reader (round robin).
    pub(crate) fn reader_index(&self) -> usize {
        self.next_reader.fetch_add(1, Ordering::Relaxed) % MAX_READERS
    }

    /// Takes a section line of its own for a new reader; `None` when all are owned.
    pub(crate) fn claim_section(&self) -> Option<usize> {
        self.section_owned.iter().position(|owned| {
            owned
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Gives back section line `line` (its owner is outside).
    pub(crate) fn release_section(&self, line: usize) {
        if let Some(owned) = self.section_owned.get(line) {
            owned.store(false, Ordering::Release);
        }
    }

    /// The owner of section line `line` begins a batch of accesses.
    pub(crate) fn enter_section(&self, line: usize) {
        if let Some(l) = self.sections.get(line) {
            // The full barrier: the slot loads of the batch come after it (the remover's
            // swap and its load of this line are sequentially consistent too).
            l.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The owner of section line `line` ends its batch.
    pub(crate) fn leave_section(&self, line: usize) {
        if let Some(l) = self.sections.get(line) {
            // Only the owner writes its line: a load and a release store, no locked
            // instruction. The remover's load of the new value orders every access of
            // the batch before its release of the mapping.
            let v = l.0.load(Ordering::Relaxed);
            l.0.store(v.wrapping_add(1), Ordering::Release);
        }
    }

    /// Runs `f` on the mapping of `id` from inside a batch.
    ///
    /// # Safety
    ///
    /// The caller owns section line `line` ([`RegionTable::claim_section`]) and entered
    /// it ([`RegionTable::enter_section`]) without leaving it since.
    pub(crate) unsafe fn with_in_section<R>(
        &self,
        line: usize,
        id: RegionId,
        f: impl FnOnce(&SharedMapping) -> R,
    ) -> Option<R> {
        debug_assert!(self
            .sections
            .get(line)
            .is_some_and(|l| l.0.load(Ordering::Relaxed) % 2 == 1));
        let slot = self.slots.get(id.0 as usize)?;
        let raw = slot.load(Ordering::SeqCst);
        // SAFETY: a non-null slot pointer came from `Arc::into_raw`, and `remove` does not
        // release the `Arc` while a section that was open when it cleared the slot stays
        // open (the caller's is, by this function's contract: entered with a sequentially
        // consistent add before this load, left only after `f` returns).
        unsafe { raw.as_ref() }.map(f)
    }

    /// Runs `f` on the mapping of `id` while announced on reader counter `reader`.
    pub(crate) fn with<R>(
        &self,
        reader: usize,
        id: RegionId,
        f: impl FnOnce(&SharedMapping) -> R,
    ) -> Option<R> {
        let slot = self.slots.get(id.0 as usize)?;
        let counter = &self.readers[reader % MAX_READERS].0;
        counter.fetch_add(1, Ordering::SeqCst);
        let raw = slot.load(Ordering::SeqCst);
        // SAFETY: a non-null slot pointer came from `Arc::into_raw` and the `Arc` is not
        // released before `remove` has seen our counter at zero, which it cannot before
        // the `fetch_sub` below (we announced before loading, both SeqCst).
        let out = unsafe { raw.as_ref() }.map(f);
        counter.fetch_sub(1, Ordering::Release);
        out
    }
}

impl Drop for RegionTable {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            let raw = slot.swap(ptr::null_mut(), Ordering::SeqCst);
            if !raw.is_null() {
                // SAFETY: from `Arc::into_raw` in `insert`; no reader exists (we have
                // `&mut self`), the slot is cleared, so the count is released once.
                drop(unsafe { Arc::from_raw(raw) });
            }
        }
    }
}

/// Test kit: removes `id` on another thread while something holds it, checks that the
/// removal waits, then calls `release` and returns what the removal handed back.
#[cfg(test)]
pub(crate) fn remove_while_held(
    t: &Arc<RegionTable>,
    id: RegionId,
    release: impl FnOnce(),
) -> Option<Arc<SharedMapping>> {
    let t3 = t.clone();
    let remover = std::thread::spawn(move || t3.remove(id));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(
        !remover.is_finished(),
        "remove returned while the region was in use"
    );
    release();
    remover.join().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Backing;

    fn mapping(len: usize) -> Arc<SharedMapping> {
        Arc::new(SharedMapping::create("t", len, Backing::Pages).unwrap())
    }

    #[test]
    fn insert_get_remove_reuse() {
        let t = RegionTable::new(2);
        assert!(t.is_empty());
        let a = t.insert(mapping(64)).unwrap();
        let b = t.insert(mapping(128)).unwrap();
        assert_eq!((a, b, t.len()), (RegionId(0), RegionId(1), 2));
        assert!(t.insert(mapping(64)).is_none(), "full");
        assert_eq!(t.get(b).unwrap().len(), 128);
        let m = t.remove(a).unwrap();
        assert_eq!(Arc::strong_count(&m), 1);
        assert!(t.remove(a).is_none() && t.get(a).is_none());
        assert!(t.get(RegionId(99)).is_none() && t.remove(RegionId(99)).is_none());
        assert_eq!(t.insert(mapping(256)), Some(RegionId(0)));
        assert_eq!((t.len(), t.capacity()), (2, 2));
        assert_eq!(RegionTable::new(0).capacity(), 1);
    }

    #[test]
    fn remove_waits_for_readers() {
        let t = Arc::new(RegionTable::new(4));
        let id = t.insert(mapping(4096)).unwrap();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t2 = t.clone();
        let reader = std::thread::spawn(move || {
            t2.with(t2.reader_index(), id, |m| {
                entered_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                m.write(0, &[1; 4096]).unwrap();
            })
        });
        entered_rx.recv().unwrap();
        let m = remove_while_held(&t, id, || go_tx.send(()).unwrap()).unwrap();
        assert!(reader.join().unwrap().is_some());
        let mut b = [0u8; 1];
        m.read(4095, &mut b).unwrap();
        assert_eq!(b, [1]);
    }
}
