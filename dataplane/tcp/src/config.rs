//! Per-connection configuration, fixed at `connect` / `accept` time.

/// Congestion control algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Congestion {
    /// CUBIC (RFC 9438).
    #[default]
    Cubic,
    /// NewReno (RFC 5681 + RFC 6582).
    NewReno,
}

/// Keepalive settings (RFC 9293 section 3.8.4). Off by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepaliveConfig {
    /// Send keepalives at all.
    pub enabled: bool,
    /// Idle time before the first probe, milliseconds (RFC 1122: at least two hours by
    /// default; ours is configurable).
    pub idle_ms: u64,
    /// Time between unanswered probes, milliseconds. A probe is an old-sequence ACK the
    /// peer answers at most once per its invalid-ACK interval (500 ms for us and Linux):
    /// keep this well above that.
    pub interval_ms: u64,
    /// Unanswered probes before the connection is declared lost.
    pub count: u32,
}

impl Default for KeepaliveConfig {
    fn default() -> Self {
        KeepaliveConfig {
            enabled: false,
            idle_ms: 7_200_000,
            interval_ms: 75_000,
            count: 9,
        }
    }
}

/// TCP configuration. Defaults suit a datacenter simulator; the RFC values are noted
/// where ours differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// MSS we advertise (and the most we send per segment): 1460 for a 1500-byte MTU.
    pub mss_bytes: u16,
    /// Receive window we advertise, bytes (at most 2^30 with scaling).
    pub rcv_wnd_bytes: u32,
    /// Window scale shift we offer (0..=14, RFC 7323).
    pub wscale: u8,
    /// Offer / accept SACK (RFC 2018).
    pub sack: bool,
    /// Offer / accept timestamps (RFC 7323).
    pub timestamps: bool,
    /// Timestamp clock tick in microseconds. RFC 7323 suggests 1 ms..1 s; 1 µs
    /// (as Linux's usec timestamps) gives useful RTT samples in a datacenter.
    pub ts_tick_us: u64,
    /// Congestion control.
    pub congestion: Congestion,
    /// Initial RTO, ms (RFC 6298: 1000).
    pub rto_ms_initial: u64,
    /// Minimum RTO, ms (RFC 6298: 1000; Linux: 200; datacenter: a few ms).
    pub rto_ms_min: u64,
    /// Maximum RTO, ms (RFC 6298: at least 60 000).
    pub rto_ms_max: u64,
    /// Delayed ACK timer, µs (RFC 9293: under 500 ms; ACK at least every 2nd full segment).
    pub delayed_ack_us: u64,
    /// Consecutive retransmission timeouts on data before the connection is lost.
    pub max_retries: u32,
    /// SYN (or SYN-ACK) retransmissions before the connection attempt fails.
    pub syn_retries: u32,
    /// Keepalive.
    pub keepalive: KeepaliveConfig,
    /// Most out-of-order bytes held per connection. The storage is allocated only when
    /// the first out-of-order segment arrives (loss, off the common path), sized
    /// `min(ooo_max_bytes, receive window)`, and released `buffer_release_ms` after it
    /// drained: a connection without loss holds none.
    pub ooo_max_bytes: usize,
    /// Most out-of-order ranges held; data needing more is dropped and not SACKed.
    pub ooo_max_ranges: usize,
    /// Most SACKed ranges the sender's scoreboard keeps.
    pub sack_max_ranges: usize,
    /// Most data segments in flight (their start offsets are kept so retransmissions
    /// reuse the original boundaries). The map grows with the segments actually in
    /// flight (so with the window) up to this bound, and is released when idle.
    pub max_inflight_segments: usize,
    /// Maximum segment lifetime, ms (TIME_WAIT lasts 2 * MSL; RFC 9293: 120 000).
    pub msl_ms: u64,
    /// Leave the checksum to the NIC (only the pseudo-header sum is written).
    pub checksum_offload: bool,
    /// Initial congestion window, segments (RFC 6928: 10).
    pub initial_cwnd_segments: u32,
    /// Most challenge ACKs (RFC 5961 section 7) and ACKs answering out-of-window data
    /// sent per second, per connection (one budget).
    pub challenge_acks_per_s: u32,
    /// Least time between two ACKs sent in reply to unacceptable segments that occupy no
    /// sequence space (out of window, PAWS-failed, acknowledging unsent data) and between
    /// challenge ACKs, ms (Linux `tcp_invalid_ratelimit`: 500). This is what makes an
    /// endless ACK exchange impossible; 0 disables the limit.
    pub invalid_ack_interval_ms: u64,
    /// Time after which empty loss-recovery storage (out-of-order buffer, SACK scoreboard,
    /// in-flight segment map) is released, ms.
    pub buffer_release_ms: u64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss_bytes: 1460,
            rcv_wnd_bytes: 1 << 20,
            wscale: 7,
            sack: true,
            timestamps: true,
            ts_tick_us: 1,
            congestion: Congestion::Cubic,
            rto_ms_initial: 1_000,
            rto_ms_min: 5,
            rto_ms_max: 60_000,
            delayed_ack_us: 200,
            max_retries: 15,
            syn_retries: 6,
            keepalive: KeepaliveConfig::default(),
            ooo_max_bytes: 256 * 1024,
            ooo_max_ranges: 16,
            sack_max_ranges: 32,
            max_inflight_segments: 4096,
            msl_ms: 30_000,
            checksum_offload: false,
            initial_cwnd_segments: 10,
            challenge_acks_per_s: 100,
            invalid_ack_interval_ms: 500,
            buffer_release_ms: 1_000,
        }
    }
}
