//! Start offsets of the data segments in flight, so a retransmission reuses the
//! original segment boundaries (FPDU alignment) instead of re-cutting the stream.
//! Bounded: when full, no new segment is sent until ACKs free room.

use std::collections::VecDeque;

/// Start offsets of unacknowledged segments, ascending.
#[derive(Clone, Debug)]
pub struct SegMap {
    starts: VecDeque<u64>,
    cap: usize,
}

impl SegMap {
    /// Room for `cap` segments, preallocated.
    pub fn new(cap: usize) -> SegMap {
        let cap = cap.max(1);
        SegMap {
            starts: VecDeque::with_capacity(cap),
            cap,
        }
    }

    /// Whether another new segment may be recorded.
    pub fn is_full(&self) -> bool {
        self.starts.len() >= self.cap
    }

    /// Records a first transmission starting at `start` (above every recorded start).
    pub fn record(&mut self, start: u64) {
        if self.starts.back().is_none_or(|&b| b < start) && !self.is_full() {
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
}
