//! Bounded out-of-order receive buffer, allocated only on loss.
//!
//! A ring of `max_bytes` indexed by stream offset modulo its size, covering offsets
//! `[rcv_nxt, rcv_nxt + max_bytes)`, and at most `max_ranges` disjoint ranges. Data that
//! does not fit is dropped (and so not SACKed). The storage is allocated by the first
//! [`OooBuffer::insert`] (the first out-of-order segment: loss, off the common path) and
//! given back by [`OooBuffer::release`] once drained, so a connection without loss holds
//! no memory here. A FIN that arrives ahead of missing data is remembered too.

/// Outcome of [`OooBuffer::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OooInsert {
    /// All of it is now held.
    Stored,
    /// None of it could be held.
    Dropped,
}

/// Out-of-order data waiting for a hole to fill.
#[derive(Clone)]
pub struct OooBuffer {
    /// Empty until the first insert; then `max_bytes` long.
    ring: Vec<u8>,
    /// Sorted, disjoint, non-adjacent `[start, end)` stream offsets. No capacity until the
    /// first insert; then `max_ranges`, never more.
    ranges: Vec<(u64, u64)>,
    max_bytes: usize,
    max_ranges: usize,
    /// Start of the range that received data most recently (first SACK block).
    recent: Option<u64>,
    /// Stream offset of a FIN received ahead of missing data.
    fin: Option<u64>,
}

impl core::fmt::Debug for OooBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OooBuffer")
            .field("max_bytes", &self.max_bytes)
            .field("allocated", &self.ring.len())
            .field("ranges", &self.ranges)
            .field("recent", &self.recent)
            .field("fin", &self.fin)
            .finish()
    }
}

impl OooBuffer {
    /// A buffer of at most `max_bytes` and `max_ranges` ranges; nothing is allocated yet.
    pub fn new(max_bytes: usize, max_ranges: usize) -> OooBuffer {
        OooBuffer {
            ring: Vec::new(),
            ranges: Vec::new(),
            max_bytes,
            max_ranges,
            recent: None,
            fin: None,
        }
    }

    /// Lowers the byte bound (the receive window shrank before any use). Has no effect
    /// once storage is allocated.
    pub fn limit_bytes(&mut self, max_bytes: usize) {
        if self.ring.is_empty() {
            self.max_bytes = self.max_bytes.min(max_bytes);
        }
    }

    /// Bytes of heap this buffer holds.
    pub fn heap_bytes(&self) -> usize {
        self.ring.capacity() + self.ranges.capacity() * core::mem::size_of::<(u64, u64)>()
    }

    /// Gives the storage back if nothing is held. Returns whether it is now released.
    pub fn release(&mut self) -> bool {
        if self.ranges.is_empty() {
            self.ring = Vec::new();
            self.ranges = Vec::new();
            self.recent = None;
        }
        self.heap_bytes() == 0
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Held ranges, in offset order.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Start of the range most recently added to.
    pub fn recent(&self) -> Option<u64> {
        self.recent
    }

    /// Stream offset of a FIN held ahead of missing data.
    pub fn fin(&self) -> Option<u64> {
        self.fin
    }

    /// Remembers a FIN at stream `offset` (beyond `rcv_nxt`); the latest one wins, so a
    /// retransmission corrects a forged one.
    pub fn set_fin(&mut self, offset: u64) {
        self.fin = Some(offset);
    }

    /// Stores `data` at stream `offset` (beyond `rcv_nxt`).
    pub fn insert(&mut self, rcv_nxt: u64, offset: u64, data: &[u8]) -> OooInsert {
        let cap = self.max_bytes as u64;
        let limit = rcv_nxt.saturating_add(cap);
        let end = offset.saturating_add(data.len() as u64);
        let start = offset.max(rcv_nxt);
        // All or nothing: a segment that does not fit whole is dropped, so SACK edges
        // stay on the sender's segment (record) boundaries.
        let clip_end = end;
        if start >= clip_end || end > limit {
            return OooInsert::Dropped;
        }
        // Where the new range goes: ranges overlapping or touching [start, clip_end).
        let first = self.ranges.partition_point(|r| r.1 < start);
        let last = self.ranges.partition_point(|r| r.0 <= clip_end);
        if first == last && self.ranges.len() >= self.max_ranges {
            return OooInsert::Dropped;
        }
        if self.ring.len() != self.max_bytes {
            // First use since allocation or release: loss, off the common path.
            self.ring = vec![0; self.max_bytes];
            self.ranges.reserve_exact(self.max_ranges);
        }
        // Copy the bytes into the ring.
        let skip = (start - offset) as usize;
        let len = (clip_end - start) as usize;
        let src = data.get(skip..skip + len).unwrap_or(&[]);
        let pos = (start % cap) as usize;
        let first_part = src.len().min(self.ring.len() - pos);
        self.ring[pos..pos + first_part].copy_from_slice(&src[..first_part]);
        self.ring[..src.len() - first_part].copy_from_slice(&src[first_part..]);
        // Merge ranges first..last into one.
        let mut merged = (start, clip_end);
        if first < last {
            merged.0 = merged.0.min(self.ranges[first].0);
            merged.1 = merged.1.max(self.ranges[last - 1].1);
            self.ranges.drain(first + 1..last);
            self.ranges[first] = merged;
        } else {
            self.ranges.insert(first, merged);
        }
        self.recent = Some(merged.0);
        OooInsert::Stored
    }

    /// Forgets everything below `rcv_nxt` (delivered in order meanwhile).
    pub fn advance(&mut self, rcv_nxt: u64) {
        while let Some(r) = self.ranges.first_mut() {
            if r.1 <= rcv_nxt {
                self.ranges.remove(0);
            } else {
                if r.0 < rcv_nxt {
                    r.0 = rcv_nxt;
                }
                break;
            }
        }
        if let Some(rec) = self.recent {
            if !self.ranges.iter().any(|r| r.0 == rec) {
                self.recent = None;
            }
        }
        if self.fin.is_some_and(|f| f < rcv_nxt) {
            // Data went past it: it was not the peer's FIN.
            self.fin = None;
        }
    }

    /// The bytes held at `rcv_nxt`, as up to two slices (the ring may wrap).
    pub fn ready(&self, rcv_nxt: u64) -> Option<(&[u8], &[u8])> {
        let r = self.ranges.first()?;
        if r.0 != rcv_nxt {
            return None;
        }
        let cap = self.ring.len();
        let pos = (r.0 % cap as u64) as usize;
        let len = (r.1 - r.0) as usize;
        let a = len.min(cap - pos);
        Some((&self.ring[pos..pos + a], &self.ring[..len - a]))
    }

    /// Drops everything held (storage stays allocated until [`OooBuffer::release`]).
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.recent = None;
        self.fin = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_replays_across_ring_wrap() {
        let mut b = OooBuffer::new(8, 4);
        // rcv_nxt = 6, ring covers [6, 14).
        assert_eq!(b.insert(6, 9, b"def"), OooInsert::Stored);
        assert_eq!(b.insert(6, 12, b"gh"), OooInsert::Stored);
        assert_eq!(b.ranges(), &[(9, 14)]);
        assert_eq!(b.ready(6), None);
        assert_eq!(b.insert(6, 6, b"abc"), OooInsert::Stored);
        let (x, y) = b.ready(6).unwrap();
        let mut all = x.to_vec();
        all.extend_from_slice(y);
        assert_eq!(all, b"abcdefgh");
        b.advance(14);
        assert!(b.is_empty());
    }

    #[test]
    fn bounded_by_bytes_and_ranges() {
        let mut b = OooBuffer::new(10, 2);
        // Does not fit whole: dropped.
        assert_eq!(b.insert(0, 8, b"xyzw"), OooInsert::Dropped);
        assert_eq!(b.insert(0, 8, b"xy"), OooInsert::Stored);
        assert_eq!(b.ranges(), &[(8, 10)]);
        assert_eq!(b.insert(0, 10, b"q"), OooInsert::Dropped);
        assert_eq!(b.insert(0, 2, b"a"), OooInsert::Stored);
        // A third disjoint range does not fit.
        assert_eq!(b.insert(0, 5, b"m"), OooInsert::Dropped);
        // Adjacent data merges and fits.
        assert_eq!(b.insert(0, 3, b"bc"), OooInsert::Stored);
        assert_eq!(b.ranges(), &[(2, 5), (8, 10)]);
        assert_eq!(b.recent(), Some(2));
        // Below rcv_nxt is trimmed.
        b.advance(3);
        assert_eq!(b.ranges(), &[(3, 5), (8, 10)]);
        assert_eq!(b.recent(), None);
        assert_eq!(b.ready(3).map(|(a, _)| a.to_vec()), Some(b"bc".to_vec()));
    }

    #[test]
    fn zero_capacity_drops_everything() {
        let mut b = OooBuffer::new(0, 4);
        assert_eq!(b.insert(0, 5, b"abc"), OooInsert::Dropped);
        assert!(b.is_empty());
    }

    #[test]
    fn storage_is_allocated_on_first_use_and_released_when_drained() {
        let mut b = OooBuffer::new(1_000, 4);
        assert_eq!(b.heap_bytes(), 0);
        b.limit_bytes(500);
        assert_eq!(b.insert(0, 10, b"abc"), OooInsert::Stored);
        assert_eq!(b.heap_bytes(), 500 + 4 * 16);
        // Still holding data: not released.
        assert!(!b.release());
        assert_eq!(b.ranges(), &[(10, 13)]);
        // Bound fixed while allocated.
        b.limit_bytes(100);
        assert_eq!(b.insert(0, 400, b"z"), OooInsert::Stored);
        b.advance(500);
        assert!(b.is_empty());
        assert!(b.release());
        assert_eq!(b.heap_bytes(), 0);
        // Usable again after release, with the same bound.
        assert_eq!(b.insert(500, 510, b"q"), OooInsert::Stored);
        assert_eq!(b.heap_bytes(), 500 + 4 * 16);
        assert_eq!(b.insert(500, 1_000, b"x"), OooInsert::Dropped);
    }

    #[test]
    fn remembers_a_fin_until_data_goes_past_it() {
        let mut b = OooBuffer::new(100, 4);
        assert_eq!(b.fin(), None);
        b.set_fin(20);
        // A FIN alone allocates nothing.
        assert_eq!(b.heap_bytes(), 0);
        b.advance(20);
        assert_eq!(b.fin(), Some(20));
        b.set_fin(25);
        assert_eq!(b.fin(), Some(25));
        b.advance(26);
        assert_eq!(b.fin(), None);
        b.set_fin(30);
        b.clear();
        assert_eq!(b.fin(), None);
    }
}
