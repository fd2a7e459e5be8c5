//! Counters per core and per port, published as atomics.
//!
//! The core counts in plain integers on the fast path and copies them, with the engine's
//! [`iwarp_engine::Counters`], into an [`Arc<CoreStats>`](CoreStats) at most every
//! `stats_interval` (Relaxed stores). Anyone may read a [`Snapshot`] at any time; values
//! of one snapshot may come from two publications (each counter is monotonic or a gauge).

use std::sync::atomic::{AtomicU64, Ordering};

use iwarp_engine::{Counters, DropReason};

macro_rules! counter_set {
    (
        $(#[$am:meta])* $atomic:ident,
        $(#[$pm:meta])* $plain:ident {
            $( $(#[doc = $d:literal])* $name:ident, )*
        }
    ) => {
        $(#[$pm])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $plain {
            $( $(#[doc = $d])* pub $name: u64, )*
        }

        $(#[$am])*
        #[derive(Debug, Default)]
        pub struct $atomic {
            $( $(#[doc = $d])* pub $name: AtomicU64, )*
        }

        impl $plain {
            /// Counter names, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Each counter's doc comment (its lines joined), in declaration order.
            pub const DOCS: &'static [&'static str] = &[$(concat!($($d, " ",)* "")),*];

            /// Calls `f` with each counter's name and value, in declaration order.
            pub fn for_each(&self, mut f: impl FnMut(&'static str, u64)) {
                $( f(stringify!($name), self.$name); )*
            }

            /// Adds every counter of `other`.
            pub fn add(&mut self, other: &$plain) {
                $( self.$name = self.$name.wrapping_add(other.$name); )*
            }
        }

        impl $atomic {
            /// Stores every counter (Relaxed).
            pub fn store(&self, v: &$plain) {
                $( self.$name.store(v.$name, Ordering::Relaxed); )*
            }

            /// Loads every counter (Relaxed).
            pub fn load(&self) -> $plain {
                $plain { $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }
    };
}

counter_set! {
    /// [`CorePlain`] as atomics.
    CoreAtomic,
    /// Counters of the core loop itself.
    CorePlain {
        /// Loop iterations.
        iterations,
        /// Iterations that did some work (received, transmitted, ran a command, a timer
        /// or an event): `busy_iterations / iterations` is the core's load.
        busy_iterations,
        /// Control commands executed.
        commands,
        /// Engine events consumed by apps.
        events_to_apps,
        /// Engine events no app took (a connect request among them is rejected).
        events_unclaimed,
        /// Apps running.
        apps,
        /// Capture: frames copied to the capture ring.
        captured,
        /// Capture: frames not captured because the ring was full.
        capture_drops,
    }
}

counter_set! {
    /// [`PortPlain`] as atomics.
    PortAtomic,
    /// Counters of one port as seen by one core (runtime and engine counters).
    PortPlain {
        /// Frames received from the port queue.
        frames_rx,
        /// Bytes received from the port queue.
        bytes_rx,
        /// Frames queued for transmission.
        frames_tx,
        /// Bytes queued for transmission.
        bytes_tx,
        /// Frames handed to the engine (received here or forwarded from another core).
        engine_frames_in,
        /// Frames received here but owned by another core, forwarded to it.
        forwarded_out,
        /// Frames another core forwarded here because this core owns them.
        forwarded_in,
        /// Frames that could not be forwarded (the forward ring was full): dropped.
        forward_drops,
        /// ARP frames copied to the other cores of the port.
        arp_copies,
        /// ARP frames another core of the port copied here.
        arp_copies_in,
        /// Transmit offers refused for lack of a buffer (back-pressure).
        tx_backpressure,
        /// Frames still queued in the port after the last flush (gauge).
        tx_pending,
        /// Frames received whose TCP checksum the NIC verified (checksum offload).
        rx_checksum_offloaded,
        /// Frames received with a bad IPv4 or TCP checksum (found by the NIC, or by the
        /// port's software check of what the NIC did not verify): dropped.
        rx_checksum_bad,
        /// Frames sent with their TCP checksum computed by the NIC (checksum offload).
        tx_checksum_offloaded,
        /// TCP segments delivered to a connection or listener.
        tcp_segments_in,
        /// Of those, segments found by header prediction (no parse walk, no lookup).
        tcp_segments_predicted,
        /// TCP segments sent.
        tcp_segments_out,
        /// TCP retransmissions.
        tcp_retransmissions,
        /// TCP retransmission timer expirations.
        tcp_rto_expirations,
        /// TCP fast retransmits (loss recoveries entered on duplicate ACKs or SACK).
        tcp_fast_retransmits,
        /// TCP duplicate ACKs received.
        tcp_dup_acks,
        /// TCP retransmission timeouts found spurious and undone.
        tcp_spurious_rtos,
        /// In-order TCP payload bytes MPA refused (no staging buffer): not acknowledged.
        tcp_rx_refused_bytes,
        /// ACKs to unacceptable segments suppressed by the rate limit.
        tcp_invalid_acks_suppressed,
        /// TCP checksum errors.
        tcp_checksum_errors,
        /// RSTs sent.
        tcp_rsts_sent,
        /// Segments for no connection left unanswered (RST budget spent).
        tcp_rsts_rate_limited,
        /// RSTs received.
        tcp_rsts_received,
        /// Half-open connections evicted to admit a SYN to a full backlog.
        tcp_half_open_evicted,
        /// Connections lost to retransmission or keepalive timeouts.
        tcp_timeouts,
        /// MPA CRC errors.
        mpa_crc_errors,
        /// FPDUs whose length was out of bounds or disagreed with a marker.
        mpa_framing_errors,
        /// Streams declared lost because an FPDU stopped growing.
        mpa_fpdu_stalls,
        /// MPA handshakes that failed, and streams MPA gave up on (CRC, framing, stall).
        mpa_failures,
        /// Terminate messages sent.
        terminates_sent,
        /// Terminate messages received.
        terminates_received,
        /// ARP requests received for our address.
        arp_requests_in,
        /// ARP requests sent.
        arp_requests_out,
        /// ARP replies received.
        arp_replies_in,
        /// Peers learnt from their own TCP segments (no ARP reply needed).
        arp_gleaned,
        /// ICMP echo requests answered.
        icmp_echo_replies,
        /// Connections established (active and passive).
        conns_established,
        /// Connections removed.
        conns_closed,
        /// Connections in the table now, TIME_WAIT included (gauge).
        conns_live,
        /// Engine events dropped because its event queue was full.
        events_dropped,
        /// Engine-started closes that timed out (reset).
        llp_close_timeouts,
        /// Zero-length RDMA Writes that nudged a silent MPA responder.
        rdma_nudges_sent,
        /// QPs associated with a connection in Idle (gauge).
        qps_idle,
        /// QPs in RTS (gauge).
        qps_rts,
        /// QPs in Closing (gauge).
        qps_closing,
        /// QPs in Terminate (gauge).
        qps_terminate,
        /// QPs in Error (gauge).
        qps_error,
    }
}

/// Names of the engine's drop reasons, indexed by `DropReason as usize`.
pub const DROP_REASON_NAMES: [&str; DropReason::COUNT] = [
    "eth_malformed",
    "eth_not_for_us",
    "eth_unknown_type",
    "arp_malformed",
    "arp_not_for_us",
    "ipv4_malformed",
    "ipv4_bad_checksum",
    "ipv4_options",
    "ipv4_fragment",
    "ipv4_not_for_us",
    "ipv4_bad_source",
    "ipv4_unknown_protocol",
    "icmp_malformed",
    "icmp_ignored",
    "tcp_malformed",
    "tcp_bad_checksum",
    "tcp_no_connection",
    "tcp_backlog_full",
    "tx_queue_full",
    "arp_pending_dropped",
    "no_route",
];

/// One port's counters with the engine's drops by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Runtime and engine counters.
    pub c: PortPlain,
    /// Engine drops, indexed by `DropReason as usize`.
    pub drops: [u64; DropReason::COUNT],
}

impl PortCounters {
    /// Copies the engine's counters (the runtime's own counters are kept).
    pub fn take_engine(&mut self, e: &Counters, conns_live: usize) {
        let c = &mut self.c;
        c.engine_frames_in = e.frames_in;
        c.tcp_segments_in = e.tcp_segments_in;
        c.tcp_segments_predicted = e.tcp_segments_predicted;
        c.tcp_segments_out = e.tcp_segments_out;
        c.tcp_retransmissions = e.tcp_retransmissions;
        c.tcp_rto_expirations = e.tcp_rto_expirations;
        c.tcp_fast_retransmits = e.tcp_fast_retransmits;
        c.tcp_dup_acks = e.tcp_dup_acks;
        c.tcp_spurious_rtos = e.tcp_spurious_rtos;
        c.tcp_rx_refused_bytes = e.tcp_rx_refused_bytes;
        c.tcp_invalid_acks_suppressed = e.tcp_invalid_acks_suppressed;
        c.tcp_checksum_errors = e.tcp_checksum_errors;
        c.tcp_rsts_sent = e.tcp_rsts_sent;
        c.tcp_rsts_rate_limited = e.tcp_rsts_rate_limited;
        c.tcp_rsts_received = e.tcp_rsts_received;
        c.tcp_half_open_evicted = e.tcp_half_open_evicted;
        c.tcp_timeouts = e.tcp_timeouts;
        c.mpa_crc_errors = e.mpa_crc_errors;
        c.mpa_framing_errors = e.mpa_framing_errors;
        c.mpa_fpdu_stalls = e.mpa_fpdu_stalls;
        c.mpa_failures = e.mpa_failures;
        c.terminates_sent = e.terminates_sent;
        c.terminates_received = e.terminates_received;
        c.arp_requests_in = e.arp_requests_in;
        c.arp_requests_out = e.arp_requests_out;
        c.arp_replies_in = e.arp_replies_in;
        c.arp_gleaned = e.arp_gleaned;
        c.icmp_echo_replies = e.icmp_echo_replies;
        c.conns_established = e.conns_established;
        c.conns_closed = e.conns_closed;
        c.conns_live = conns_live as u64;
        c.events_dropped = e.events_dropped;
        c.llp_close_timeouts = e.llp_close_timeouts;
        c.rdma_nudges_sent = e.rdma_nudges_sent;
        let q = &e.qps_by_state;
        (
            c.qps_idle,
            c.qps_rts,
            c.qps_closing,
            c.qps_terminate,
            c.qps_error,
        ) = (q[0], q[1], q[2], q[3], q[4]);
        self.drops = e.drops;
    }

    /// Copies the port queue's checksum counters.
    pub fn take_checksums(&mut self, c: &crate::io::ChecksumCounters) {
        self.c.rx_checksum_offloaded = c.rx_verified;
        self.c.rx_checksum_bad = c.rx_bad;
        self.c.tx_checksum_offloaded = c.tx_offloaded;
    }

    /// Adds `other`.
    pub fn add(&mut self, other: &PortCounters) {
        self.c.add(&other.c);
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a = a.wrapping_add(*b);
        }
    }

    /// Engine drops plus forward-ring drops.
    pub fn drops_total(&self) -> u64 {
        self.drops
            .iter()
            .fold(self.c.forward_drops, |a, b| a.wrapping_add(*b))
    }

    /// Calls `f` with every counter: the plain ones, then `drop_<reason>`.
    pub fn for_each(&self, mut f: impl FnMut(&'static str, &'static str, u64)) {
        self.c.for_each(|n, v| f("", n, v));
        for (name, v) in DROP_REASON_NAMES.iter().zip(self.drops.iter()) {
            f("drop_", name, *v);
        }
    }
}

/// One port's counters as atomics.
#[derive(Debug)]
pub struct PortStats {
    /// Global port id.
    pub port: u16,
    /// Runtime and engine counters.
    pub c: PortAtomic,
    /// Engine drops by reason.
    pub drops: [AtomicU64; DropReason::COUNT],
}

impl PortStats {
    fn new(port: u16) -> PortStats {
        PortStats {
            port,
            c: PortAtomic::default(),
            drops: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn store(&self, v: &PortCounters) {
        self.c.store(&v.c);
        for (a, b) in self.drops.iter().zip(v.drops.iter()) {
            a.store(*b, Ordering::Relaxed);
        }
    }

    fn load(&self) -> PortCounters {
        PortCounters {
            c: self.c.load(),
            drops: core::array::from_fn(|i| self.drops[i].load(Ordering::Relaxed)),
        }
    }
}

/// The published counters of one core: written by the core, read by anyone.
#[derive(Debug)]
pub struct CoreStats {
    /// The core's global index.
    pub core: usize,
    /// Loop counters.
    pub loop_counters: CoreAtomic,
    /// Per port, in the core's port order.
    pub ports: Vec<PortStats>,
    /// QPs the core's engines hold (all ports; for placement).
    pub qps: AtomicU64,
    /// Publications so far.
    pub publications: AtomicU64,
}

impl CoreStats {
    /// Zeroed counters for a core serving `ports` (global port ids).
    pub fn new(core: usize, ports: &[u16]) -> CoreStats {
        CoreStats {
            core,
            loop_counters: CoreAtomic::default(),
            ports: ports.iter().map(|&p| PortStats::new(p)).collect(),
            qps: AtomicU64::new(0),
            publications: AtomicU64::new(0),
        }
    }

    /// Publishes (core side; Relaxed stores, no allocation).
    pub fn publish<'a>(
        &self,
        core: &CorePlain,
        ports: impl IntoIterator<Item = &'a PortCounters>,
        qps: u64,
    ) {
        self.loop_counters.store(core);
        for (s, v) in self.ports.iter().zip(ports) {
            s.store(v);
        }
        self.qps.store(qps, Ordering::Relaxed);
        self.publications.fetch_add(1, Ordering::Release);
    }

    /// A snapshot of this core (reader side; allocates).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            cores: 1,
            core: self.loop_counters.load(),
            ports: self.ports.iter().map(|p| (p.port, p.load())).collect(),
        }
    }
}

/// Counters of one core, or summed over cores: plain values, rendered as a table
/// ([`core::fmt::Display`]), as `key=value` lines ([`Snapshot::to_kv`]) or as JSON
/// ([`Snapshot::to_json`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Cores summed.
    pub cores: u64,
    /// Loop counters (summed).
    pub core: CorePlain,
    /// Per port (global id), sorted by id, summed over cores.
    pub ports: Vec<(u16, PortCounters)>,
}

impl Snapshot {
    /// Adds another snapshot (ports matched by id).
    pub fn add(&mut self, other: &Snapshot) {
        self.cores += other.cores;
        self.core.add(&other.core);
        for (id, pc) in &other.ports {
            match self.ports.binary_search_by_key(id, |(p, _)| *p) {
                Ok(i) => self.ports[i].1.add(pc),
                Err(i) => self.ports.insert(i, (*id, *pc)),
            }
        }
    }

    /// The sum of many snapshots.
    pub fn sum<'a>(snaps: impl IntoIterator<Item = &'a Snapshot>) -> Snapshot {
        let mut s = Snapshot::default();
        for x in snaps {
            s.add(x);
        }
        s
    }

    /// One port's counters.
    pub fn port(&self, id: u16) -> Option<&PortCounters> {
        self.ports.iter().find(|(p, _)| *p == id).map(|(_, c)| c)
    }

    /// Every port summed.
    pub fn total(&self) -> PortCounters {
        let mut t = PortCounters::default();
        for (_, c) in &self.ports {
            t.add(c);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_engine() {
        assert_eq!(DROP_REASON_NAMES.len(), DropReason::COUNT);
        assert_eq!(DROP_REASON_NAMES[DropReason::NoRoute as usize], "no_route");
        assert_eq!(
            DROP_REASON_NAMES[DropReason::TcpBacklogFull as usize],
            "tcp_backlog_full"
        );
    }

    #[test]
    fn publish_snapshot_and_sum() {
        let s0 = CoreStats::new(0, &[0, 1]);
        let s1 = CoreStats::new(1, &[1]);
        let mut p = PortCounters::default();
        p.c.frames_rx = 5;
        p.drops[DropReason::NoRoute as usize] = 2;
        let core = CorePlain {
            iterations: 10,
            busy_iterations: 4,
            ..CorePlain::default()
        };
        s0.publish(&core, &[p, p], 3);
        s1.publish(&core, &[p], 1);
        let a = s0.snapshot();
        assert_eq!(a.port(1).unwrap().c.frames_rx, 5);
        let sum = Snapshot::sum([&a, &s1.snapshot()]);
        assert_eq!(sum.cores, 2);
        assert_eq!(sum.core.iterations, 20);
        assert_eq!(sum.port(1).unwrap().c.frames_rx, 10);
        assert_eq!(sum.port(0).unwrap().c.frames_rx, 5);
        assert_eq!(sum.total().c.frames_rx, 15);
        assert_eq!(sum.total().drops_total(), 6);
        assert_eq!(s0.qps.load(Ordering::Relaxed), 3);
    }
}
