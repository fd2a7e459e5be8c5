//! The library's error type.

use std::fmt;
use std::io;

use iwarp_shm_socket::{ErrorCode, ErrorReply};

/// Result of a verbs call.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a verbs call failed.
#[derive(Debug)]
pub enum Error {
    /// The daemon refused the request (nothing changed in the daemon).
    Daemon(ErrorReply),
    /// The daemon did not answer within the context's timeout
    /// ([`crate::Context::set_timeout`]); the request may or may not have been done.
    Timeout,
    /// The daemon is gone (it shut down or its socket closed): every object of this
    /// context is gone with it. Every later call, post and poll returns this.
    DaemonGone,
    /// The daemon is up but serves as many clients as it may (`control.max_clients`);
    /// it answered `DaemonFull` instead of `Welcome` (the message says more). Try again
    /// later.
    DaemonFull(String),
    /// The ring has no free slot (post): poll completions, then post again.
    QueueFull,
    /// Non-blocking read of an event queue or channel with nothing in it.
    WouldBlock,
    /// An argument is out of range or inconsistent (the message says which).
    InvalidArgument(String),
    /// The daemon sent something this library does not expect (a reply of the wrong
    /// kind, a ring that does not match its description, a corrupt ring index).
    Protocol(String),
    /// A system call failed.
    Io(io::Error),
}

impl Error {
    /// The daemon's error code, if the daemon refused the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Daemon(r) => Some(r.code),
            Error::DaemonFull(_) => Some(ErrorCode::DaemonFull),
            _ => None,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    pub(crate) fn protocol(msg: impl Into<String>) -> Error {
        Error::Protocol(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Daemon(r) => write!(f, "iwarpd refused: {r}"),
            Error::Timeout => f.write_str("iwarpd did not answer in time"),
            Error::DaemonGone => f.write_str("iwarpd is gone"),
            Error::DaemonFull(m) => write!(f, "iwarpd is full: {m}"),
            Error::QueueFull => f.write_str("work queue full"),
            Error::WouldBlock => f.write_str("no event"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Daemon(r) => Some(r),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<rustix::io::Errno> for Error {
    fn from(e: rustix::io::Errno) -> Error {
        Error::Io(e.into())
    }
}

impl From<ErrorReply> for Error {
    fn from(r: ErrorReply) -> Error {
        match r.code {
            ErrorCode::DaemonFull => Error::DaemonFull(r.message),
            _ => Error::Daemon(r),
        }
    }
}
