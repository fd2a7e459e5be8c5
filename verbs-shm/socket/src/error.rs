//! Error answers: a code for programs, a sentence for people.

use serde::{Deserialize, Serialize};

/// Why a request failed. Nothing changed in the daemon when a request fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    // Protocol and policy.
    /// The message was not a valid frame or body; it was ignored.
    BadMessage,
    /// The client speaks another protocol version (the daemon's is in the message).
    VersionMismatch,
    /// The access policy does not admit this user (`[control] allow_users/allow_groups`).
    PermissionDenied,
    /// The request needs administrator rights (iwarpctl's listings of other clients).
    NotAdmin,
    /// `Hello` was not the first message, or came twice.
    NotReady,
    /// The daemon is shutting down.
    ShuttingDown,
    /// A per-client or daemon-wide limit was reached (the message names it).
    LimitReached,
    /// No object with that handle belongs to this client.
    NoSuchObject,
    /// The object is still used by another object (a PD with QPs, a CQ with QPs, ...).
    InUse,
    /// An argument is out of range or inconsistent (the message names it).
    InvalidArgument,
    /// The memory could not be made (hugepages exhausted, memfd failed).
    OutOfMemory,
    /// A passed file descriptor was missing or of the wrong kind.
    BadFd,
    /// A dataplane core did not answer in time.
    CoreTimeout,
    /// The daemon failed internally (a bug; the message says what).
    Internal,
    // The verbs layer (verbs spec 9.5).
    /// Insufficient resources.
    InsufficientResources,
    /// Invalid PD.
    InvalidPd,
    /// Invalid CQ.
    InvalidCq,
    /// CQ too large / cannot shrink.
    InvalidCqSize,
    /// Invalid QP.
    InvalidQp,
    /// Invalid SRQ.
    InvalidSrq,
    /// Too many WRs or SGEs requested.
    TooManyWrsOrSges,
    /// IRD or ORD too large.
    InvalidIrdOrd,
    /// The QP state does not allow this transition or attribute change.
    InvalidStateTransition,
    /// The QP is in a state that does not allow the operation.
    InvalidQpState,
    /// Invalid STag.
    InvalidStag,
    /// Invalid length.
    InvalidLength,
    /// Invalid virtual address.
    InvalidVa,
    /// Invalid access rights.
    InvalidAccessRights,
    /// A memory window is still bound to the MR.
    MwStillBound,
    /// The limit is out of range.
    LimitOutOfRange,
    // Connection management.
    /// The address or port is in use.
    AddressInUse,
    /// No port of the daemon has that address, or no route to it.
    NoRoute,
    /// The CM id is not in a state that allows the operation.
    InvalidCmState,
    /// The connection is gone.
    InvalidConnection,
    /// A QP on another dataplane core than the connection, the SRQ or the CQ it needs.
    WrongCore,
    // Admission (appended: the variants above keep their wire numbers).
    /// The daemon serves `control.max_clients` clients already: try again later. Sent
    /// instead of `Welcome` (also before `Hello`, with sequence number 0).
    DaemonFull,
    /// `DestroyQp` of a QP whose graceful close is under way and not yet past its FIN:
    /// ask again shortly (the daemon resets the connection if it takes too long). The
    /// client library does; applications never see it.
    CloseInProgress,
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What kind of failure.
    pub code: ErrorCode,
    /// What happened, for people: names the field or limit at fault.
    pub message: String,
}

impl ErrorReply {
    /// An error with its sentence.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}

impl core::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorReply {}
