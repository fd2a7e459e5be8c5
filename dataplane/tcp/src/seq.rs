//! TCP sequence numbers (RFC 9293 section 3.4): 32-bit values compared modulo 2^32.

use core::fmt;
use core::ops::{Add, Sub};

/// A TCP sequence number. Arithmetic wraps; comparisons are modulo 2^32 and are only
/// meaningful for values less than 2^31 apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// Signed distance `self - other`, valid while the two are less than 2^31 apart.
    pub const fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self < other` modulo 2^32.
    pub const fn lt(self, other: SeqNumber) -> bool {
        self.diff(other) < 0
    }

    /// `self <= other` modulo 2^32.
    pub const fn le(self, other: SeqNumber) -> bool {
        self.diff(other) <= 0
    }

    /// `self > other` modulo 2^32.
    pub const fn gt(self, other: SeqNumber) -> bool {
        self.diff(other) > 0
    }

    /// `self >= other` modulo 2^32.
    pub const fn ge(self, other: SeqNumber) -> bool {
        self.diff(other) >= 0
    }

    /// `lo <= self < hi` modulo 2^32 (an empty range when `lo == hi`).
    pub const fn in_range(self, lo: SeqNumber, hi: SeqNumber) -> bool {
        self.0.wrapping_sub(lo.0) < hi.0.wrapping_sub(lo.0)
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs))
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs))
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_across_wrap() {
        let a = SeqNumber(u32::MAX - 5);
        let b = a + 10;
        assert_eq!(b, SeqNumber(4));
        assert!(a.lt(b) && b.gt(a) && a.le(a) && a.ge(a));
        assert_eq!(b.diff(a), 10);
        assert_eq!(a.diff(b), -10);
        assert_eq!(b - 10, a);
    }

    #[test]
    fn in_range_wraps_and_is_half_open() {
        let lo = SeqNumber(u32::MAX - 1);
        let hi = lo + 4;
        assert!(lo.in_range(lo, hi));
        assert!(SeqNumber(1).in_range(lo, hi));
        assert!(!hi.in_range(lo, hi));
        assert!(!lo.in_range(lo, lo));
    }
}
