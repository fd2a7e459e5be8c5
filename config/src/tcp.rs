//! `[tcp]`: TCP tunables of every connection.

use iwarp_tcp::{Congestion, KeepaliveConfig, TcpConfig};
use serde::{Deserialize, Serialize};

use crate::error::{ensure, ConfigError};
use crate::seeds::Hex128;

/// Congestion control algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CongestionControl {
    /// CUBIC (RFC 9438, default).
    #[default]
    Cubic,
    /// NewReno (RFC 5681, RFC 6582).
    Newreno,
}

/// Largest MSS: a 9000-byte MTU less the IPv4 and TCP headers.
pub const MSS_MAX: u16 = 8960;

/// `[tcp]`: the TCP configuration of every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcpSection {
    /// Congestion control: `cubic` or `newreno`.
    pub congestion: CongestionControl,
    /// Initial retransmission timeout, milliseconds (RFC 6298: 1000).
    pub rto_ms_initial: u64,
    /// Minimum RTO, milliseconds (RFC 6298: 1000; Linux 200; a datacenter a few ms).
    pub rto_ms_min: u64,
    /// Maximum RTO, milliseconds.
    pub rto_ms_max: u64,
    /// Cap on the MSS we advertise and send; the port's MTU lowers it further.
    pub mss_bytes: u16,
    /// Receive window we advertise, bytes.
    pub rcv_wnd_bytes: u32,
    /// Window scale shift we offer (0..=14, RFC 7323).
    pub wscale: u8,
    /// Offer and accept SACK (RFC 2018).
    pub sack: bool,
    /// Offer and accept timestamps (RFC 7323).
    pub timestamps: bool,
    /// Timestamp clock tick, microseconds.
    pub ts_tick_us: u64,
    /// Delayed ACK timer, microseconds (0: ACK every segment at once).
    pub delayed_ack_us: u64,
    /// Consecutive retransmission timeouts before a connection is lost.
    pub max_retries: u32,
    /// SYN retransmissions before a connection attempt fails.
    pub syn_retries: u32,
    /// Send keepalive probes on idle connections.
    pub keepalive: bool,
    /// Idle time before the first keepalive probe, milliseconds.
    pub keepalive_idle_ms: u64,
    /// Time between unanswered probes, milliseconds (well above 500).
    pub keepalive_interval_ms: u64,
    /// Unanswered probes before the connection is lost.
    pub keepalive_count: u32,
    /// Out-of-order bytes held per connection (allocated on loss only).
    pub ooo_max_bytes: u32,
    /// Out-of-order ranges held per connection.
    pub ooo_max_ranges: u32,
    /// SACKed ranges the sender's scoreboard keeps.
    pub sack_max_ranges: u32,
    /// Data segments in flight per connection.
    pub max_inflight_segments: u32,
    /// Initial congestion window, segments (RFC 6928: 10).
    pub initial_cwnd_segments: u32,
    /// Maximum segment lifetime, milliseconds (TIME-WAIT lasts twice this).
    pub msl_ms: u64,
    /// Most challenge ACKs (RFC 5961) and ACKs answering out-of-window data per second,
    /// per connection.
    pub challenge_acks_per_s: u32,
    /// Least time between ACKs answering unacceptable segments, milliseconds (0: no limit).
    pub invalid_ack_interval_ms: u64,
    /// Time after which idle loss-recovery buffers are released, milliseconds.
    pub buffer_release_ms: u64,
    /// How long a close iwarpd started may take before the connection is reset, milliseconds.
    pub close_timeout_ms: u64,
    /// After a listener is removed, SYNs for its port are dropped (the peer retransmits)
    /// instead of refused for this long, milliseconds (0: refused at once).
    pub relisten_grace_ms: u64,
    /// Most RSTs per second a dataplane core sends in answer to segments for no
    /// connection (closed ports, dead connections); the rest are dropped and counted.
    pub no_connection_rsts_per_s: u32,
    /// Secret of the RFC 6528 ISN generator, 32 hex digits; absent: random at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isn_secret: Option<Hex128>,
}

/// The daemon's default keepalive idle time, ms.
pub const DAEMON_KEEPALIVE_IDLE_MS: u64 = 30_000;
/// The daemon's default time between unanswered keepalive probes, ms.
pub const DAEMON_KEEPALIVE_INTERVAL_MS: u64 = 5_000;
/// The daemon's default number of unanswered probes before the connection is lost.
pub const DAEMON_KEEPALIVE_COUNT: u32 = 3;

impl Default for TcpSection {
    fn default() -> TcpSection {
        let t = TcpConfig::default();
        TcpSection {
            congestion: CongestionControl::Cubic,
            rto_ms_initial: t.rto_ms_initial,
            rto_ms_min: t.rto_ms_min,
            rto_ms_max: t.rto_ms_max,
            mss_bytes: MSS_MAX,
            rcv_wnd_bytes: t.rcv_wnd_bytes,
            wscale: t.wscale,
            sack: t.sack,
            timestamps: t.timestamps,
            ts_tick_us: t.ts_tick_us,
            // A poll-mode core handles a whole receive burst before it transmits, so an
            // immediate ACK is one ACK per connection per burst: no timer needed.
            delayed_ack_us: 0,
            max_retries: t.max_retries,
            syn_retries: t.syn_retries,
            // The engine's default is RFC 1122's (off; 2 h idle). A daemon must end the
            // connections of a peer that vanished (a killed daemon, a pulled cable) even
            // when it has nothing to send, where the retransmission timer never runs:
            // keepalive ends an idle dead connection within idle + interval x count
            // = 30 + 5 x 3 = 45 s (docs/DAEMON.md, "Dead peers").
            keepalive: true,
            keepalive_idle_ms: DAEMON_KEEPALIVE_IDLE_MS,
            keepalive_interval_ms: DAEMON_KEEPALIVE_INTERVAL_MS,
            keepalive_count: DAEMON_KEEPALIVE_COUNT,
            ooo_max_bytes: iwarp_engine::config::DEFAULT_TCP_OOO_BYTES as u32,
            ooo_max_ranges: t.ooo_max_ranges as u32,
            sack_max_ranges: t.sack_max_ranges as u32,
            max_inflight_segments: iwarp_engine::config::DEFAULT_TCP_INFLIGHT_SEGMENTS as u32,
            initial_cwnd_segments: t.initial_cwnd_segments,
            msl_ms: t.msl_ms,
            challenge_acks_per_s: t.challenge_acks_per_s,
            invalid_ack_interval_ms: t.invalid_ack_interval_ms,
            buffer_release_ms: t.buffer_release_ms,
            close_timeout_ms: 60_000,
            relisten_grace_ms: iwarp_engine::config::DEFAULT_RELISTEN_GRACE_MS,
            no_connection_rsts_per_s: iwarp_engine::config::DEFAULT_NO_CONNECTION_RSTS_PER_S,
            isn_secret: None,
        }
    }
}

impl TcpSection {
    /// The engine's TCP configuration (`checksum_offload` as resolved for the port).
    pub fn tcp_config(&self, checksum_offload: bool) -> TcpConfig {
        TcpConfig {
            mss_bytes: self.mss_bytes,
            rcv_wnd_bytes: self.rcv_wnd_bytes,
            wscale: self.wscale,
            sack: self.sack,
            timestamps: self.timestamps,
            ts_tick_us: self.ts_tick_us,
            congestion: match self.congestion {
                CongestionControl::Cubic => Congestion::Cubic,
                CongestionControl::Newreno => Congestion::NewReno,
            },
            rto_ms_initial: self.rto_ms_initial,
            rto_ms_min: self.rto_ms_min,
            rto_ms_max: self.rto_ms_max,
            delayed_ack_us: self.delayed_ack_us,
            max_retries: self.max_retries,
            syn_retries: self.syn_retries,
            keepalive: KeepaliveConfig {
                enabled: self.keepalive,
                idle_ms: self.keepalive_idle_ms,
                interval_ms: self.keepalive_interval_ms,
                count: self.keepalive_count,
            },
            ooo_max_bytes: self.ooo_max_bytes as usize,
            ooo_max_ranges: self.ooo_max_ranges as usize,
            sack_max_ranges: self.sack_max_ranges as usize,
            max_inflight_segments: self.max_inflight_segments as usize,
            msl_ms: self.msl_ms,
            checksum_offload,
            initial_cwnd_segments: self.initial_cwnd_segments,
            challenge_acks_per_s: self.challenge_acks_per_s,
            invalid_ack_interval_ms: self.invalid_ack_interval_ms,
            buffer_release_ms: self.buffer_release_ms,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure(self.rto_ms_min > 0, "tcp.rto_ms_min", "must be positive")?;
        ensure(
            self.rto_ms_min <= self.rto_ms_initial,
            "tcp.rto_ms_initial",
            "must be at least rto_ms_min",
        )?;
        ensure(
            self.rto_ms_initial <= self.rto_ms_max && self.rto_ms_max <= 3_600_000,
            "tcp.rto_ms_max",
            "must be at least rto_ms_initial and at most 3600000",
        )?;
        ensure(
            (536..=MSS_MAX).contains(&self.mss_bytes),
            "tcp.mss_bytes",
            format!("must be in 536..={MSS_MAX}"),
        )?;
        ensure(
            self.wscale <= 14,
            "tcp.wscale",
            "must be at most 14 (RFC 7323)",
        )?;
        let wnd_max: u32 = if self.wscale == 0 { 65_535 } else { 1 << 30 };
        ensure(
            self.rcv_wnd_bytes >= u32::from(self.mss_bytes).min(wnd_max)
                && self.rcv_wnd_bytes <= wnd_max,
            "tcp.rcv_wnd_bytes",
            format!(
                "must be at least mss_bytes and at most {wnd_max} (with wscale {})",
                self.wscale
            ),
        )?;
        ensure(
            (1..=1_000_000).contains(&self.ts_tick_us),
            "tcp.ts_tick_us",
            "must be in 1..=1000000",
        )?;
        ensure(
            self.delayed_ack_us < 500_000,
            "tcp.delayed_ack_us",
            "must be below 500000 (RFC 9293)",
        )?;
        ensure(
            (1..=100).contains(&self.max_retries),
            "tcp.max_retries",
            "must be in 1..=100",
        )?;
        ensure(
            (1..=100).contains(&self.syn_retries),
            "tcp.syn_retries",
            "must be in 1..=100",
        )?;
        if self.keepalive {
            ensure(
                self.keepalive_idle_ms > 0,
                "tcp.keepalive_idle_ms",
                "must be positive",
            )?;
            ensure(
                self.keepalive_interval_ms >= 1_000,
                "tcp.keepalive_interval_ms",
                "must be at least 1000 (the peer answers probes at most every 500 ms)",
            )?;
            ensure(
                self.keepalive_count > 0,
                "tcp.keepalive_count",
                "must be positive",
            )?;
        }
        ensure(
            self.ooo_max_bytes <= 64 << 20,
            "tcp.ooo_max_bytes",
            "must be at most 67108864",
        )?;
        ensure(
            (1..=1024).contains(&self.ooo_max_ranges),
            "tcp.ooo_max_ranges",
            "must be in 1..=1024",
        )?;
        ensure(
            (1..=1024).contains(&self.sack_max_ranges),
            "tcp.sack_max_ranges",
            "must be in 1..=1024",
        )?;
        ensure(
            (1..=1 << 20).contains(&self.max_inflight_segments),
            "tcp.max_inflight_segments",
            "must be in 1..=1048576",
        )?;
        ensure(
            (1..=1000).contains(&self.initial_cwnd_segments),
            "tcp.initial_cwnd_segments",
            "must be in 1..=1000",
        )?;
        ensure(
            (1..=600_000).contains(&self.msl_ms),
            "tcp.msl_ms",
            "must be in 1..=600000",
        )?;
        ensure(
            self.buffer_release_ms > 0,
            "tcp.buffer_release_ms",
            "must be positive",
        )?;
        ensure(
            (1..=3_600_000).contains(&self.close_timeout_ms),
            "tcp.close_timeout_ms",
            "must be in 1..=3600000",
        )?;
        ensure(
            (1..=10_000_000).contains(&self.no_connection_rsts_per_s),
            "tcp.no_connection_rsts_per_s",
            "must be in 1..=10000000",
        )?;
        ensure(
            self.relisten_grace_ms <= 10_000,
            "tcp.relisten_grace_ms",
            "must be in 0..=10000",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(f: impl FnOnce(&mut TcpSection)) -> String {
        let mut t = TcpSection::default();
        f(&mut t);
        t.validate().unwrap_err().field
    }

    #[test]
    fn rules_name_their_field() {
        TcpSection::default().validate().unwrap();
        assert_eq!(err(|t| t.rto_ms_min = 0), "tcp.rto_ms_min");
        assert_eq!(err(|t| t.rto_ms_initial = 1), "tcp.rto_ms_initial");
        assert_eq!(err(|t| t.rto_ms_max = 10), "tcp.rto_ms_max");
        assert_eq!(err(|t| t.mss_bytes = 100), "tcp.mss_bytes");
        assert_eq!(err(|t| t.wscale = 15), "tcp.wscale");
        assert_eq!(err(|t| t.wscale = 0), "tcp.rcv_wnd_bytes");
        assert_eq!(err(|t| t.rcv_wnd_bytes = 10), "tcp.rcv_wnd_bytes");
        assert_eq!(err(|t| t.ts_tick_us = 0), "tcp.ts_tick_us");
        assert_eq!(err(|t| t.delayed_ack_us = 500_000), "tcp.delayed_ack_us");
        assert_eq!(err(|t| t.max_retries = 0), "tcp.max_retries");
        assert_eq!(err(|t| t.syn_retries = 0), "tcp.syn_retries");
        let ka = |f: fn(&mut TcpSection)| {
            err(|t| {
                t.keepalive = true;
                f(t)
            })
        };
        assert_eq!(ka(|t| t.keepalive_idle_ms = 0), "tcp.keepalive_idle_ms");
        assert_eq!(
            ka(|t| t.keepalive_interval_ms = 500),
            "tcp.keepalive_interval_ms"
        );
        assert_eq!(ka(|t| t.keepalive_count = 0), "tcp.keepalive_count");
        assert_eq!(err(|t| t.ooo_max_bytes = u32::MAX), "tcp.ooo_max_bytes");
        assert_eq!(err(|t| t.ooo_max_ranges = 0), "tcp.ooo_max_ranges");
        assert_eq!(err(|t| t.sack_max_ranges = 0), "tcp.sack_max_ranges");
        assert_eq!(
            err(|t| t.max_inflight_segments = 0),
            "tcp.max_inflight_segments"
        );
        assert_eq!(
            err(|t| t.initial_cwnd_segments = 0),
            "tcp.initial_cwnd_segments"
        );
        assert_eq!(err(|t| t.msl_ms = 0), "tcp.msl_ms");
        assert_eq!(err(|t| t.buffer_release_ms = 0), "tcp.buffer_release_ms");
        assert_eq!(err(|t| t.close_timeout_ms = 0), "tcp.close_timeout_ms");
    }

    #[test]
    fn maps_onto_the_engine() {
        let t = TcpSection {
            congestion: CongestionControl::Newreno,
            keepalive: true,
            keepalive_count: 3,
            ..TcpSection::default()
        };
        let c = t.tcp_config(true);
        assert_eq!(c.congestion, Congestion::NewReno);
        assert!(c.keepalive.enabled);
        assert_eq!(c.keepalive.count, 3);
        assert!(c.checksum_offload);
        assert_eq!(c.mss_bytes, MSS_MAX);
        assert_eq!(c.ooo_max_bytes, iwarp_engine::config::DEFAULT_TCP_OOO_BYTES);
    }

    #[test]
    fn the_daemon_defaults_end_an_idle_dead_connection_within_45_s() {
        // Issue 17 item 5: with the engine's default (keepalive off) a connection to a
        // vanished peer that had nothing to send stayed live for ever.
        let t = TcpSection::default();
        assert!(t.keepalive);
        let bound = t.keepalive_idle_ms + t.keepalive_interval_ms * u64::from(t.keepalive_count);
        assert_eq!(bound, 45_000);
        t.validate().unwrap();
        let k = t.tcp_config(false).keepalive;
        assert!(k.enabled && k.idle_ms == 30_000 && k.count == 3);
    }
}
