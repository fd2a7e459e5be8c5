//! The output side of the engine: control frames first, then segments of the connections
//! on the ready list (round-robin among ready connections, a turn of at most
//! `EngineConfig::tx_turn_segs_max` segments each, default [`TX_TURN_SEGS_MAX`]), the one
//! place frames leave (and RSTs are counted), and the removal of closed connections.
//!
//! A [`Transmitter`] is one transmit pass: it borrows the engine, so no input, timer or
//! verb can run between two of its frames, and the connection whose turn it is keeps it
//! without being looked up, serviced and re-armed again for every segment (that work is
//! done when the turn starts and when it ends), and without its QP pumped into MPA while
//! MPA holds a segment's worth TCP has not sent. `Engine::poll_transmit` is a pass of one
//! frame.

use iwarp_tcp::TcpState;
use iwarp_types::{ConnId, Instant, Memory};
use smoltcp::wire::IpProtocol;

use crate::conn_table::slot_of;
use crate::counters::DropReason;
use crate::engine::Engine;
use crate::glue::{QpSource, TcpTx};
use crate::iface::{is_tcp_rst, L4_OFFSET};

/// The default of `EngineConfig::tx_turn_segs_max`, the segments a connection sends in
/// one turn at most before the next ready connection's turn: enough to carry a 64 KiB
/// message at MTU 9000 or a third of one at MTU 1500 in one turn, few enough that 16
/// ready connections interleave within 256 frames. While connections wait for an FPDU
/// ring of the MPA pool, a turn is one segment.
pub const TX_TURN_SEGS_MAX: u32 = 16;

/// The connection whose turn it is.
#[derive(Clone, Copy)]
struct Turn {
    id: ConnId,
    /// Segments it may still send in this turn.
    left: u32,
    /// Its next hop's MAC as its first segment found it: the ARP cache changes only
    /// through input and timers, neither of which runs within a pass.
    mac: [u8; 6],
}

/// Where a frame of a transmit pass came from.
#[derive(Clone, Copy)]
enum Origin {
    /// A connection's TCP segment.
    Conn,
    /// The interface's control queue or an ARP-held frame.
    Control,
}

/// One transmit pass over the engine ([`Engine::transmitter`]): call
/// [`Transmitter::next`] for each frame buffer until it returns `None` or the caller has
/// no more buffers, then drop it. Dropping it ends the open turn (the connection's timers
/// are re-armed and it goes back on the ready list).
pub struct Transmitter<'e> {
    eng: &'e mut Engine,
    mem: &'e dyn Memory,
    now: Instant,
    turn: Option<Turn>,
}

impl Engine {
    /// Writes one whole Ethernet frame (ARP, ICMP, or a TCP segment of a connection with
    /// something to send, round-robin) into `buf` and returns its length; `None` when
    /// nothing is due. Never allocates and never walks idle connections: only those on the
    /// ready list (marked by input, timers, verbs and CM calls) are visited. `buf` should
    /// hold `mtu + 14` bytes. To write several frames, a [`Transmitter`] does less work
    /// per frame.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &impl Memory,
    ) -> Option<usize> {
        self.transmitter(now, mem).next(buf)
    }

    /// A transmit pass at `now`: frames in the order of as many `poll_transmit` calls,
    /// except that a connection keeps its turn for up to `EngineConfig::tx_turn_segs_max`
    /// segments (default [`TX_TURN_SEGS_MAX`]).
    pub fn transmitter<'e>(&'e mut self, now: Instant, mem: &'e impl Memory) -> Transmitter<'e> {
        Transmitter {
            eng: self,
            mem,
            now,
            turn: None,
        }
    }
}

impl Transmitter<'_> {
    /// The next frame, written into `buf` (as [`Engine::poll_transmit`]); `None` when
    /// nothing is due now.
    pub fn next(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (n, origin) = self.next_inner(buf)?;
        let frame = buf.get(..n).unwrap_or_default();
        // A connection's segment has its TCP header at `L4_OFFSET`, written by its TCP;
        // a control frame (ARP, ICMP, a reset for no connection) is parsed.
        let rst = match origin {
            Origin::Conn => frame.get(L4_OFFSET..).is_some_and(iwarp_tcp::has_rst),
            Origin::Control => is_tcp_rst(frame),
        };
        let c = &mut self.eng.core.counters;
        c.frames_out += 1;
        c.bytes_out += n as u64;
        if rst {
            c.tcp_rsts_sent += 1;
        }
        Some(n)
    }

    fn next_inner(&mut self, buf: &mut [u8]) -> Option<(usize, Origin)> {
        let (now, mem) = (self.now, self.mem);
        let eng = &mut *self.eng;
        let frame_max = eng.core.iface.frame_len_max().min(buf.len());
        // A turn that is over ends first: its connection goes back on the ready list
        // before the waiters woken just below, as it would have after its last segment.
        // While connections wait for an FPDU ring (on the wait list, or on the ready list
        // with a ring promised), a turn is one segment: a promised ring is used only once
        // its connection's turn comes, and long turns would keep it idle meanwhile.
        if let Some(turn) = self.turn {
            if turn.left == 0 || eng.core.rings_awaited() {
                self.turn = None;
                eng.end_turn(turn.id, true);
            }
        }
        eng.core.wake_pool_waiters(&mut eng.conns);
        // Control frames first.
        if let Some(n) = eng.core.iface.poll_transmit(buf, &mut eng.core.counters) {
            return Some((n, Origin::Control));
        }
        if frame_max <= L4_OFFSET {
            return None;
        }
        if let Some(turn) = self.turn.take() {
            let sent = eng.transmit_conn(now, turn.id, &mut buf[..frame_max], mem, Some(turn.mac));
            if let Some((n, _)) = sent {
                self.turn = Some(Turn {
                    left: turn.left - 1,
                    ..turn
                });
                return Some((n, Origin::Conn));
            }
            // Nothing more now: the turn ends without a place on the ready list.
            eng.end_turn(turn.id, false);
        }
        // Every connection ready at the start is visited at most once per call.
        let mut budget = eng.core.ready.len();
        loop {
            // A connection may have just queued an ARP request.
            if let Some(n) = eng.core.iface.poll_transmit(buf, &mut eng.core.counters) {
                return Some((n, Origin::Control));
            }
            if budget == 0 {
                // Rings came back meanwhile (a connection retired): its waiters go now.
                budget = eng.core.wake_pool_waiters(&mut eng.conns);
            }
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let slot = eng.core.ready.pop()?;
            let Some(id) = eng.conns.id_at_slot(slot) else {
                continue;
            };
            eng.core.counters.conn_visits += 1;
            if let Some((n, mac)) = eng.transmit_conn(now, id, &mut buf[..frame_max], mem, None) {
                self.turn = Some(Turn {
                    id,
                    left: eng.core.cfg.tx_turn_segs_max.saturating_sub(1),
                    mac,
                });
                return Some((n, Origin::Conn));
            }
            eng.end_turn(id, false);
        }
    }

    /// Ends the open turn of a connection that sent its last segment in it: it may have
    /// more, so it goes to the back of the ready list.
    fn end_turn(&mut self) {
        if let Some(turn) = self.turn.take() {
            self.eng.end_turn(turn.id, true);
        }
    }
}

impl Drop for Transmitter<'_> {
    fn drop(&mut self) {
        self.end_turn();
    }
}

impl Engine {
    /// One segment of connection `id` and the MAC it went to, or `None` (it has nothing
    /// to send now; it may have been removed). `turn_mac` is `None` when a turn starts:
    /// the connection's state is brought up to date first (acknowledged FPDUs released,
    /// TCP and MPA events, the QP's LLP requests) and its next hop is resolved. Later
    /// segments of a turn skip both (no input ran since, and the next hop's MAC is the
    /// turn's) unless the connection has nothing left, when it is serviced once before
    /// the answer is `None`, as at the start of a turn.
    fn transmit_conn(
        &mut self,
        now: Instant,
        id: ConnId,
        buf: &mut [u8],
        mem: &dyn Memory,
        turn_mac: Option<[u8; 6]>,
    ) -> Option<(usize, [u8; 6])> {
        let conn = self.conns.get_mut(id)?;
        let core = &mut self.core;
        let mut serviced = false;
        if turn_mac.is_none() {
            core.service(now, id, conn);
            serviced = true;
        }
        loop {
            // Inside a turn the QP is pumped only when MPA holds less than a segment
            // that TCP has not sent yet (the pump keeps about a window queued).
            if serviced || conn.tx_unsent_bytes() < conn.tcp.eff_mss() as u64 {
                core.pump(now, id, conn, mem);
            }
            let hop = conn.next_hop;
            let mac = match turn_mac {
                Some(mac) => Some(mac),
                None => core
                    .iface
                    .resolve(now, hop, &mut conn.arp_hint, &mut core.counters),
            };
            if mac.is_none() && !core.iface.arp.can_hold(hop) {
                // Woken when the resolution ends (or by its own timers and input).
                core.arp_wait.push(slot_of(id));
                return None;
            }
            let mut src = QpSource {
                rnic: &mut core.rnic,
                qp: conn.tx_qp(),
                mem,
            };
            let mut tx = TcpTx {
                mpa: conn.mpa.tx_pooled(&mut src, &mut core.mpa_pool),
                sent_max: &mut conn.tx_sent_max,
            };
            let rexmits = conn.tcp.counters().retransmits;
            let Some(n) = conn.tcp.poll_transmit(now, &mut tx, &mut buf[L4_OFFSET..]) else {
                if serviced {
                    return None;
                }
                // What sending changed (TCP and MPA events, a close the QP asked for
                // once it ran dry) is taken in before the connection says it is done.
                core.service(now, id, conn);
                serviced = true;
                continue;
            };
            core.counters.tcp_retransmissions += conn.tcp.counters().retransmits - rexmits;
            let remote = conn.remote_ip();
            core.counters.tcp_segments_out += 1;
            match mac {
                Some(mac) => {
                    core.iface
                        .emit_headers(buf, mac, remote, IpProtocol::Tcp, n);
                    return Some((L4_OFFSET + n, mac));
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

    /// Ends connection `id`'s turn: sending armed and moved its TCP timers; one that may
    /// have more goes to the back of the ready list, one that is done and Closed is
    /// removed.
    fn end_turn(&mut self, id: ConnId, may_have_more: bool) {
        let Some(conn) = self.conns.get(id) else {
            return;
        };
        self.core.rearm(id, conn);
        if may_have_more {
            self.core.ready.push(slot_of(id));
        } else if conn.tcp.state() == TcpState::Closed {
            self.remove(id);
        }
    }

    /// Removes a connection whose TCP is Closed, reporting what the caller is owed.
    pub(crate) fn remove(&mut self, id: ConnId) {
        let Some(tuple) = self.conns.get(id).map(|c| c.tuple) else {
            return;
        };
        if let Some(conn) = self.conns.remove(id, &tuple) {
            self.core.timers.set(slot_of(id), None);
            self.core.retire(id, conn);
        }
    }
}
