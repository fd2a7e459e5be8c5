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
//! Logical contract (not memory safety): the control thread calls `remove` only after
//! every core acknowledged that no MR uses the region any more; an id may be reused by a
//! later `insert`.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use iwarp_types::RegionId;

use crate::SharedMapping;

/// Default number of slots of a table.
pub const DEFAULT_TABLE_SLOTS: usize = 65536;
/// Reader counters of a table (readers beyond this share counters, which stays correct).
pub const MAX_READERS: usize = 128;

/// One reader counter on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct ReaderLine(AtomicU64);

/// A fixed-capacity table of shared mappings.
pub struct RegionTable {
    slots: Box<[AtomicPtr<SharedMapping>]>,
    readers: Box<[ReaderLine]>,
    next_reader: AtomicUsize,
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
        // SAFETY: `raw` came from `Arc::into_raw` in `insert`; the slot no longer holds it
        // and every reader that loaded it has left (counters seen at zero after the
        // swap), so this is the only owner of that strong count.
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
        let t3 = t.clone();
        let remover = std::thread::spawn(move || t3.remove(id));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !remover.is_finished(),
            "remove returned while a reader used the mapping"
        );
        go_tx.send(()).unwrap();
        assert!(reader.join().unwrap().is_some());
        let m = remover.join().unwrap().unwrap();
        let mut b = [0u8; 1];
        m.read(4095, &mut b).unwrap();
        assert_eq!(b, [1]);
    }
}
