//! The control thread's view of a dataplane core's service ([`CoreLink`]), and how the
//! service's errors become protocol errors.

use std::time::Duration;

use iwarp_engine::CmError;
use iwarp_shm_service::{ServiceError, ServiceHandle, ServiceNotice, ServiceReply, ServiceRequest};
use iwarp_shm_socket::{ErrorCode, ErrorReply};
use iwarp_types::VerbError;

/// One core's service as the control thread uses it. [`ServiceHandle`] is the real one;
/// tests use a fake.
pub trait CoreLink: Send {
    /// Sends `req` and waits at most `timeout` for its reply.
    fn call(
        &mut self,
        req: ServiceRequest,
        timeout: Duration,
    ) -> Result<ServiceReply, ServiceError>;
    /// The oldest unread notice.
    fn poll_notice(&mut self) -> Option<ServiceNotice>;
}

impl CoreLink for ServiceHandle {
    fn call(
        &mut self,
        req: ServiceRequest,
        timeout: Duration,
    ) -> Result<ServiceReply, ServiceError> {
        ServiceHandle::call(self, req, timeout)
    }

    fn poll_notice(&mut self) -> Option<ServiceNotice> {
        ServiceHandle::poll_notice(self)
    }
}

/// The protocol code of an engine verb error.
pub fn verb_code(e: VerbError) -> ErrorCode {
    use ErrorCode as C;
    use VerbError as V;
    match e {
        V::InsufficientResources => C::InsufficientResources,
        V::InvalidPd => C::InvalidPd,
        V::PdInUse | V::CqInUse | V::SrqInUse => C::InUse,
        V::InvalidCq => C::InvalidCq,
        V::CqTooLarge | V::CqShrinkFailed => C::InvalidCqSize,
        V::InvalidQp => C::InvalidQp,
        V::InvalidSrq => C::InvalidSrq,
        V::LimitOutOfRange => C::LimitOutOfRange,
        V::TooManyWrsRequested | V::TooManySges | V::TooManyWrsPosted | V::QueueShrinkFailed => {
            C::TooManyWrsOrSges
        }
        V::OrdTooLarge | V::IrdTooLarge => C::InvalidIrdOrd,
        V::InvalidStateTransition | V::CannotChangeAttribute => C::InvalidStateTransition,
        V::InvalidQpState => C::InvalidQpState,
        V::RqAssociatedWithSrq | V::InvalidModifier => C::InvalidArgument,
        V::InvalidStag => C::InvalidStag,
        V::InvalidLength => C::InvalidLength,
        V::InvalidVa => C::InvalidVa,
        V::InvalidAccessRights => C::InvalidAccessRights,
        V::MwStillBound => C::MwStillBound,
        V::InvalidConnection => C::InvalidConnection,
    }
}

/// The protocol code of a connection-management error.
pub fn cm_code(e: CmError) -> ErrorCode {
    match e {
        CmError::Listen(_) | CmError::TupleInUse => ErrorCode::AddressInUse,
        CmError::InvalidQp => ErrorCode::InvalidQp,
        CmError::InvalidConnection => ErrorCode::InvalidConnection,
        CmError::InvalidState => ErrorCode::InvalidCmState,
        CmError::NoRoute => ErrorCode::NoRoute,
        CmError::NoPort | CmError::TableFull => ErrorCode::InsufficientResources,
        CmError::InvalidParams => ErrorCode::InvalidArgument,
    }
}

/// A service error as the client sees it; `what` names the operation.
pub fn service_error(what: &str, core: usize, e: ServiceError) -> ErrorReply {
    let code = match e {
        ServiceError::Timeout | ServiceError::QueueFull => ErrorCode::CoreTimeout,
        ServiceError::CoreGone => ErrorCode::ShuttingDown,
        ServiceError::Verb(v) => verb_code(v),
        ServiceError::Cm(c) => cm_code(c),
        ServiceError::Ring(_) | ServiceError::UnknownClient => ErrorCode::Internal,
        ServiceError::TableFull => ErrorCode::LimitReached,
        ServiceError::Invalid(_) => ErrorCode::InvalidArgument,
        ServiceError::CloseUnderway => ErrorCode::CloseInProgress,
    };
    ErrorReply::new(code, format!("{what} on core {core}: {e}"))
}

/// The error type of handlers.
pub type Error = ErrorReply;

/// Shorthand for an error answer.
pub fn err(code: ErrorCode, msg: impl Into<String>) -> ErrorReply {
    ErrorReply::new(code, msg)
}

/// The answer for a handle the client does not own.
pub fn no_such(kind: &str, h: u32) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::NoSuchObject,
        format!("no {kind} {h:#x} belongs to this client"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_codes() {
        assert_eq!(verb_code(VerbError::PdInUse), ErrorCode::InUse);
        assert_eq!(verb_code(VerbError::OrdTooLarge), ErrorCode::InvalidIrdOrd);
        assert_eq!(cm_code(CmError::NoRoute), ErrorCode::NoRoute);
        let e = service_error("AllocPd", 1, ServiceError::Timeout);
        assert_eq!(e.code, ErrorCode::CoreTimeout);
        assert!(e.message.contains("core 1"));
        assert_eq!(
            service_error("x", 0, ServiceError::TableFull).code,
            ErrorCode::LimitReached
        );
    }
}
