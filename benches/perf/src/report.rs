//! Results for people (perftest-like lines) and programs (JSON).

use serde_json::{json, Value};

use crate::args::Test;
use crate::progress::IntervalResult;
use crate::stats::{Bandwidth, LatencySummary};

/// What one size measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measured {
    /// A latency test.
    Latency(LatencySummary),
    /// A bandwidth test.
    Bandwidth(Bandwidth),
}

/// One size's result.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeResult {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations measured.
    pub iterations: u64,
    /// The figures.
    pub measured: Measured,
    /// The intervals of a timed run (`-D` with `--interval`), in order.
    pub intervals: Vec<IntervalResult>,
    /// Latency tests: the distribution, (fraction at or below, microseconds) points
    /// (`Samples::cdf`); empty for bandwidth tests.
    pub cdf: Vec<(f64, f64)>,
}

/// The run's settings, for the report's head.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// The test.
    pub test: Test,
    /// QPs.
    pub qps: u32,
    /// WRs in flight per QP.
    pub depth: u32,
    /// The daemon(s).
    pub daemons: Vec<String>,
    /// The peer address.
    pub peer: String,
}

/// The header line above the rows of `test`.
pub fn header(test: Test) -> String {
    if test.is_latency() {
        let what = if test.reports_half_rtt() {
            "half round trip"
        } else {
            "round trip"
        };
        format!(
            "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}   [us, {what}]",
            "bytes", "iters", "min", "median", "avg", "p99", "p99.9", "max"
        )
    } else {
        format!(
            "{:>10} {:>10} {:>12} {:>10} {:>14}",
            "bytes", "iters", "MB/s", "Gbit/s", "msgs/s"
        )
    }
}

/// One row.
pub fn row(r: &SizeResult) -> String {
    match &r.measured {
        Measured::Latency(l) => format!(
            "{:>10} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            r.size, r.iterations, l.min_us, l.median_us, l.avg_us, l.p99_us, l.p999_us, l.max_us
        ),
        Measured::Bandwidth(b) => format!(
            "{:>10} {:>10} {:>12.2} {:>10.3} {:>14.0}",
            r.size,
            r.iterations,
            b.mb_per_s(),
            b.gbit_per_s(),
            b.msgs_per_s()
        ),
    }
}

fn result_json(test: Test, r: &SizeResult) -> Value {
    let mut v = measured_json(test, r);
    if !r.cdf.is_empty() {
        v["cdf"] = r.cdf.iter().map(|&(p, us)| json!([p, us])).collect();
    }
    if !r.intervals.is_empty() {
        v["intervals"] = r
            .intervals
            .iter()
            .map(|i| {
                json!({
                    "start_s": i.start_s, "end_s": i.end_s, "messages": i.messages,
                    "bytes": i.bytes, "mb_per_s": i.mb_per_s(),
                    "p50_us": i.p50_us, "p99_us": i.p99_us,
                    "retransmissions": i.retransmissions,
                })
            })
            .collect();
    }
    v
}

fn measured_json(test: Test, r: &SizeResult) -> Value {
    match &r.measured {
        Measured::Latency(l) => json!({
            "size": r.size, "iterations": r.iterations,
            "latency": if test.reports_half_rtt() { "half_rtt" } else { "rtt" },
            "min_us": l.min_us, "median_us": l.median_us, "avg_us": l.avg_us,
            "p99_us": l.p99_us, "p999_us": l.p999_us, "max_us": l.max_us,
        }),
        Measured::Bandwidth(b) => json!({
            "size": r.size, "iterations": r.iterations, "messages": b.messages, "bytes": b.bytes,
            "elapsed_s": b.elapsed_s, "mb_per_s": b.mb_per_s(), "gbit_per_s": b.gbit_per_s(),
            "msgs_per_s": b.msgs_per_s(),
        }),
    }
}

/// The whole run as a JSON document.
pub fn json(info: &RunInfo, results: &[SizeResult]) -> Value {
    json!({
        "tool": "iwarp-perf",
        "version": env!("CARGO_PKG_VERSION"),
        "test": info.test.name(),
        "qps": info.qps,
        "depth": info.depth,
        "daemons": info.daemons,
        "peer": info.peer,
        "results": results.iter().map(|r| result_json(info.test, r)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat() -> SizeResult {
        SizeResult {
            size: 64,
            iterations: 1000,
            measured: Measured::Latency(LatencySummary {
                samples: 1000,
                min_us: 1.5,
                median_us: 2.0,
                avg_us: 2.25,
                p99_us: 5.0,
                p999_us: 9.0,
                max_us: 12.0,
            }),
            intervals: Vec::new(),
            cdf: Vec::new(),
        }
    }

    fn bw() -> SizeResult {
        SizeResult {
            size: 65536,
            iterations: 5000,
            measured: Measured::Bandwidth(Bandwidth {
                messages: 5000,
                bytes: 5000 * 65536,
                elapsed_s: 0.1,
            }),
            intervals: Vec::new(),
            cdf: Vec::new(),
        }
    }

    #[test]
    fn rows_line_up_with_their_header() {
        let h = header(Test::SendLat);
        assert!(h.ends_with("[us, half round trip]"), "{h}");
        assert!(header(Test::ReadLat).ends_with("[us, round trip]"));
        assert_eq!(
            row(&lat()),
            "        64       1000       1.50       2.00       2.25       5.00       9.00      12.00"
        );
        assert_eq!(
            row(&bw()),
            "     65536       5000      3276.80     26.214          50000"
        );
        assert_eq!(header(Test::WriteBw).len(), row(&bw()).len());
    }

    fn info(test: Test) -> RunInfo {
        RunInfo {
            test,
            qps: 1,
            depth: 1,
            daemons: vec!["a".into()],
            peer: "198.18.0.1:18515".into(),
        }
    }

    #[test]
    fn json_keeps_the_intervals() {
        let info = info(Test::WriteBw);
        let mut r = bw();
        assert!(json(&info, &[r.clone()])["results"][0]
            .get("intervals")
            .is_none());
        r.intervals.push(IntervalResult {
            start_s: 0.0,
            end_s: 1.0,
            messages: 10,
            bytes: 655_360,
            p50_us: None,
            p99_us: None,
            retransmissions: Some(3),
        });
        let j = json(&info, &[r]);
        let i = &j["results"][0]["intervals"][0];
        assert_eq!(i["messages"], 10);
        assert_eq!(i["mb_per_s"], 0.65536);
        assert!(i["p50_us"].is_null());
        assert_eq!(i["retransmissions"], 3);
    }

    #[test]
    fn json_keeps_the_latency_distribution() {
        let info = info(Test::SendLat);
        let mut r = lat();
        assert!(json(&info, &[r.clone()])["results"][0].get("cdf").is_none());
        r.cdf = vec![(0.0, 1.5), (0.5, 2.0), (1.0, 12.0)];
        let j = json(&info, &[r]);
        assert_eq!(j["results"][0]["cdf"][1][0], 0.5);
        assert_eq!(j["results"][0]["cdf"][2][1], 12.0);
    }

    #[test]
    fn json_has_every_figure() {
        let info = info(Test::SendLat);
        let j = json(&info, &[lat()]);
        let r = &j["results"][0];
        assert_eq!(j["test"], "send_lat");
        assert_eq!(r["latency"], "half_rtt");
        for k in [
            "min_us",
            "median_us",
            "avg_us",
            "p99_us",
            "p999_us",
            "max_us",
        ] {
            assert!(r[k].is_f64(), "{k}");
        }
        assert_eq!(r["median_us"], 2.0);
        let j = json(
            &RunInfo {
                test: Test::WriteBw,
                ..info
            },
            &[bw()],
        );
        let r = &j["results"][0];
        assert!((r["gbit_per_s"].as_f64().unwrap() - 26.2144).abs() < 1e-9);
        assert_eq!(r["msgs_per_s"], 50000.0);
        assert_eq!(r["mb_per_s"], 3276.8);
    }
}
