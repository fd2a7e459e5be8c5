//! The load generator's figures on the metrics endpoint: while `iwarpd loadgen` runs, its
//! messages, bytes and completion latency (every core merged) as OpenMetrics families
//! beside the daemon's counters: `iwarpd_loadgen_messages_total`,
//! `iwarpd_loadgen_bytes_total` and the histogram `iwarpd_loadgen_latency_seconds`.
//!
//! The control thread of the run publishes a merged copy of the cores' progress at most
//! every [`PUBLISH_INTERVAL`] (the cores publish theirs every 100 ms: never per message);
//! a scrape reads the latest copy under a mutex that neither the cores nor the fast path
//! ever take. A daemon that runs no load generator shows none of these families.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use iwarp_loadgen::Histogram;

use crate::metrics::{escape_help, Format};

/// Least time between two publications of the control thread.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(250);

/// Upper bounds of the latency histogram's buckets, nanoseconds (1 us to 1 s in 1-2-5
/// steps, as Prometheus client libraries choose them; `+Inf` follows).
pub const LATENCY_BOUNDS_NS: [u64; 19] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

/// What the load generator has done so far, all cores together.
#[derive(Clone, Debug, Default)]
pub struct LoadgenSample {
    /// Messages completed.
    pub messages: u64,
    /// Payload bytes completed.
    pub bytes: u64,
    /// Latency of the signaled completions, nanoseconds.
    pub latency: Histogram,
}

/// The latest sample, shared by the run (writer) and the metrics thread (reader).
#[derive(Debug, Default)]
pub struct LoadgenMetrics {
    latest: Mutex<Option<LoadgenSample>>,
}

impl LoadgenMetrics {
    /// Replaces the latest sample.
    pub fn publish(&self, sample: LoadgenSample) {
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(sample);
        }
    }

    /// Appends the load generator's families to `out` (nothing before the first sample).
    pub fn render(&self, out: &mut String, format: Format) {
        let Ok(latest) = self.latest.lock() else {
            return;
        };
        let Some(s) = latest.as_ref() else {
            return;
        };
        for (name, help, value) in [
            (
                "loadgen_messages",
                "Messages the load generator completed (all cores).",
                s.messages,
            ),
            (
                "loadgen_bytes",
                "Payload bytes the load generator completed (all cores).",
                s.bytes,
            ),
        ] {
            let family = match format {
                Format::OpenMetrics => format!("iwarpd_{name}"),
                Format::Text => format!("iwarpd_{name}_total"),
            };
            let _ = write!(
                out,
                "# TYPE {family} counter\n# HELP {family} {}\niwarpd_{name}_total {value}\n",
                escape_help(help)
            );
        }
        let h = &s.latency;
        let name = "iwarpd_loadgen_latency_seconds";
        let _ = writeln!(out, "# TYPE {name} histogram");
        if format == Format::OpenMetrics {
            let _ = writeln!(out, "# UNIT {name} seconds");
        }
        let _ = writeln!(
            out,
            "# HELP {name} Latency of the load generator's signaled completions: post to completion, all cores."
        );
        for bound in LATENCY_BOUNDS_NS {
            let le = bound as f64 / 1e9;
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{le}\"}} {}",
                h.count_at_most(bound)
            );
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count());
        let _ = writeln!(out, "{name}_count {}", h.count());
        let _ = writeln!(out, "{name}_sum {}", h.sum() as f64 / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_before_the_first_sample() {
        let m = LoadgenMetrics::default();
        let mut out = String::new();
        m.render(&mut out, Format::OpenMetrics);
        assert!(out.is_empty());
    }

    #[test]
    fn counters_and_a_cumulative_histogram_in_seconds() {
        let m = LoadgenMetrics::default();
        let mut latency = Histogram::new();
        for ns in [800u64, 1_500, 3_000, 3_000, 70_000, 2_000_000_000] {
            latency.record(ns);
        }
        m.publish(LoadgenSample {
            messages: 6,
            bytes: 6 * 4096,
            latency,
        });
        let mut out = String::new();
        m.render(&mut out, Format::OpenMetrics);
        for line in [
            "# TYPE iwarpd_loadgen_messages counter",
            "iwarpd_loadgen_messages_total 6",
            "iwarpd_loadgen_bytes_total 24576",
            "# TYPE iwarpd_loadgen_latency_seconds histogram",
            "# UNIT iwarpd_loadgen_latency_seconds seconds",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"0.000001\"} 1",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"0.000002\"} 2",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"0.000005\"} 4",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"0.0001\"} 5",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"1\"} 5",
            "iwarpd_loadgen_latency_seconds_bucket{le=\"+Inf\"} 6",
            "iwarpd_loadgen_latency_seconds_count 6",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "missing `{line}` in:\n{out}"
            );
        }
        let sum: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("iwarpd_loadgen_latency_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .expect("a sum");
        assert!((sum - 2.0000783).abs() < 1e-9, "{sum}");
        let mut text = String::new();
        m.render(&mut text, Format::Text);
        assert!(text.contains("# TYPE iwarpd_loadgen_messages_total counter\n"));
        assert!(!text.contains("# UNIT"));
    }
}
