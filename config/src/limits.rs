//! `[limits]` (the bound of every verbs and connection table of one engine) and `[ip]`
//! (IPv4 and ARP).

use serde::{Deserialize, Serialize};

use iwarp_rdma::RnicLimits;
use iwarp_types::MAX_SGE;

use crate::error::{ensure, ConfigError};
use crate::seeds::Hex64;

/// Largest IRD/ORD the MPA Request can carry (14 bits).
pub const IRD_ORD_MAX: u32 = 0x3fff;

/// The deepest CQ: a CQ's ring holds depth + 1 entries rounded up to a power of two, and
/// a shared-memory ring has at most 2^20 entries (`iwarp_ring::RingLayout::MAX_ENTRIES`).
/// libfabric's `ofi_rxm` asks 262,144; siw offers about a million as well.
pub const MAX_CQE: u32 = (1 << 20) - 1;

/// `[limits]`: bounds of one engine. A dataplane core runs one engine per port, so each
/// bound holds per core and per port; every table is preallocated at start-up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// QPs.
    pub max_qps: u32,
    /// TCP connections (connected, connecting, closing and TIME-WAIT); at least `max_qps`.
    pub max_conns: u32,
    /// Completion queues.
    pub max_cqs: u32,
    /// Entries of one CQ (CQ depth).
    pub max_cqe: u32,
    /// Memory regions. The engine bounds regions and windows together (`max_mrs + max_mws` STags).
    pub max_mrs: u32,
    /// Memory windows.
    pub max_mws: u32,
    /// Protection domains.
    pub max_pds: u32,
    /// Shared receive queues.
    pub max_srqs: u32,
    /// Outstanding WRs of one SRQ.
    pub max_srq_wr: u32,
    /// Outstanding WRs of one send queue (SQ depth).
    pub max_sq_wr: u32,
    /// Outstanding WRs of one receive queue (RQ depth).
    pub max_rq_wr: u32,
    /// Scatter/gather elements per WR.
    pub max_sge: u32,
    /// Inbound RDMA Reads outstanding per QP (IRD).
    pub max_ird: u32,
    /// Outbound RDMA Reads outstanding per QP (ORD).
    pub max_ord: u32,
    /// Listening ports.
    pub max_listeners: u32,
    /// Largest backlog of one listener.
    pub backlog_max: u32,
    /// Lowest local port of active opens.
    pub ephemeral_port_min: u16,
    /// Highest local port of active opens.
    pub ephemeral_port_max: u16,
    /// Engine events (CM, async, CQ notifications) queued between two polls.
    pub event_queue_len: u32,
    /// Asynchronous verbs events queued (overflow is counted).
    pub max_async_events: u32,
    /// CQ notifications queued (overflow is counted).
    pub max_cq_events: u32,
    /// Completion event handler ids.
    pub max_cehs: u32,
    /// Control frames (ARP, ICMP replies, RSTs) queued for transmission.
    pub ctrl_tx_frames: u32,
    /// Segments a connection sends in one transmit turn at most before the next ready
    /// connection's turn (`iwarp_engine::EngineConfig::tx_turn_segs_max`).
    pub tx_turn_segs_max: u32,
    /// Seed of the STag randomisation, 16 hex digits; absent: random at start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stag_seed: Option<Hex64>,
}

impl Default for LimitsSection {
    fn default() -> LimitsSection {
        LimitsSection {
            max_qps: 1024,
            max_conns: 2048,
            max_cqs: 1024,
            max_cqe: MAX_CQE,
            max_mrs: 4096,
            max_mws: 1024,
            max_pds: 256,
            max_srqs: 64,
            max_srq_wr: 16384,
            max_sq_wr: 1024,
            max_rq_wr: 1024,
            max_sge: MAX_SGE as u32,
            max_ird: 16,
            max_ord: 16,
            max_listeners: 16,
            backlog_max: 128,
            ephemeral_port_min: 49152,
            ephemeral_port_max: 65535,
            event_queue_len: 4096,
            max_async_events: 1024,
            max_cq_events: 4096,
            max_cehs: 64,
            ctrl_tx_frames: 64,
            tx_turn_segs_max: iwarp_engine::TX_TURN_SEGS_MAX,
            stag_seed: None,
        }
    }
}

impl LimitsSection {
    /// The verbs limits of one engine.
    pub fn rnic_limits(&self) -> RnicLimits {
        RnicLimits {
            max_qps: self.max_qps,
            max_sq_wr: self.max_sq_wr,
            max_rq_wr: self.max_rq_wr,
            max_sge: self.max_sge,
            max_ord: self.max_ord,
            max_ird: self.max_ird,
            max_pds: self.max_pds,
            max_cqs: self.max_cqs,
            max_cqe: self.max_cqe,
            max_srqs: self.max_srqs,
            max_srq_wr: self.max_srq_wr,
            max_stags: self.max_mrs.saturating_add(self.max_mws),
            max_async_events: self.max_async_events,
            max_cq_events: self.max_cq_events,
            max_cehs: self.max_cehs,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let positive: [(&str, u32, u32); 22] = [
            ("max_qps", self.max_qps, 1 << 20),
            ("max_conns", self.max_conns, 1 << 20),
            ("max_cqs", self.max_cqs, 1 << 20),
            ("max_cqe", self.max_cqe, MAX_CQE),
            ("max_mrs", self.max_mrs, 1 << 22),
            ("max_mws", self.max_mws, 1 << 22),
            ("max_pds", self.max_pds, 1 << 20),
            ("max_srqs", self.max_srqs, 1 << 20),
            ("max_srq_wr", self.max_srq_wr, 1 << 20),
            ("max_sq_wr", self.max_sq_wr, 1 << 20),
            ("max_rq_wr", self.max_rq_wr, 1 << 20),
            ("max_sge", self.max_sge, MAX_SGE as u32),
            ("max_ird", self.max_ird, IRD_ORD_MAX),
            ("max_ord", self.max_ord, IRD_ORD_MAX),
            ("max_listeners", self.max_listeners, 1 << 16),
            ("backlog_max", self.backlog_max, 1 << 16),
            ("event_queue_len", self.event_queue_len, 1 << 22),
            ("max_async_events", self.max_async_events, 1 << 22),
            ("max_cq_events", self.max_cq_events, 1 << 22),
            ("max_cehs", self.max_cehs, 1 << 16),
            ("ctrl_tx_frames", self.ctrl_tx_frames, 1 << 16),
            ("tx_turn_segs_max", self.tx_turn_segs_max, 1024),
        ];
        for (key, v, max) in positive {
            ensure(
                (1..=max).contains(&v),
                format!("limits.{key}"),
                format!("{v} is outside 1..={max}"),
            )?;
        }
        ensure(
            self.max_conns >= self.max_qps,
            "limits.max_conns",
            format!(
                "must be at least max_qps ({}): every QP needs a connection",
                self.max_qps
            ),
        )?;
        ensure(
            self.ephemeral_port_min >= 1024 && self.ephemeral_port_min <= self.ephemeral_port_max,
            "limits.ephemeral_port_min",
            "must be at least 1024 and at most ephemeral_port_max",
        )?;
        ensure(
            u32::from(self.ephemeral_port_max - self.ephemeral_port_min) + 1 >= 64,
            "limits.ephemeral_port_max",
            "the ephemeral range must hold at least 64 ports",
        )
    }
}

/// `[ip]`: IPv4 and ARP of every port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IpSection {
    /// TTL of the IPv4 packets we send.
    pub ttl: u8,
    /// ARP cache entries per engine.
    pub arp_cache_entries: u32,
    /// Lifetime of a resolved ARP entry, milliseconds.
    pub arp_entry_timeout_ms: u64,
    /// Interval between ARP requests while resolving, milliseconds.
    pub arp_retry_ms: u64,
    /// ARP requests for one resolution before the destination is unreachable.
    pub arp_retries_max: u32,
    /// Frames held (all next hops) while their next hop is being resolved.
    pub arp_pending_frames: u32,
    /// Frames held per next hop being resolved (at most `arp_pending_frames`).
    pub arp_pending_per_hop: u32,
}

impl Default for IpSection {
    fn default() -> IpSection {
        IpSection {
            ttl: 64,
            arp_cache_entries: 256,
            arp_entry_timeout_ms: 60_000,
            arp_retry_ms: 1_000,
            arp_retries_max: 3,
            arp_pending_frames: 64,
            arp_pending_per_hop: 8,
        }
    }
}

impl IpSection {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        ensure(self.ttl > 0, "ip.ttl", "must be positive")?;
        ensure(
            (1..=1 << 20).contains(&self.arp_cache_entries),
            "ip.arp_cache_entries",
            "must be in 1..=1048576",
        )?;
        ensure(
            (1..=86_400_000).contains(&self.arp_entry_timeout_ms),
            "ip.arp_entry_timeout_ms",
            "must be in 1..=86400000",
        )?;
        ensure(
            (1..=60_000).contains(&self.arp_retry_ms),
            "ip.arp_retry_ms",
            "must be in 1..=60000",
        )?;
        ensure(
            (1..=100).contains(&self.arp_retries_max),
            "ip.arp_retries_max",
            "must be in 1..=100",
        )?;
        ensure(
            (1..=1 << 16).contains(&self.arp_pending_frames),
            "ip.arp_pending_frames",
            "must be in 1..=65536",
        )?;
        ensure(
            (1..=self.arp_pending_frames).contains(&self.arp_pending_per_hop),
            "ip.arp_pending_per_hop",
            "must be positive and at most arp_pending_frames",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lerr(f: impl FnOnce(&mut LimitsSection)) -> String {
        let mut l = LimitsSection::default();
        f(&mut l);
        l.validate().unwrap_err().field
    }

    #[test]
    fn limit_rules_name_their_field() {
        LimitsSection::default().validate().unwrap();
        assert_eq!(lerr(|l| l.max_qps = 0), "limits.max_qps");
        assert_eq!(lerr(|l| l.max_cqe = 0), "limits.max_cqe");
        assert_eq!(lerr(|l| l.max_sge = 7), "limits.max_sge");
        assert_eq!(lerr(|l| l.max_ird = 0x4000), "limits.max_ird");
        assert_eq!(lerr(|l| l.max_ord = 0), "limits.max_ord");
        assert_eq!(lerr(|l| l.backlog_max = 0), "limits.backlog_max");
        assert_eq!(lerr(|l| l.ctrl_tx_frames = 0), "limits.ctrl_tx_frames");
        assert_eq!(lerr(|l| l.tx_turn_segs_max = 0), "limits.tx_turn_segs_max");
        assert_eq!(
            lerr(|l| l.tx_turn_segs_max = 1025),
            "limits.tx_turn_segs_max"
        );
        assert_eq!(lerr(|l| l.max_conns = 10), "limits.max_conns");
        assert_eq!(
            lerr(|l| l.ephemeral_port_min = 80),
            "limits.ephemeral_port_min"
        );
        assert_eq!(
            lerr(|l| {
                l.ephemeral_port_min = 60000;
                l.ephemeral_port_max = 50000;
            }),
            "limits.ephemeral_port_min"
        );
        assert_eq!(
            lerr(|l| {
                l.ephemeral_port_min = 60000;
                l.ephemeral_port_max = 60010;
            }),
            "limits.ephemeral_port_max"
        );
    }

    #[test]
    fn rnic_limits_map_every_bound() {
        let l = LimitsSection {
            max_mrs: 10,
            max_mws: 5,
            max_cqe: 77,
            ..LimitsSection::default()
        };
        let r = l.rnic_limits();
        assert_eq!(r.max_stags, 15);
        assert_eq!(r.max_cqe, 77);
        assert_eq!(r.max_qps, l.max_qps);
        assert_eq!(r.max_sge, MAX_SGE as u32);
    }

    #[test]
    fn ip_rules_name_their_field() {
        IpSection::default().validate().unwrap();
        let e = |f: fn(&mut IpSection)| {
            let mut s = IpSection::default();
            f(&mut s);
            s.validate().unwrap_err().field
        };
        assert_eq!(e(|s| s.ttl = 0), "ip.ttl");
        assert_eq!(e(|s| s.arp_cache_entries = 0), "ip.arp_cache_entries");
        assert_eq!(e(|s| s.arp_entry_timeout_ms = 0), "ip.arp_entry_timeout_ms");
        assert_eq!(e(|s| s.arp_retry_ms = 0), "ip.arp_retry_ms");
        assert_eq!(e(|s| s.arp_retries_max = 0), "ip.arp_retries_max");
        assert_eq!(e(|s| s.arp_pending_frames = 0), "ip.arp_pending_frames");
        assert_eq!(e(|s| s.arp_pending_per_hop = 65), "ip.arp_pending_per_hop");
    }
}
