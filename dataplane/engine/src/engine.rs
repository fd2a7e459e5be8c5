//! The engine: one per dataplane core. Frames, verbs and `now` in; frames, completions,
//! events and the next deadline out. See the crate documentation for the call order.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use iwarp_mpa::{MpaPool, PoolLimits};
use iwarp_rdma::{Rnic, TxUlpdu};
use iwarp_tcp::{
    reply_to_unknown, FourTuple, IsnGenerator, TcpCounters, TcpParseError, TcpSegment,
};
use iwarp_types::{ConnId, Duration, Instant, Memory, QpId, SecondBudget};
use smoltcp::wire::IpProtocol;

use crate::config::{ConfigError, EngineConfig};
use crate::conn::Conn;
use crate::conn_table::{slot_of, ConnTable, Listeners, PortAllocator, WireTuple};
use crate::counters::{Counters, DropReason};
use crate::event::Event;
use crate::glue::{QpSink, TcpRx};
use crate::iface::{Iface, Ingress, TcpIn};
use crate::rx_predict::RxPrediction;
use crate::sched::{ReadyList, TimerHeap};

/// IPv4 + TCP fixed headers: path MTU less this is the path MSS (RFC 1191).
const FIXED_HEADERS_LEN: u16 = 40;
/// The smallest MTU an IPv4 link may have (RFC 791); smaller claims are ignored.
const MIN_PATH_MTU: u16 = 68;
/// A quoted sequence number further than this past `snd.una` is not in flight (RFC 5927
/// check; bounded by the largest window, 2^30 with window scale 14).
const FRAG_NEEDED_SEQ_WINDOW: u32 = 1 << 30;

/// Hasher of the QP → connection map. QP ids are chosen by this engine (a peer never
/// names one), so a multiplicative hash suffices: no SipHash on every doorbell.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpIdHasher(u64);

impl Hasher for QpIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = self.0.rotate_left(32) ^ u64::from(n);
    }

    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// QP → connection map.
pub(crate) type QpConns = HashMap<QpId, ConnId, BuildHasherDefault<QpIdHasher>>;

/// Engine events with room from the start (`EngineCore::events`).
const EVENTS_PREALLOCATED: usize = 64;

/// Everything of the engine except the connection table, so a connection can be
/// borrowed next to the rest.
pub(crate) struct EngineCore {
    pub(crate) cfg: EngineConfig,
    pub(crate) iface: Iface,
    pub(crate) listeners: Listeners,
    pub(crate) ports: PortAllocator,
    pub(crate) isn: IsnGenerator,
    pub(crate) rnic: Rnic,
    pub(crate) qp_conns: QpConns,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counters: Counters,
    /// Connections that may have something to send (slots; one entry each).
    pub(crate) ready: ReadyList,
    /// Passive opens in SYN_RECEIVED, oldest first (slots; entries of connections that
    /// completed their handshake or left are dropped when met): the candidates a SYN to
    /// a full backlog evicts (`Engine::evict_half_open`).
    pub(crate) half_open: ReadyList,
    /// Connections that could not queue a frame while their next hop is resolved.
    pub(crate) arp_wait: ReadyList,
    /// Each connection's earliest deadline (slots; one entry each).
    pub(crate) timers: TimerHeap,
    /// MPA storage lent to connections while they use it (FPDU rings, staging buffers,
    /// the transmit scratch buffer).
    pub(crate) mpa_pool: MpaPool<TxUlpdu>,
    /// Connections waiting for an FPDU ring, first come first served: those that found
    /// the pool empty and those whose turn on a ring ended while others waited; woken
    /// as rings come back.
    pub(crate) pool_wait: ReadyList,
    /// Rings set aside for woken waiters that have not taken them yet
    /// (`Conn::ring_promised`): never more than the pool has available.
    pub(crate) rings_promised: usize,
    /// The budget of RSTs answering segments for no connection
    /// (`no_connection_rsts_per_s`; why: where a segment finds no connection).
    pub(crate) rst_budget: SecondBudget,
    /// The connection whose last inbound segments were handled in the open receive pass
    /// without being serviced and re-armed yet ([`crate::Receiver`]): that is done once,
    /// when the pass moves to anything else or ends.
    pub(crate) rx_deferred: Option<ConnId>,
    /// The deferred connection's TCP counters when its run of segments began: the run's
    /// input is counted in [`Counters`] once, when it is serviced.
    pub(crate) rx_tcp_before: TcpCounters,
    /// The last usual frame of a connection, for predicting the next (`rx_predict.rs`).
    pub(crate) rx_prediction: RxPrediction,
}

/// The sans-IO iWARP engine of one core.
///
/// Call order after any `handle_*` or verb: [`Engine::poll_transmit`] until `None`, then
/// [`Engine::poll_event`] until `None`, then [`Engine::poll_timeout`].
///
/// # Cost per call
///
/// No call walks the connections: a ready list holds the connections that may have
/// something to send (marked by input, timer expiry, CM calls and the verbs wrappers
/// [`Engine::post_send`], [`Engine::post_recv`], [`Engine::modify_qp`],
/// [`Engine::qp_doorbell`]) and an indexed binary heap holds each connection's earliest
/// deadline. `poll_timeout` is O(1), `handle_timeout` O(log n) per due connection,
/// `poll_transmit` O(1) when idle. [`Counters::conn_visits`] counts the connections
/// visited. Only [`Engine::counters`] walks them (statistics).
///
/// # Memory per connection
///
/// An idle established connection holds its table slot only
/// ([`EngineConfig::conn_slot_bytes`]): TCP allocates its loss-recovery storage on loss
/// and releases it when idle, and MPA borrows its FPDU ring and receive staging buffer
/// from the engine's pool only while it uses them ([`Engine::mpa_pool`]). A busy
/// connection holds at most [`EngineConfig::conn_bytes_estimate`], the whole engine at
/// most [`EngineConfig::conns_bytes_max`]. [`Engine::conn_heap_bytes`] reports what a
/// connection holds now.
pub struct Engine {
    pub(crate) core: EngineCore,
    pub(crate) conns: ConnTable<Conn>,
}

impl EngineCore {
    /// The verbs layer's next asynchronous event or CQ notification.
    pub(crate) fn rnic_event(&mut self) -> Option<Event> {
        if let Some(ev) = self.rnic.poll_async_event() {
            if let iwarp_types::AsyncEventKind::TerminateReceived(_) = ev.kind {
                self.counters.terminates_received += 1;
            }
            return Some(Event::Async(ev));
        }
        self.rnic.poll_cq_event().map(Event::CqNotify)
    }

    /// Re-arms the timer-heap entry of `conn` after anything changed its timers.
    pub(crate) fn rearm(&mut self, id: ConnId, conn: &Conn) {
        self.timers.set(slot_of(id), conn.deadline());
    }

    /// After any call into `conn`: re-arms its timer and queues it for transmission.
    pub(crate) fn touch(&mut self, id: ConnId, conn: &Conn) {
        self.rearm(id, conn);
        self.ready.push(slot_of(id));
    }

    /// Moves every connection waiting for ARP to the ready list.
    pub(crate) fn wake_arp_waiters(&mut self) {
        while let Some(slot) = self.arp_wait.pop() {
            self.ready.push(slot);
        }
    }

    /// When a close started now must have completed.
    pub(crate) fn close_deadline(&self, now: Instant) -> Instant {
        now + Duration::from_millis(self.cfg.llp_close_timeout_ms)
    }

    /// Queues an event; counted and dropped if the queue is full (returns false).
    pub(crate) fn push_event(&mut self, ev: Event) -> bool {
        if self.events.len() >= self.cfg.event_queue_len {
            self.counters.events_dropped += 1;
            return false;
        }
        self.events.push_back(ev);
        true
    }
}

impl Engine {
    /// A new engine. Panics if the configuration is invalid (see [`Engine::try_new`]).
    pub fn new(cfg: EngineConfig) -> Engine {
        match Engine::try_new(cfg) {
            Ok(e) => e,
            Err(e) => panic!("{e}"),
        }
    }

    /// A new engine, or the first invalid configuration field. Every table and queue is
    /// allocated here.
    pub fn try_new(mut cfg: EngineConfig) -> Result<Engine, ConfigError> {
        cfg.validate()?;
        // TCP segments must fit the MTU (we send no IP options).
        let mss_max = u16::try_from(cfg.mss_for_mtu()).unwrap_or(u16::MAX);
        cfg.tcp.mss_bytes = cfg.tcp.mss_bytes.min(mss_max);
        // We never send an FPDU longer than one segment: the transmit scratch buffer
        // need not be larger.
        cfg.mpa.tx_ulpdu_max_bytes = cfg.mpa.tx_ulpdu_max_bytes.min(usize::from(mss_max));
        cfg.tcp.checksum_offload = cfg.checksum_offload;
        cfg.rnic.seed = cfg.stag_seed;
        let rnic = Rnic::new(cfg.rnic);
        let qps = cfg.rnic.limits.max_qps as usize;
        let core = EngineCore {
            iface: Iface::new(&cfg),
            listeners: Listeners::new(cfg.max_listeners),
            ports: PortAllocator::with_seed(
                cfg.ephemeral_port_min,
                cfg.ephemeral_port_max,
                u64::from_le_bytes([
                    cfg.isn_secret[0],
                    cfg.isn_secret[1],
                    cfg.isn_secret[2],
                    cfg.isn_secret[3],
                    cfg.isn_secret[4],
                    cfg.isn_secret[5],
                    cfg.isn_secret[6],
                    cfg.isn_secret[7],
                ]) ^ cfg.stag_seed,
            ),
            isn: IsnGenerator::new(cfg.isn_secret),
            rnic,
            qp_conns: QpConns::with_capacity_and_hasher(qps, Default::default()),
            // Room for the usual few; beyond, the queue grows to its high-water mark (at
            // most `event_queue_len`, a doubling at a time, so a handful of allocations in
            // the engine's life). Preallocated whole, the ring's head would walk through
            // every page of it (536-byte events: 2.2 MB at the daemon's 4,096) and the
            // process's RSS would creep up for as long as that takes.
            events: VecDeque::with_capacity(cfg.event_queue_len.min(EVENTS_PREALLOCATED)),
            counters: Counters::default(),
            ready: ReadyList::new(cfg.max_conns),
            half_open: ReadyList::new(cfg.max_conns),
            arp_wait: ReadyList::new(cfg.max_conns),
            timers: TimerHeap::new(cfg.max_conns),
            mpa_pool: MpaPool::new(
                &cfg.mpa,
                PoolLimits {
                    rings_max: cfg.mpa_pool_rings.min(cfg.max_conns),
                    staging_max: cfg.mpa_pool_staging.min(cfg.max_conns),
                },
            ),
            pool_wait: ReadyList::new(cfg.max_conns),
            rings_promised: 0,
            rst_budget: SecondBudget::new(),
            rx_deferred: None,
            rx_tcp_before: TcpCounters::default(),
            rx_prediction: RxPrediction::new(),
            cfg,
        };
        let conns = ConnTable::new(core.cfg.max_conns, core.cfg.isn_secret);
        Ok(Engine { core, conns })
    }

    /// The configuration in force (MSS clamped to the MTU).
    pub fn config(&self) -> &EngineConfig {
        &self.core.cfg
    }

    /// The counters, with the QPs-by-state snapshot refreshed.
    pub fn counters(&mut self) -> &Counters {
        let mut by_state = [0u64; 5];
        for qp in self.core.qp_conns.keys() {
            if let Ok(info) = self.core.rnic.query_qp(*qp) {
                by_state[crate::counters::qp_state_index(info.state)] += 1;
            }
        }
        self.core.counters.qps_by_state = by_state;
        &self.core.counters
    }

    /// The counters without refreshing the QPs-by-state snapshot (left as the last
    /// [`Engine::counters`] call made it): O(1), for frequent publication.
    pub fn counters_fast(&self) -> &Counters {
        &self.core.counters
    }

    /// The verbs objects (PDs, CQs, SRQs, QPs, MRs, MWs).
    pub fn rnic(&self) -> &Rnic {
        &self.core.rnic
    }

    /// The verbs objects, mutable: poll CQs, register memory, create and destroy objects.
    ///
    /// Work that makes a QP send (posting to its send queue, Modify QP to Terminate,
    /// Error or Closing) should go through [`Engine::post_send`], [`Engine::post_recv`]
    /// and [`Engine::modify_qp`]; after posting through `rnic_mut()` directly, call
    /// [`Engine::qp_doorbell`] with the QP, or the engine will not notice the work until
    /// the connection's next input or timer. Then call `poll_transmit`.
    pub fn rnic_mut(&mut self) -> &mut Rnic {
        &mut self.core.rnic
    }

    /// A connection, for inspection.
    pub fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns.get(id)
    }

    /// The connection a QP is associated with.
    pub fn qp_conn(&self, qp: QpId) -> Option<ConnId> {
        self.core.qp_conns.get(&qp).copied()
    }

    /// Live connections (TIME-WAIT included).
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    /// Heap bytes connection `id` holds now beyond its slot: TCP's loss-recovery
    /// storage and MPA's buffers (start-up buffers, event queue, a lent FPDU ring or
    /// staging buffer). Zero for an idle established connection.
    pub fn conn_heap_bytes(&self, id: ConnId) -> Option<usize> {
        self.conns
            .get(id)
            .map(|c| c.tcp.heap_bytes() + c.mpa.heap_bytes())
    }

    /// Heap bytes every live connection holds beyond its slot (walks the connections:
    /// statistics, not for the fast path).
    pub fn conns_heap_bytes(&self) -> usize {
        let mut sum = 0;
        let mut pos = 0;
        while let Some(id) = self.conns.live_at(pos) {
            pos += 1;
            sum += self.conn_heap_bytes(id).unwrap_or(0);
        }
        sum
    }

    /// At exit, once the shutdown is over: ends the connections TCP still holds in
    /// TIME_WAIT. Their QPs are closed already (TIME_WAIT is TCP's quarantine of a closed
    /// connection) and a process that exits cannot keep it; each counts as closed.
    /// Returns how many ended. Walks the table: not for the fast path.
    pub fn end_time_wait(&mut self, now: Instant) -> usize {
        let mut ended = 0;
        let mut pos = 0;
        while let Some(id) = self.conns.live_at(pos) {
            match self.conns.get_mut(id) {
                Some(c) if c.tcp.state() == iwarp_tcp::TcpState::TimeWait => {
                    c.tcp.abort(now);
                    // Removal moves another id into `pos` (swap remove).
                    self.remove(id);
                    ended += 1;
                }
                _ => pos += 1,
            }
        }
        ended
    }

    /// Bytes of the connection table allocated at start-up (every slot, see
    /// [`EngineConfig::conn_slot_bytes`]).
    pub fn conn_table_bytes(&self) -> usize {
        self.conns.capacity() * self.core.cfg.conn_slot_bytes()
    }

    /// The MPA pool: what it lends now, its counters and the heap it holds itself.
    pub fn mpa_pool(&self) -> &MpaPool<TxUlpdu> {
        &self.core.mpa_pool
    }

    /// Handles one inbound Ethernet frame: a receive pass of one frame. To handle several,
    /// one [`crate::Receiver`] does less work per frame.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8], mem: &mut impl Memory) {
        self.receiver(now).handle_frame(frame, mem);
    }

    /// Services and re-arms the connection whose segments the receive pass handled last.
    pub(crate) fn flush_rx_deferred(&mut self, now: Instant) {
        let Some(id) = self.core.rx_deferred.take() else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(id) {
            let core = &mut self.core;
            core.counters
                .take_tcp_input(&core.rx_tcp_before, conn.tcp.counters());
            core.service(now, id, conn);
            core.touch(id, conn);
        }
    }

    /// [`Engine::handle_frame`] inside a receive pass: a segment of the connection
    /// handled last leaves it unserviced (see `EngineCore::rx_deferred`); anything else
    /// services it first.
    pub(crate) fn handle_frame_deferred(
        &mut self,
        now: Instant,
        frame: &[u8],
        mem: &mut dyn Memory,
    ) {
        let c = &mut self.core.counters;
        c.frames_in += 1;
        c.bytes_in += frame.len() as u64;
        let offloaded = self.core.cfg.checksum_offload;
        if let Some((id, seg)) = self.core.rx_prediction.predict(frame, offloaded) {
            if self.conns.get(id).is_some() {
                self.core.counters.tcp_segments_predicted += 1;
                let (src_ip, src_mac) = self.core.rx_prediction.source();
                self.handle_conn_segment(now, id, &seg, src_ip, src_mac, mem);
                return;
            }
            self.core.rx_prediction.forget();
        }
        // By reference, as the parsed segment in `handle_tcp` (the reason is there).
        match &self
            .core
            .iface
            .handle_frame(now, frame, &mut self.core.counters)
        {
            Ingress::Tcp(t) => self.handle_tcp(now, t, frame, mem),
            Ingress::FragNeeded(f) => {
                self.flush_rx_deferred(now);
                self.handle_frag_needed(now, *f)
            }
            // ARP may have resolved a next hop some connection waits for.
            Ingress::Done => {
                self.flush_rx_deferred(now);
                self.core.wake_arp_waiters()
            }
        }
    }

    /// RFC 1191 with the RFC 5927 check: the quoted segment must belong to a connection
    /// and its sequence number must lie in what is unacknowledged; then the path MSS
    /// shrinks (never below TCP's floor) and FPDUs follow it.
    fn handle_frag_needed(&mut self, now: Instant, f: crate::iface::icmp::FragNeeded) {
        let tuple = FourTuple {
            local_ip: self.core.iface.ip.octets(),
            local_port: f.local_port,
            remote_ip: f.remote_ip,
            remote_port: f.remote_port,
        };
        let Some(id) = self.conns.lookup(&tuple) else {
            self.core.counters.drop(DropReason::IcmpIgnored);
            return;
        };
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        // Stream offset of the quoted sequence number, relative to what is acknowledged.
        let first = conn.tcp.iss().0.wrapping_add(1);
        let off = f.seq.wrapping_sub(first);
        let acked = conn.tcp.acked_offset() as u32;
        let in_flight = off.wrapping_sub(acked) < FRAG_NEEDED_SEQ_WINDOW;
        if !in_flight || f.mtu < MIN_PATH_MTU {
            self.core.counters.drop(DropReason::IcmpIgnored);
            return;
        }
        self.core.counters.icmp_frag_needed += 1;
        conn.tcp.set_path_mss(now, f.mtu - FIXED_HEADERS_LEN);
        let core = &mut self.core;
        core.service(now, id, conn);
        core.touch(id, conn);
    }

    /// A TCP segment the interface found in `frame`, taken by the full path (parsed,
    /// looked up); a usual segment of a connection is kept for predicting the next.
    fn handle_tcp(&mut self, now: Instant, t: &TcpIn<'_>, frame: &[u8], mem: &mut dyn Memory) {
        let verify = !self.core.cfg.checksum_offload;
        // Matched by reference: moving the parsed segment out of the `Result` copied it
        // to another stack slot, loads that waited on the parser's narrower stores.
        let parsed = TcpSegment::parse(t.src_ip.octets(), t.dst_ip.octets(), t.segment, verify);
        let seg = match &parsed {
            Ok(s) => s,
            Err(TcpParseError::Checksum) => {
                self.core.counters.drop(DropReason::TcpBadChecksum);
                self.core.counters.tcp_checksum_errors += 1;
                return;
            }
            Err(_) => {
                self.core.counters.drop(DropReason::TcpMalformed);
                return;
            }
        };
        let found = match WireTuple::new(t.src_ip, t.dst_ip, t.segment) {
            Some(wire) => self.conns.lookup_wire(wire, &seg.tuple),
            None => self.conns.lookup(&seg.tuple),
        };
        if let Some(id) = found {
            self.core.rx_prediction.learn(frame, id, &seg.tuple);
            self.handle_conn_segment(now, id, seg, t.src_ip, t.src_mac, mem);
            return;
        }
        // A segment for no connection: the deferred one is done first.
        self.flush_rx_deferred(now);
        let syn = seg.flags.syn && !seg.flags.ack && !seg.flags.rst;
        if syn && self.core.listeners.get(seg.tuple.local_port).is_some() {
            self.core.counters.tcp_segments_in += 1;
            self.passive_open(now, seg, t.src_mac);
            return;
        }
        self.core.counters.drop(DropReason::TcpNoConnection);
        let grace = Duration::from_millis(self.core.cfg.relisten_grace_ms);
        if syn
            && !self
                .core
                .listeners
                .refuse_syn(seg.tuple.local_port, now, grace)
        {
            // Its listener was removed a moment ago: the peer retransmits the SYN.
            return;
        }
        // RFC 9293 (3.10.7.1) answers a segment for a closed port or a connection that no
        // longer exists with a RST. Sent for every such frame, a flood of them (SYNs to
        // closed ports, segments forged for dead connections) turns the core into an
        // amplifier, one frame out per frame in. Like FreeBSD's `badport_bandlim` (and
        // the RFC 5961 budget of challenge ACKs), a core sends at most
        // `no_connection_rsts_per_s` of them a second; the segments beyond are dropped
        // all the same and counted. A genuine peer loses nothing: it retransmits and gets
        // its RST in a later second.
        let per_s = self.core.cfg.no_connection_rsts_per_s;
        if !self.core.rst_budget.try_take(now, per_s) {
            self.core.counters.tcp_rsts_rate_limited += 1;
            return;
        }
        self.send_rst(seg, t.src_mac);
    }

    /// A segment of connection `id` from `src_ip`/`src_mac` (found by the full path or
    /// predicted): into its TCP, with what it acknowledged released at once and the rest
    /// of its service deferred until the receive pass moves on.
    fn handle_conn_segment(
        &mut self,
        now: Instant,
        id: ConnId,
        seg: &TcpSegment<'_>,
        src_ip: core::net::Ipv4Addr,
        src_mac: [u8; 6],
        mem: &mut dyn Memory,
    ) {
        // Another connection's segment: the deferred one is done first.
        if Some(id) != self.core.rx_deferred {
            self.flush_rx_deferred(now);
        }
        self.core.counters.tcp_segments_in += 1;
        if seg.flags.rst {
            self.core.counters.tcp_rsts_received += 1;
        }
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        let core = &mut self.core;
        if core.rx_deferred != Some(id) {
            // A run of its segments starts: what their input changes in its TCP counters
            // is added when the run ends (`flush_rx_deferred`).
            core.rx_tcp_before = *conn.tcp.counters();
        }
        let mut sink = QpSink {
            rnic: &mut core.rnic,
            qp: conn.rx_qp(),
            mem,
        };
        let rx = conn.mpa.rx_pooled(&mut sink, &mut core.mpa_pool).at(now);
        let acked = conn.tcp.acked_offset();
        conn.tcp.handle_segment(now, seg, &mut TcpRx(rx));
        core.counters.conn_visits += 1;
        // An on-link peer whose address this core is still resolving (its ARP reply
        // lost, or gone to another core): its own segment says where it is.
        let hop = conn.next_hop;
        let gleaned = hop == src_ip
            && !core.iface.arp.resolved_at(hop, conn.arp_hint)
            && core.iface.arp.glean(now, hop, src_mac, false);
        // What the segment acknowledged completes now, before the next segment's
        // receive completions, as one by one (an ACK and the next message often
        // come back to back: the send and receive queues' completions keep the
        // order they had); the rest of the service and the re-arm wait until the
        // receive pass moves on (at once outside one).
        if conn.tcp.acked_offset() != acked {
            core.release_acked(conn);
        }
        core.rx_deferred = Some(id);
        if gleaned {
            core.counters.arp_gleaned += 1;
            core.wake_arp_waiters();
        }
    }

    /// Answers a segment for nothing with an RST (RFC 9293 3.10.7.1), straight back to the
    /// MAC it came from.
    pub(crate) fn send_rst(&mut self, seg: &TcpSegment<'_>, mac: [u8; 6]) {
        let Some(rst) = reply_to_unknown(seg) else {
            return;
        };
        let offload = self.core.cfg.checksum_offload;
        let dst = core::net::Ipv4Addr::from(seg.tuple.remote_ip);
        let core = &mut self.core;
        // Counted in `poll_transmit`, where every frame leaves.
        let _ = core
            .iface
            .queue_ip(mac, dst, IpProtocol::Tcp, &mut core.counters, |buf| {
                rst.emit(buf, offload)
            });
    }

    /// Re-arms the timer of connection `id` and queues it for transmission (after a CM
    /// call or a verb changed it).
    pub(crate) fn touch(&mut self, id: ConnId) {
        if let Some(conn) = self.conns.get(id) {
            self.core.touch(id, conn);
        }
    }

    /// Runs every timer due at `now`: the interface's (ARP) and those of the connections
    /// whose deadline passed, found in the timer heap (idle connections are not visited).
    pub fn handle_timeout(&mut self, now: Instant, mem: &mut impl Memory) {
        let _ = mem;
        if self.core.iface.poll_timeout().is_some_and(|t| t <= now) {
            self.core.iface.handle_timeout(now, &mut self.core.counters);
            // A resolution finished or failed: connections that could not queue a frame
            // for their next hop try again.
            self.core.wake_arp_waiters();
        }
        // Each connection due at the start is handled once (a deadline that is still due
        // afterwards waits for the next call): bounded by the heap size.
        let mut budget = self.core.timers.len();
        while budget > 0 {
            budget -= 1;
            let Some((at, slot)) = self.core.timers.peek() else {
                break;
            };
            if at > now {
                break;
            }
            self.core.timers.set(slot, None);
            let Some(id) = self.conns.id_at_slot(slot) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(id) else {
                continue;
            };
            let core = &mut self.core;
            core.counters.conn_visits += 1;
            let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
            if due(conn.tcp.poll_timeout()) {
                let rtos = conn.tcp.counters().rto_expirations;
                conn.tcp.handle_timeout(now);
                let fired = conn.tcp.counters().rto_expirations.wrapping_sub(rtos);
                core.counters.tcp_rto_expirations += fired;
                if fired != 0 {
                    core.iface
                        .suspect_neighbour(now, conn.next_hop, &mut core.counters);
                }
            }
            if due(conn.mpa_deadline()) {
                conn.mpa.handle_timeout(now);
            }
            if due(conn.close_deadline) {
                core.close_timed_out(now, id, conn);
            }
            if due(conn.nudge_at) {
                core.nudge_check(now, conn);
            }
            core.service(now, id, conn);
            core.touch(id, conn);
        }
    }

    /// The earliest deadline of any timer (ARP, TCP, MPA, close): O(1), from the heap.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.core.timers.peek().map(|(t, _)| t);
        [self.core.iface.poll_timeout(), conns]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next engine event: connection management first, then the verbs layer's
    /// asynchronous events and CQ notifications.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(ev) = self.core.events.pop_front() {
            return Some(ev);
        }
        self.core.rnic_event()
    }
}
