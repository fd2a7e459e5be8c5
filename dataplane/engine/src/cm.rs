//! Connection management: listen, connect, accept, reject, disconnect, abort, and the
//! passive open of a SYN that reached a listener.

use core::fmt;
use core::net::Ipv4Addr;

use iwarp_mpa::MpaConn;
use iwarp_rdma::{LlpEvent, QpModify};
use iwarp_tcp::{FourTuple, TcpConn, TcpSegment, TcpState};
use iwarp_types::{ConnId, Instant, QpId, QpState};

use crate::conn::{AcceptParams, Conn, ConnState, ConnectParams, Role};
use crate::conn_table::{slot_of, ListenError};
use crate::counters::DropReason;
use crate::engine::Engine;
use crate::event::PrivateData;

/// Entries of the half-open list one SYN to a full backlog examines at most (bounds the
/// work per frame; entries of other listeners go to the back of the list).
const HALF_OPEN_SCAN_MAX: usize = 32;

/// Why a connection-management call failed. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmError {
    /// `listen` failed.
    Listen(ListenError),
    /// No such QP, or it is not Idle, or it is already given to a connection.
    InvalidQp,
    /// No such connection.
    InvalidConnection,
    /// The connection is not in a state that allows the call.
    InvalidState,
    /// No route to the destination (off-link without a gateway).
    NoRoute,
    /// No local port available.
    NoPort,
    /// The local port and 4-tuple are taken.
    TupleInUse,
    /// The connection table is full.
    TableFull,
    /// Private data, IRD or ORD refused by MPA.
    InvalidParams,
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for CmError {}

/// IRD/ORD travel in 14 bits (RFC 6581).
fn ird_ord_u16(v: u32) -> Result<u16, CmError> {
    if v < 1 << 14 {
        Ok(v as u16)
    } else {
        Err(CmError::InvalidParams)
    }
}

impl Engine {
    /// Accepts connections on `port`; at most `backlog` (capped by config) may wait for
    /// `accept`/`reject` at once.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<(), CmError> {
        let backlog = backlog.min(self.core.cfg.backlog_max);
        self.core
            .listeners
            .listen(port, backlog)
            .map_err(CmError::Listen)
    }

    /// Stops listening on `port` (connections already made are kept). False if none.
    pub fn unlisten(&mut self, port: u16) -> bool {
        self.core.listeners.unlisten(port)
    }

    /// Picks a free local port towards `remote_ip:remote_port` for which `f` holds
    /// (the dataplane uses it to choose ports whose RSS hash lands on this core). Pass the
    /// result to [`Engine::connect_from`].
    pub fn choose_local_port(
        &mut self,
        remote_ip: Ipv4Addr,
        remote_port: u16,
        f: impl Fn(u16) -> bool,
    ) -> Option<u16> {
        let local_ip = self.core.iface.ip.octets();
        let (listeners, conns) = (&self.core.listeners, &self.conns);
        self.core.ports.choose(|p| {
            let tuple = FourTuple {
                local_ip,
                local_port: p,
                remote_ip: remote_ip.octets(),
                remote_port,
            };
            f(p) && listeners.get(p).is_none() && !conns.contains_tuple(&tuple)
        })
    }

    /// Active open from an ephemeral port: TCP SYN, then the MPA Request with `params`.
    /// `qp` must be Idle; it enters RTS when MPA completes ([`crate::Event::Established`]).
    pub fn connect(
        &mut self,
        now: Instant,
        qp: QpId,
        remote_ip: Ipv4Addr,
        remote_port: u16,
        params: ConnectParams,
    ) -> Result<ConnId, CmError> {
        let port = self
            .choose_local_port(remote_ip, remote_port, |_| true)
            .ok_or(CmError::NoPort)?;
        self.connect_from(now, qp, port, remote_ip, remote_port, params)
    }

    /// Active open from a given local port (see [`Engine::choose_local_port`]).
    pub fn connect_from(
        &mut self,
        now: Instant,
        qp: QpId,
        local_port: u16,
        remote_ip: Ipv4Addr,
        remote_port: u16,
        params: ConnectParams,
    ) -> Result<ConnId, CmError> {
        let (qp_ird, qp_ord) = self.check_qp_free(qp)?;
        let next_hop = self
            .core
            .iface
            .next_hop(remote_ip)
            .ok_or(CmError::NoRoute)?;
        if local_port == 0 || remote_port == 0 || remote_ip == self.core.iface.ip {
            return Err(CmError::InvalidParams);
        }
        let tuple = FourTuple {
            local_ip: self.core.iface.ip.octets(),
            local_port,
            remote_ip: remote_ip.octets(),
            remote_port,
        };
        if self.conns.contains_tuple(&tuple) {
            return Err(CmError::TupleInUse);
        }
        if self.conns.is_full() {
            return Err(CmError::TableFull);
        }
        let mut mpa_cfg = self.core.cfg.mpa;
        mpa_cfg.ird = ird_ord_u16(params.ird.min(qp_ird))?;
        mpa_cfg.ord = ird_ord_u16(params.ord.min(qp_ord))?;
        mpa_cfg.p2p = params.p2p;
        let mpa = MpaConn::initiator(&mpa_cfg, params.private_data.as_slice(), now)
            .map_err(|_| CmError::InvalidParams)?;
        let isn = self.core.isn.isn(&tuple, now);
        let tcp = TcpConn::connect(self.core.cfg.tcp, tuple, isn, now);
        let conn = Conn::new(tuple, tcp, mpa, Some(qp), Role::Active, next_hop, params);
        let id = self
            .conns
            .insert(tuple, conn)
            .map_err(|_| CmError::TableFull)?;
        self.core.qp_conns.insert(qp, id);
        self.touch(id);
        Ok(id)
    }

    /// Checks `qp` is Idle and unused; returns its (IRD, ORD) attributes, which cap what
    /// we offer in MPA.
    fn check_qp_free(&self, qp: QpId) -> Result<(u32, u32), CmError> {
        let info = self
            .core
            .rnic
            .query_qp(qp)
            .map_err(|_| CmError::InvalidQp)?;
        if info.state != QpState::Idle || self.core.qp_conns.contains_key(&qp) {
            return Err(CmError::InvalidQp);
        }
        Ok((info.attr.ird, info.attr.ord))
    }

    /// Accepts a connection reported by [`crate::Event::ConnectRequest`] on `qp` (Idle):
    /// the MPA Reply goes out and the QP enters RTS.
    pub fn accept(
        &mut self,
        now: Instant,
        conn: ConnId,
        qp: QpId,
        params: AcceptParams,
    ) -> Result<(), CmError> {
        let (qp_ird, qp_ord) = self.check_qp_free(qp)?;
        let c = self.conns.get_mut(conn).ok_or(CmError::InvalidConnection)?;
        if c.state != ConnState::AwaitAccept {
            return Err(CmError::InvalidState);
        }
        let ird = ird_ord_u16(params.ird.min(qp_ird))?;
        let ord = ird_ord_u16(params.ord.min(qp_ord))?;
        c.mpa
            .accept(params.private_data.as_slice(), ird, ord)
            .map_err(|_| CmError::InvalidParams)?;
        c.qp = Some(qp);
        c.state = ConnState::Accepted;
        if let Some(port) = c.backlog_port.take() {
            self.core.listeners.release_slot(port);
        }
        self.core.qp_conns.insert(qp, conn);
        self.core.service(now, conn, c);
        self.core.touch(conn, c);
        Ok(())
    }

    /// Rejects a connection reported by [`crate::Event::ConnectRequest`]: an MPA Reply with
    /// the Reject flag and `private_data`, then a FIN once the peer acknowledged the Reply
    /// (never in the Reply's segment: Linux siw would handle that FIN first and drop the
    /// reject's private data, docs/INTEROP.md). The close deadline bounds the wait.
    pub fn reject(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: PrivateData,
    ) -> Result<(), CmError> {
        let c = self.conns.get_mut(conn).ok_or(CmError::InvalidConnection)?;
        if c.state != ConnState::AwaitAccept {
            return Err(CmError::InvalidState);
        }
        c.mpa
            .reject(private_data.as_slice())
            .map_err(|_| CmError::InvalidParams)?;
        c.reported = true;
        c.close_deadline
            .get_or_insert(self.core.close_deadline(now));
        c.state = ConnState::Rejecting;
        if let Some(port) = c.backlog_port.take() {
            self.core.listeners.release_slot(port);
        }
        self.core.service(now, conn, c);
        self.core.touch(conn, c);
        Ok(())
    }

    /// Graceful close of `qp`'s connection: the QP goes to Closing, and TCP sends its FIN
    /// once the send queue has drained. Before RDMA mode the connection is just closed.
    pub fn disconnect(&mut self, now: Instant, qp: QpId) -> Result<(), CmError> {
        let id = self.qp_conn(qp).ok_or(CmError::InvalidQp)?;
        let c = self.conns.get_mut(id).ok_or(CmError::InvalidConnection)?;
        if c.qp_ready {
            // RTS: Closing once the SQ and Read queues drained, then the QP asks for the
            // FIN. Not in RTS any more (Terminate, Error): the QP already asked for the
            // close or reset it needs.
            let _ = self.core.rnic.qp_disconnect(qp);
        } else {
            c.close(now, self.core.close_deadline(now));
            c.failure
                .get_or_insert(crate::event::ConnectFailure::Aborted);
        }
        self.core.service(now, id, c);
        self.core.touch(id, c);
        Ok(())
    }

    /// Leaves a graceful close `qp` started to TCP once its FIN is out and every byte is
    /// acknowledged: the QP leaves the connection (LLP Closed, `Disconnected` to the
    /// caller as for any close) and TCP finishes the FIN exchange and TIME_WAIT alone.
    /// For a QP destroyed during its close, instead of [`Engine::abort`]: the peer sees
    /// the close complete, as Linux's iw_cm lets a closing connection finish, not a reset.
    /// False (nothing done) if the close is not that far or the QP has no connection.
    /// The shared-memory service asks it when a client destroys a QP
    /// ([`Engine::qp_close_underway`]).
    pub fn release_closing_qp(&mut self, now: Instant, qp: QpId) -> bool {
        let Some(id) = self.qp_conn(qp) else {
            return false;
        };
        let Some(c) = self.conns.get_mut(id) else {
            return false;
        };
        if !c.qp_ready || !c.tcp.fin_sent_and_data_acked() {
            return false;
        }
        self.core.detach_qp(id, c, LlpEvent::Closed);
        self.core.service(now, id, c);
        self.core.touch(id, c);
        self.qp_conn(qp).is_none()
    }

    /// True while a graceful close of `qp`'s connection is under way: asked and waiting
    /// for the SQ to drain, or Closing with TCP not yet done. A caller about to destroy
    /// the QP may give [`Engine::release_closing_qp`] a moment (the FIN going out, the
    /// last bytes acknowledged) before it falls back to [`Engine::abort`].
    pub fn qp_close_underway(&self, qp: QpId) -> bool {
        let Some(c) = self.qp_conn(qp).and_then(|id| self.conns.get(id)) else {
            return false;
        };
        if !c.qp_ready || c.tcp.state() == iwarp_tcp::TcpState::Closed {
            return false;
        }
        let rnic = &self.core.rnic;
        rnic.qp_close_requested(qp) || rnic.query_qp(qp).is_ok_and(|i| i.state == QpState::Closing)
    }

    /// Abortive close of `qp`'s connection: TCP RST, the QP goes to Error (WRs flushed).
    pub fn abort(&mut self, now: Instant, qp: QpId) -> Result<(), CmError> {
        let id = self.qp_conn(qp).ok_or(CmError::InvalidQp)?;
        let c = self.conns.get_mut(id).ok_or(CmError::InvalidConnection)?;
        if c.qp_ready {
            let m = QpModify {
                state: Some(QpState::Error),
                ..QpModify::default()
            };
            let _ = self.core.rnic.modify_qp(qp, &m);
        }
        c.failure
            .get_or_insert(crate::event::ConnectFailure::Aborted);
        c.tcp.abort(now);
        c.state = ConnState::Closing;
        self.core.service(now, id, c);
        self.core.touch(id, c);
        Ok(())
    }

    /// A SYN reached a listener: passive open (TCP SYN_RECEIVED, MPA Responder).
    /// The SYN came from `src_mac`: an on-link peer not yet known is learnt from it, so
    /// that the SYN-ACK needs no ARP round trip (and no ARP reply that RSS may send to
    /// another core).
    pub(crate) fn passive_open(&mut self, now: Instant, seg: &TcpSegment<'_>, src_mac: [u8; 6]) {
        let tuple = seg.tuple;
        let remote = Ipv4Addr::from(tuple.remote_ip);
        let Some(next_hop) = self.core.iface.next_hop(remote) else {
            self.core.counters.drop(DropReason::NoRoute);
            return;
        };
        let slot = self.core.listeners.take_slot(tuple.local_port)
            || (self.evict_half_open(tuple.local_port)
                && self.core.listeners.take_slot(tuple.local_port));
        if !slot {
            self.core.counters.drop(DropReason::TcpBacklogFull);
            return;
        }
        if self.conns.is_full() {
            self.core.listeners.release_slot(tuple.local_port);
            self.core.counters.drop(DropReason::TcpBacklogFull);
            return;
        }
        if next_hop == remote && self.core.iface.arp.glean(now, remote, src_mac, true) {
            self.core.counters.arp_gleaned += 1;
            self.core.wake_arp_waiters();
        }
        let isn = self.core.isn.isn(&tuple, now);
        let Some(tcp) = TcpConn::accept(self.core.cfg.tcp, tuple, seg, isn, now) else {
            self.core.listeners.release_slot(tuple.local_port);
            self.core.counters.drop(DropReason::TcpMalformed);
            return;
        };
        let mpa = MpaConn::responder(&self.core.cfg.mpa, now);
        let mut conn = Conn::new(
            tuple,
            tcp,
            mpa,
            None,
            Role::Passive,
            next_hop,
            ConnectParams::default(),
        );
        conn.backlog_port = Some(tuple.local_port);
        match self.conns.insert(tuple, conn) {
            Ok(id) => {
                self.core.half_open.push(slot_of(id));
                self.touch(id);
            }
            Err(_) => {
                self.core.listeners.release_slot(tuple.local_port);
                self.core.counters.drop(DropReason::TcpBacklogFull);
            }
        }
    }

    /// A SYN found its listener's backlog full: the oldest half-open connection of that
    /// listener (SYN_RECEIVED, not yet announced) is dropped without a word, freeing its
    /// slot, so that a flood of SYNs from addresses that never answer cannot keep a
    /// listener's backlog full (a real peer's handshake takes one round trip; a flood's
    /// entries wait for SYN-ACK retransmissions). Examines at most
    /// [`HALF_OPEN_SCAN_MAX`] entries of the half-open list. True if one was dropped.
    fn evict_half_open(&mut self, port: u16) -> bool {
        let scan = self.core.half_open.len().min(HALF_OPEN_SCAN_MAX);
        for _ in 0..scan {
            let Some(slot) = self.core.half_open.pop() else {
                break;
            };
            let Some(id) = self.conns.id_at_slot(slot) else {
                continue;
            };
            let Some(c) = self.conns.get(id) else {
                continue;
            };
            let half_open =
                c.role == Role::Passive && !c.announced && c.tcp.state() == TcpState::SynReceived;
            if !half_open {
                // Its handshake completed (or the slot holds another connection now).
                continue;
            }
            if c.backlog_port != Some(port) {
                self.core.half_open.push(slot);
                continue;
            }
            self.remove(id);
            self.core.counters.tcp_half_open_evicted += 1;
            return true;
        }
        false
    }
}
