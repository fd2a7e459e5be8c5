//! Per-connection glue run after every input: TCP events, MPA events, QP requests,
//! acknowledged FPDUs back to the QP, new ULPDUs from the QP into MPA, and retirement.

use core::net::SocketAddrV4;

use iwarp_mpa::{FailReason, MpaEvent, Negotiated};
use iwarp_rdma::{LlpEvent, LlpParams, LlpRequest, LlpRole, RtrKind};
use iwarp_tcp::{TcpEvent, TcpState};
use iwarp_types::{ConnId, Duration, Instant, Memory, QpId, TermCode};
use iwarp_wire::mpa::RtrType;

use crate::conn::{Conn, ConnState, Role};
use crate::conn_table::ConnTable;
use crate::engine::EngineCore;
use crate::event::{ConnectFailure, Event};

/// Most ULPDUs moved from a QP into MPA per service pass (bounds the work per call).
const PUMP_MAX: usize = 64;
/// FPDUs a connection queues on one turn of an FPDU ring while other connections wait for
/// a ring (a quarter of a ring's entries: about 90 KiB at MTU 1500).
pub(crate) const RING_TURN_FPDUS: u16 = 64;
/// Most QP LLP requests handled per pass.
const LLP_REQUESTS_MAX: usize = 4;

fn rtr_kind(t: Option<RtrType>) -> Option<RtrKind> {
    t.map(|t| match t {
        RtrType::Write => RtrKind::Write,
        RtrType::Read => RtrKind::Read,
        RtrType::Send => RtrKind::Send,
    })
}

impl EngineCore {
    /// Processes everything the layers of `conn` reported.
    pub(crate) fn service(&mut self, now: Instant, id: ConnId, conn: &mut Conn) {
        // FPDUs the input acknowledged retire before the QP hears of a FIN the same
        // segment carried: a peer's FIN acknowledges everything it received, and the QP
        // judges the close by what is still outstanding (an empty SQ and IRQ is a clean
        // close, anything else a Bad LLP Close with a Terminate).
        self.release_acked(conn);
        self.tcp_events(now, id, conn);
        self.mpa_events(now, id, conn);
        if conn.state == ConnState::Rejecting && conn.tcp.acked_offset() >= conn.mpa.end_offset() {
            // The peer has the whole Reject: now the FIN, in a segment of its own.
            let deadline = self.close_deadline(now);
            conn.close(now, deadline);
        }
        if let (true, Some(qp)) = (conn.qp_ready, conn.qp) {
            // The inbound RTR needs nothing more from us: MPA opens its gate on the first
            // FPDU received. Clear the one-shot flag.
            let _ = self.rnic.qp_take_rtr_received(qp);
            for _ in 0..LLP_REQUESTS_MAX {
                match self.rnic.qp_poll_llp_request(qp) {
                    // The FIN must follow whatever the QP still has to send (a Terminate
                    // in particular): `pump` closes once the QP ran dry.
                    Some(LlpRequest::Close) => conn.close_requested = true,
                    Some(LlpRequest::Reset) => {
                        conn.tcp.abort(now);
                        conn.state = ConnState::Closing;
                    }
                    None => break,
                }
            }
        }
        // LLP Close complete from the RDMA point of view (verbs 6.2.5, figures 9 and 11):
        // our FIN is acknowledged and the peer's FIN received. TIME_WAIT is TCP's own
        // business: the connection lingers in the table without its QP, which goes to
        // Idle (Closing) or Error (Terminate) now and can be reused at once.
        if conn.qp_ready && conn.tcp.state() == TcpState::TimeWait {
            self.detach_qp(id, conn, LlpEvent::Closed);
        }
    }

    /// Gives the QP back the descriptors of FPDUs TCP has acknowledged (their WRs
    /// complete).
    #[inline]
    pub(crate) fn release_acked(&mut self, conn: &mut Conn) {
        if let (true, Some(qp)) = (conn.qp_ready, conn.qp) {
            let rnic = &mut self.rnic;
            conn.mpa.released_pooled(
                conn.tcp.acked_offset(),
                |d| rnic.qp_ulpdu_acked(qp, &d),
                &mut self.mpa_pool,
            );
        }
    }

    /// Ends the association of the connection's QP with its LLP stream: the QP hears
    /// `ev` (Closed, Reset or TimedOut), forgets the connection, and the caller is told
    /// `Disconnected`. The connection itself may live on (TIME_WAIT) without a QP.
    pub(crate) fn detach_qp(&mut self, id: ConnId, conn: &mut Conn, ev: LlpEvent) {
        let (true, Some(qp)) = (conn.qp_ready, conn.qp) else {
            return;
        };
        self.rnic.qp_llp_event(qp, ev);
        conn.qp_ready = false;
        conn.qp = None;
        conn.close_requested = false;
        conn.state = ConnState::Closing;
        if self.qp_conns.get(&qp) == Some(&id) {
            self.qp_conns.remove(&qp);
        }
        if conn.established {
            conn.reported = true;
            self.push_event(Event::Disconnected { conn: id, qp });
        }
    }

    /// An engine-initiated close did not complete in time (FIN_WAIT_2 with a silent
    /// peer, or a close that never got its FIN out): reset the connection; the QP hears
    /// that the LLP timed out (verbs 6.2.5: LLP Reset, "LLP Connection Lost", Error).
    pub(crate) fn close_timed_out(&mut self, now: Instant, id: ConnId, conn: &mut Conn) {
        conn.close_deadline = None;
        if matches!(conn.tcp.state(), TcpState::Closed | TcpState::TimeWait) {
            return;
        }
        self.counters.llp_close_timeouts += 1;
        conn.failure.get_or_insert(ConnectFailure::Timeout);
        self.detach_qp(id, conn, LlpEvent::TimedOut);
        conn.tcp.abort(now);
        conn.state = ConnState::Closing;
    }

    fn tcp_events(&mut self, now: Instant, id: ConnId, conn: &mut Conn) {
        while let Some(ev) = conn.tcp.poll_event() {
            match ev {
                TcpEvent::Connected => {
                    if conn.state == ConnState::TcpHandshake {
                        conn.state = ConnState::MpaHandshake;
                        conn.mpa.restart_timer(now);
                    }
                }
                TcpEvent::PeerClosed => match (conn.qp_ready, conn.qp) {
                    (true, Some(qp)) => {
                        self.rnic.qp_llp_event(qp, LlpEvent::PeerClosed);
                        if conn.established {
                            self.push_event(Event::PeerClosed { conn: id, qp });
                        }
                    }
                    _ => {
                        conn.failure.get_or_insert(ConnectFailure::Reset);
                        let deadline = self.close_deadline(now);
                        conn.close(now, deadline);
                    }
                },
                TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => {
                    let (llp, failure) = match ev {
                        TcpEvent::Reset if conn.state == ConnState::TcpHandshake => {
                            (LlpEvent::Reset, ConnectFailure::Refused)
                        }
                        TcpEvent::Reset => (LlpEvent::Reset, ConnectFailure::Reset),
                        TcpEvent::TimedOut => {
                            self.counters.tcp_timeouts += 1;
                            let resolved = self
                                .iface
                                .arp
                                .lookup(conn.next_hop, conn.arp_hint)
                                .is_some();
                            let failure = if resolved {
                                ConnectFailure::Timeout
                            } else {
                                ConnectFailure::Unreachable
                            };
                            (LlpEvent::TimedOut, failure)
                        }
                        _ => (LlpEvent::Closed, ConnectFailure::Reset),
                    };
                    conn.failure.get_or_insert(failure);
                    conn.close_deadline = None;
                    self.detach_qp(id, conn, llp);
                    conn.state = ConnState::Closing;
                }
            }
        }
    }

    fn mpa_events(&mut self, now: Instant, id: ConnId, conn: &mut Conn) {
        while let Some(ev) = conn.mpa.poll_event() {
            match ev {
                MpaEvent::RequestReceived(info) => {
                    conn.state = ConnState::AwaitAccept;
                    let t = conn.tuple;
                    let queued = self.push_event(Event::ConnectRequest {
                        conn: id,
                        local_port: t.local_port,
                        remote: SocketAddrV4::new(t.remote_ip.into(), t.remote_port),
                        private_data: info.private_data,
                        ird: u32::from(info.ird),
                        ord: u32::from(info.ord),
                        p2p: info.p2p,
                    });
                    conn.announced = queued;
                    if !queued {
                        // Nobody will answer a request the caller never saw: refuse it
                        // rather than hold the backlog slot forever.
                        conn.reported = true;
                        conn.tcp.abort(now);
                        conn.state = ConnState::Closing;
                    }
                }
                MpaEvent::Established(neg) => self.establish(now, id, conn, &neg),
                MpaEvent::Rejected { private_data } => {
                    conn.reported = true;
                    self.counters.mpa_failures += 1;
                    self.push_event(Event::Rejected {
                        conn: id,
                        private_data,
                    });
                    let deadline = self.close_deadline(now);
                    conn.close(now, deadline);
                }
                MpaEvent::Failed(f) => {
                    self.counters.mpa_failures += 1;
                    match f.reason {
                        FailReason::Crc => self.counters.mpa_crc_errors += 1,
                        FailReason::FpduStalled => self.counters.mpa_fpdu_stalls += 1,
                        FailReason::SegmentSize | FailReason::MarkerMismatch => {
                            self.counters.mpa_framing_errors += 1
                        }
                        _ => {}
                    }
                    match (conn.qp_ready, conn.qp, f.term) {
                        (true, Some(qp), Some(code)) => self.rnic.qp_terminate(qp, code),
                        (true, Some(qp), None) => {
                            self.rnic.qp_terminate(qp, TermCode::LLP_LOCAL_CATASTROPHIC)
                        }
                        _ => {
                            let reason = match f.reason {
                                FailReason::Timeout => self.timeout_reason(conn),
                                _ => ConnectFailure::Mpa(
                                    f.term.unwrap_or(TermCode::LLP_INVALID_REQ_RESP),
                                ),
                            };
                            conn.failure.get_or_insert(reason);
                            conn.tcp.abort(now);
                            conn.state = ConnState::Closing;
                        }
                    }
                }
            }
        }
    }

    /// A timeout before RDMA mode: `Unreachable` if the next hop never answered ARP.
    fn timeout_reason(&mut self, conn: &Conn) -> ConnectFailure {
        if self
            .iface
            .arp
            .lookup(conn.next_hop, conn.arp_hint)
            .is_some()
        {
            ConnectFailure::Timeout
        } else {
            ConnectFailure::Unreachable
        }
    }

    /// MPA entered FPDU mode: the QP goes to RTS with the negotiated parameters.
    fn establish(&mut self, now: Instant, id: ConnId, conn: &mut Conn, neg: &Negotiated) {
        let Some(qp) = conn.qp else {
            conn.tcp.abort(now);
            conn.state = ConnState::Closing;
            return;
        };
        let (role, rtr) = Self::llp_role(conn, neg);
        // What we offered was capped by the QP's attributes; cap again in case the peer's
        // answer raised it (our ORD never exceeds our offer, nor our IRD).
        let (ird, ord) = match self.rnic.query_qp(qp) {
            Ok(i) => (
                u32::from(neg.ird).min(i.attr.ird),
                u32::from(neg.ord).min(i.attr.ord),
            ),
            Err(_) => (u32::from(neg.ird), u32::from(neg.ord)),
        };
        let params = LlpParams {
            ird,
            ord,
            role,
            rtr,
        };
        match self.rnic.qp_establish(qp, id, params) {
            Ok(()) => {
                conn.qp_ready = true;
                conn.established = true;
                conn.state = ConnState::Rdma;
                if conn.role == Role::Active && self.cfg.initiator_nudge_ms > 0 {
                    conn.nudge_at = Some(now + Duration::from_millis(self.cfg.initiator_nudge_ms));
                }
                self.counters.conns_established += 1;
                let private_data = neg.private_data;
                self.push_event(Event::Established {
                    conn: id,
                    qp,
                    private_data,
                });
            }
            Err(_) => {
                conn.failure.get_or_insert(ConnectFailure::Aborted);
                conn.tcp.abort(now);
                conn.state = ConnState::Closing;
            }
        }
    }

    /// The QP's LLP role and RTR duty for a negotiated connection.
    ///
    /// - Initiator: the RTR MPA negotiated (revision 2). In MPA revision 1 there is no
    ///   RTR negotiation, but peer-to-peer mode asked by the application is still served
    ///   the MPA v1 way: a zero-length RDMA Write as the first FPDU (a responder that does
    ///   not expect it places nothing: zero-length tagged Writes are not validated).
    /// - Responder: MPA already holds our FPDUs back until the initiator's first FPDU
    ///   (RFC 5044 7.1.2, unless `responder_waits_for_first_fpdu` is off, and then we
    ///   are configured to send at once), so the QP need not hold its send queue: local-only WRs (Bind, Fast-Register, Invalidate Local) complete at
    ///   once and ULPDUs queue (bounded) in MPA, ready the moment the gate opens.
    ///   `iwarp-rdma`'s `LlpRole::Responder` holds back every WR that sends until the
    ///   first inbound FPDU (local-only WRs still run), so it is used only where the QP
    ///   must recognise the inbound RTR itself: a zero-length Send RTR, which must not
    ///   consume a receive. Write and Read RTRs need no recognition (a zero-length Write
    ///   places nothing; a zero-length Read is answered by a zero-length Read Response).
    fn llp_role(conn: &Conn, neg: &Negotiated) -> (LlpRole, Option<RtrKind>) {
        match conn.role {
            Role::Active => {
                let rtr = match rtr_kind(neg.send_rtr) {
                    None if neg.revision == 1 && conn.p2p => Some(RtrKind::Write),
                    r => r,
                };
                (LlpRole::Initiator, rtr)
            }
            Role::Passive => match rtr_kind(neg.await_rtr) {
                Some(RtrKind::Send) => (LlpRole::Responder, Some(RtrKind::Send)),
                // The QP sends nothing first and holds nothing back.
                _ => (LlpRole::Initiator, None),
            },
        }
    }

    /// Moves waiting connections to the ready list in the order they came, one for each
    /// ring the MPA pool has that is not already set aside, and sets a ring aside for
    /// each (`Conn::ring_promised`): O(1) when nobody waits. Returns the number woken.
    ///
    /// Asked before every frame a transmit pass hands out: the empty case is inlined.
    #[inline]
    pub(crate) fn wake_pool_waiters(&mut self, conns: &mut ConnTable<Conn>) -> usize {
        if self.pool_wait.is_empty() {
            return 0;
        }
        self.wake_pool_waiters_now(conns)
    }

    fn wake_pool_waiters_now(&mut self, conns: &mut ConnTable<Conn>) -> usize {
        let free = self
            .mpa_pool
            .rings_available()
            .saturating_sub(self.rings_promised);
        let mut woken = 0;
        // Bounded: each turn pops one entry of the list.
        while woken < free {
            let Some(slot) = self.pool_wait.pop() else {
                break;
            };
            let Some(conn) = conns.id_at_slot(slot).and_then(|id| conns.get_mut(id)) else {
                continue;
            };
            if !conn.ring_promised {
                conn.ring_promised = true;
                self.rings_promised += 1;
            }
            self.ready.push(slot);
            woken += 1;
        }
        woken
    }

    /// Whether some connection waits for an FPDU ring: on the wait list, or woken with
    /// a ring set aside for it that it has not taken yet.
    pub(crate) fn rings_awaited(&self) -> bool {
        !self.pool_wait.is_empty() || self.rings_promised > 0
    }

    /// Gives up a ring set aside for `conn` that it did not take.
    fn drop_ring_promise(&mut self, conn: &mut Conn) {
        if conn.ring_promised {
            conn.ring_promised = false;
            self.rings_promised = self.rings_promised.saturating_sub(1);
        }
    }

    /// Whether `conn` may use an FPDU ring now: it holds one, one was set aside for it,
    /// or nobody waits and the pool has one that is not set aside for another.
    fn may_use_ring(&self, conn: &Conn) -> bool {
        conn.mpa.holds_tx_ring()
            || conn.ring_promised
            || (self.pool_wait.is_empty() && self.mpa_pool.rings_available() > self.rings_promised)
    }

    /// Moves ULPDUs from the QP into MPA while TCP can send them. The FPDU ring is
    /// borrowed from the pool for the time FPDUs are queued; with none free the
    /// connection waits on `pool_wait` (its WRs stay on the QP). While others wait, a
    /// connection queues at most [`RING_TURN_FPDUS`] FPDUs on its ring, then lets the
    /// ring drain back to the pool and waits behind them: without turns, busy connections
    /// would keep their rings for ever and the others would never send.
    pub(crate) fn pump(&mut self, now: Instant, id: ConnId, conn: &mut Conn, mem: &dyn Memory) {
        let (true, Some(qp)) = (conn.qp_ready, conn.qp) else {
            self.drop_ring_promise(conn);
            return;
        };
        let mut dry = true;
        if matches!(
            conn.tcp.state(),
            TcpState::Established | TcpState::CloseWait
        ) {
            let held = conn.mpa.holds_tx_ring();
            let may = self.may_use_ring(conn);
            if may && conn.mpa.take_tx_ring(&mut self.mpa_pool) {
                if !held || conn.ring_promised {
                    // A new turn: a ring just taken, or the connection's place in the
                    // wait list came while it still held its last one.
                    conn.ring_turn_fpdus = 0;
                }
                dry = self.pump_qp(now, conn, qp, mem);
                if !dry && self.ring_turn_over(conn) {
                    self.pool_wait.push(crate::conn_table::slot_of(id));
                }
                // Nothing was queued (the QP had nothing): the ring goes straight back.
                conn.mpa.return_tx_ring(&mut self.mpa_pool);
            } else {
                if !may {
                    self.mpa_pool.count_ring_wait();
                }
                self.pool_wait.push(crate::conn_table::slot_of(id));
                dry = false;
            }
        }
        // A ring set aside for this connection was taken above or is not wanted now.
        self.drop_ring_promise(conn);
        if dry && conn.close_requested {
            conn.close_requested = false;
            let deadline = self.close_deadline(now);
            conn.close(now, deadline);
        }
    }

    /// Whether `conn` used up its turn on its FPDU ring while others wait for one.
    fn ring_turn_over(&self, conn: &Conn) -> bool {
        conn.ring_turn_fpdus >= RING_TURN_FPDUS && !self.pool_wait.is_empty()
    }

    /// Moves ULPDUs of `qp` into MPA; true if the QP has nothing more to send now.
    fn pump_qp(&mut self, now: Instant, conn: &mut Conn, qp: QpId, mem: &dyn Memory) -> bool {
        let max = conn.mpa.max_ulpdu_len(conn.tcp.eff_mss());
        for _ in 0..PUMP_MAX {
            if self.ring_turn_over(conn) {
                return false;
            }
            // Keep about one window of FPDUs queued ahead of TCP: enough to fill it,
            // not so much that completions lag (held-back FPDUs count as unsent: the
            // queue stays about one window long).
            let unsent = conn.tx_unsent_bytes();
            let target = conn.tcp.send_window_room().max(max) as u64;
            if unsent >= target || conn.mpa.tx_room() == 0 {
                return false;
            }
            let Some((desc, len)) = self.rnic.qp_next_ulpdu(qp, max, mem) else {
                return true;
            };
            if desc.is_terminate() {
                self.counters.terminates_sent += 1;
            }
            conn.ring_turn_fpdus = conn.ring_turn_fpdus.saturating_add(1);
            if conn.mpa.push_ulpdu(desc, len).is_err() {
                // There was room and `len <= max`: a failure is a bug in a layer. Stop the
                // stream rather than lose the segment silently.
                self.counters.mpa_failures += 1;
                self.rnic.qp_terminate(qp, TermCode::LLP_LOCAL_CATASTROPHIC);
                conn.tcp.abort(now);
                return true;
            }
        }
        false
    }

    /// A connection left the table: release what it held and tell the caller.
    pub(crate) fn retire(&mut self, id: ConnId, mut conn: Conn) {
        self.counters.conns_closed += 1;
        if let Some(port) = conn.backlog_port {
            self.listeners.release_slot(port);
        }
        conn.mpa.return_storage(&mut self.mpa_pool);
        self.drop_ring_promise(&mut conn);
        // Normally detached already when TCP reported the end.
        self.detach_qp(id, &mut conn, LlpEvent::Closed);
        if let Some(qp) = conn.qp {
            // Never established (an active open that failed).
            if self.qp_conns.get(&qp) == Some(&id) {
                self.qp_conns.remove(&qp);
            }
        }
        // The caller knows this connection (it connected, or saw its ConnectRequest) and
        // has not been told how it ended.
        let known = conn.role == Role::Active || conn.announced;
        if known && !conn.reported {
            let reason = conn.failure.unwrap_or(ConnectFailure::Reset);
            self.push_event(Event::ConnectFailed { conn: id, reason });
        }
    }
}
