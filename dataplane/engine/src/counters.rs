//! Engine counters: frames and bytes in and out, drops by reason, TCP, MPA and RDMAP
//! error tallies, and QPs by state. Plain integers updated on the fast path (one core owns
//! the engine, so no atomics); the dataplane copies them out for the control plane.

use iwarp_tcp::TcpCounters;
use iwarp_types::QpState;

/// Why an inbound or outbound frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Ethernet frame shorter than its header, or longer than the MTU allows.
    EthMalformed = 0,
    /// Destination MAC neither ours nor broadcast.
    EthNotForUs = 1,
    /// EtherType neither ARP nor IPv4.
    EthUnknownType = 2,
    /// ARP packet malformed or not Ethernet/IPv4.
    ArpMalformed = 3,
    /// ARP packet not for our address.
    ArpNotForUs = 4,
    /// IPv4 header truncated, wrong version or inconsistent lengths.
    Ipv4Malformed = 5,
    /// IPv4 header checksum wrong.
    Ipv4BadChecksum = 6,
    /// IPv4 header with options (unsupported).
    Ipv4Options = 7,
    /// IPv4 fragment (unsupported: TCP uses PMTU-sized segments).
    Ipv4Fragment = 8,
    /// IPv4 destination not our address.
    Ipv4NotForUs = 9,
    /// IPv4 source is broadcast, multicast, unspecified or ours.
    Ipv4BadSource = 10,
    /// IPv4 protocol neither TCP nor ICMP.
    Ipv4UnknownProtocol = 11,
    /// ICMP malformed or bad checksum.
    IcmpMalformed = 12,
    /// ICMP message type we do not answer.
    IcmpIgnored = 13,
    /// TCP segment malformed (header, offsets).
    TcpMalformed = 14,
    /// TCP checksum wrong.
    TcpBadChecksum = 15,
    /// TCP segment for no connection and no listener (answered with RST when allowed).
    TcpNoConnection = 16,
    /// A SYN for a listener whose backlog or the connection table is full.
    TcpBacklogFull = 17,
    /// A control frame could not be queued (control TX queue full).
    TxQueueFull = 18,
    /// A frame waiting for ARP resolution was dropped (per-hop queue full or resolution
    /// failed).
    ArpPendingDropped = 19,
    /// Outbound frame with no route (no gateway for an off-subnet destination).
    NoRoute = 20,
}

impl DropReason {
    /// Number of reasons (size of the counter array).
    pub const COUNT: usize = 21;
}

/// Every counter of one engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed to `handle_frame`.
    pub frames_in: u64,
    /// Bytes handed to `handle_frame`.
    pub bytes_in: u64,
    /// Frames written by `poll_transmit`.
    pub frames_out: u64,
    /// Bytes written by `poll_transmit`.
    pub bytes_out: u64,
    /// Drops, indexed by [`DropReason`] as `usize`.
    pub drops: [u64; DropReason::COUNT],
    /// ARP requests received for our address.
    pub arp_requests_in: u64,
    /// ARP requests sent (resolution and retries).
    pub arp_requests_out: u64,
    /// ARP replies received.
    pub arp_replies_in: u64,
    /// Peers learnt from their own TCP segments while not resolved (a SYN to a
    /// listener, a segment of a connection whose ARP reply never came), or re-confirmed
    /// by them while a refresh or a retransmission timeout re-asked by ARP.
    pub arp_gleaned: u64,
    /// ICMP echo requests answered.
    pub icmp_echo_replies: u64,
    /// ICMP "fragmentation needed" messages taken (the path MSS shrank).
    pub icmp_frag_needed: u64,
    /// TCP segments delivered to a connection or listener.
    pub tcp_segments_in: u64,
    /// Of those, segments of a connection found by header prediction (the frame matched
    /// the connection's last usual frame: no parse walk, no lookup; `rx_predict.rs`).
    pub tcp_segments_predicted: u64,
    /// TCP segments sent.
    pub tcp_segments_out: u64,
    /// TCP checksum failures (also counted under [`DropReason::TcpBadChecksum`]).
    pub tcp_checksum_errors: u64,
    /// RSTs sent: answers to stray segments, aborts and resets of connections (counted
    /// from the flags of every TCP frame `poll_transmit` writes).
    pub tcp_rsts_sent: u64,
    /// Segments for no connection left unanswered: the RST budget of the second
    /// (`EngineConfig::no_connection_rsts_per_s`) was spent. Also counted under
    /// [`DropReason::TcpNoConnection`].
    pub tcp_rsts_rate_limited: u64,
    /// RSTs received on a connection.
    pub tcp_rsts_received: u64,
    /// Half-open passive connections (SYN_RECEIVED) dropped to admit a SYN to their
    /// listener's full backlog: the oldest goes (a SYN flood cannot lock a listener).
    pub tcp_half_open_evicted: u64,
    /// TCP data segments retransmitted (any cause), counted as they leave.
    pub tcp_retransmissions: u64,
    /// TCP retransmission timer expirations (data or SYN outstanding).
    pub tcp_rto_expirations: u64,
    /// TCP loss recoveries entered by duplicate ACKs or SACK (fast retransmit).
    pub tcp_fast_retransmits: u64,
    /// TCP duplicate ACKs received.
    pub tcp_dup_acks: u64,
    /// TCP retransmission timeouts found spurious (the peer had the data: RFC 3522
    /// detection by timestamps) and undone.
    pub tcp_spurious_rtos: u64,
    /// In-order TCP payload bytes MPA refused (no staging buffer free in the pool): not
    /// acknowledged, so the peer sends them again.
    pub tcp_rx_refused_bytes: u64,
    /// ACKs not sent in answer to unacceptable segments (rate limit,
    /// `invalid_ack_interval_ms`).
    pub tcp_invalid_acks_suppressed: u64,
    /// Connections lost to retransmission or keepalive timeouts.
    pub tcp_timeouts: u64,
    /// Connections opened (active and passive, reaching Established).
    pub conns_established: u64,
    /// Connections removed from the table.
    pub conns_closed: u64,
    /// MPA CRC errors.
    pub mpa_crc_errors: u64,
    /// FPDUs whose ULPDU_Length was out of bounds (verbs "segment size invalid") or
    /// disagreed with a marker ("bad FPDU"): the CRC could not be checked.
    pub mpa_framing_errors: u64,
    /// Streams declared lost because an FPDU stopped growing (`mpa.fpdu_stall_timeout_ms`).
    pub mpa_fpdu_stalls: u64,
    /// MPA failures: handshakes that failed (bad request/reply, reject, timeout) and
    /// streams MPA gave up on in RDMA mode (CRC, framing, stall: each also counted by its
    /// own counter above).
    pub mpa_failures: u64,
    /// Terminate messages sent.
    pub terminates_sent: u64,
    /// Terminate messages received.
    pub terminates_received: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// Engine-initiated closes that did not complete within `llp_close_timeout_ms` (the
    /// connection was reset).
    pub llp_close_timeouts: u64,
    /// Zero-length RDMA Writes sent to nudge an MPA responder that had sent nothing
    /// (`EngineConfig::initiator_nudge_ms`).
    pub rdma_nudges_sent: u64,
    /// Connections visited by `handle_frame`, `handle_timeout` and `poll_transmit`
    /// (a debug counter: it grows with work, not with idle connections).
    pub conn_visits: u64,
    /// QPs by state (snapshot kept up to date by the engine), indexed by [`qp_state_index`].
    pub qps_by_state: [u64; 5],
}

impl Counters {
    /// Adds what a run of segments' input changed in a connection's TCP counters.
    #[inline]
    pub(crate) fn take_tcp_input(&mut self, before: &TcpCounters, after: &TcpCounters) {
        self.tcp_fast_retransmits += after.fast_retransmits.wrapping_sub(before.fast_retransmits);
        self.tcp_dup_acks += after.dup_acks.wrapping_sub(before.dup_acks);
        self.tcp_spurious_rtos += after.spurious_rtos.wrapping_sub(before.spurious_rtos);
        self.tcp_rx_refused_bytes += after.rx_refused_bytes.wrapping_sub(before.rx_refused_bytes);
        self.tcp_invalid_acks_suppressed += after
            .invalid_acks_suppressed
            .wrapping_sub(before.invalid_acks_suppressed);
    }

    /// Counts one drop.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        let c = &mut self.drops[reason as usize];
        *c = c.wrapping_add(1);
    }

    /// Number of drops for a reason.
    pub fn drops_of(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    /// Total drops of every reason.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().fold(0u64, |a, b| a.wrapping_add(*b))
    }

    /// Number of QPs in `state`.
    pub fn qps_in(&self, state: QpState) -> u64 {
        self.qps_by_state[qp_state_index(state)]
    }
}

/// Index of a QP state in [`Counters::qps_by_state`].
pub const fn qp_state_index(state: QpState) -> usize {
    match state {
        QpState::Idle => 0,
        QpState::Rts => 1,
        QpState::Closing => 2,
        QpState::Terminate => 3,
        QpState::Error => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_by_reason() {
        let mut c = Counters::default();
        c.drop(DropReason::Ipv4Fragment);
        c.drop(DropReason::Ipv4Fragment);
        c.drop(DropReason::NoRoute);
        assert_eq!(c.drops_of(DropReason::Ipv4Fragment), 2);
        assert_eq!(c.drops_of(DropReason::NoRoute), 1);
        assert_eq!(c.drops_of(DropReason::EthNotForUs), 0);
        assert_eq!(c.drops_total(), 3);
        assert_eq!(DropReason::NoRoute as usize + 1, DropReason::COUNT);
    }

    #[test]
    fn qp_state_indices_distinct() {
        let all = [
            QpState::Idle,
            QpState::Rts,
            QpState::Closing,
            QpState::Terminate,
            QpState::Error,
        ];
        for (i, s) in all.iter().enumerate() {
            assert_eq!(qp_state_index(*s), i);
        }
        let mut c = Counters::default();
        c.qps_by_state[qp_state_index(QpState::Rts)] = 3;
        assert_eq!(c.qps_in(QpState::Rts), 3);
    }
}
