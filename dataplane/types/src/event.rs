//! Asynchronous events (verbs section 8.3.3, figures 24, 25 and 37).

use crate::{CqId, QpId, SrqId, TermCode};

/// The resource an asynchronous event is affiliated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// A queue pair.
    Qp(QpId),
    /// A completion queue.
    Cq(CqId),
    /// A shared receive queue.
    Srq(SrqId),
    /// The whole engine (RNIC).
    Rnic,
}

/// Event identifiers of verbs figure 37 (numbered as in `seed-inventory.md` section 4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncEventKind {
    /// 1: the stream finished Closing and no SQ WQE was flushed.
    LlpCloseComplete,
    /// 2: a Terminate was received (its code is attached).
    TerminateReceived(TermCode),
    /// 3: TCP RST received.
    LlpConnectionReset,
    /// 4: retransmission or keepalive timeout.
    LlpConnectionLost,
    /// 5-7: segment size invalid, CRC error, bad FPDU (code attached).
    LlpIntegrityError(TermCode),
    /// 8-15: a remote operation error found in an inbound message (code attached).
    RemoteOperationError(TermCode),
    /// 16-20, 23-32: a protection error found in an inbound message (code attached).
    ProtectionError(TermCode),
    /// 21: a segment arrived while the QP was Closing.
    BadClose,
    /// 22: the LLP closed while work was outstanding.
    BadLlpClose,
    /// 33-34: CQ overflow or operation error during a completion.
    CqError,
    /// 35: error pulling a WQE from the SRQ.
    SrqError,
    /// 36: local catastrophic error.
    LocalQpCatastrophic,
    /// 37: CQ overflow detected (affiliated with the CQ).
    CqOverflow,
    /// 39: SRQ limit reached (one shot).
    SrqLimitReached,
    /// 40: QP RQ limit reached (one shot).
    QpRqLimitReached,
    /// The QP entered the Error state (referenced by verbs 6.2.3 but not listed).
    QpErrorStateEntered,
}

/// An asynchronous event record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncEvent {
    /// Affiliated resource.
    pub resource: EventResource,
    /// What happened.
    pub kind: AsyncEventKind,
}
