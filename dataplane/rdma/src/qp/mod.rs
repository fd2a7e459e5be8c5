//! Queue pairs: send and receive queues, the RDMA Read queues (ORQ bounded by ORD, IRQ
//! bounded by IRD), the DDP receive contexts, the five verbs states and the Terminate.
//!
//! A `Qp` never touches the PD/CQ/SRQ/memory tables itself: every call that needs them
//! receives a `Ctx` (`crate::ctx`) built by the [`Rnic`](crate::Rnic) from its tables.
//!
//! File split (siw-like): `sq` (send queue and retirement), `sq_ring` (the fixed ring the
//! send queue keeps its WQEs in, reused in place), `tx` (outbound segments),
//! `rx` (inbound dispatch, Sends, Writes), `rx_read` (Read Requests and Responses),
//! `term` (Terminate, error entry, flush), `llp` (LLP events and state changes).

mod attr;
mod fill;
mod llp;
mod revalidate;
mod rx;
mod rx_read;
pub(crate) mod sq;
mod sq_ring;
mod term;
mod tx;

use std::collections::VecDeque;

use iwarp_types::{ConnId, PdId, QpId, QpState, RecvWr, Stag, WcStatus};

pub use attr::{
    LlpEvent, LlpParams, LlpRequest, LlpRole, QpAttr, QpCounters, QpInfo, QpModify, RtrKind,
    TermRecord,
};
pub(crate) use llp::QpLimits;
pub(crate) use term::TermBuf;
pub use tx::TxUlpdu;

use crate::ctx::Loc;
use sq::SendQueue;

/// Untagged queue numbers (RFC 5040 section 3.1).
pub(crate) const QN_SEND: usize = 0;
/// Queue number of RDMA Read Requests.
pub(crate) const QN_READ: usize = 1;
/// Queue number of Terminate messages.
pub(crate) const QN_TERM: usize = 2;

/// One outbound RDMA Read Request waiting for its Read Response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OrqEntry {
    /// The Read WQE (`None`: a Read RTR).
    pub seq: Option<u64>,
    /// Data sink STag the Response must carry.
    pub stag: Stag,
    /// Tagged offset the next Response segment must carry.
    pub next_to: u64,
    /// Read size.
    pub size: u32,
    /// Bytes placed so far.
    pub placed: u32,
}

/// One inbound RDMA Read Request whose Response is (being) sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IrqEntry {
    /// Data sink STag (copied uninterpreted into the Response).
    pub sink_stag: Stag,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// Read size.
    pub size: u32,
    /// Source memory (validated when the Request arrived).
    pub loc: Loc,
    /// Bytes handed out so far.
    pub sent: u32,
    /// Data source STag (re-validated before each Response segment).
    pub src_stag: Stag,
    /// Data source tagged offset of the first byte.
    pub src_to: u64,
    /// MSN of the Read Request (for the Terminate's copy of its header).
    pub msn: u32,
}

/// The untagged (Send) message being received.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxSend {
    /// The receive WR it consumes.
    pub wr: RecvWr,
    /// PD the receive SGEs are checked against (the SRQ's PD for SRQ receives).
    pub pd: PdId,
    /// MSN of the message.
    pub msn: u32,
    /// Bytes placed so far (the next MO).
    pub received: u32,
}

/// Why the QP left RTS for Terminate (decides the async events of verbs 6.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TermCause {
    /// Modify QP to Terminate.
    Modify,
    /// A WR completed in error (reported through the CQ).
    Completion,
    /// The peer's Terminate was received.
    Received,
    /// An error found in an inbound segment, not reported through a CQE.
    Local,
    /// An error the LLP (MPA, TCP) found on the stream: reported as an LLP integrity
    /// error (verbs figure 37, events 5-7) whatever the Terminate's code.
    Llp,
}

/// A queue pair.
pub(crate) struct Qp {
    pub id: QpId,
    /// What its completions carry in `Cqe::qp` (its id unless the owner named it
    /// otherwise, [`Rnic::set_qp_completion_id`](crate::Rnic::set_qp_completion_id)).
    pub cqe_qp: QpId,
    pub attr: QpAttr,
    pub state: QpState,
    pub conn: Option<ConnId>,
    pub sq: SendQueue,
    pub rq: VecDeque<RecvWr>,
    pub rq_depth: usize,
    /// Outbound Read Requests in flight (bounded by the negotiated ORD).
    pub orq: VecDeque<OrqEntry>,
    pub orq_cap: usize,
    /// Inbound Read Requests not fully answered (bounded by the negotiated IRD).
    pub irq: VecDeque<IrqEntry>,
    pub irq_cap: usize,
    /// ORD / IRD in force on the stream.
    pub ord: u32,
    pub ird: u32,
    /// Next MSN to send, per untagged queue (the first message carries 1).
    pub tx_msn: [u32; 3],
    /// Next MSN expected, per untagged queue.
    pub rx_msn: [u32; 3],
    /// Outbound message being segmented.
    pub tx_cur: Option<tx::TxCur>,
    /// Inbound Send being received.
    pub rx_send: Option<RxSend>,
    /// Terminate to send (built when the error was found).
    pub term_tx: Option<TermBuf>,
    /// The Terminate was handed to MPA.
    pub term_sent: bool,
    /// The Terminate was acknowledged by TCP.
    pub term_acked: bool,
    /// Terminate sent or received (Query QP).
    pub term_record: Option<TermRecord>,
    /// The peer's Terminate received after this end sent one (Query QP).
    pub term_peer_record: Option<TermRecord>,
    pub term_cause: Option<TermCause>,
    /// SQ WQE a received Terminate relates to, and the status it completes with.
    pub term_related: Option<(u64, WcStatus)>,
    /// Pending request to the LLP.
    pub llp_request: Option<LlpRequest>,
    /// Zero-length RTR still to send.
    pub rtr_tx: Option<RtrKind>,
    /// RTR expected from the peer (Responder); no FPDU is sent before one arrives.
    pub rtr_expected: Option<RtrKind>,
    /// An inbound RTR was recognised and not yet taken by the engine.
    pub rtr_received: bool,
    /// Responder: nothing may be sent before the first inbound FPDU.
    pub hold_tx: bool,
    /// A zero-length RDMA Write (a nudge) to send between two messages.
    pub nudge_tx: bool,
    /// Graceful local close requested: go Closing once the SQ and IRQ drained.
    pub close_when_drained: bool,
    /// QP RQ Limit (QPs with an SRQ; verbs 6.3.8).
    pub rq_limit: u32,
    /// The QP RQ Limit event is armed (one shot).
    pub rq_limit_armed: bool,
    pub counters: QpCounters,
}

impl Qp {
    /// A new QP in Idle; every queue allocated here.
    pub(crate) fn new(id: QpId, attr: QpAttr, max_ord: u32, max_ird: u32) -> Qp {
        let rq_depth = if attr.srq.is_some() {
            0
        } else {
            attr.rq_depth as usize
        };
        let orq_cap = max_ord.max(1) as usize;
        let irq_cap = max_ird.max(1) as usize;
        Qp {
            id,
            cqe_qp: id,
            attr,
            state: QpState::Idle,
            conn: None,
            sq: SendQueue::new(attr.sq_depth as usize),
            rq: VecDeque::with_capacity(rq_depth),
            rq_depth,
            orq: VecDeque::with_capacity(orq_cap),
            orq_cap,
            irq: VecDeque::with_capacity(irq_cap),
            irq_cap,
            ord: attr.ord,
            ird: attr.ird,
            tx_msn: [1; 3],
            rx_msn: [1; 3],
            tx_cur: None,
            rx_send: None,
            term_tx: None,
            term_sent: false,
            term_acked: false,
            term_record: None,
            term_peer_record: None,
            term_cause: None,
            term_related: None,
            llp_request: None,
            rtr_tx: None,
            rtr_expected: None,
            rtr_received: false,
            hold_tx: false,
            nudge_tx: false,
            close_when_drained: false,
            rq_limit: 0,
            rq_limit_armed: false,
            counters: QpCounters::default(),
        }
    }

    /// Resets the stream state (DDP MSNs, receive contexts, Terminate) for a new stream
    /// (verbs 6.2.1.2: Idle to RTS resets RDMAP/DDP state).
    pub(crate) fn reset_stream(&mut self) {
        self.tx_msn = [1; 3];
        self.rx_msn = [1; 3];
        self.tx_cur = None;
        self.rx_send = None;
        self.orq.clear();
        self.irq.clear();
        self.term_tx = None;
        self.term_sent = false;
        self.term_acked = false;
        self.term_record = None;
        self.term_peer_record = None;
        self.term_cause = None;
        self.term_related = None;
        self.llp_request = None;
        self.rtr_tx = None;
        self.rtr_expected = None;
        self.rtr_received = false;
        self.hold_tx = false;
        self.nudge_tx = false;
        self.close_when_drained = false;
    }

    /// Query QP.
    pub(crate) fn info(&self) -> QpInfo {
        let mut attr = self.attr;
        attr.ord = self.ord;
        attr.ird = self.ird;
        attr.sq_depth = self.sq.depth as u32;
        attr.rq_depth = self.rq_depth as u32;
        let terminal = matches!(self.state, QpState::Terminate | QpState::Error);
        QpInfo {
            id: self.id,
            state: self.state,
            attr,
            conn: self.conn,
            terminate: if terminal { self.term_record } else { None },
            terminate_received: if terminal {
                self.term_peer_record
            } else {
                None
            },
            rq_limit: self.rq_limit,
            rq_limit_armed: self.rq_limit_armed,
        }
    }
}
