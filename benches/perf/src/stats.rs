//! Latency samples and their summary; bandwidth figures.

/// Latency samples in nanoseconds, preallocated: recording never allocates.
#[derive(Debug)]
pub struct Samples {
    ns: Vec<u64>,
}

impl Samples {
    /// Room for `cap` samples.
    pub fn with_capacity(cap: usize) -> Samples {
        Samples {
            ns: Vec::with_capacity(cap),
        }
    }

    /// Records one; false (not recorded) when full.
    #[inline]
    pub fn record(&mut self, ns: u64) -> bool {
        if self.ns.len() == self.ns.capacity() {
            return false;
        }
        self.ns.push(ns);
        true
    }

    /// The samples so far, in the order taken (until [`Samples::summary`] sorts them).
    pub fn as_slice(&self) -> &[u64] {
        &self.ns
    }

    /// True when no more fit.
    pub fn is_full(&self) -> bool {
        self.ns.len() == self.ns.capacity()
    }

    /// Forgets every sample (keeps the room).
    pub fn clear(&mut self) {
        self.ns.clear();
    }

    /// The summary of the samples, each divided by `divisor` (2 for half round trips), in
    /// microseconds. `None` without samples.
    pub fn summary(&mut self, divisor: u64) -> Option<LatencySummary> {
        if self.ns.is_empty() {
            return None;
        }
        self.ns.sort_unstable();
        let n = self.ns.len();
        let d = divisor.max(1) as f64 * 1000.0;
        let at = |p: f64| self.ns[rank(n, p)] as f64 / d;
        let sum: u128 = self.ns.iter().map(|&x| x as u128).sum();
        Some(LatencySummary {
            samples: n as u64,
            min_us: self.ns[0] as f64 / d,
            median_us: at(0.5),
            avg_us: sum as f64 / n as f64 / d,
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: self.ns[n - 1] as f64 / d,
        })
    }
}

/// The fractions of samples at which [`Samples::cdf`] gives the latency: every percent,
/// then finer in the tail (99.1 .. 99.9 %, 99.99 %), and the largest sample (1.0).
pub fn cdf_fractions() -> impl Iterator<Item = f64> {
    (1..=99)
        .map(|p| p as f64 / 100.0)
        .chain((1..=9).map(|t| 0.99 + t as f64 / 1000.0))
        .chain([0.9999, 1.0])
}

impl Samples {
    /// The distribution of the samples as (fraction at or below, microseconds) points at
    /// [`cdf_fractions`], each sample divided by `divisor`; the first point is the smallest
    /// sample at fraction 0. Empty without samples. Sorts the samples.
    pub fn cdf(&mut self, divisor: u64) -> Vec<(f64, f64)> {
        if self.ns.is_empty() {
            return Vec::new();
        }
        self.ns.sort_unstable();
        let n = self.ns.len();
        let d = divisor.max(1) as f64 * 1000.0;
        std::iter::once((0.0, self.ns[0] as f64 / d))
            .chain(cdf_fractions().map(|p| (p, self.ns[rank(n, p)] as f64 / d)))
            .collect()
    }
}

/// Nearest-rank percentile index: the smallest sample with at least `p` of the samples at
/// or below it.
pub fn rank(n: usize, p: f64) -> usize {
    let r = (p * n as f64).ceil() as usize;
    r.clamp(1, n) - 1
}

/// Latency of one size, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub samples: u64,
    /// Smallest.
    pub min_us: f64,
    /// Median.
    pub median_us: f64,
    /// Mean.
    pub avg_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// Throughput of one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    /// Messages completed.
    pub messages: u64,
    /// Payload bytes completed.
    pub bytes: u64,
    /// Seconds from the first post to the last completion.
    pub elapsed_s: f64,
}

impl Bandwidth {
    /// MB/s (10^6 bytes).
    pub fn mb_per_s(&self) -> f64 {
        self.rate(self.bytes as f64) / 1e6
    }

    /// Gbit/s (10^9 bits).
    pub fn gbit_per_s(&self) -> f64 {
        self.rate(self.bytes as f64 * 8.0) / 1e9
    }

    /// Messages per second.
    pub fn msgs_per_s(&self) -> f64 {
        self.rate(self.messages as f64)
    }

    fn rate(&self, x: f64) -> f64 {
        if self.elapsed_s > 0.0 {
            x / self.elapsed_s
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(rank(1, 0.5), 0);
        assert_eq!(rank(100, 0.5), 49);
        assert_eq!(rank(100, 0.99), 98);
        assert_eq!(rank(1000, 0.999), 998);
        assert_eq!(rank(10, 0.999), 9);
        assert_eq!(rank(10, 0.0), 0);
    }

    #[test]
    fn summary_of_known_samples() {
        let mut s = Samples::with_capacity(1000);
        // 1..=1000 microseconds, shuffled.
        for i in 0..1000u64 {
            assert!(s.record(((i * 7919) % 1000 + 1) * 1000));
        }
        assert!(s.is_full() && !s.record(1));
        let m = s.summary(1).unwrap();
        assert_eq!(m.samples, 1000);
        assert_eq!(
            (m.min_us, m.median_us, m.p99_us, m.p999_us, m.max_us),
            (1.0, 500.0, 990.0, 999.0, 1000.0)
        );
        assert!((m.avg_us - 500.5).abs() < 1e-9);
        // Half round trips.
        let h = s.summary(2).unwrap();
        assert_eq!((h.min_us, h.median_us, h.max_us), (0.5, 250.0, 500.0));
        s.clear();
        assert!(s.summary(1).is_none());
    }

    #[test]
    fn cdf_of_known_samples() {
        let mut s = Samples::with_capacity(1000);
        assert!(s.cdf(1).is_empty());
        for ns in (1..=1000u64).rev() {
            s.record(ns * 1000);
        }
        let c = s.cdf(2);
        assert_eq!(c.first(), Some(&(0.0, 0.5)));
        assert_eq!(c.last(), Some(&(1.0, 500.0)));
        assert!(c.contains(&(0.5, 250.0)), "{c:?}");
        assert!(c.contains(&(0.999, 499.5)), "{c:?}");
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(c.len(), 1 + 99 + 9 + 2);
    }

    #[test]
    fn bandwidth_units() {
        let b = Bandwidth {
            messages: 1000,
            bytes: 65_536_000,
            elapsed_s: 0.5,
        };
        assert!((b.mb_per_s() - 131.072).abs() < 1e-9);
        assert!((b.gbit_per_s() - 1.048576).abs() < 1e-9);
        assert!((b.msgs_per_s() - 2000.0).abs() < 1e-9);
        let z = Bandwidth {
            messages: 0,
            bytes: 0,
            elapsed_s: 0.0,
        };
        assert_eq!(z.gbit_per_s(), 0.0);
    }
}
