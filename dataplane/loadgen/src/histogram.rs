//! A preallocated log-linear histogram of nanosecond values (HDR style): values below
//! 128 are exact; above, each power of two is split into 64 buckets, so a reported
//! value is within 1/128 of the true one. Recording is O(1) and never allocates.

/// Exact buckets below this value.
const LINEAR: u64 = 128;
/// Sub-buckets per power of two above [`LINEAR`] (2^6).
const SUB_BITS: u32 = 6;
const SUB: usize = 1 << SUB_BITS;
/// Bucket count: 128 exact, then 64 per power of two from 2^7 to 2^63.
pub const BUCKETS: usize = LINEAR as usize + (64 - 7) * SUB;

/// Counts of values by bucket, plus exact count, sum, min and max.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64]>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl core::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("max", &self.max)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 7
    let m = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    LINEAR as usize + (e as usize - 7) * SUB + m
}

/// Lowest and highest value of bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < LINEAR as usize {
        return (i as u64, i as u64);
    }
    let k = i - LINEAR as usize;
    let e = 7 + (k / SUB) as u32;
    let m = (k % SUB) as u64;
    let width = 1u64 << (e - SUB_BITS);
    let lo = (SUB as u64 + m) << (e - SUB_BITS);
    (lo, lo.saturating_add(width - 1))
}

impl Histogram {
    /// An empty histogram (the only allocation).
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0u64; BUCKETS].into_boxed_slice(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest value (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Values recorded that are certainly at most `v`: the counts of the buckets whose
    /// highest value is at most `v` (a bucket spans 1/64 of its power of two, so values
    /// within that of `v` may be left out). Cumulative, as a Prometheus `le` bucket.
    pub fn count_at_most(&self, v: u64) -> u64 {
        let b = bucket_of(v);
        let through = if bucket_range(b).1 <= v { b + 1 } else { b };
        self.counts[..through].iter().sum()
    }

    /// Arithmetic mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` in [0, 1]: the smallest recorded value such that at
    /// least `ceil(q * count)` values are at or below it (bucket midpoint, clamped to
    /// the exact min and max; the first and last rank are the exact min and max).
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        if rank == self.count {
            return self.max;
        }
        if rank == 1 {
            return self.min;
        }
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(i);
                let mid = lo + (hi - lo) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The values recorded since `earlier` (an earlier copy of this histogram): bucket
    /// counts subtracted; min and max are those of the buckets still holding values
    /// (their bounds, clamped to this histogram's exact min and max).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut h = Histogram::new();
        for (i, (a, b)) in self.counts.iter().zip(earlier.counts.iter()).enumerate() {
            let n = a.saturating_sub(*b);
            if n > 0 {
                let (lo, hi) = bucket_range(i);
                h.min = h.min.min(lo.max(self.min));
                h.max = h.max.max(hi.min(self.max));
            }
            h.counts[i] = n;
        }
        h.count = self.count.saturating_sub(earlier.count);
        h.sum = self.sum.saturating_sub(earlier.sum);
        h
    }

    /// Forgets every value (no allocation).
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.count = 0;
        self.sum = 0;
        self.min = u64::MAX;
        self.max = 0;
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn since_keeps_what_came_after_the_copy() {
        let mut h = Histogram::new();
        for v in [10, 20, 30] {
            h.record(v);
        }
        let before = h.clone();
        for v in [1_000, 2_000, 3_000, 4_000] {
            h.record(v);
        }
        let d = h.since(&before);
        assert_eq!(d.count(), 4);
        assert!(
            d.quantile(0.5) >= 1_900 && d.quantile(0.5) <= 2_100,
            "{}",
            d.quantile(0.5)
        );
        assert!(
            d.min() >= 900 && d.max() == 4_000,
            "{} {}",
            d.min(),
            d.max()
        );
        assert!((d.mean() - 2_500.0).abs() < 1.0);
        assert_eq!(h.since(&h).count(), 0);
    }

    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi >= lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_of_a_known_set() {
        let mut h = Histogram::new();
        // 1..=1000 µs in ns: p50 = 500 µs, p90 = 900 µs, p99 = 990 µs, p99.9 = 999 µs.
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        for (q, want) in [
            (0.5, 500_000u64),
            (0.9, 900_000),
            (0.99, 990_000),
            (0.999, 999_000),
        ] {
            let got = h.quantile(q);
            let err = got.abs_diff(want) as f64 / want as f64;
            assert!(err <= 1.0 / 128.0, "q {q}: {got} vs {want}");
        }
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(h.quantile(0.0), 1000);
        assert_eq!(h.min(), 1000);
        assert_eq!(h.max(), 1_000_000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
        // Small values are exact.
        let mut s = Histogram::new();
        for v in [3u64, 1, 2, 100, 4] {
            s.record(v);
        }
        assert_eq!(s.quantile(0.5), 3);
        assert_eq!(s.quantile(0.8), 4);
        assert_eq!(s.quantile(0.81), 100);
        assert_eq!(Histogram::new().quantile(0.5), 0);
    }

    #[test]
    fn count_at_most_is_cumulative_and_never_counts_a_larger_value() {
        let mut h = Histogram::new();
        for v in [5u64, 127, 128, 1_000, 1_016, 1_024, 50_000, u64::MAX] {
            h.record(v);
        }
        assert_eq!(h.count_at_most(0), 0);
        assert_eq!(h.count_at_most(5), 1, "exact below 128");
        assert_eq!(h.count_at_most(128), 2, "128 is in the bucket 128..=129");
        assert_eq!(h.count_at_most(129), 3);
        // 1,000 is in the bucket 1000..=1007: counted from 1,007 on.
        assert_eq!(h.count_at_most(1_000), 3);
        assert_eq!(h.count_at_most(1_007), 4);
        assert_eq!(h.count_at_most(1_023), 5);
        assert_eq!(h.count_at_most(1_024), 5, "1,024 opens a bucket of 16");
        assert_eq!(h.count_at_most(1_039), 6);
        assert_eq!(h.count_at_most(u64::MAX), 8);
        let mut last = 0;
        for v in (0..100_000u64).step_by(97) {
            let n = h.count_at_most(v);
            assert!(n >= last);
            last = n;
        }
        assert_eq!(
            h.sum(),
            5 + 127 + 128 + 1_000 + 1_016 + 1_024 + 50_000 + u128::from(u64::MAX)
        );
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 0..5000u64 {
            let x = v * v;
            if v % 3 == 0 {
                a.record(x)
            } else {
                b.record(x)
            }
            all.record(x);
        }
        a.merge(&b);
        assert_eq!(a, all);
        a.clear();
        assert_eq!(a.count(), 0);
        assert_eq!(a.min(), 0);
    }
}
