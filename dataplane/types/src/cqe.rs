//! Work completions (verbs section 9.3.2.1) and their status (section 9.5.2, figure 36).

use crate::{QpId, Stag};

/// Completion status. Names follow verbs figure 36; the numeric values are ours and part
/// of the shared-memory ABI, so they never change once assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// The operation succeeded.
    Success = 0,
    /// The WR was outstanding when the QP entered Error.
    Flushed = 1,
    /// WQE format error (impossible opcode, inconsistent modifiers).
    InvalidWqe = 2,
    /// QP-related error while processing.
    LocalQpCatastrophic = 3,
    /// A Terminate was received that relates to this WR.
    RemoteTermination = 4,
    /// Local STag not valid / not allowed for the operation.
    InvalidStag = 5,
    /// Local SGE outside its region (including receive buffer too small).
    BaseBounds = 6,
    /// Local region lacks the right.
    AccessViolation = 7,
    /// PD (region) or QP (window) mismatch.
    InvalidPd = 8,
    /// Tagged offset plus length wraps.
    WrapError = 9,
    /// Incoming Send with Invalidate named an STag of another PD or without remote rights.
    InvalidateStagInvalid = 10,
    /// RDMA Read posted with ORD = 0.
    ZeroOrd = 11,
    /// Fast-Register on a QP without the privilege.
    QpNotPrivileged = 12,
    /// Bind / Fast-Register on an STag that is not Invalid.
    StagNotInvalid = 13,
    /// Fast-Register length or layout not supported.
    InvalidLength = 14,
    /// Fast-Register or Bind asked for an impossible combination of rights.
    InvalidAccessRights = 15,
    /// Bind: the region STag is invalid.
    InvalidRegion = 16,
    /// Bind: the window STag is invalid.
    InvalidWindow = 17,
    /// Fast-Register: VA inconsistent.
    InvalidVa = 18,
    /// Bind failed for another reason.
    MwBindError = 19,
    /// A protection error was found at the remote peer (reported through Terminate).
    RemoteAccessError = 20,
    /// The remote peer reported an operation error.
    RemoteOperationError = 21,
}

impl WcStatus {
    /// Every status, for ABI round-trip tests.
    pub const ALL: [WcStatus; 22] = [
        WcStatus::Success,
        WcStatus::Flushed,
        WcStatus::InvalidWqe,
        WcStatus::LocalQpCatastrophic,
        WcStatus::RemoteTermination,
        WcStatus::InvalidStag,
        WcStatus::BaseBounds,
        WcStatus::AccessViolation,
        WcStatus::InvalidPd,
        WcStatus::WrapError,
        WcStatus::InvalidateStagInvalid,
        WcStatus::ZeroOrd,
        WcStatus::QpNotPrivileged,
        WcStatus::StagNotInvalid,
        WcStatus::InvalidLength,
        WcStatus::InvalidAccessRights,
        WcStatus::InvalidRegion,
        WcStatus::InvalidWindow,
        WcStatus::InvalidVa,
        WcStatus::MwBindError,
        WcStatus::RemoteAccessError,
        WcStatus::RemoteOperationError,
    ];

    /// From the ABI value.
    pub fn from_u8(v: u8) -> Option<WcStatus> {
        WcStatus::ALL.get(v as usize).copied()
    }
}

/// Operation type of a work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// Send.
    Send = 0,
    /// Send with Solicited Event.
    SendSe = 1,
    /// Send with Invalidate.
    SendInv = 2,
    /// Send with SE and Invalidate.
    SendSeInv = 3,
    /// RDMA Write.
    Write = 4,
    /// RDMA Read.
    Read = 5,
    /// RDMA Read with Invalidate Local STag.
    ReadInv = 6,
    /// Bind Memory Window.
    Bind = 7,
    /// Fast-Register.
    FastReg = 8,
    /// Invalidate Local STag.
    LocalInv = 9,
    /// Receive (an incoming Send of any type).
    Recv = 10,
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// The WR's identifier.
    pub wr_id: u64,
    /// Status; on error only `wr_id`, `qp` and `opcode` are meaningful.
    pub status: WcStatus,
    /// Operation type.
    pub opcode: WcOpcode,
    /// Bytes received (Receive only).
    pub byte_len: u32,
    /// QP the WR was posted on (for SRQ receives: the QP that consumed it).
    pub qp: QpId,
    /// The STag the incoming Send with Invalidate invalidated.
    pub invalidated: Option<Stag>,
    /// The incoming message carried the Solicited Event flag.
    pub solicited: bool,
}

impl Cqe {
    /// A placeholder completion (zero id, Success, Send, nothing else): what a buffer of
    /// completions is filled with before a poll writes into it.
    pub const EMPTY: Cqe = Cqe {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        qp: QpId(0),
        invalidated: None,
        solicited: false,
    };
}
