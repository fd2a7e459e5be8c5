//! The sender's SACK scoreboard (RFC 6675): which stream ranges above `snd.una` the
//! peer reported holding. Bounded: a report needing more ranges than configured is
//! ignored (the sender just knows less). Its storage is allocated by the first SACK (loss)
//! and given back by [`Scoreboard::release`] when empty.

/// SACKed ranges above `snd.una`, in stream offsets.
#[derive(Clone, Debug)]
pub struct Scoreboard {
    /// Sorted, disjoint, non-adjacent `[start, end)`.
    ranges: Vec<(u64, u64)>,
    max_ranges: usize,
}

impl Scoreboard {
    /// Room for `max_ranges` ranges, allocated at the first SACK.
    pub fn new(max_ranges: usize) -> Scoreboard {
        Scoreboard {
            ranges: Vec::new(),
            max_ranges,
        }
    }

    /// Bytes of heap held.
    pub fn heap_bytes(&self) -> usize {
        self.ranges.capacity() * core::mem::size_of::<(u64, u64)>()
    }

    /// Gives the storage back if nothing is SACKed. Returns whether it is now released.
    pub fn release(&mut self) -> bool {
        if self.ranges.is_empty() {
            self.ranges = Vec::new();
        }
        self.heap_bytes() == 0
    }

    /// Whether anything is SACKed.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Records `[start, end)` as held by the peer.
    pub fn add(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let first = self.ranges.partition_point(|r| r.1 < start);
        let last = self.ranges.partition_point(|r| r.0 <= end);
        if first < last {
            let s = start.min(self.ranges[first].0);
            let e = end.max(self.ranges[last - 1].1);
            self.ranges.drain(first + 1..last);
            self.ranges[first] = (s, e);
        } else if self.ranges.len() < self.max_ranges {
            if self.ranges.capacity() == 0 {
                // First SACK since allocation or release: loss, off the common path.
                self.ranges.reserve_exact(self.max_ranges);
            }
            self.ranges.insert(first, (start, end));
        }
    }

    /// Forgets ranges at or below the cumulative ACK point.
    pub fn advance(&mut self, snd_una: u64) {
        while let Some(r) = self.ranges.first_mut() {
            if r.1 <= snd_una {
                self.ranges.remove(0);
            } else {
                r.0 = r.0.max(snd_una);
                break;
            }
        }
    }

    /// Total SACKed bytes.
    pub fn sacked_bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.1 - r.0).sum()
    }

    /// SACKed bytes at or above `offset`.
    pub fn sacked_above(&self, offset: u64) -> u64 {
        self.ranges
            .iter()
            .filter(|r| r.1 > offset)
            .map(|r| r.1 - r.0.max(offset))
            .sum()
    }

    /// One past the highest SACKed byte.
    pub fn highest(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// Whether `offset` is SACKed.
    #[cfg(test)]
    pub fn contains(&self, offset: u64) -> bool {
        self.ranges.iter().any(|r| r.0 <= offset && offset < r.1)
    }

    /// The first un-SACKed run `[a, b)` with `from <= a < limit`, `b <= limit`.
    pub fn next_hole(&self, from: u64, limit: u64) -> Option<(u64, u64)> {
        let mut a = from;
        for r in &self.ranges {
            if r.1 <= a {
                continue;
            }
            if r.0 <= a {
                a = r.1;
                continue;
            }
            // r.0 > a: hole [a, r.0).
            break;
        }
        if a >= limit {
            return None;
        }
        let b = self
            .ranges
            .iter()
            .find(|r| r.0 > a)
            .map_or(limit, |r| r.0.min(limit));
        Some((a, b))
    }

    /// Bytes not SACKed in `[from, to)`.
    pub fn holes_between(&self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        let sacked: u64 = self
            .ranges
            .iter()
            .map(|r| r.1.min(to).saturating_sub(r.0.max(from)))
            .sum();
        (to - from) - sacked
    }

    /// Forgets everything (after an RTO, RFC 2018 section 8).
    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_holes_and_advance() {
        let mut s = Scoreboard::new(3);
        s.add(20, 30);
        s.add(40, 50);
        s.add(30, 35);
        assert_eq!(s.sacked_bytes(), 25);
        assert_eq!(s.highest(), Some(50));
        assert_eq!(s.next_hole(10, 50), Some((10, 20)));
        assert_eq!(s.next_hole(20, 50), Some((35, 40)));
        assert_eq!(s.next_hole(40, 50), None);
        assert_eq!(s.next_hole(40, 60), Some((50, 60)));
        assert_eq!(s.holes_between(10, 50), 15);
        assert_eq!(s.sacked_above(42), 8);
        assert!(s.contains(22) && !s.contains(37));
        s.advance(25);
        assert_eq!(s.sacked_bytes(), 20);
        s.advance(60);
        assert!(s.is_empty());
    }

    #[test]
    fn bounded_ranges_ignore_extra_reports() {
        let mut s = Scoreboard::new(1);
        s.add(10, 20);
        s.add(30, 40);
        assert_eq!(s.highest(), Some(20));
        s.add(5, 10);
        assert_eq!(s.sacked_bytes(), 15);
        s.add(8, 8);
        assert_eq!(s.sacked_bytes(), 15);
    }

    #[test]
    fn storage_comes_with_the_first_sack_and_goes_when_empty() {
        let mut s = Scoreboard::new(4);
        assert_eq!(s.heap_bytes(), 0);
        s.add(10, 20);
        assert_eq!(s.heap_bytes(), 4 * 16);
        assert!(!s.release());
        s.add(30, 40);
        s.add(50, 60);
        s.add(70, 80);
        // Never grows past the bound.
        s.add(90, 95);
        assert_eq!(s.heap_bytes(), 4 * 16);
        s.advance(100);
        assert!(s.release());
        assert_eq!(s.heap_bytes(), 0);
        s.add(110, 120);
        assert_eq!(s.highest(), Some(120));
    }
}
