//! rdma-core's error conventions: `errno` and the errno value returned.

use iwarp_verbs::{Error, ErrorCode};

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: libc::c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The errno a provider answers for `e`.
pub(crate) fn errno_of(e: &Error) -> libc::c_int {
    match e {
        Error::Daemon(r) => daemon_errno(r.code),
        Error::Timeout => libc::ETIMEDOUT,
        Error::DaemonGone => libc::EIO,
        // Every client slot of the daemon is taken: the device is busy, try again later.
        Error::DaemonFull(_) => libc::EBUSY,
        Error::QueueFull => libc::ENOMEM,
        Error::WouldBlock => libc::EAGAIN,
        Error::InvalidArgument(_) => libc::EINVAL,
        Error::Protocol(_) => libc::EPROTO,
        Error::Io(io) => io.raw_os_error().unwrap_or(libc::EIO),
    }
}

fn daemon_errno(code: ErrorCode) -> libc::c_int {
    use ErrorCode::*;
    match code {
        PermissionDenied | NotAdmin => libc::EACCES,
        ShuttingDown => libc::EIO,
        LimitReached | InsufficientResources | OutOfMemory => libc::ENOMEM,
        NoSuchObject => libc::ENOENT,
        InUse | DaemonFull | MwStillBound | CloseInProgress => libc::EBUSY,
        CoreTimeout => libc::ETIMEDOUT,
        BadFd => libc::EBADF,
        AddressInUse => libc::EADDRINUSE,
        NoRoute => libc::EHOSTUNREACH,
        Internal | BadMessage | VersionMismatch | NotReady => libc::EPROTO,
        _ => libc::EINVAL,
    }
}

/// Sets `errno` for `e` (with the reason under `IWARP_DEBUG`) and returns it.
pub(crate) fn fail(what: &str, e: &Error) -> libc::c_int {
    crate::debug::debug!("{what}: {e}");
    let n = errno_of(e);
    set_errno(n);
    n
}

/// Sets `errno` to `n` (with `why` under `IWARP_DEBUG`) and returns it.
pub(crate) fn fail_with(what: &str, n: libc::c_int, why: &str) -> libc::c_int {
    crate::debug::debug!("{what}: {why}");
    set_errno(n);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_rdma_core_errnos() {
        assert_eq!(errno_of(&Error::DaemonGone), libc::EIO);
        assert_eq!(errno_of(&Error::QueueFull), libc::ENOMEM);
        assert_eq!(errno_of(&Error::Timeout), libc::ETIMEDOUT);
        assert_eq!(daemon_errno(ErrorCode::LimitReached), libc::ENOMEM);
        assert_eq!(daemon_errno(ErrorCode::InvalidArgument), libc::EINVAL);
        let io = Error::Io(std::io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(errno_of(&io), libc::ENOENT);
    }
}
