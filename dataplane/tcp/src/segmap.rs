//! Start offsets of the data segments in flight, so a retransmission reuses the
//! original segment boundaries (FPDU alignment) instead of re-cutting the stream.
//! Bounded: when full, no new segment is sent until ACKs free room.
//!
//! The storage follows the segments actually in flight (so the connection's window, not
//! the configured maximum): it starts empty, doubles when a first transmission finds it
//! full (at most `log2(cap)` times while the window opens), never exceeds `cap`, and is
//! given back by [`SegMap::release_storage`] when nothing is in flight.

use std::collections::VecDeque;

/// Capacity of the first allocation.
const MIN_SEGMENTS: usize = 8;

/// Start offsets of unacknowledged segments, ascending.
#[derive(Clone, Debug)]
pub struct SegMap {
    starts: VecDeque<u64>,
    cap: usize,
}

impl SegMap {
    /// Room for at most `cap` segments; nothing is allocated yet.
    pub fn new(cap: usize) -> SegMap {
        let cap = cap.max(1);
        SegMap {
            starts: VecDeque::new(),
            cap,
        }
    }

    /// Bytes of heap held.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * core::mem::size_of::<u64>()
    }

    /// Gives the storage back if nothing is in flight. Returns whether it is now released.
    pub fn release_storage(&mut self) -> bool {
        if self.starts.is_empty() {
            self.starts = VecDeque::new();
        }
        self.heap_bytes() == 0
    }

    /// Whether another new segment may be recorded.
    pub fn is_full(&self) -> bool {
        self.starts.len() >= self.cap
    }

    /// Records a first transmission starting at `start` (above every recorded start).
    pub fn record(&mut self, start: u64) {
        if self.starts.back().is_none_or(|&b| b < start) && !self.is_full() {
            let len = self.starts.len();
            if len == self.starts.capacity() {
                // Double (from 8), never past `cap`.
                let grow = len.max(MIN_SEGMENTS).min(self.cap - len);
                self.starts.reserve_exact(grow);
            }
            self.starts.push_back(start);
        }
    }

    /// Forgets segments wholly below `snd_una` (`snd_max` ends the last one).
    pub fn release(&mut self, snd_una: u64, snd_max: u64) {
        if snd_una >= snd_max {
            self.starts.clear();
            return;
        }
        while self.starts.len() >= 2 && self.starts[1] <= snd_una {
            self.starts.pop_front();
        }
    }

    /// End of the original segment containing `offset`: the next recorded start, or
    /// `snd_max`.
    pub fn end_of(&self, offset: u64, snd_max: u64) -> u64 {
        let i = self.starts.partition_point(|&s| s <= offset);
        self.starts.get(i).copied().unwrap_or(snd_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_release_and_bound() {
        let mut m = SegMap::new(3);
        m.record(0);
        m.record(800);
        m.record(1800);
        assert!(m.is_full());
        m.record(2500);
        assert_eq!(m.end_of(0, 2500), 800);
        assert_eq!(m.end_of(900, 2500), 1800);
        assert_eq!(m.end_of(1800, 2500), 2500);
        m.release(900, 2500);
        assert!(!m.is_full());
        assert_eq!(m.end_of(900, 2500), 1800);
        m.release(2500, 2500);
        assert_eq!(m.end_of(2500, 3000), 3000);
    }

    #[test]
    fn storage_grows_with_the_flight_and_is_released_when_idle() {
        let mut m = SegMap::new(20);
        assert_eq!(m.heap_bytes(), 0);
        m.record(0);
        let first = m.heap_bytes();
        assert!((8 * 8..16 * 8).contains(&first), "{first}");
        for i in 1..20u64 {
            m.record(i * 100);
        }
        assert!(m.is_full());
        m.record(5_000);
        // Bounded by cap (VecDeque may round up a little).
        assert!(m.heap_bytes() < 2 * 20 * 8, "{}", m.heap_bytes());
        assert_eq!(m.end_of(1_850, 2_000), 1_900);
        assert!(!m.release_storage());
        m.release(2_000, 2_000);
        assert!(m.release_storage());
        assert_eq!(m.heap_bytes(), 0);
    }
}
