//! The interval lines of `iwarpd loadgen` (`--interval S`, as iperf3 prints them): every
//! S seconds the control thread reads each core's published progress (a copy of its
//! client's report, taken every `CLIENT_PROGRESS_INTERVAL` on the core) and prints what
//! happened since the previous line: goodput, messages per second, latency p50 / p99 of
//! the completions of the interval, TCP retransmissions. The lines go into `--json`.

use std::fmt;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use iwarp_loadgen::{Histogram, Report};
use serde::Serialize;

use crate::apps::Progress;

/// Intervals kept for the JSON report, at most (a day of one-second lines).
const MAX_INTERVALS: usize = 86_400;

/// One interval of the run.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    /// Start and end, seconds since the load generator started its clients.
    pub start_s: f64,
    pub end_s: f64,
    /// In the warm-up (not measured: the report's counts do not move).
    pub warmup: bool,
    /// Payload goodput, 10^9 bits per second.
    pub gbit_per_s: f64,
    /// Messages completed per second.
    pub messages_per_s: f64,
    /// Latency of the interval's signaled completions, microseconds (0: none).
    pub p50_us: f64,
    pub p99_us: f64,
    /// TCP data segments retransmitted in the interval (all connections of the cores).
    pub retransmissions: u64,
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{:6.1}-{:6.1} s] {:8.3} Gbit/s {:12.0} msg/s  p50 {:9.2} us  p99 {:9.2} us  retransmissions {}{}",
            self.start_s,
            self.end_s,
            self.gbit_per_s,
            self.messages_per_s,
            self.p50_us,
            self.p99_us,
            self.retransmissions,
            if self.warmup { "  (warm-up)" } else { "" }
        )
    }
}

/// The interval clock of a run: when a line is due, and the previous snapshot of each
/// core to subtract.
pub struct IntervalClock {
    every: StdDuration,
    warmup_s: f64,
    start: Option<StdInstant>,
    last: Option<StdInstant>,
    last_end_s: f64,
    prev: Vec<Option<Progress>>,
    intervals: Vec<Interval>,
}

impl IntervalClock {
    /// Lines every `every` for `cores` cores; the first `warmup_s` seconds are warm-up.
    pub fn new(every: StdDuration, cores: usize, warmup_s: f64) -> IntervalClock {
        IntervalClock {
            every,
            warmup_s,
            start: None,
            last: None,
            last_end_s: 0.0,
            prev: vec![None; cores],
            intervals: Vec::new(),
        }
    }

    /// True when a line is due (the first call starts the clock).
    pub fn due(&mut self) -> bool {
        let now = StdInstant::now();
        let start = *self.start.get_or_insert(now);
        let last = self.last.unwrap_or(start);
        now.duration_since(last) >= self.every
    }

    /// The line of the interval ending now from each core's latest progress (`None`: a
    /// core that published none yet); None for the first snapshot (nothing to subtract).
    pub fn take(&mut self, snaps: &[Option<Progress>]) -> Option<Interval> {
        let now = StdInstant::now();
        let end_s = self
            .start
            .map_or(0.0, |s| now.duration_since(s).as_secs_f64());
        self.last = Some(now);
        let mut messages = 0u64;
        let mut bytes = 0u64;
        let mut retransmissions = 0u64;
        let mut latency = Histogram::new();
        let mut seconds = 0f64;
        let mut any = false;
        for (k, snap) in snaps.iter().enumerate() {
            let Some(cur) = snap else { continue };
            let Some(prev) = self.prev.get_mut(k) else {
                continue;
            };
            match prev.as_ref() {
                Some(p) => {
                    let d = cur.at.saturating_since(p.at).as_nanos() as f64 / 1e9;
                    seconds = seconds.max(d);
                    messages += cur.report.messages.saturating_sub(p.report.messages);
                    bytes += cur.report.bytes.saturating_sub(p.report.bytes);
                    retransmissions += cur.retransmissions.saturating_sub(p.retransmissions);
                    latency.merge(&cur.report.latency.since(&p.report.latency));
                }
                None => {
                    // The core's first copy: everything since the run began, over the
                    // control thread's interval (the core's start is not known here).
                    seconds = seconds.max(end_s - self.last_end_s);
                    messages += cur.report.messages;
                    bytes += cur.report.bytes;
                    latency.merge(&cur.report.latency);
                }
            }
            any = true;
            *prev = Some(cur.clone());
        }
        let start_s = self.last_end_s;
        self.last_end_s = end_s;
        if !any {
            return None;
        }
        let per_s = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let line = Interval {
            start_s,
            end_s,
            warmup: end_s <= self.warmup_s,
            gbit_per_s: per_s(bytes) * 8.0 / 1e9,
            messages_per_s: per_s(messages),
            p50_us: latency.quantile(0.5) as f64 / 1e3,
            p99_us: latency.quantile(0.99) as f64 / 1e3,
            retransmissions,
        };
        if self.intervals.len() < MAX_INTERVALS {
            self.intervals.push(line.clone());
        }
        Some(line)
    }

    /// The intervals so far.
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }
}

/// The report's JSON with the intervals added last (`"intervals": [...]`), the
/// report's own fields kept in their order (scripts read the first match of a key).
pub fn report_json(r: &Report, intervals: &[Interval]) -> String {
    let base = r.to_json();
    let (Some(body), Ok(list)) = (base.strip_suffix('}'), serde_json::to_string(intervals)) else {
        return base;
    };
    let sep = if body.trim_end().ends_with('{') {
        ""
    } else {
        ","
    };
    format!("{body}{sep}\"intervals\":{list}}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp_loadgen::Op;
    use iwarp_types::{Duration, Instant};

    fn snap(at_ms: u64, messages: u64, lat_ns: &[u64], retrans: u64) -> Progress {
        let mut report = Report::new(Op::Write, 1000, 1, 16, false);
        report.messages = messages;
        report.bytes = messages * 1000;
        for v in lat_ns {
            report.latency.record(*v);
        }
        Progress {
            at: Instant::ZERO + Duration::from_millis(at_ms),
            report,
            retransmissions: retrans,
        }
    }

    #[test]
    fn an_interval_is_the_difference_of_two_snapshots_summed_over_cores() {
        let mut c = IntervalClock::new(StdDuration::ZERO, 2, 0.0);
        assert!(c.due());
        // First snapshots: everything so far (the first interval).
        assert!(c.take(&[Some(snap(0, 10, &[5_000], 1)), None]).is_some());
        assert!(
            c.take(&[None, None]).is_none(),
            "nothing published: no line"
        );
        let l = c
            .take(&[
                Some(snap(1_000, 1_010, &[5_000, 10_000, 10_000], 4)),
                Some(snap(500, 7, &[], 0)),
            ])
            .expect("a line");
        // Core 0: 1,000 messages of 1,000 B in 1 s; core 1: its first copy, all of its
        // 7 messages.
        assert!((l.messages_per_s - 1_007.0).abs() < 1e-6, "{l}");
        assert!((l.gbit_per_s - 0.008056).abs() < 1e-9, "{l}");
        assert_eq!(l.retransmissions, 3);
        assert!(l.p50_us > 9.0 && l.p50_us < 11.0, "{l}");
        assert_eq!(c.intervals().len(), 2);
        let json = report_json(&Report::new(Op::Write, 1000, 1, 16, false), c.intervals());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["intervals"].as_array().unwrap().len(), 2);
        assert!(l.to_string().contains("retransmissions 3"), "{l}");
    }
}
