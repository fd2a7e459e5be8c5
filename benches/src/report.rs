//! Turning per-sample timings into rates, medians and the one-line result each benchmark
//! prints beside criterion's per-iteration time, e.g.
//! `write_64KiB: 21.3 Gbit/s, limit (2x copy+crc) 38.0 Gbit/s, ratio 0.56`.

use std::time::Duration;

/// Timings of one benchmark: one entry per sample (criterion's `iter_custom` call or one
/// timed run of the report binary).
#[derive(Clone, Debug, Default)]
pub struct SampleLog {
    samples: Vec<(u64, Duration)>,
}

impl SampleLog {
    /// An empty log with room for `cap` samples.
    pub fn with_capacity(cap: usize) -> SampleLog {
        SampleLog {
            samples: Vec::with_capacity(cap),
        }
    }

    /// Records `units` (messages or passes) done in `elapsed`.
    pub fn push(&mut self, units: u64, elapsed: Duration) {
        self.samples.push((units, elapsed));
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Median rate (units per second) of the last `last` samples (all if fewer); `None`
    /// if there is no sample with a positive time.
    pub fn median_rate(&self, last: usize) -> Option<f64> {
        let skip = self.samples.len().saturating_sub(last);
        let mut rates: Vec<f64> = self.samples[skip..]
            .iter()
            .filter(|(_, d)| !d.is_zero())
            .map(|(n, d)| *n as f64 / d.as_secs_f64())
            .collect();
        median(&mut rates)
    }
}

/// The median of `v` (mean of the two middle values for even lengths); `None` if empty.
/// NaNs sort last.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// How a benchmark's result is quoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Goodput in Gbit/s (payload bits only).
    Goodput,
    /// Message rate in millions of WRs per second.
    MessageRate,
}

/// One benchmark's result beside the machine's limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Benchmark name, e.g. `write_64KiB`.
    pub name: String,
    /// Message size in bytes.
    pub msg_len: u64,
    /// The link MTU of the pair.
    pub mtu: usize,
    /// How the result is quoted.
    pub metric: Metric,
    /// Engine payload bytes per second.
    pub engine_bytes_per_s: f64,
    /// Limit (2x copy + CRC) bytes per second for buffers of `msg_len`.
    pub limit_bytes_per_s: f64,
    /// Configuration note, e.g. `mtu 1500, TCP/IP csum offloaded, MPA CRC on`.
    pub note: String,
}

impl Summary {
    /// Engine / limit.
    pub fn ratio(&self) -> f64 {
        if self.limit_bytes_per_s > 0.0 {
            self.engine_bytes_per_s / self.limit_bytes_per_s
        } else {
            0.0
        }
    }

    /// Engine messages per second.
    pub fn engine_msgs_per_s(&self) -> f64 {
        self.engine_bytes_per_s / self.msg_len.max(1) as f64
    }

    /// Limit messages per second.
    pub fn limit_msgs_per_s(&self) -> f64 {
        self.limit_bytes_per_s / self.msg_len.max(1) as f64
    }

    /// The one-line result.
    pub fn line(&self) -> String {
        let gbit = |b: f64| b * 8.0 / 1e9;
        let main = match self.metric {
            Metric::Goodput => format!(
                "{}: {:.2} Gbit/s, limit (2x copy+crc) {:.2} Gbit/s, ratio {:.3}",
                self.name,
                gbit(self.engine_bytes_per_s),
                gbit(self.limit_bytes_per_s),
                self.ratio()
            ),
            Metric::MessageRate => format!(
                "{}: {:.3} M WR/s ({:.2} Gbit/s), limit (2x copy+crc) {:.2} M/s ({:.2} Gbit/s), ratio {:.3}",
                self.name,
                self.engine_msgs_per_s() / 1e6,
                gbit(self.engine_bytes_per_s),
                self.limit_msgs_per_s() / 1e6,
                gbit(self.limit_bytes_per_s),
                self.ratio()
            ),
        };
        if self.note.is_empty() {
            main
        } else {
            format!("{main} [{}]", self.note)
        }
    }
}

/// A message size as the benchmark names it: `64B`, `4KiB`, `64KiB`, `1MiB`.
pub fn size_name(len: u64) -> String {
    if len >= 1 << 20 && len & ((1 << 20) - 1) == 0 {
        format!("{}MiB", len >> 20)
    } else if len >= 1024 && len & 1023 == 0 {
        format!("{}KiB", len >> 10)
    } else {
        format!("{len}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn median_rate_uses_the_last_samples_and_skips_zero_times() {
        let mut log = SampleLog::with_capacity(4);
        log.push(1_000_000, Duration::from_secs(10)); // warm-up, excluded
        log.push(100, Duration::ZERO);
        log.push(200, Duration::from_secs(1));
        log.push(400, Duration::from_secs(1));
        assert_eq!(log.len(), 4);
        assert_eq!(log.median_rate(3), Some(300.0));
        assert_eq!(SampleLog::default().median_rate(5), None);
    }

    #[test]
    fn goodput_line_matches_the_issue_format() {
        let s = Summary {
            name: "write_64KiB".into(),
            msg_len: 65536,
            mtu: 1500,
            metric: Metric::Goodput,
            engine_bytes_per_s: 21.3e9 / 8.0,
            limit_bytes_per_s: 38.0e9 / 8.0,
            note: String::new(),
        };
        assert_eq!(
            s.line(),
            "write_64KiB: 21.30 Gbit/s, limit (2x copy+crc) 38.00 Gbit/s, ratio 0.561"
        );
    }

    #[test]
    fn rate_line_quotes_millions_and_the_note() {
        let s = Summary {
            name: "write_64B".into(),
            msg_len: 64,
            mtu: 1500,
            metric: Metric::MessageRate,
            engine_bytes_per_s: 2.0e6 * 64.0,
            limit_bytes_per_s: 40.0e6 * 64.0,
            note: "mtu 1500".into(),
        };
        assert_eq!(
            s.line(),
            "write_64B: 2.000 M WR/s (1.02 Gbit/s), limit (2x copy+crc) 40.00 M/s (20.48 Gbit/s), ratio 0.050 [mtu 1500]"
        );
        let zero = Summary {
            limit_bytes_per_s: 0.0,
            ..s
        };
        assert_eq!(zero.ratio(), 0.0);
    }

    #[test]
    fn size_names() {
        assert_eq!(size_name(64), "64B");
        assert_eq!(size_name(4096), "4KiB");
        assert_eq!(size_name(65536), "64KiB");
        assert_eq!(size_name(1 << 20), "1MiB");
        assert_eq!(size_name(1500), "1500B");
    }
}
