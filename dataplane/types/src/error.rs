//! Immediate errors of verbs (verbs section 9.5.1). A verb that fails leaves its
//! resource unchanged.

use core::fmt;

/// Immediate verb error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerbError {
    /// A table or queue is full.
    InsufficientResources,
    /// No such PD.
    InvalidPd,
    /// The PD is still used by a QP, region, window or SRQ.
    PdInUse,
    /// No such CQ.
    InvalidCq,
    /// A work queue still reports to the CQ.
    CqInUse,
    /// CQ depth above the engine's limit.
    CqTooLarge,
    /// The CQ holds more entries than the requested new size.
    CqShrinkFailed,
    /// No such QP.
    InvalidQp,
    /// No such SRQ.
    InvalidSrq,
    /// QPs still use the SRQ.
    SrqInUse,
    /// Limit above the queue size.
    LimitOutOfRange,
    /// Queue depth above the engine's limit.
    TooManyWrsRequested,
    /// More SGEs than allowed.
    TooManySges,
    /// ORD above the engine's limit.
    OrdTooLarge,
    /// IRD above the engine's limit.
    IrdTooLarge,
    /// Transition not in the QP state diagram.
    InvalidStateTransition,
    /// The attribute cannot change in this state.
    CannotChangeAttribute,
    /// Posting to a full queue.
    TooManyWrsPosted,
    /// Posting in a state that forbids it.
    InvalidQpState,
    /// The QP's receives come from an SRQ.
    RqAssociatedWithSrq,
    /// Malformed modifier (for example, an RDMA Read with more than one local SGE).
    InvalidModifier,
    /// No such STag index (or the STag kind does not fit the verb).
    InvalidStag,
    /// Region outside its memory arena, or zero/overflowing length.
    InvalidLength,
    /// Virtual address inconsistent.
    InvalidVa,
    /// Impossible combination of rights (verbs figure 18).
    InvalidAccessRights,
    /// Windows are still bound to the region or the QP.
    MwStillBound,
    /// No such LLP connection, or it is not ready.
    InvalidConnection,
    /// A work queue or SRQ holds more WRs than the requested new size (Modify S-RQ,
    /// Modify QP "Shrink failed").
    QueueShrinkFailed,
}

impl fmt::Display for VerbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for VerbError {}
