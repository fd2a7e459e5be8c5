//! Engine configuration: addresses, the configuration of every layer, and the bound of
//! every table and queue the engine preallocates at construction.

use core::fmt;
use core::net::Ipv4Addr;

use iwarp_mpa::MpaConfig;
use iwarp_rdma::{RnicConfig, RnicLimits};
use iwarp_tcp::{TcpConfig, TCP_HEADER_LEN};

/// Default first nudge check of an MPA initiator ([`EngineConfig::initiator_nudge_ms`]).
pub const DEFAULT_INITIATOR_NUDGE_MS: u64 = 10;
/// Nudge checks (and so nudges) per connection at most: at 1, 5, 21 and 85 times
/// `initiator_nudge_ms` after RDMA mode began.
pub const NUDGES_MAX: u8 = 4;
/// Largest `initiator_nudge_ms` accepted (one minute).
pub const INITIATOR_NUDGE_MS_MAX: u64 = 60_000;

/// Ethernet header length (no VLAN tag).
pub const ETH_HEADER_LEN: usize = 14;
/// IPv4 header length (we never send options and drop packets carrying them).
pub const IPV4_HEADER_LEN: usize = 20;
/// Smallest IP MTU an IPv4 host must support (RFC 791).
pub const MTU_MIN: usize = 576;
/// Largest IP MTU we accept (jumbo frames).
pub const MTU_MAX: usize = 9000;

/// Default out-of-order buffer per connection (TcpConfig's own default is 256 KiB): holds
/// about 33 full segments past a hole at MTU 1500; more is dropped and retransmitted.
pub const DEFAULT_TCP_OOO_BYTES: usize = 48 * 1024;
/// Default in-flight segment map per connection (TcpConfig's default is 4096): 512
/// segments are about 740 KB in flight at MSS 1448.
pub const DEFAULT_TCP_INFLIGHT_SEGMENTS: usize = 512;
/// Default FPDU ring per connection (MpaConfig's default is 1024 entries of ~80 bytes):
/// 256 FPDUs queued or unacknowledged, about 370 KB at MTU 1500.
pub const DEFAULT_MPA_TX_QUEUE_LEN: usize = 256;
/// Default largest inbound ULPDU (MpaConfig's default is 65535): peers size FPDUs to
/// their MSS (Linux siw does), and 9216 covers a 9000-byte MTU. A peer sending longer
/// FPDUs gets a Terminate; raise it (up to 65535) for such peers.
pub const DEFAULT_MPA_RX_ULPDU_BYTES: usize = 9216;
/// Default FPDU rings of the engine's MPA pool: connections with FPDUs queued or
/// unacknowledged at once (more wait for a ring: their WRs stay on their QPs).
pub const DEFAULT_MPA_POOL_RINGS: usize = 256;
/// Default receive staging buffers of the engine's MPA pool: connections in the middle
/// of an FPDU that straddles TCP segments (or carries markers) at once.
pub const DEFAULT_MPA_POOL_STAGING: usize = 64;
/// Per-connection bytes of the engine's own tables besides the `Conn` slot: demux map
/// entry, live list, free list, ready, ARP-wait and pool-wait lists, timer heap.
const TABLE_BYTES_PER_CONN: usize = 104;
/// MPA's event queue holds this many events per connection (`iwarp-mpa` EVENTS_MAX),
/// only while events wait (start-up, failures).
const MPA_EVENTS_PER_CONN: usize = 8;

/// Default [`EngineConfig::relisten_grace_ms`]: below a peer's first SYN retransmission
/// (1 s, RFC 6298), above the time an application takes to listen again.
pub const DEFAULT_RELISTEN_GRACE_MS: u64 = 500;

/// Default [`EngineConfig::no_connection_rsts_per_s`]: as Linux's budget of challenge ACKs
/// (`tcp_challenge_ack_limit`); FreeBSD's `badport_bandlim` allows 200.
pub const DEFAULT_NO_CONNECTION_RSTS_PER_S: u32 = 1_000;

/// Everything an [`crate::Engine`] needs; seeds included, so a run is reproducible.
///
/// Memory per connection. An idle established connection holds only its `Conn` slot and
/// table entries ([`EngineConfig::conn_slot_bytes`], about 1.9 KB, allocated for every
/// slot of the table at start-up): TCP's loss-recovery storage is allocated on loss and
/// released when idle, and MPA's buffers are lent by a per-engine pool only while used
/// (an FPDU ring while FPDUs are unacknowledged, a receive staging buffer while an FPDU
/// straddles segments, one transmit scratch buffer for the whole engine); MPA's start-up
/// buffers and event queue are freed once the connection is established.
/// 10,000 idle connections of one core take about 19 MB of engine memory.
///
/// A busy connection holds at most [`EngineConfig::conn_bytes_estimate`] (about 83 KB with
/// the defaults: 48 KiB TCP out-of-order buffer, 4 KiB segment map, 0.8 KiB TCP range
/// lists, 20 KiB FPDU ring of 256 entries of 80 bytes, 9.3 KiB staging buffer), and the
/// whole engine at most [`EngineConfig::conns_bytes_max`]: the pool lends at most
/// `mpa_pool_rings` rings and `mpa_pool_staging` staging buffers at once.
/// `TcpConfig`'s and `MpaConfig`'s own defaults would cost about 450 KB per busy connection.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Our Ethernet address.
    pub mac: [u8; 6],
    /// Our IPv4 address.
    pub ipv4: Ipv4Addr,
    /// Length of the on-link prefix of `ipv4` (0..=32).
    pub prefix_len: u8,
    /// Next hop for off-link destinations; `None`: off-link destinations are unreachable.
    pub gateway: Option<Ipv4Addr>,
    /// IP MTU in bytes (IPv4 header included, Ethernet header excluded).
    pub mtu: usize,
    /// TTL of the IPv4 packets we send.
    pub ip_ttl: u8,
    /// TCP configuration (MSS is derived from `mtu` by the engine if larger). Its
    /// per-connection buffers: `ooo_max_bytes` (out-of-order data) and
    /// `max_inflight_segments` (8 bytes each), allocated at open.
    pub tcp: TcpConfig,
    /// MPA configuration (markers, CRC, RFC 6581 RTR, private data limits). Its buffers
    /// come from the engine's MPA pool while used: an FPDU ring (`tx_queue_len` entries)
    /// while FPDUs are unacknowledged, a receive staging buffer (`rx_ulpdu_max_bytes`)
    /// while an FPDU straddles segments, and one transmit scratch buffer for the engine
    /// (`tx_ulpdu_max_bytes`, capped by the engine at the MSS).
    pub mpa: MpaConfig,
    /// FPDU rings the MPA pool lends at once at most (1..=`max_conns` is useful; more is
    /// allowed and never used): connections with FPDUs in flight. A connection finding
    /// none waits (its WRs stay on the QP) until one comes back.
    pub mpa_pool_rings: usize,
    /// Receive staging buffers the MPA pool lends at once at most: connections in the
    /// middle of a straddling FPDU. A connection finding none leaves that FPDU for the
    /// peer to send again.
    pub mpa_pool_staging: usize,
    /// Segments a connection sends in one turn of a transmit pass at most, before the
    /// next ready connection's turn (`Engine::transmitter`; default
    /// [`crate::TX_TURN_SEGS_MAX`]): longer turns do the per-turn work (lookup, service,
    /// timer re-arm) less often, shorter ones let many busy connections interleave more
    /// finely. While connections wait for an FPDU ring a turn is one segment whatever
    /// this says. 1..=1024.
    pub tx_turn_segs_max: u32,
    /// Verbs object limits (QPs, CQs, MRs, queue depths, IRD/ORD). Its `seed` is replaced
    /// by `stag_seed`.
    pub rnic: RnicConfig,
    /// Connection table size (active + passive, TIME-WAIT included).
    pub max_conns: usize,
    /// Listener table size.
    pub max_listeners: usize,
    /// Largest backlog a listener may ask for.
    pub backlog_max: usize,
    /// After a listener is removed, a SYN for its port is dropped (not answered with RST)
    /// for this long from the first such SYN, so that a peer gets in on the SYN's
    /// retransmission when the application re-creates the listener (0: refused at once).
    pub relisten_grace_ms: u64,
    /// Most RSTs per second that answer segments for no connection (closed ports, dead
    /// connections); the segments beyond are dropped without an answer and counted
    /// (`Counters::tcp_rsts_rate_limited`), so that a flood of them cannot make the core
    /// flood the wire back (FreeBSD's `badport_bandlim`). At least 1.
    pub no_connection_rsts_per_s: u32,
    /// Lowest local port for active opens.
    pub ephemeral_port_min: u16,
    /// Highest local port for active opens.
    pub ephemeral_port_max: u16,
    /// ARP cache entries.
    pub arp_cache_entries: usize,
    /// Lifetime of a resolved ARP entry before it is refreshed.
    pub arp_entry_timeout_ms: u64,
    /// Interval between ARP requests while resolving.
    pub arp_retry_ms: u64,
    /// ARP requests sent for one resolution before giving up.
    pub arp_retries_max: u32,
    /// Frames (all next hops together) held while their next hop is being resolved.
    pub arp_pending_frames: usize,
    /// Frames held per next hop.
    pub arp_pending_per_hop: usize,
    /// Control frames (ARP, ICMP replies, RSTs) queued for `poll_transmit`.
    pub ctrl_tx_frames: usize,
    /// Events queued for `poll_event`.
    pub event_queue_len: usize,
    /// How long a close the engine started (the QP's LLP Close, a reject, a failed MPA
    /// exchange) may take before the connection is reset and the QP told the LLP timed
    /// out: bounds FIN_WAIT_2 when the peer never sends its FIN (verbs 6.2.3, 6.2.5: the
    /// LLP must bound Closing and Terminate). Linux's `tcp_fin_timeout` is 60 s.
    pub llp_close_timeout_ms: u64,
    /// MPA initiator, RDMA mode, the responder has sent no FPDU yet: checks at this many
    /// milliseconds after RDMA mode began, then 4, 16 and 64 times as long; at a check
    /// where the QP has sent something and received nothing, the QP sends one
    /// zero-length RDMA Write (a nudge: it places nothing and no ULP sees it). A Linux siw
    /// responder that received the first FPDU before attaching its socket to the QP
    /// never reads it until new bytes arrive (docs/INTEROP.md, difference 2); the nudge
    /// is those bytes. At most [`NUDGES_MAX`] per connection; 0 turns nudging off.
    pub initiator_nudge_ms: u64,
    /// Secret of the RFC 6528 ISN generator.
    pub isn_secret: [u8; 16],
    /// Seed of the STag index randomisation.
    pub stag_seed: u64,
    /// The NIC computes IPv4/TCP checksums (outbound) and verifies them (inbound).
    pub checksum_offload: bool,
}

impl Default for EngineConfig {
    /// A configuration that runs in the simulator: 198.18.0.1/24 (RFC 2544 benchmarking
    /// range), MTU 1500, small tables.
    fn default() -> EngineConfig {
        EngineConfig {
            mac: [0x02, 0, 0, 0, 0, 0x01],
            ipv4: Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 24,
            gateway: None,
            mtu: 1500,
            ip_ttl: 64,
            tcp: TcpConfig {
                ooo_max_bytes: DEFAULT_TCP_OOO_BYTES,
                max_inflight_segments: DEFAULT_TCP_INFLIGHT_SEGMENTS,
                ..TcpConfig::default()
            },
            mpa: MpaConfig {
                tx_queue_len: DEFAULT_MPA_TX_QUEUE_LEN,
                rx_ulpdu_max_bytes: DEFAULT_MPA_RX_ULPDU_BYTES,
                ..MpaConfig::default()
            },
            rnic: RnicConfig {
                limits: RnicLimits::default(),
                seed: 0,
            },
            mpa_pool_rings: DEFAULT_MPA_POOL_RINGS,
            mpa_pool_staging: DEFAULT_MPA_POOL_STAGING,
            tx_turn_segs_max: crate::TX_TURN_SEGS_MAX,
            max_conns: 64,
            max_listeners: 8,
            backlog_max: 16,
            relisten_grace_ms: DEFAULT_RELISTEN_GRACE_MS,
            no_connection_rsts_per_s: DEFAULT_NO_CONNECTION_RSTS_PER_S,
            ephemeral_port_min: 49152,
            ephemeral_port_max: 65535,
            arp_cache_entries: 32,
            arp_entry_timeout_ms: 60_000,
            arp_retry_ms: 1_000,
            arp_retries_max: 3,
            arp_pending_frames: 16,
            arp_pending_per_hop: 4,
            ctrl_tx_frames: 32,
            event_queue_len: 256,
            llp_close_timeout_ms: 60_000,
            initiator_nudge_ms: DEFAULT_INITIATOR_NUDGE_MS,
            isn_secret: *b"iwarp-isn-secret",
            stag_seed: 0x5eed_5eed_5eed_5eed,
            checksum_offload: false,
        }
    }
}

/// A configuration field holds a value the engine cannot run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field's name.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid engine config: {}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

fn check(ok: bool, field: &'static str, reason: &'static str) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError { field, reason })
    }
}

impl EngineConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mac_ok = self.mac[0] & 1 == 0 && self.mac != [0; 6];
        check(mac_ok, "mac", "must be a unicast, non-zero address")?;
        let ip_ok = !self.ipv4.is_unspecified()
            && !self.ipv4.is_broadcast()
            && !self.ipv4.is_multicast()
            && !self.ipv4.is_loopback();
        check(ip_ok, "ipv4", "must be a unicast host address")?;
        check(self.prefix_len <= 32, "prefix_len", "must be at most 32")?;
        if let Some(gw) = self.gateway {
            let on_link = crate::iface::same_subnet(self.ipv4, gw, self.prefix_len);
            check(
                on_link && gw != self.ipv4,
                "gateway",
                "must be another on-link address",
            )?;
        }
        check(
            (MTU_MIN..=MTU_MAX).contains(&self.mtu),
            "mtu",
            "must be in 576..=9000",
        )?;
        check(self.ip_ttl > 0, "ip_ttl", "must be positive")?;
        check(
            self.initiator_nudge_ms <= INITIATOR_NUDGE_MS_MAX,
            "initiator_nudge_ms",
            "must be at most 60000 (0 = off)",
        )?;
        check(
            self.max_conns > 0 && self.max_conns <= 1 << 20,
            "max_conns",
            "1..=2^20",
        )?;
        check(self.max_listeners > 0, "max_listeners", "must be positive")?;
        check(
            self.mpa_pool_rings > 0 && self.mpa_pool_rings <= 1 << 20,
            "mpa_pool_rings",
            "1..=2^20",
        )?;
        check(
            self.mpa_pool_staging > 0 && self.mpa_pool_staging <= 1 << 20,
            "mpa_pool_staging",
            "1..=2^20",
        )?;
        check(
            (1..=1024).contains(&self.tx_turn_segs_max),
            "tx_turn_segs_max",
            "1..=1024",
        )?;
        check(
            self.mpa.tx_queue_len > 0,
            "mpa.tx_queue_len",
            "must be positive",
        )?;
        check(self.backlog_max > 0, "backlog_max", "must be positive")?;
        check(
            self.no_connection_rsts_per_s > 0,
            "no_connection_rsts_per_s",
            "must be positive",
        )?;
        check(
            self.ephemeral_port_min > 0 && self.ephemeral_port_min <= self.ephemeral_port_max,
            "ephemeral_port_min",
            "must be positive and at most ephemeral_port_max",
        )?;
        check(
            self.arp_cache_entries > 0,
            "arp_cache_entries",
            "must be positive",
        )?;
        check(
            self.arp_entry_timeout_ms > 0,
            "arp_entry_timeout_ms",
            "must be positive",
        )?;
        check(self.arp_retry_ms > 0, "arp_retry_ms", "must be positive")?;
        check(
            self.arp_retries_max > 0,
            "arp_retries_max",
            "must be positive",
        )?;
        check(
            self.arp_pending_per_hop <= self.arp_pending_frames,
            "arp_pending_per_hop",
            "must be at most arp_pending_frames",
        )?;
        check(
            self.ctrl_tx_frames > 0,
            "ctrl_tx_frames",
            "must be positive",
        )?;
        check(
            self.event_queue_len > 0,
            "event_queue_len",
            "must be positive",
        )?;
        check(
            self.llp_close_timeout_ms > 0,
            "llp_close_timeout_ms",
            "must be positive",
        )?;
        Ok(())
    }

    /// Largest Ethernet frame we send or accept (header included, FCS excluded).
    pub fn frame_len_max(&self) -> usize {
        self.mtu + ETH_HEADER_LEN
    }

    /// Bytes of one slot of the connection table, allocated for every slot at start-up:
    /// `size_of::<Conn>()` plus the slot header and the engine's per-connection table
    /// entries. All an idle established connection costs the engine (TCP and MPA hold no
    /// heap then; the verbs objects are the application's and are not counted).
    pub fn conn_slot_bytes(&self) -> usize {
        core::mem::size_of::<Option<crate::conn::Conn>>() + 16 + TABLE_BYTES_PER_CONN
    }

    /// Bytes of one FPDU ring of the MPA pool: `tx_queue_len` entries of a descriptor, its
    /// stream offset and two lengths.
    pub fn mpa_ring_bytes(&self) -> usize {
        self.mpa.tx_queue_len * (core::mem::size_of::<iwarp_rdma::TxUlpdu>() + 16)
    }

    /// Bytes of one receive staging buffer of the MPA pool (one largest inbound FPDU).
    pub fn mpa_staging_bytes(&self) -> usize {
        let rx_ulpdu = self.mpa.rx_ulpdu_max_bytes.min(usize::from(u16::MAX));
        // Length field, pad and CRC (markers are removed before staging).
        rx_ulpdu + 2 + 3 + 4
    }

    /// TCP's loss-recovery storage of one connection at most (out-of-order buffer and
    /// its ranges, SACK scoreboard, in-flight segment map): held on loss only.
    fn tcp_bytes_max(&self) -> usize {
        self.tcp.ooo_max_bytes
            + 16 * self.tcp.ooo_max_ranges
            + 16 * self.tcp.sack_max_ranges
            + 8 * self.tcp.max_inflight_segments.max(1)
    }

    /// MPA's start-up storage of one connection: the boxed start-up buffers (the peer's
    /// and our frame of 20 + 512 octets, the parsed Request), our frame until
    /// acknowledged, and the event queue while events wait.
    fn mpa_startup_bytes(&self) -> usize {
        4 * 532 + MPA_EVENTS_PER_CONN * core::mem::size_of::<iwarp_mpa::MpaEvent>()
    }

    /// Upper bound, in bytes, of what one busy connection holds at once: its slot
    /// ([`EngineConfig::conn_slot_bytes`]), TCP's out-of-order buffer, segment map and
    /// range lists (on loss), MPA's start-up buffers (until established), an FPDU ring
    /// and a staging buffer lent by the MPA pool (while used).
    pub fn conn_bytes_estimate(&self) -> usize {
        self.conn_slot_bytes()
            + self.tcp_bytes_max()
            + self.mpa_startup_bytes()
            + self.mpa_ring_bytes()
            + self.mpa_staging_bytes()
    }

    /// Upper bound, in bytes, of the memory of every connection of the engine together:
    /// every slot, TCP's and MPA's start-up storage for each connection, the rings and
    /// staging buffers the MPA pool may lend at once, and its transmit scratch buffer.
    pub fn conns_bytes_max(&self) -> usize {
        let per_conn = self.conn_slot_bytes() + self.tcp_bytes_max() + self.mpa_startup_bytes();
        let mss = self.mss_for_mtu().min(usize::from(self.tcp.mss_bytes));
        let tx_ulpdu = self.mpa.tx_ulpdu_max_bytes.min(mss);
        // Length field, pad, CRC, and a marker every 512 octets and two more.
        let scratch = tx_ulpdu + 9 + 4 * ((tx_ulpdu + 9) / 508 + 2);
        let pool = self.mpa_pool_rings.min(self.max_conns) * self.mpa_ring_bytes()
            + self.mpa_pool_staging.min(self.max_conns) * self.mpa_staging_bytes()
            + scratch;
        self.max_conns * per_conn + pool
    }

    /// Largest MSS the MTU allows: MTU minus the IPv4 and TCP base headers (TCP subtracts
    /// its options itself). The engine caps `tcp.mss_bytes` to this.
    pub fn mss_for_mtu(&self) -> usize {
        self.mtu.saturating_sub(IPV4_HEADER_LEN + TCP_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        EngineConfig::default().validate().unwrap();
    }

    #[test]
    fn ten_thousand_default_connections_fit_in_a_gibibyte() {
        const GIB: usize = 1 << 30;
        let mut c = EngineConfig::default();
        let per_conn = c.conn_bytes_estimate();
        assert!(per_conn * 10_000 < GIB, "{per_conn} bytes per connection");
        assert!(per_conn > 48 * 1024, "the out-of-order buffer is counted");
        c.mtu = MTU_MAX;
        assert!(c.conn_bytes_estimate() * 10_000 < GIB, "jumbo frames too");
        // An idle connection costs its slot only; all of them busy at once stay bounded
        // by the pool.
        c.max_conns = 10_000;
        assert!(c.conn_slot_bytes() < 2_500, "{} bytes", c.conn_slot_bytes());
        assert!(c.conns_bytes_max() < GIB, "{}", c.conns_bytes_max());
        // TcpConfig's and MpaConfig's own defaults would not fit.
        c.tcp = TcpConfig::default();
        c.mpa = MpaConfig::default();
        assert!(c.conn_bytes_estimate() * 10_000 > GIB);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |f: fn(&mut EngineConfig)| {
            let mut c = EngineConfig::default();
            f(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(bad(|c| c.mac = [1, 0, 0, 0, 0, 0]), "mac");
        assert_eq!(bad(|c| c.ipv4 = Ipv4Addr::BROADCAST), "ipv4");
        assert_eq!(bad(|c| c.prefix_len = 33), "prefix_len");
        assert_eq!(
            bad(|c| c.gateway = Some(Ipv4Addr::new(10, 9, 0, 1))),
            "gateway"
        );
        assert_eq!(bad(|c| c.mtu = 100), "mtu");
        assert_eq!(bad(|c| c.max_conns = 0), "max_conns");
        assert_eq!(bad(|c| c.ephemeral_port_min = 0), "ephemeral_port_min");
        assert_eq!(bad(|c| c.arp_pending_per_hop = 100), "arp_pending_per_hop");
        assert_eq!(bad(|c| c.event_queue_len = 0), "event_queue_len");
        assert_eq!(bad(|c| c.mpa_pool_rings = 0), "mpa_pool_rings");
        assert_eq!(bad(|c| c.tx_turn_segs_max = 0), "tx_turn_segs_max");
        assert_eq!(bad(|c| c.tx_turn_segs_max = 1025), "tx_turn_segs_max");
        assert_eq!(bad(|c| c.mpa_pool_staging = 0), "mpa_pool_staging");
        assert_eq!(bad(|c| c.mpa.tx_queue_len = 0), "mpa.tx_queue_len");
        assert_eq!(bad(|c| c.llp_close_timeout_ms = 0), "llp_close_timeout_ms");
        let e = bad(|c| c.ctrl_tx_frames = 0);
        assert_eq!(e, "ctrl_tx_frames");
    }
}
