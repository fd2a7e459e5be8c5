//! The output side of the engine: control frames first, then one segment of the next
//! connection on the ready list (round-robin among ready connections), the one place
//! frames leave (and RSTs are counted), and the removal of closed connections.

use iwarp_tcp::TcpState;
use iwarp_types::{ConnId, Instant, Memory};
use smoltcp::wire::IpProtocol;

use crate::conn_table::slot_of;
use crate::counters::DropReason;
use crate::engine::Engine;
use crate::glue::{QpSource, TcpTx};
use crate::iface::{is_tcp_rst, L4_OFFSET};

impl Engine {
    /// Writes one whole Ethernet frame (ARP, ICMP, or a TCP segment of a connection with
    /// something to send, round-robin) into `buf` and returns its length; `None` when
    /// nothing is due. Never allocates and never walks idle connections: only those on the
    /// ready list (marked by input, timers, verbs and CM calls) are visited. `buf` should
    /// hold `mtu + 14` bytes.
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
        if buf.get(..n).is_some_and(is_tcp_rst) {
            c.tcp_rsts_sent += 1;
        }
        Some(n)
    }

    fn poll_transmit_inner(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &dyn Memory,
    ) -> Option<usize> {
        let frame_max = self.core.iface.frame_len_max().min(buf.len());
        self.core.wake_pool_waiters(&mut self.conns);
        // Every connection ready at the start is visited at most once per call.
        let mut budget = self.core.ready.len();
        loop {
            // Control frames first; a connection may have just queued an ARP request.
            if let Some(n) = self.core.iface.poll_transmit(buf, &mut self.core.counters) {
                return Some(n);
            }
            if budget == 0 {
                // Rings came back meanwhile (a connection retired): its waiters go now.
                budget = self.core.wake_pool_waiters(&mut self.conns);
            }
            if budget == 0 || frame_max <= L4_OFFSET {
                return None;
            }
            budget -= 1;
            let slot = self.core.ready.pop()?;
            let Some(id) = self.conns.id_at_slot(slot) else {
                continue;
            };
            self.core.counters.conn_visits += 1;
            if let Some(n) = self.transmit_conn(now, id, &mut buf[..frame_max], mem) {
                // It may have more: back of the line.
                self.core.ready.push(slot);
                return Some(n);
            }
        }
    }

    /// One segment of connection `id`, or `None` (it has nothing to send now; it may have
    /// been removed).
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
        core.pump(now, id, conn, mem);
        let out = loop {
            let hop = conn.next_hop;
            let mac = core
                .iface
                .resolve(now, hop, &mut conn.arp_hint, &mut core.counters);
            if mac.is_none() && !core.iface.arp.can_hold(hop) {
                // Woken when the resolution ends (or by its own timers and input).
                core.arp_wait.push(slot_of(id));
                break None;
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
                break None;
            };
            core.counters.tcp_retransmissions += conn.tcp.counters().retransmits - rexmits;
            let remote = conn.remote_ip();
            core.counters.tcp_segments_out += 1;
            match mac {
                Some(mac) => {
                    core.iface
                        .emit_headers(buf, mac, remote, IpProtocol::Tcp, n);
                    break Some(L4_OFFSET + n);
                }
                None => {
                    core.iface
                        .emit_headers(buf, [0; 6], remote, IpProtocol::Tcp, n);
                    if !core.iface.arp.hold(hop, &buf[..L4_OFFSET + n]) {
                        core.counters.drop(DropReason::ArpPendingDropped);
                    }
                }
            }
        };
        // Sending arms and moves TCP timers.
        core.rearm(id, conn);
        if out.is_none() && conn.tcp.state() == TcpState::Closed {
            self.remove(id);
        }
        out
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
