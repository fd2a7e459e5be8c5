//! What a run measured: [`Report`] (client) and [`ServerReport`] (server), plain data
//! with a human-readable `Display`, `to_json()` (serde) and `merge` for several cores.

use core::fmt;

use iwarp_types::WcStatus;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::histogram::Histogram;
use crate::messages::{Op, RejectReason};
use crate::pattern::Mismatch;

/// Mismatches kept with their details (the rest are only counted).
pub const MAX_MISMATCHES: usize = 4;

/// The first few mismatches, in the order found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MismatchLog {
    items: [Option<Mismatch>; MAX_MISMATCHES],
}

impl MismatchLog {
    /// Keeps `m` if there is room.
    pub fn push(&mut self, m: Mismatch) {
        if let Some(slot) = self.items.iter_mut().find(|s| s.is_none()) {
            *slot = Some(m);
        }
    }

    /// The kept mismatches.
    pub fn iter(&self) -> impl Iterator<Item = &Mismatch> {
        self.items.iter().flatten()
    }

    /// Keeps those of `other` while there is room.
    pub fn merge(&mut self, other: &MismatchLog) {
        for m in other.iter() {
            self.push(*m);
        }
    }
}

/// Errors seen by a client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    /// Connects that failed (refused, reset, timed out, unreachable, aborted, or the
    /// `connect` call itself failed).
    pub connect_failed: u64,
    /// Connects the server rejected.
    pub rejected: u64,
    /// The reason of the first reject.
    pub reject_reason: Option<RejectReason>,
    /// Established connections whose accept private data was not a loadgen accept.
    pub bad_accept: u64,
    /// QPs lost during the run (disconnected, reset or in error before the client closed
    /// them).
    pub qp_lost: u64,
    /// Error completions by status (index: [`WcStatus`] as `u8`); flushes of receives
    /// during an orderly close are not counted.
    pub completions: [u64; WcStatus::ALL.len()],
    /// Verbs asynchronous events on the client's QPs.
    pub async_events: u64,
    /// Post Send / Post Receive calls that failed.
    pub post_failed: u64,
    /// Control messages from the server that made no sense (unknown kind, an ack for a
    /// slot not in flight).
    pub protocol: u64,
    /// Messages whose data did not match the pattern (checked by the client for READ,
    /// reported back by the server for WRITE and SEND).
    pub verify_mismatches: u64,
    /// QPs the client closed whose close was not graceful (reset, Terminate, or aborted
    /// after the close timeout); details in [`Report::close`].
    pub bad_close: u64,
}

impl ErrorCounts {
    /// Error completions of every status.
    pub fn completion_errors(&self) -> u64 {
        self.completions.iter().sum()
    }

    /// Every error counted.
    pub fn total(&self) -> u64 {
        self.connect_failed
            + self.rejected
            + self.bad_accept
            + self.qp_lost
            + self.completion_errors()
            + self.async_events
            + self.post_failed
            + self.protocol
            + self.verify_mismatches
            + self.bad_close
    }

    fn merge(&mut self, o: &ErrorCounts) {
        self.connect_failed += o.connect_failed;
        self.rejected += o.rejected;
        self.reject_reason = self.reject_reason.or(o.reject_reason);
        self.bad_accept += o.bad_accept;
        self.qp_lost += o.qp_lost;
        for (a, b) in self.completions.iter_mut().zip(o.completions.iter()) {
            *a += *b;
        }
        self.async_events += o.async_events;
        self.post_failed += o.post_failed;
        self.protocol += o.protocol;
        self.verify_mismatches += o.verify_mismatches;
        self.bad_close += o.bad_close;
    }
}

/// How the client's established connections ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CloseStats {
    /// Graceful: FIN both ways, both acknowledged, nothing outstanding (the QP went back
    /// to Idle).
    pub graceful: u64,
    /// Ended by a reset, a timeout, a Terminate or a Bad Close (the QP went to Error).
    pub reset: u64,
    /// The graceful close did not finish within the close timeout: the client reset the
    /// connection itself.
    pub aborted: u64,
    /// Terminate messages the client's QPs sent.
    pub terminates_sent: u64,
    /// Terminate messages the client's QPs received.
    pub terminates_received: u64,
}

impl CloseStats {
    /// Connections that did not end gracefully.
    pub fn unclean(&self) -> u64 {
        self.reset + self.aborted
    }

    fn merge(&mut self, o: &CloseStats) {
        self.graceful += o.graceful;
        self.reset += o.reset;
        self.aborted += o.aborted;
        self.terminates_sent += o.terminates_sent;
        self.terminates_received += o.terminates_received;
    }
}

/// Connection set-up: from `Engine::connect` (the SYN is queued) to the `Established`
/// event (MPA Reply received, QP in RTS).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetupStats {
    /// Connections established.
    pub established: u64,
    /// From the first connect call to the last `Established`, in ns.
    pub window_ns: u64,
    /// Set-up time of each connection, ns.
    pub latency: Histogram,
}

impl SetupStats {
    /// Connections established per second over the set-up window.
    pub fn rate_per_sec(&self) -> f64 {
        if self.window_ns == 0 {
            0.0
        } else {
            self.established as f64 * 1e9 / self.window_ns as f64
        }
    }
}

/// The result of a client run (or of several cores' clients merged).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The operation.
    pub op: Op,
    /// Message size in bytes.
    pub size: u32,
    /// QPs asked for.
    pub qps: u32,
    /// WRs outstanding per QP.
    pub depth: u32,
    /// Data was verified.
    pub verify: bool,
    /// Length of the measurement window, seconds.
    pub seconds: f64,
    /// Messages completed inside the window.
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// Post-to-completion latency of the (signaled) messages completed in the window, ns.
    /// For verified WRITEs: post to the server's ack.
    pub latency: Histogram,
    /// Connection set-up.
    pub setup: SetupStats,
    /// Errors.
    pub errors: ErrorCounts,
    /// How the connections ended.
    pub close: CloseStats,
    /// The first mismatches the client found itself (READ verify).
    pub mismatches: MismatchLog,
}

impl Report {
    /// An empty report of a run (allocates the histograms).
    pub fn new(op: Op, size: u32, qps: u32, depth: u32, verify: bool) -> Report {
        Report {
            op,
            size,
            qps,
            depth,
            verify,
            seconds: 0.0,
            messages: 0,
            bytes: 0,
            latency: Histogram::new(),
            setup: SetupStats::default(),
            errors: ErrorCounts::default(),
            close: CloseStats::default(),
            mismatches: MismatchLog::default(),
        }
    }

    /// Payload goodput, Gbit/s.
    pub fn goodput_gbps(&self) -> f64 {
        if self.seconds <= 0.0 {
            0.0
        } else {
            self.bytes as f64 * 8.0 / self.seconds / 1e9
        }
    }

    /// Messages per second.
    pub fn messages_per_sec(&self) -> f64 {
        if self.seconds <= 0.0 {
            0.0
        } else {
            self.messages as f64 / self.seconds
        }
    }

    /// Latency at quantile `q` (0.5, 0.9, 0.99, 0.999, 1.0), µs.
    pub fn latency_us(&self, q: f64) -> f64 {
        self.latency.quantile(q) as f64 / 1000.0
    }

    /// Adds another core's report of the same run: counts add up, the window is the
    /// longest (cores run side by side), histograms merge.
    pub fn merge(&mut self, o: &Report) {
        self.qps += o.qps;
        self.seconds = self.seconds.max(o.seconds);
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.latency.merge(&o.latency);
        self.setup.established += o.setup.established;
        self.setup.window_ns = self.setup.window_ns.max(o.setup.window_ns);
        self.setup.latency.merge(&o.setup.latency);
        self.errors.merge(&o.errors);
        self.close.merge(&o.close);
        self.mismatches.merge(&o.mismatches);
    }

    /// One JSON object: the run, `latency_us`, `setup`, `errors` (with
    /// `completions_by_status`, the statuses seen), `close` and `mismatches`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&ReportJson::new(self)).unwrap_or_default()
    }
}

/// `x` as written with `places` decimals (the precision the report is given in).
fn fixed(x: f64, places: usize) -> f64 {
    format!("{x:.places$}").parse().unwrap_or(x)
}

/// [`Report::to_json`]'s object.
#[derive(Serialize)]
struct ReportJson<'a> {
    op: String,
    size: u32,
    qps: u32,
    depth: u32,
    verify: bool,
    seconds: f64,
    messages: u64,
    bytes: u64,
    goodput_gbps: f64,
    messages_per_sec: f64,
    latency_us: LatencyJson,
    setup: SetupJson,
    errors: ErrorsJson<'a>,
    close: &'a CloseStats,
    mismatches: Vec<MismatchJson>,
}

/// Quantiles of the message latency, µs.
#[derive(Serialize)]
struct LatencyJson {
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
    samples: u64,
}

/// Connection set-up.
#[derive(Serialize)]
struct SetupJson {
    established: u64,
    window_s: f64,
    rate_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

/// [`ErrorCounts`] with the error completions summed and by status.
#[derive(Serialize)]
struct ErrorsJson<'a> {
    connect_failed: u64,
    rejected: u64,
    bad_accept: u64,
    qp_lost: u64,
    completion_errors: u64,
    async_events: u64,
    post_failed: u64,
    protocol: u64,
    verify_mismatches: u64,
    bad_close: u64,
    completions_by_status: ByStatus<'a>,
}

/// `{"<status>": count}` of the statuses with a count, in [`WcStatus::ALL`] order.
struct ByStatus<'a>(&'a [u64; WcStatus::ALL.len()]);

impl Serialize for ByStatus<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (st, n) in WcStatus::ALL.iter().zip(self.0.iter()) {
            if *n > 0 {
                m.serialize_entry(&format!("{st:?}"), n)?;
            }
        }
        m.end()
    }
}

/// One mismatch; the words in hex (`0x` and 16 digits).
#[derive(Serialize)]
struct MismatchJson {
    qp: u32,
    seq: u64,
    offset: u64,
    expected: String,
    got: String,
}

impl<'a> ReportJson<'a> {
    fn new(r: &'a Report) -> ReportJson<'a> {
        let us = |ns: u64, places| fixed(ns as f64 / 1000.0, places);
        let e = &r.errors;
        ReportJson {
            op: r.op.to_string(),
            size: r.size,
            qps: r.qps,
            depth: r.depth,
            verify: r.verify,
            seconds: fixed(r.seconds, 6),
            messages: r.messages,
            bytes: r.bytes,
            goodput_gbps: fixed(r.goodput_gbps(), 6),
            messages_per_sec: fixed(r.messages_per_sec(), 3),
            latency_us: LatencyJson {
                p50: fixed(r.latency_us(0.5), 3),
                p90: fixed(r.latency_us(0.9), 3),
                p99: fixed(r.latency_us(0.99), 3),
                p999: fixed(r.latency_us(0.999), 3),
                max: us(r.latency.max(), 3),
                samples: r.latency.count(),
            },
            setup: SetupJson {
                established: r.setup.established,
                window_s: fixed(r.setup.window_ns as f64 / 1e9, 6),
                rate_per_sec: fixed(r.setup.rate_per_sec(), 3),
                p50_us: us(r.setup.latency.quantile(0.5), 3),
                p99_us: us(r.setup.latency.quantile(0.99), 3),
                max_us: us(r.setup.latency.max(), 3),
            },
            errors: ErrorsJson {
                connect_failed: e.connect_failed,
                rejected: e.rejected,
                bad_accept: e.bad_accept,
                qp_lost: e.qp_lost,
                completion_errors: e.completion_errors(),
                async_events: e.async_events,
                post_failed: e.post_failed,
                protocol: e.protocol,
                verify_mismatches: e.verify_mismatches,
                bad_close: e.bad_close,
                completions_by_status: ByStatus(&e.completions),
            },
            close: &r.close,
            mismatches: r
                .mismatches
                .iter()
                .map(|m| MismatchJson {
                    qp: m.qp,
                    seq: m.seq,
                    offset: m.offset,
                    expected: format!("{:#018x}", m.expected),
                    got: format!("{:#018x}", m.got),
                })
                .collect(),
        }
    }
}

fn write_mismatches(f: &mut fmt::Formatter<'_>, log: &MismatchLog) -> fmt::Result {
    for m in log.iter() {
        writeln!(
            f,
            "  mismatch: qp {} seq {} offset {}: expected {:#018x}, got {:#018x}",
            m.qp, m.seq, m.offset, m.expected, m.got
        )?;
    }
    Ok(())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "loadgen {} {} B x {} QPs x depth {} (verify {}): {:.3} s",
            self.op,
            self.size,
            self.qps,
            self.depth,
            if self.verify { "on" } else { "off" },
            self.seconds
        )?;
        writeln!(
            f,
            "  {} messages, {} bytes: {:.3} Gbit/s, {:.0} messages/s",
            self.messages,
            self.bytes,
            self.goodput_gbps(),
            self.messages_per_sec()
        )?;
        writeln!(
            f,
            "  latency µs: p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}  ({} samples)",
            self.latency_us(0.5),
            self.latency_us(0.9),
            self.latency_us(0.99),
            self.latency_us(0.999),
            self.latency.max() as f64 / 1000.0,
            self.latency.count()
        )?;
        writeln!(
            f,
            "  set-up: {} connections in {:.6} s ({:.0}/s), p50 {:.2} µs, p99 {:.2} µs",
            self.setup.established,
            self.setup.window_ns as f64 / 1e9,
            self.setup.rate_per_sec(),
            self.setup.latency.quantile(0.5) as f64 / 1000.0,
            self.setup.latency.quantile(0.99) as f64 / 1000.0
        )?;
        let c = &self.close;
        writeln!(
            f,
            "  close: {} of {} connections graceful (FIN both ways), {} reset, {} aborted after the close timeout; Terminates {} sent, {} received",
            c.graceful,
            c.graceful + c.unclean(),
            c.reset,
            c.aborted,
            c.terminates_sent,
            c.terminates_received
        )?;
        let e = &self.errors;
        write!(
            f,
            "  errors: connect failed {}, rejected {}, bad accept {}, QPs lost {}, error completions {}, async events {}, post failed {}, protocol {}, verify mismatches {}, bad closes {}",
            e.connect_failed,
            e.rejected,
            e.bad_accept,
            e.qp_lost,
            e.completion_errors(),
            e.async_events,
            e.post_failed,
            e.protocol,
            e.verify_mismatches,
            e.bad_close
        )?;
        if let Some(r) = e.reject_reason {
            write!(f, " (first reject: {r})")?;
        }
        writeln!(f)?;
        for (st, n) in WcStatus::ALL.iter().zip(e.completions.iter()) {
            if *n > 0 {
                writeln!(f, "  completions {st:?}: {n}")?;
            }
        }
        write_mismatches(f, &self.mismatches)
    }
}

/// What a server has done so far (readable at any time). Serialized without the
/// mismatch details (`to_json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// Connections accepted.
    pub accepted: u64,
    /// Connect requests rejected (bad hello, no room).
    pub rejected: u64,
    /// Accepted connections that ended (served and closed, or lost).
    pub served: u64,
    /// Accepted connections that failed before RDMA mode.
    pub failed: u64,
    /// Connections open now.
    pub active: u32,
    /// SENDs received (data messages; control messages not counted).
    pub messages_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// Messages (SEND) and slots (WRITE) checked against the pattern.
    pub messages_verified: u64,
    /// Their bytes.
    pub bytes_verified: u64,
    /// Checks that failed.
    pub verify_mismatches: u64,
    /// Credit messages sent.
    pub credits_sent: u64,
    /// Write acks sent.
    pub acks_sent: u64,
    /// Error completions (flushes during close not counted), failed posts, and protocol
    /// violations by clients (a SEND without credit, an unknown control message).
    pub errors: u64,
    /// The first mismatches.
    #[serde(skip)]
    pub mismatches: MismatchLog,
}

impl ServerReport {
    /// Adds another core's server report.
    pub fn merge(&mut self, o: &ServerReport) {
        self.accepted += o.accepted;
        self.rejected += o.rejected;
        self.served += o.served;
        self.failed += o.failed;
        self.active += o.active;
        self.messages_received += o.messages_received;
        self.bytes_received += o.bytes_received;
        self.messages_verified += o.messages_verified;
        self.bytes_verified += o.bytes_verified;
        self.verify_mismatches += o.verify_mismatches;
        self.credits_sent += o.credits_sent;
        self.acks_sent += o.acks_sent;
        self.errors += o.errors;
        self.mismatches.merge(&o.mismatches);
    }

    /// One JSON object (the counters; the mismatch details are left out).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl fmt::Display for ServerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "loadgen server: {} accepted, {} rejected, {} served, {} failed, {} active",
            self.accepted, self.rejected, self.served, self.failed, self.active
        )?;
        writeln!(
            f,
            "  received {} messages ({} bytes); verified {} ({} bytes), {} mismatches; {} credits and {} acks sent; {} errors",
            self.messages_received,
            self.bytes_received,
            self.messages_verified,
            self.bytes_verified,
            self.verify_mismatches,
            self.credits_sent,
            self.acks_sent,
            self.errors
        )?;
        write_mismatches(f, &self.mismatches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(messages: u64, seconds: f64, lat: &[u64]) -> Report {
        let mut r = Report::new(Op::Write, 1000, 1, 8, false);
        r.seconds = seconds;
        r.messages = messages;
        r.bytes = messages * 1000;
        for &v in lat {
            r.latency.record(v);
        }
        r
    }

    #[test]
    fn report_math() {
        let r = sample(2_000_000, 2.0, &[1000, 2000, 3000, 4000]);
        assert!((r.goodput_gbps() - 8.0).abs() < 1e-9);
        assert!((r.messages_per_sec() - 1e6).abs() < 1e-6);
        assert!((r.latency_us(0.5) - 2.0).abs() < 0.02);
        assert!((r.latency_us(1.0) - 4.0).abs() < 1e-9);
        let zero = sample(5, 0.0, &[]);
        assert_eq!(zero.goodput_gbps(), 0.0);
        assert_eq!(zero.messages_per_sec(), 0.0);
    }

    #[test]
    fn merge_adds_counts_and_keeps_the_window() {
        let mut a = sample(1000, 1.0, &[1000; 10]);
        let mut b = sample(3000, 1.0, &[5000; 30]);
        b.errors.completions[WcStatus::Flushed as usize] = 2;
        b.errors.reject_reason = Some(RejectReason::BadSize);
        b.mismatches.push(Mismatch {
            qp: 1,
            seq: 2,
            offset: 8,
            expected: 1,
            got: 2,
        });
        a.setup.window_ns = 5;
        b.setup.window_ns = 7;
        a.merge(&b);
        assert_eq!(a.messages, 4000);
        assert_eq!(a.qps, 2);
        assert_eq!(a.seconds, 1.0);
        assert!((a.goodput_gbps() - 0.032).abs() < 1e-9);
        assert_eq!(a.latency.count(), 40);
        // 10 x 1 µs, 30 x 5 µs: the median is 5 µs.
        assert!((a.latency_us(0.5) - 5.0).abs() < 0.05);
        assert!((a.latency_us(0.2) - 1.0).abs() < 0.01);
        assert_eq!(a.errors.completion_errors(), 2);
        assert_eq!(a.errors.reject_reason, Some(RejectReason::BadSize));
        assert_eq!(a.setup.window_ns, 7);
        assert_eq!(a.mismatches.iter().count(), 1);
        let text = a.to_string();
        assert!(text.contains("4000 messages"), "{text}");
        assert!(text.contains("mismatch: qp 1 seq 2 offset 8"), "{text}");
        let json = a.to_json();
        assert!(json.starts_with('{') && json.ends_with('}'), "{json}");
        assert!(json.contains("\"messages\":4000"), "{json}");
        assert!(json.contains("\"Flushed\":2"), "{json}");
        assert_eq!(json.matches('{').count(), json.matches('}').count());
    }

    #[test]
    fn mismatch_log_is_bounded_and_server_report_prints() {
        let mut log = MismatchLog::default();
        for i in 0..10 {
            log.push(Mismatch {
                qp: 0,
                seq: i,
                offset: 0,
                expected: 0,
                got: 1,
            });
        }
        assert_eq!(log.iter().count(), MAX_MISMATCHES);
        assert_eq!(log.iter().next().unwrap().seq, 0);
        let mut s = ServerReport {
            accepted: 2,
            mismatches: log,
            ..ServerReport::default()
        };
        s.merge(&ServerReport {
            accepted: 1,
            ..ServerReport::default()
        });
        assert_eq!(s.accepted, 3);
        assert!(s.to_string().contains("3 accepted"));
        assert!(s.to_json().contains("\"accepted\":3"));
    }

    /// A report with every field of the JSON set (nothing zero that can be non-zero).
    fn fixed() -> Report {
        let mut r = sample(123_457, 1.25, &[1500, 2500, 9000, 12_345]);
        r.op = Op::Read;
        r.verify = true;
        r.setup.established = 3;
        r.setup.window_ns = 1_234_567;
        for v in [10_000, 20_000, 35_000] {
            r.setup.latency.record(v);
        }
        let e = &mut r.errors;
        e.connect_failed = 1;
        e.rejected = 2;
        e.reject_reason = Some(RejectReason::BadSize);
        e.bad_accept = 3;
        e.qp_lost = 4;
        e.completions[WcStatus::Flushed as usize] = 5;
        e.completions[WcStatus::ALL.len() - 1] = 6;
        e.async_events = 7;
        e.post_failed = 8;
        e.protocol = 9;
        e.verify_mismatches = 10;
        e.bad_close = 11;
        r.close = CloseStats {
            graceful: 12,
            reset: 13,
            aborted: 14,
            terminates_sent: 15,
            terminates_received: 16,
        };
        for i in 0..2 {
            r.mismatches.push(Mismatch {
                qp: i,
                seq: 17 + u64::from(i),
                offset: 24,
                expected: 0x0123_4567_89ab_cdef,
                got: 0xfeed_u64 << i,
            });
        }
        r
    }

    fn fixed_server() -> ServerReport {
        ServerReport {
            accepted: 1,
            rejected: 2,
            served: 3,
            failed: 4,
            active: 5,
            messages_received: 6,
            bytes_received: 7,
            messages_verified: 8,
            bytes_verified: 9,
            verify_mismatches: 10,
            credits_sent: 11,
            acks_sent: 12,
            errors: 13,
            mismatches: fixed().mismatches,
        }
    }

    /// `to_json` of [`fixed`], [`fixed_server`] and an empty SEND report as the
    /// hand-written serializer wrote them: scripts/bench-loadgen.sh, scripts/linux-peer.sh
    /// and `iwarpd stats --json` readers depend on these names and this nesting.
    const PINNED: [&str; 3] = [
        r#"{"op":"read","size":1000,"qps":1,"depth":8,"verify":true,"seconds":1.250000,"messages":123457,"bytes":123457000,"goodput_gbps":0.790125,"messages_per_sec":98765.600,"latency_us":{"p50":2.511,"p90":12.345,"p99":12.345,"p999":12.345,"max":12.345,"samples":4},"setup":{"established":3,"window_s":0.001235,"rate_per_sec":2430.002,"p50_us":20.095,"p99_us":35.000,"max_us":35.000},"errors":{"connect_failed":1,"rejected":2,"bad_accept":3,"qp_lost":4,"completion_errors":11,"async_events":7,"post_failed":8,"protocol":9,"verify_mismatches":10,"bad_close":11,"completions_by_status":{"Flushed":5,"RemoteOperationError":6}},"close":{"graceful":12,"reset":13,"aborted":14,"terminates_sent":15,"terminates_received":16},"mismatches":[{"qp":0,"seq":17,"offset":24,"expected":"0x0123456789abcdef","got":"0x000000000000feed"},{"qp":1,"seq":18,"offset":24,"expected":"0x0123456789abcdef","got":"0x000000000001fdda"}]}"#,
        r#"{"accepted":1,"rejected":2,"served":3,"failed":4,"active":5,"messages_received":6,"bytes_received":7,"messages_verified":8,"bytes_verified":9,"verify_mismatches":10,"credits_sent":11,"acks_sent":12,"errors":13}"#,
        r#"{"op":"send","size":64,"qps":1,"depth":1,"verify":false,"seconds":0.000000,"messages":0,"bytes":0,"goodput_gbps":0.000000,"messages_per_sec":0.000,"latency_us":{"p50":0.000,"p90":0.000,"p99":0.000,"p999":0.000,"max":0.000,"samples":0},"setup":{"established":0,"window_s":0.000000,"rate_per_sec":0.000,"p50_us":0.000,"p99_us":0.000,"max_us":0.000},"errors":{"connect_failed":0,"rejected":0,"bad_accept":0,"qp_lost":0,"completion_errors":0,"async_events":0,"post_failed":0,"protocol":0,"verify_mismatches":0,"bad_close":0,"completions_by_status":{}},"close":{"graceful":0,"reset":0,"aborted":0,"terminates_sent":0,"terminates_received":0},"mismatches":[]}"#,
    ];

    /// The keys of a JSON text in the order written (nesting flattened).
    fn keys_in_order(json: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = json;
        while let Some(i) = rest.find('"') {
            let after = &rest[i + 1..];
            let Some(j) = after.find('"') else { break };
            let (word, tail) = (&after[..j], &after[j + 1..]);
            if tail.starts_with(':') {
                out.push(word.to_string());
            }
            rest = tail;
        }
        out
    }

    #[test]
    fn json_shape_is_pinned() {
        let now = [
            fixed().to_json(),
            fixed_server().to_json(),
            Report::new(Op::Send, 64, 1, 1, false).to_json(),
        ];
        for (pinned, now) in PINNED.iter().zip(now.iter()) {
            let a: serde_json::Value = serde_json::from_str(pinned).unwrap();
            let b: serde_json::Value = serde_json::from_str(now).expect(now);
            assert_eq!(a, b, "\npinned: {pinned}\nnow:    {now}");
            assert_eq!(keys_in_order(pinned), keys_in_order(now), "{now}");
        }
    }
}
