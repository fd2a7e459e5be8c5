//! The engine: one per dataplane core. Frames, verbs and `now` in; frames, completions,
//! events and the next deadline out. See the crate documentation for the call order.

use std::collections::{HashMap, VecDeque};

use iwarp_rdma::Rnic;
use iwarp_tcp::{reply_to_unknown, IsnGenerator, TcpParseError, TcpSegment, TcpState};
use iwarp_types::{ConnId, Instant, Memory, QpId};
use smoltcp::wire::IpProtocol;

use crate::config::{ConfigError, EngineConfig};
use crate::conn::Conn;
use crate::conn_table::{ConnTable, Listeners, PortAllocator};
use crate::counters::{Counters, DropReason};
use crate::event::Event;
use crate::glue::{QpSink, QpSource, TcpRx, TcpTx};
use crate::iface::{Iface, Ingress, TcpIn, L4_OFFSET};

/// Everything of the engine except the connection table, so a connection can be
/// borrowed next to the rest.
pub(crate) struct Core {
    pub(crate) cfg: EngineConfig,
    pub(crate) iface: Iface,
    pub(crate) listeners: Listeners,
    pub(crate) ports: PortAllocator,
    pub(crate) isn: IsnGenerator,
    pub(crate) rnic: Rnic,
    pub(crate) qp_conns: HashMap<QpId, ConnId>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counters: Counters,
    /// Retransmissions of connections already removed.
    pub(crate) retired_retransmits: u64,
}

/// The sans-IO iWARP engine of one core.
///
/// Call order after any `handle_*` or verb: [`Engine::poll_transmit`] until `None`, then
/// [`Engine::poll_event`] until `None`, then [`Engine::poll_timeout`].
pub struct Engine {
    pub(crate) core: Core,
    pub(crate) conns: ConnTable<Conn>,
}

impl Core {
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
        cfg.tcp.checksum_offload = cfg.checksum_offload;
        cfg.rnic.seed = cfg.stag_seed;
        let rnic = Rnic::new(cfg.rnic);
        let qps = cfg.rnic.limits.max_qps as usize;
        let core = Core {
            iface: Iface::new(&cfg),
            listeners: Listeners::new(cfg.max_listeners),
            ports: PortAllocator::new(cfg.ephemeral_port_min, cfg.ephemeral_port_max),
            isn: IsnGenerator::new(cfg.isn_secret),
            rnic,
            qp_conns: HashMap::with_capacity(qps),
            events: VecDeque::with_capacity(cfg.event_queue_len),
            counters: Counters::default(),
            retired_retransmits: 0,
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
        let mut retransmits = self.core.retired_retransmits;
        let mut pos = 0;
        while let Some(id) = self.conns.live_at(pos) {
            pos += 1;
            if let Some(c) = self.conns.get(id) {
                retransmits += c.tcp.counters().retransmits;
            }
        }
        self.core.counters.tcp_retransmissions = retransmits;
        &self.core.counters
    }

    /// The verbs objects (PDs, CQs, SRQs, QPs, MRs, MWs).
    pub fn rnic(&self) -> &Rnic {
        &self.core.rnic
    }

    /// The verbs objects, mutable: post WRs, poll CQs, register memory. Call
    /// `poll_transmit` afterwards.
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

    /// Handles one inbound Ethernet frame.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8], mem: &mut impl Memory) {
        let c = &mut self.core.counters;
        c.frames_in += 1;
        c.bytes_in += frame.len() as u64;
        match self
            .core
            .iface
            .handle_frame(now, frame, &mut self.core.counters)
        {
            Ingress::Tcp(t) => self.handle_tcp(now, t, mem),
            Ingress::Done => {}
        }
    }

    fn handle_tcp(&mut self, now: Instant, t: TcpIn<'_>, mem: &mut dyn Memory) {
        let verify = !self.core.cfg.checksum_offload;
        let seg = match TcpSegment::parse(t.src_ip.octets(), t.dst_ip.octets(), t.segment, verify) {
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
        if let Some(id) = self.conns.lookup(&seg.tuple) {
            self.core.counters.tcp_segments_in += 1;
            if seg.flags.rst {
                self.core.counters.tcp_rsts_received += 1;
            }
            let Some(conn) = self.conns.get_mut(id) else {
                return;
            };
            let core = &mut self.core;
            let mut sink = QpSink {
                rnic: &mut core.rnic,
                qp: conn.rx_qp(),
                mem,
            };
            conn.tcp
                .handle_segment(now, &seg, &mut TcpRx(conn.mpa.rx(&mut sink)));
            core.service(now, id, conn);
            return;
        }
        let syn = seg.flags.syn && !seg.flags.ack && !seg.flags.rst;
        if syn && self.core.listeners.get(seg.tuple.local_port).is_some() {
            self.core.counters.tcp_segments_in += 1;
            self.passive_open(now, &seg);
            return;
        }
        self.core.counters.drop(DropReason::TcpNoConnection);
        self.send_rst(&seg, t.src_mac);
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
        if core
            .iface
            .queue_ip(mac, dst, IpProtocol::Tcp, &mut core.counters, |buf| {
                rst.emit(buf, offload)
            })
        {
            core.counters.tcp_rsts_sent += 1;
        }
    }

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant, mem: &mut impl Memory) {
        let _ = mem;
        self.core.iface.handle_timeout(now, &mut self.core.counters);
        let mut pos = self.conns.len();
        while pos > 0 {
            pos -= 1;
            let Some(id) = self.conns.live_at(pos) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(id) else {
                continue;
            };
            let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
            if due(conn.tcp.poll_timeout()) {
                conn.tcp.handle_timeout(now);
            }
            if due(conn.mpa.poll_timeout()) {
                conn.mpa.handle_timeout(now);
            }
            self.core.service(now, id, conn);
        }
    }

    /// The earliest deadline of any timer (ARP, TCP, MPA).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.core.iface.poll_timeout();
        let mut pos = 0;
        while let Some(id) = self.conns.live_at(pos) {
            pos += 1;
            let Some(conn) = self.conns.get(id) else {
                continue;
            };
            for d in [conn.tcp.poll_timeout(), conn.mpa.poll_timeout()]
                .into_iter()
                .flatten()
            {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        }
        t
    }

    /// The next engine event: connection management first, then the verbs layer's
    /// asynchronous events and CQ notifications.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(ev) = self.core.events.pop_front() {
            return Some(ev);
        }
        self.core.rnic_event()
    }

    /// Writes one whole Ethernet frame (ARP, ICMP, or a TCP segment of some connection,
    /// round-robin) into `buf` and returns its length; `None` when nothing is due. Never
    /// allocates. `buf` should hold `mtu + 14` bytes.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &impl Memory,
    ) -> Option<usize> {
        let n = self.poll_transmit_inner(now, buf, mem)?;
        let c = &mut self.core.counters;
        c.frames_out += 1;
        c.bytes_out += n as u64;
        Some(n)
    }

    fn poll_transmit_inner(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &dyn Memory,
    ) -> Option<usize> {
        let frame_max = self.core.iface.frame_len_max().min(buf.len());
        let mut budget = self.conns.len();
        loop {
            // Control frames first; a connection may have just queued an ARP request.
            if let Some(n) = self.core.iface.poll_transmit(buf, &mut self.core.counters) {
                return Some(n);
            }
            if budget == 0 || frame_max <= L4_OFFSET {
                return None;
            }
            budget -= 1;
            let id = self.conns.next_round_robin()?;
            if let Some(n) = self.transmit_conn(now, id, &mut buf[..frame_max], mem) {
                return Some(n);
            }
        }
    }

    /// One segment of connection `id`, or `None` (then the connection may be removed).
    fn transmit_conn(
        &mut self,
        now: Instant,
        id: ConnId,
        buf: &mut [u8],
        mem: &dyn Memory,
    ) -> Option<usize> {
        let conn = self.conns.get_mut(id)?;
        let core = &mut self.core;
        core.service(now, id, conn);
        core.pump(now, conn, mem);
        loop {
            let hop = conn.next_hop;
            let mac = core
                .iface
                .resolve(now, hop, &mut conn.arp_hint, &mut core.counters);
            if mac.is_none() && !core.iface.arp.can_hold(hop) {
                return None;
            }
            let mut src = QpSource {
                rnic: &mut core.rnic,
                qp: conn.tx_qp(),
                mem,
            };
            let mut tx = TcpTx {
                mpa: conn.mpa.tx(&mut src),
                sent_max: &mut conn.tx_sent_max,
            };
            let out = conn.tcp.poll_transmit(now, &mut tx, &mut buf[L4_OFFSET..]);
            let Some(n) = out else {
                if conn.tcp.state() == TcpState::Closed {
                    self.remove(id);
                }
                return None;
            };
            let remote = conn.remote_ip();
            core.counters.tcp_segments_out += 1;
            match mac {
                Some(mac) => {
                    core.iface
                        .emit_headers(buf, mac, remote, IpProtocol::Tcp, n);
                    return Some(L4_OFFSET + n);
                }
                None => {
                    core.iface
                        .emit_headers(buf, [0; 6], remote, IpProtocol::Tcp, n);
                    if !core.iface.arp.hold(hop, &buf[..L4_OFFSET + n]) {
                        core.counters.drop(DropReason::ArpPendingDropped);
                    }
                }
            }
        }
    }

    /// Removes a connection whose TCP is Closed, reporting what the caller is owed.
    pub(crate) fn remove(&mut self, id: ConnId) {
        let Some(tuple) = self.conns.get(id).map(|c| c.tuple) else {
            return;
        };
        if let Some(conn) = self.conns.remove(id, &tuple) {
            self.core.retire(id, conn);
        }
    }
}
