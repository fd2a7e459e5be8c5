//! One LLP connection of the engine: TCP, MPA and (once associated) a QP, with the
//! connection-management state around them.

use core::net::Ipv4Addr;

use iwarp_mpa::MpaConn;
use iwarp_rdma::TxUlpdu;
use iwarp_tcp::{FourTuple, TcpConn};
use iwarp_types::{Instant, QpId};

use crate::event::{ConnectFailure, PrivateData};

/// Which side opened the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// We connected (TCP active open, MPA Initiator).
    Active,
    /// A listener accepted it (TCP passive open, MPA Responder).
    Passive,
}

/// Connection-management state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// TCP three-way handshake in progress.
    TcpHandshake,
    /// MPA Request/Reply exchange in progress.
    MpaHandshake,
    /// Passive: the ConnectRequest event was delivered; waiting for accept or reject.
    AwaitAccept,
    /// Passive: accepted; waiting for MPA to enter RDMA mode.
    Accepted,
    /// Passive: rejected; the Reply with the Reject flag is on its way, the FIN follows
    /// once the peer acknowledged it.
    Rejecting,
    /// RDMA mode: the QP is associated.
    Rdma,
    /// Tearing down; removed once TCP is Closed.
    Closing,
}

/// Parameters of an active open (RFC 6581: IRD/ORD and peer-to-peer mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectParams {
    /// Private data for the MPA Request.
    pub private_data: PrivateData,
    /// Our IRD (inbound Read Requests we accept).
    pub ird: u32,
    /// Our ORD (outbound Read Requests we issue).
    pub ord: u32,
    /// Ask for peer-to-peer mode (an RTR is sent by us, the Initiator).
    pub p2p: bool,
}

/// Parameters of `accept`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceptParams {
    /// Private data for the MPA Reply.
    pub private_data: PrivateData,
    /// Our IRD.
    pub ird: u32,
    /// Our ORD.
    pub ord: u32,
}

/// A connection-table entry.
pub struct Conn {
    /// The 4-tuple (our side local).
    pub tuple: FourTuple,
    /// TCP.
    pub tcp: TcpConn,
    /// MPA, queueing RDMA segment descriptors.
    pub mpa: MpaConn<TxUlpdu>,
    /// The associated QP (given at `connect` or `accept`).
    pub qp: Option<QpId>,
    /// Active or passive.
    pub role: Role,
    /// Connection-management state.
    pub state: ConnState,
    /// IP next hop (the peer or the gateway).
    pub next_hop: Ipv4Addr,
    /// ARP cache slot of the next hop last time (O(1) lookup hint).
    pub arp_hint: usize,
    /// Passive: the listening port whose backlog slot this connection holds.
    pub backlog_port: Option<u16>,
    /// Active: we asked for peer-to-peer mode (`ConnectParams::p2p`; the rest of the
    /// parameters went into the MPA Request and are not kept).
    pub p2p: bool,
    /// `Established` was reported (so a `Disconnected` is owed at the end).
    pub established: bool,
    /// The QP is associated with this connection's LLP stream (`qp_establish` done and
    /// the LLP not yet reported gone): ULPDUs flow between MPA and the QP.
    pub qp_ready: bool,
    /// The final CM event (`Rejected`) was already reported.
    pub reported: bool,
    /// Passive: the `ConnectRequest` event was queued (the caller knows the connection).
    pub announced: bool,
    /// Why the connection failed before RDMA mode, once known.
    pub failure: Option<ConnectFailure>,
    /// Highest stream offset TCP has taken from MPA (sent at least once).
    pub tx_sent_max: u64,
    /// The QP asked for a graceful close; the FIN goes once the QP has nothing to send.
    pub close_requested: bool,
    /// When an engine-initiated close that has not completed is given up (RST, and the
    /// QP learns the LLP timed out): bounds FIN_WAIT_2 and Closing (verbs 6.2.3, 6.2.5).
    pub close_deadline: Option<Instant>,
    /// Active, RDMA mode: the next nudge check (`EngineConfig::initiator_nudge_ms`).
    pub nudge_at: Option<Instant>,
    /// Nudge checks done.
    pub nudge_checks: u8,
    /// Woken from the MPA pool's wait list with a ring set aside for it (taken or given
    /// up at its next pump).
    pub ring_promised: bool,
    /// FPDUs queued since its turn on an FPDU ring began (`EngineCore::pump`).
    pub ring_turn_fpdus: u16,
}

impl core::fmt::Debug for Conn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conn")
            .field("tuple", &self.tuple)
            .field("tcp", &self.tcp.state())
            .field("mpa", &self.mpa.state())
            .field("qp", &self.qp)
            .field("role", &self.role)
            .field("state", &self.state)
            .finish()
    }
}

impl Default for ConnectParams {
    /// No private data, IRD = ORD = 16, no peer-to-peer mode.
    fn default() -> ConnectParams {
        ConnectParams {
            private_data: PrivateData::EMPTY,
            ird: 16,
            ord: 16,
            p2p: false,
        }
    }
}

impl Default for AcceptParams {
    /// No private data, IRD = ORD = 16.
    fn default() -> AcceptParams {
        AcceptParams {
            private_data: PrivateData::EMPTY,
            ird: 16,
            ord: 16,
        }
    }
}

impl Conn {
    /// A new entry in the TCP handshake.
    pub fn new(
        tuple: FourTuple,
        tcp: TcpConn,
        mpa: MpaConn<TxUlpdu>,
        qp: Option<QpId>,
        role: Role,
        next_hop: Ipv4Addr,
        params: ConnectParams,
    ) -> Conn {
        Conn {
            tuple,
            tcp,
            mpa,
            qp,
            role,
            state: ConnState::TcpHandshake,
            next_hop,
            arp_hint: 0,
            backlog_port: None,
            p2p: params.p2p,
            established: false,
            qp_ready: false,
            reported: false,
            announced: false,
            failure: None,
            tx_sent_max: 0,
            close_requested: false,
            close_deadline: None,
            nudge_at: None,
            nudge_checks: 0,
            ring_promised: false,
            ring_turn_fpdus: 0,
        }
    }

    /// The peer's IPv4 address.
    pub fn remote_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.tuple.remote_ip)
    }

    /// The QP inbound ULPDUs go to, once associated.
    pub fn rx_qp(&self) -> Option<QpId> {
        if self.qp_ready {
            self.qp
        } else {
            None
        }
    }

    /// Bytes of FPDUs queued in MPA that TCP has not sent yet. FPDUs a responder's MPA
    /// still holds back (RFC 5044 7.1.2) count as unsent.
    pub fn tx_unsent_bytes(&self) -> u64 {
        let sent = self.tx_sent_max.max(self.tcp.acked_offset());
        self.mpa.queued_end_offset().saturating_sub(sent)
    }

    /// The earliest deadline of the connection: TCP's timers, MPA's handshake deadline,
    /// the engine's close deadline and the next nudge check.
    pub fn deadline(&self) -> Option<Instant> {
        fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, None) => x,
                (None, y) => y,
            }
        }
        let t = earlier(self.tcp.poll_timeout(), self.mpa_deadline());
        earlier(earlier(t, self.close_deadline), self.nudge_at)
    }

    /// MPA's handshake deadline (`mpa.handshake_timeout_ms`: the wait for the peer's
    /// Request or Reply). An active open runs it only once TCP is connected: before,
    /// TCP's own SYN schedule (`tcp.syn_retries`) bounds the connect. A passive open
    /// runs it from the SYN, so a half-open connection holds a backlog slot no longer
    /// than that (the peer's next SYN makes a new one). It restarts when TCP connects.
    pub fn mpa_deadline(&self) -> Option<Instant> {
        if self.state == ConnState::TcpHandshake && self.role == Role::Active {
            None
        } else {
            self.mpa.poll_timeout()
        }
    }

    /// Starts a graceful TCP close (FIN after everything queued) that must complete by
    /// `deadline`.
    pub fn close(&mut self, now: Instant, deadline: Instant) {
        self.tcp.close(now);
        self.state = ConnState::Closing;
        self.close_deadline.get_or_insert(deadline);
    }

    /// The QP outbound ULPDUs come from (same rule as [`Conn::rx_qp`]).
    pub fn tx_qp(&self) -> Option<QpId> {
        self.rx_qp()
    }
}
