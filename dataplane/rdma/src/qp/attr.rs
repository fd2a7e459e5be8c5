//! Public attribute, parameter and report types of a queue pair (verbs 9.2.5, RFC 6581).

use iwarp_types::{ConnId, CqId, PdId, QpId, QpState, SrqId, TermCode};
use iwarp_wire::rdmap::MAX_TERMINATE_LEN;

/// Create QP attributes (verbs 9.2.5.1). Every attribute must be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    /// Protection domain of the QP.
    pub pd: PdId,
    /// CQ of the send queue.
    pub send_cq: CqId,
    /// CQ of the receive queue (may equal `send_cq`).
    pub recv_cq: CqId,
    /// Shared receive queue; `rq_depth` and `max_recv_sge` are then ignored.
    pub srq: Option<SrqId>,
    /// Maximum outstanding send-queue WRs.
    pub sq_depth: u32,
    /// Maximum outstanding receive-queue WRs.
    pub rq_depth: u32,
    /// Maximum SGEs per Send-type or RDMA Write WR.
    pub max_send_sge: u32,
    /// Maximum SGEs per Receive WR.
    pub max_recv_sge: u32,
    /// Outbound RDMA Read Requests outstanding at most (ORD).
    pub ord: u32,
    /// Inbound RDMA Read Requests outstanding at most (IRD).
    pub ird: u32,
    /// Inbound RDMA Read Requests are enabled.
    pub inbound_read: bool,
    /// Inbound RDMA Writes and RDMA Read Responses are enabled.
    pub inbound_write: bool,
    /// Bind Memory Window WRs are enabled.
    pub bind_enabled: bool,
    /// STag 0 and Fast-Register are enabled (privileged consumers only).
    pub privileged: bool,
    /// Fast-Register is enabled without STag 0: for a privileged intermediary that has
    /// verified the consumer's right to every buffer a Fast-Register can name (verbs R
    /// 8.1.2 item 4; the shared-memory daemon resolves a FastReg's arena through the
    /// client's own arenas). `privileged` implies it.
    pub fast_reg: bool,
}

impl QpAttr {
    /// The smallest QP in `pd` with both queues on `cq`: no SRQ, queues one WR deep, one
    /// SGE per WR, ORD and IRD 1, no inbound RDMA Read or Write, no Bind, unprivileged.
    /// Set what differs with struct update syntax:
    /// `QpAttr { sq_depth: 64, inbound_write: true, ..QpAttr::new(pd, cq) }`.
    pub const fn new(pd: PdId, cq: CqId) -> QpAttr {
        QpAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            sq_depth: 1,
            rq_depth: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            ord: 1,
            ird: 1,
            inbound_read: false,
            inbound_write: false,
            bind_enabled: false,
            privileged: false,
            fast_reg: false,
        }
    }
}

/// Modify QP inputs (verbs 9.2.5.3). `None` leaves an attribute unchanged; `state: None`
/// is an attribute-only change in the current state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpModify {
    /// Next state.
    pub state: Option<QpState>,
    /// New ORD.
    pub ord: Option<u32>,
    /// New IRD.
    pub ird: Option<u32>,
    /// New send-queue depth.
    pub sq_depth: Option<u32>,
    /// New receive-queue depth (not with an SRQ).
    pub rq_depth: Option<u32>,
    /// New QP RQ Limit (QPs with an SRQ only; verbs 6.3.8). A non-zero limit arms it.
    pub rq_limit: Option<u32>,
    /// Re-arm the QP RQ Limit event (allowed while already armed; verbs 6.3.8).
    pub arm_rq_limit: bool,
}

/// A Terminate message sent or received, kept for Query QP (verbs 9.2.5.2, 6.2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermRecord {
    /// The error it carried.
    pub code: TermCode,
    /// True if this end sent it; false if the peer did.
    pub local: bool,
    /// The Terminate message as on the wire after its DDP header (control word, DDP
    /// segment length, terminated DDP and RDMA headers as present); `message_len` bytes
    /// are meaningful, the rest is zero. A received one longer than this is truncated.
    pub message: [u8; MAX_TERMINATE_LEN],
    /// Meaningful bytes of `message`.
    pub message_len: u8,
}

impl TermRecord {
    /// A record of `code` with the Terminate body `message` (truncated to fit).
    pub fn new(code: TermCode, local: bool, message: &[u8]) -> TermRecord {
        let n = message.len().min(MAX_TERMINATE_LEN);
        let mut m = [0u8; MAX_TERMINATE_LEN];
        m[..n].copy_from_slice(&message[..n]);
        TermRecord {
            code,
            local,
            message: m,
            message_len: n as u8,
        }
    }

    /// The Terminate body bytes (after the DDP header).
    pub fn message(&self) -> &[u8] {
        &self.message[..usize::from(self.message_len).min(MAX_TERMINATE_LEN)]
    }
}

/// Query QP output (verbs 9.2.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInfo {
    /// QP identifier.
    pub id: QpId,
    /// Current state.
    pub state: QpState,
    /// Current attributes (depths as allocated, ORD/IRD as in force).
    pub attr: QpAttr,
    /// The LLP connection, when associated (not in Idle or Error).
    pub conn: Option<ConnId>,
    /// The Terminate sent or received (Terminate and Error states): the first one, the
    /// one that moved the QP out of RTS or Closing.
    pub terminate: Option<TermRecord>,
    /// The peer's Terminate when this end had already sent its own (Terminate and Error
    /// states): both messages stay retrievable (verbs 6.2.4, 9.2.5.2).
    pub terminate_received: Option<TermRecord>,
    /// QP RQ Limit (QPs with an SRQ; verbs 6.3.8, 9.2.5.2); 0 when none.
    pub rq_limit: u32,
    /// The QP RQ Limit event is armed.
    pub rq_limit_armed: bool,
}

/// The zero-length RTR message of RFC 6581 (peer-to-peer mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RtrKind {
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read Request (the peer answers with a zero-length Read Response).
    Read,
    /// A zero-length Send.
    Send,
}

/// This end's MPA role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LlpRole {
    /// MPA Initiator: sends the first FPDU (the RTR in peer-to-peer mode).
    Initiator,
    /// MPA Responder: sends no FPDU before it received one (RFC 5044 7.1.2).
    Responder,
}

/// What the engine negotiated for the connection the QP is associated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlpParams {
    /// Negotiated inbound Read Requests (at most the QP's IRD).
    pub ird: u32,
    /// Negotiated outbound Read Requests (at most the QP's ORD).
    pub ord: u32,
    /// This end's MPA role.
    pub role: LlpRole,
    /// Peer-to-peer RTR: the Initiator sends it on establishment, the Responder expects it.
    pub rtr: Option<RtrKind>,
}

/// What the LLP reported to the QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LlpEvent {
    /// The peer closed its direction (TCP FIN).
    PeerClosed,
    /// The connection was reset (TCP RST).
    Reset,
    /// Retransmission or keepalive timeout.
    TimedOut,
    /// The graceful close finished (both FINs exchanged and acknowledged).
    Closed,
}

/// What the QP asks of the LLP (polled by the engine with `qp_poll_llp_request`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LlpRequest {
    /// Close gracefully once everything queued is sent (TCP FIN).
    Close,
    /// Abort the connection (TCP RST) and disassociate.
    Reset,
}

/// Per-QP traffic counters. Index of the arrays: the RDMAP opcode (0..=7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCounters {
    /// DDP messages sent, by opcode (counted at the last segment).
    pub msgs_out: [u64; 8],
    /// Payload bytes sent, by opcode (first transmissions only).
    pub bytes_out: [u64; 8],
    /// DDP messages received, by opcode (counted at the last segment).
    pub msgs_in: [u64; 8],
    /// Payload bytes received and placed, by opcode.
    pub bytes_in: [u64; 8],
    /// DDP segments sent.
    pub segs_out: u64,
    /// DDP segments received.
    pub segs_in: u64,
    /// Terminate messages sent.
    pub terms_sent: u64,
    /// Terminate messages received.
    pub terms_received: u64,
    /// Inbound segments ignored because of the QP state.
    pub segs_ignored: u64,
    /// Descriptors given to `fill_ulpdu` that no longer matched a queued WR (zero-filled).
    pub stale_fills: u64,
    /// Zero-length RDMA Writes sent as nudges ([`crate::Rnic::qp_queue_nudge`]); not in
    /// `msgs_out` or `segs_out` (no ULP message).
    pub nudges_sent: u64,
}
