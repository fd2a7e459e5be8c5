//! Interval lines of a timed run (`-D SECONDS`, every `--interval` seconds), as iperf3
//! prints them: bandwidth tests the rate of the interval, latency tests its median and
//! 99th percentile, both the daemon's TCP retransmissions in the interval (when the
//! daemon tells them: `iwarpctl counters` is an administration request); each interval is
//! kept for the JSON report.

use std::time::{Duration, Instant};

use crate::stats::rank;

/// One interval of one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalResult {
    /// Start, seconds since the size's measurement began.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Messages completed in the interval (bandwidth) or samples taken (latency).
    pub messages: u64,
    /// Bytes moved (bandwidth; messages times the size).
    pub bytes: u64,
    /// Median latency in the interval, microseconds (latency tests).
    pub p50_us: Option<f64>,
    /// 99th percentile latency in the interval, microseconds (latency tests).
    pub p99_us: Option<f64>,
    /// TCP segments the daemon retransmitted in the interval (every connection of its
    /// cores), when it tells (root or `[control] admin_users`).
    pub retransmissions: Option<u64>,
}

impl IntervalResult {
    /// MB/s of the interval (10^6 bytes).
    pub fn mb_per_s(&self) -> f64 {
        let t = (self.end_s - self.start_s).max(1e-9);
        self.bytes as f64 / t / 1e6
    }

    /// The line printed for it.
    pub fn line(&self, size: u64) -> String {
        let mut l = self.rate_line(size);
        if let Some(r) = self.retransmissions {
            l.push_str(&format!("   retransmissions {r}"));
        }
        l
    }

    fn rate_line(&self, size: u64) -> String {
        match (self.p50_us, self.p99_us) {
            (Some(p50), Some(p99)) => format!(
                "[{:>6.1}-{:>6.1} s] {:>10} B {:>10} samples   p50 {:>9.2} us   p99 {:>9.2} us",
                self.start_s, self.end_s, size, self.messages, p50, p99
            ),
            _ => {
                let t = (self.end_s - self.start_s).max(1e-9);
                format!(
                    "[{:>6.1}-{:>6.1} s] {:>10} B {:>12.2} MB/s {:>10.3} Gbit/s {:>14.0} msgs/s",
                    self.start_s,
                    self.end_s,
                    size,
                    self.mb_per_s(),
                    self.bytes as f64 * 8.0 / t / 1e9,
                    self.messages as f64 / t
                )
            }
        }
    }
}

/// The interval clock of one size's measurement.
pub struct Progress {
    every: Option<Duration>,
    size: u64,
    divisor: u64,
    start: Instant,
    mark: Instant,
    mark_count: u64,
    /// The intervals so far.
    pub intervals: Vec<IntervalResult>,
    scratch: Vec<u64>,
    /// Reads the daemon's retransmission counter (None: it does not tell).
    retrans_source: Option<Box<dyn FnMut() -> Option<u64>>>,
    retrans_mark: Option<u64>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("every", &self.every)
            .field("size", &self.size)
            .field("intervals", &self.intervals.len())
            .field("retransmissions", &self.retrans_source.is_some())
            .finish()
    }
}

impl Progress {
    /// Intervals of `every` (none: no lines) for messages of `size` bytes; latencies are
    /// divided by `divisor` (2 for half round trips).
    pub fn new(every: Option<Duration>, size: u64, divisor: u64) -> Progress {
        let now = Instant::now();
        Progress {
            every,
            size,
            divisor: divisor.max(1),
            start: now,
            mark: now,
            mark_count: 0,
            intervals: Vec::new(),
            scratch: Vec::new(),
            retrans_source: None,
            retrans_mark: None,
        }
    }

    /// Interval lines also show what `source` counts between their ends (the daemon's
    /// TCP retransmissions); read once per interval, a control-socket round trip.
    pub fn with_retransmissions(
        mut self,
        source: impl FnMut() -> Option<u64> + 'static,
    ) -> Progress {
        if self.every.is_some() {
            self.retrans_source = Some(Box::new(source));
        }
        self
    }

    fn read_retransmissions(&mut self) -> Option<u64> {
        self.retrans_source.as_mut().and_then(|f| f())
    }

    /// Starts the clock (after the warm-up).
    pub fn start(&mut self, count: u64) {
        let now = Instant::now();
        self.start = now;
        self.mark = now;
        self.mark_count = count;
        self.retrans_mark = self.read_retransmissions();
    }

    /// True when an interval ended (one clock read, no other work).
    #[inline]
    pub fn due(&self) -> bool {
        self.every.is_some_and(|d| self.mark.elapsed() >= d)
    }

    /// At the end of the measurement: the last, partial interval (if it has anything).
    pub fn finish(&mut self, count: u64, samples: Option<&[u64]>) {
        if self.every.is_some() && count > self.mark_count {
            self.tick(count, samples);
        }
    }

    /// Closes the interval: `count` messages completed so far in total; `samples`, for
    /// latency tests, every sample so far (those after the interval's start count).
    pub fn tick(&mut self, count: u64, samples: Option<&[u64]>) {
        let now = Instant::now();
        let messages = count.saturating_sub(self.mark_count);
        let (p50_us, p99_us) = match samples {
            Some(all) => {
                let from = (self.mark_count as usize).min(all.len());
                self.scratch.clear();
                self.scratch.extend_from_slice(&all[from..]);
                self.scratch.sort_unstable();
                let n = self.scratch.len();
                let d = self.divisor as f64 * 1000.0;
                if n == 0 {
                    (Some(0.0), Some(0.0))
                } else {
                    (
                        Some(self.scratch[rank(n, 0.5)] as f64 / d),
                        Some(self.scratch[rank(n, 0.99)] as f64 / d),
                    )
                }
            }
            None => (None, None),
        };
        let retrans_now = self.read_retransmissions();
        let retransmissions = match (self.retrans_mark, retrans_now) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let r = IntervalResult {
            start_s: (self.mark - self.start).as_secs_f64(),
            end_s: (now - self.start).as_secs_f64(),
            messages,
            bytes: messages * self.size,
            p50_us,
            p99_us,
            retransmissions,
        };
        println!("{}", r.line(self.size));
        self.intervals.push(r);
        self.mark = now;
        self.mark_count = count;
        self.retrans_mark = retrans_now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_of_bandwidth_and_latency() {
        let mut p = Progress::new(Some(Duration::ZERO), 1000, 1);
        p.start(10);
        assert!(p.due());
        p.tick(110, None);
        let r = p.intervals[0];
        assert_eq!((r.messages, r.bytes, r.p50_us), (100, 100_000, None));
        assert!(r.line(1000).contains("MB/s"), "{}", r.line(1000));
        // Latency: the samples after the interval's start (index 110 on).
        let mut all = vec![1_000_000u64; 110];
        all.extend((1..=100).map(|i| i * 1000));
        p.tick(210, Some(&all));
        let r = p.intervals[1];
        assert_eq!(r.messages, 100);
        assert_eq!(r.p50_us, Some(50.0));
        assert_eq!(r.p99_us, Some(99.0));
        assert!(r.line(1000).contains("p99"), "{}", r.line(1000));
        // No interval asked: never due.
        assert!(!Progress::new(None, 1, 1).due());
        // Retransmissions between the ends of each interval.
        let mut n = 100u64;
        let mut p = Progress::new(Some(Duration::ZERO), 1000, 1).with_retransmissions(move || {
            n += 7;
            Some(n)
        });
        p.start(0);
        p.tick(10, None);
        assert_eq!(p.intervals[0].retransmissions, Some(7));
        assert!(p.intervals[0].line(1000).ends_with("retransmissions 7"));
        // A daemon that does not tell: no figure, no word in the line.
        let mut p = Progress::new(Some(Duration::ZERO), 1000, 1).with_retransmissions(|| None);
        p.start(0);
        p.tick(10, None);
        assert_eq!(p.intervals[0].retransmissions, None);
        assert!(!p.intervals[0].line(1000).contains("retrans"));
    }
}
