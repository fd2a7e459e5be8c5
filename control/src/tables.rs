//! Bounded per-client handle tables. A handle packs a slot index (low
//! [`SLOT_BITS`] bits) and a generation (high bits, never 0), so a freed handle does not
//! name the slot's next occupant and a forged value names nothing.

/// Bits of a handle that hold the slot.
pub const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
const GEN_MAX: u32 = (1 << (32 - SLOT_BITS)) - 1;

/// A table of at most `capacity` entries addressed by packed handles.
#[derive(Debug)]
pub struct Table<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    len: usize,
    capacity: usize,
}

impl<T> Table<T> {
    /// An empty table of at most `capacity` entries (at most 2^20).
    pub fn new(capacity: usize) -> Table<T> {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            capacity: capacity.min(SLOT_MASK as usize + 1),
        }
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The handle the next `insert` will return (`None` if full): lets a caller set up
    /// shared state that names the handle before committing the entry.
    pub fn next_handle(&self) -> Option<u32> {
        if self.len >= self.capacity {
            return None;
        }
        let slot = match self.free.last() {
            Some(&s) => s,
            None => self.slots.len() as u32,
        };
        let gen = self.slots.get(slot as usize).map_or(1, |s| s.0);
        Some(gen << SLOT_BITS | slot)
    }

    /// Inserts `v`; its handle, or `None` if the table is full.
    pub fn insert(&mut self, v: T) -> Option<u32> {
        let h = self.next_handle()?;
        let slot = h & SLOT_MASK;
        if slot as usize == self.slots.len() {
            self.slots.push((1, Some(v)));
        } else {
            self.free.pop();
            self.slots[slot as usize].1 = Some(v);
        }
        self.len += 1;
        Some(h)
    }

    fn index(&self, h: u32) -> Option<usize> {
        let slot = (h & SLOT_MASK) as usize;
        let gen = h >> SLOT_BITS;
        match self.slots.get(slot) {
            Some((g, Some(_))) if *g == gen => Some(slot),
            _ => None,
        }
    }

    /// The slot of a live handle (a dense index below the capacity).
    pub fn slot(&self, h: u32) -> Option<u32> {
        self.index(h).map(|i| i as u32)
    }

    /// The entry of `h`, if live.
    pub fn get(&self, h: u32) -> Option<&T> {
        self.index(h).and_then(|i| self.slots[i].1.as_ref())
    }

    /// The entry of `h`, if live.
    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        self.index(h).and_then(|i| self.slots[i].1.as_mut())
    }

    /// Removes `h`; its entry if it was live.
    pub fn remove(&mut self, h: u32) -> Option<T> {
        let i = self.index(h)?;
        let v = self.slots[i].1.take();
        let g = self.slots[i].0;
        self.slots[i].0 = if g >= GEN_MAX { 1 } else { g + 1 };
        self.free.push(i as u32);
        self.len -= 1;
        v
    }

    /// Every live entry with its handle.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, (g, v))| v.as_ref().map(|v| (g << SLOT_BITS | i as u32, v)))
    }

    /// The handles of every live entry.
    pub fn handles(&self) -> Vec<u32> {
        self.iter().map(|(h, _)| h).collect()
    }
}

/// A bitmap allocator of doorbell bits (per client and core).
#[derive(Debug)]
pub struct BitAlloc {
    words: Vec<u64>,
    bits: u32,
}

impl BitAlloc {
    /// `bits` bits, all free.
    pub fn new(bits: u32) -> BitAlloc {
        BitAlloc {
            words: vec![0; bits.div_ceil(64) as usize],
            bits,
        }
    }

    /// The lowest free bit, now taken.
    pub fn alloc(&mut self) -> Option<u32> {
        for (w, word) in self.words.iter_mut().enumerate() {
            if *word != u64::MAX {
                let b = w as u32 * 64 + (!*word).trailing_zeros();
                if b >= self.bits {
                    return None;
                }
                *word |= 1 << (b % 64);
                return Some(b);
            }
        }
        None
    }

    /// Frees `bit` (ignored if not taken).
    pub fn free(&mut self, bit: u32) {
        if let Some(w) = self.words.get_mut((bit / 64) as usize) {
            *w &= !(1 << (bit % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_generational_and_bounded() {
        let mut t: Table<&str> = Table::new(2);
        let a = t.insert("a").unwrap();
        let b = t.insert("b").unwrap();
        assert_ne!(a, b);
        assert!(t.insert("c").is_none(), "bounded");
        assert_eq!(t.get(a), Some(&"a"));
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.get(a), None, "freed handle names nothing");
        let c = t.insert("c").unwrap();
        assert_eq!(c & SLOT_MASK, a & SLOT_MASK, "slot reused");
        assert_ne!(c, a, "with a new generation");
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(0xdead_beef), None);
        assert_eq!(t.get(u32::MAX), None);
        assert_eq!(t.remove(0), None);
        assert_eq!(t.len(), 2);
        let mut hs = t.handles();
        hs.sort_unstable();
        let mut want = vec![b, c];
        want.sort_unstable();
        assert_eq!(hs, want);
        assert_eq!(t.slot(b), Some(1));
    }

    #[test]
    fn next_handle_predicts_insert() {
        let mut t: Table<u8> = Table::new(4);
        for i in 0..4 {
            let p = t.next_handle().unwrap();
            assert_eq!(t.insert(i).unwrap(), p);
        }
        assert_eq!(t.next_handle(), None);
        let h = t.handles()[2];
        t.remove(h);
        let p = t.next_handle().unwrap();
        assert_eq!(t.insert(9).unwrap(), p);
    }

    #[test]
    fn bits_allocate_lowest_first_and_bounded() {
        let mut b = BitAlloc::new(70);
        for i in 0..70 {
            assert_eq!(b.alloc(), Some(i));
        }
        assert_eq!(b.alloc(), None);
        b.free(65);
        b.free(3);
        assert_eq!(b.alloc(), Some(3));
        assert_eq!(b.alloc(), Some(65));
        b.free(1000);
    }
}
