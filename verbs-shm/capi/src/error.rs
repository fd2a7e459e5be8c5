//! Error codes of the C API (`enum iwv_error`), the calling thread's last failure, and
//! the guards every entry point runs in: no panic crosses the FFI boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use iwarp_verbs::{Error, ErrorCode};

pub const IWV_EPERM: c_int = 1;
pub const IWV_ENOENT: c_int = 2;
pub const IWV_EIO: c_int = 5;
pub const IWV_EBADF: c_int = 9;
pub const IWV_EAGAIN: c_int = 11;
pub const IWV_ENOMEM: c_int = 12;
pub const IWV_EACCES: c_int = 13;
pub const IWV_EFAULT: c_int = 14;
pub const IWV_EBUSY: c_int = 16;
pub const IWV_EXDEV: c_int = 18;
pub const IWV_EINVAL: c_int = 22;
pub const IWV_ENOSPC: c_int = 28;
pub const IWV_EPROTO: c_int = 71;
pub const IWV_EPROTONOSUPPORT: c_int = 93;
pub const IWV_EADDRINUSE: c_int = 98;
pub const IWV_ENETUNREACH: c_int = 101;
pub const IWV_ENOTCONN: c_int = 107;
pub const IWV_ESHUTDOWN: c_int = 108;
pub const IWV_ETIMEDOUT: c_int = 110;
pub const IWV_EDAEMONGONE: c_int = 1001;
pub const IWV_EQUEUEFULL: c_int = 1002;
pub const IWV_EPANIC: c_int = 1003;
pub const IWV_EDAEMONFULL: c_int = 1004;

/// Every code with its sentence (`iwv_strerror`), NUL-terminated.
const SENTENCES: [(c_int, &CStr); 23] = [
    (IWV_EPERM, c"operation not permitted"),
    (IWV_ENOENT, c"no such object"),
    (IWV_EIO, c"iwarpd failed internally"),
    (IWV_EBADF, c"bad file descriptor"),
    (IWV_EAGAIN, c"nothing available now, try again"),
    (IWV_ENOMEM, c"out of memory or resources"),
    (IWV_EACCES, c"permission denied by iwarpd's policy"),
    (IWV_EFAULT, c"NULL pointer argument"),
    (IWV_EBUSY, c"object in use"),
    (IWV_EXDEV, c"object on another dataplane core"),
    (IWV_EINVAL, c"invalid argument, state or transition"),
    (IWV_ENOSPC, c"a configured limit is reached"),
    (
        IWV_EPROTO,
        c"protocol error (unexpected answer from iwarpd)",
    ),
    (
        IWV_EPROTONOSUPPORT,
        c"protocol version mismatch with iwarpd",
    ),
    (IWV_EADDRINUSE, c"address in use"),
    (IWV_ENETUNREACH, c"no route to the address"),
    (IWV_ENOTCONN, c"no such connection"),
    (IWV_ESHUTDOWN, c"iwarpd is shutting down"),
    (IWV_ETIMEDOUT, c"timed out"),
    (
        IWV_EDAEMONGONE,
        c"iwarpd is gone (every object is gone with it)",
    ),
    (
        IWV_EQUEUEFULL,
        c"work queue full: poll completions, then post again",
    ),
    (IWV_EPANIC, c"internal error in the iwarp-verbs C library"),
    (
        IWV_EDAEMONFULL,
        c"iwarpd is full: it serves as many clients as it may (control.max_clients); try again later",
    ),
];

/// The sentence of `code` (either sign).
pub(crate) fn strerror(code: c_int) -> &'static CStr {
    let c = code.checked_abs().unwrap_or(0);
    if c == 0 {
        return c"success";
    }
    SENTENCES
        .iter()
        .find(|(k, _)| *k == c)
        .map(|(_, s)| *s)
        .unwrap_or(c"unknown error")
}

/// The positive code of a daemon refusal.
pub(crate) fn daemon_code(code: ErrorCode) -> c_int {
    use ErrorCode::*;
    match code {
        BadMessage => IWV_EPROTO,
        VersionMismatch => IWV_EPROTONOSUPPORT,
        PermissionDenied => IWV_EACCES,
        NotAdmin => IWV_EPERM,
        NotReady => IWV_EAGAIN,
        ShuttingDown => IWV_ESHUTDOWN,
        LimitReached => IWV_ENOSPC,
        NoSuchObject => IWV_ENOENT,
        InUse | MwStillBound | CloseInProgress => IWV_EBUSY,
        OutOfMemory | InsufficientResources => IWV_ENOMEM,
        BadFd => IWV_EBADF,
        CoreTimeout => IWV_ETIMEDOUT,
        Internal => IWV_EIO,
        InvalidArgument
        | InvalidPd
        | InvalidCq
        | InvalidCqSize
        | InvalidQp
        | InvalidSrq
        | TooManyWrsOrSges
        | InvalidIrdOrd
        | InvalidStateTransition
        | InvalidQpState
        | InvalidStag
        | InvalidLength
        | InvalidVa
        | InvalidAccessRights
        | LimitOutOfRange
        | InvalidCmState => IWV_EINVAL,
        AddressInUse => IWV_EADDRINUSE,
        NoRoute => IWV_ENETUNREACH,
        InvalidConnection => IWV_ENOTCONN,
        WrongCore => IWV_EXDEV,
        DaemonFull => IWV_EDAEMONFULL,
    }
}

/// The positive code of a library error.
pub(crate) fn code_of(e: &Error) -> c_int {
    match e {
        Error::Daemon(r) => daemon_code(r.code),
        Error::Timeout => IWV_ETIMEDOUT,
        Error::DaemonGone => IWV_EDAEMONGONE,
        Error::DaemonFull(_) => IWV_EDAEMONFULL,
        Error::QueueFull => IWV_EQUEUEFULL,
        Error::WouldBlock => IWV_EAGAIN,
        Error::InvalidArgument(_) => IWV_EINVAL,
        Error::Protocol(_) => IWV_EPROTO,
        Error::Io(io) => match io.raw_os_error() {
            Some(c) if c > 0 => c,
            _ => IWV_EIO,
        },
    }
}

/// A failure of an entry point: a code and words for `iwv_last_error_message`.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A NULL pointer where one is required.
    pub(crate) fn null(what: &str) -> Failure {
        Failure::new(IWV_EFAULT, format!("{what} is NULL"))
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(IWV_EINVAL, message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            code: code_of(&e),
            message: e.to_string(),
        }
    }
}

/// What an entry point's body returns.
pub(crate) type CResult<T> = Result<T, Failure>;

thread_local! {
    static LAST: RefCell<(c_int, CString)> = RefCell::new((0, CString::default()));
}

fn record(code: c_int, message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = (-code, text));
    // SAFETY: `__errno_location` returns the calling thread's errno, always valid.
    unsafe { *libc::__errno_location() = code };
}

/// The calling thread's last failure (negative code; 0 if none).
pub(crate) fn last_code() -> c_int {
    LAST.with(|l| l.borrow().0)
}

/// The calling thread's last failure in words; valid until the thread's next failure.
pub(crate) fn last_message() -> *const c_char {
    LAST.with(|l| l.borrow().1.as_ptr())
}

fn run<T>(f: impl FnOnce() -> CResult<T>) -> CResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(Failure::new(IWV_EPANIC, format!("panic caught: {what}")))
        }
    }
}

/// Runs an entry point returning a count or 0: a failure answers its negative code.
pub(crate) fn guard(f: impl FnOnce() -> CResult<c_int>) -> c_int {
    match run(f) {
        Ok(v) => v,
        Err(e) => {
            record(e.code, &e.message);
            -e.code
        }
    }
}

/// Runs an entry point returning a new object: a failure answers NULL.
pub(crate) fn guard_new<T>(f: impl FnOnce() -> CResult<T>) -> *mut T {
    match run(f) {
        Ok(v) => Box::into_raw(Box::new(v)),
        Err(e) => {
            record(e.code, &e.message);
            std::ptr::null_mut()
        }
    }
}

/// Runs an accessor: a failure (NULL handle) answers `default`.
pub(crate) fn guard_value<T>(default: T, f: impl FnOnce() -> CResult<T>) -> T {
    match run(f) {
        Ok(v) => v,
        Err(e) => {
            record(e.code, &e.message);
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_sentence() {
        for (code, s) in SENTENCES {
            assert_eq!(strerror(code), s);
            assert_eq!(strerror(-code), s);
        }
        assert_eq!(strerror(0), c"success");
        assert_eq!(strerror(4242), c"unknown error");
        assert_eq!(strerror(c_int::MIN), c"success");
    }

    #[test]
    fn failures_are_recorded_per_thread() {
        assert_eq!(guard(|| Ok(3)), 3);
        let r = guard(|| Err(Failure::from(Error::QueueFull)));
        assert_eq!(r, -IWV_EQUEUEFULL);
        assert_eq!(last_code(), -IWV_EQUEUEFULL);
        // SAFETY: `last_message` is a NUL-terminated string owned by this thread.
        let m = unsafe { CStr::from_ptr(last_message()) };
        assert_eq!(m.to_str().unwrap(), "work queue full");
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(IWV_EQUEUEFULL)
        );
        let other = std::thread::spawn(last_code).join().unwrap();
        assert_eq!(other, 0);
    }

    #[test]
    fn panics_do_not_escape() {
        let r = guard(|| -> CResult<c_int> { panic!("boom") });
        assert_eq!(r, -IWV_EPANIC);
        let p: *mut u32 = guard_new(|| -> CResult<u32> { panic!("boom") });
        assert!(p.is_null());
        assert_eq!(guard_value(7u32, || -> CResult<u32> { panic!("x") }), 7);
        // SAFETY: as above.
        let m = unsafe { CStr::from_ptr(last_message()) };
        assert!(m.to_str().unwrap().contains("panic caught: x"));
    }

    #[test]
    fn daemon_refusals_map_to_errno() {
        let e = Error::Daemon(iwarp_verbs::ErrorReply::new(
            ErrorCode::AddressInUse,
            "port 7",
        ));
        assert_eq!(code_of(&e), IWV_EADDRINUSE);
        assert_eq!(daemon_code(ErrorCode::InvalidQpState), IWV_EINVAL);
        let io = Error::Io(std::io::Error::from_raw_os_error(IWV_EACCES));
        assert_eq!(code_of(&io), IWV_EACCES);
        assert_eq!(daemon_code(ErrorCode::DaemonFull), IWV_EDAEMONFULL);
        let full = Error::DaemonFull("control.max_clients (2)".into());
        assert_eq!(code_of(&full), IWV_EDAEMONFULL);
        assert!(strerror(IWV_EDAEMONFULL)
            .to_str()
            .unwrap()
            .starts_with("iwarpd is full"));
    }
}
