//! A bounded slab addressed by generation-checked 32-bit handles, shared by the PD, CQ and
//! SRQ tables.
//!
//! A handle is `generation << 24 | (slot + 1)`: never zero, and a handle kept after its
//! object was removed no longer matches once the slot is reused (the generation moved on).
//! All storage is allocated at construction.

/// Largest number of slots (the slot number must fit in 24 bits, slot + 1 included).
pub(crate) const MAX_SLOTS: usize = (1 << 24) - 2;

struct Slot<T> {
    generation: u8,
    value: Option<T>,
}

/// A bounded table of `T` addressed by `u32` handles.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// Free slot numbers; the next one handed out is at the end.
    free: Vec<u32>,
}

impl<T> Slab<T> {
    /// A slab of `capacity` slots (clamped to [`MAX_SLOTS`]).
    pub(crate) fn new(capacity: usize) -> Slab<T> {
        let capacity = capacity.min(MAX_SLOTS);
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, || Slot {
            generation: 0,
            value: None,
        });
        // Hand out low slots first.
        let free = (0..capacity as u32).rev().collect();
        Slab { slots, free }
    }

    /// Stores `value`; `None` (and `value` dropped) if every slot is taken.
    pub(crate) fn insert(&mut self, value: T) -> Option<u32> {
        let slot = self.free.pop()?;
        let entry = self.slots.get_mut(slot as usize)?;
        entry.value = Some(value);
        Some(((entry.generation as u32) << 24) | (slot + 1))
    }

    fn slot_of(handle: u32) -> Option<(usize, u8)> {
        let slot = (handle & 0x00ff_ffff).checked_sub(1)?;
        Some((slot as usize, (handle >> 24) as u8))
    }

    /// The value of `handle`, if it is live.
    pub(crate) fn get(&self, handle: u32) -> Option<&T> {
        let (slot, generation) = Self::slot_of(handle)?;
        let entry = self.slots.get(slot)?;
        if entry.generation != generation {
            return None;
        }
        entry.value.as_ref()
    }

    /// The value of `handle`, if it is live, mutably.
    pub(crate) fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        let (slot, generation) = Self::slot_of(handle)?;
        let entry = self.slots.get_mut(slot)?;
        if entry.generation != generation {
            return None;
        }
        entry.value.as_mut()
    }

    /// Removes and returns the value of `handle`; the handle becomes stale.
    pub(crate) fn remove(&mut self, handle: u32) -> Option<T> {
        let (slot, generation) = Self::slot_of(handle)?;
        let entry = self.slots.get_mut(slot)?;
        if entry.generation != generation {
            return None;
        }
        let value = entry.value.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(slot as u32);
        Some(value)
    }

    /// Number of live values.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Number of slots.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_generation_checked() {
        let mut s: Slab<u8> = Slab::new(2);
        let a = s.insert(1).unwrap();
        let b = s.insert(2).unwrap();
        assert_eq!(s.insert(3), None);
        assert_ne!(a, 0);
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(a), Some(1));
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        let c = s.insert(4).unwrap();
        assert_ne!(c, a, "a reused slot gets a new handle");
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(c), Some(&4));
        *s.get_mut(b).unwrap() = 9;
        assert_eq!(s.get(b), Some(&9));
        assert_eq!(s.get(0), None);
        assert_eq!(s.get(0xffff_ffff), None);
        assert_eq!(s.capacity(), 2);
    }
}
