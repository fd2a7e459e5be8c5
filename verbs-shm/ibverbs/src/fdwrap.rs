//! Descriptors handed to applications: an epoll instance over the client library's
//! descriptors. It is readable exactly when one of them is, and its file status flags
//! are the application's own: rdma-core applications make `channel->fd` non-blocking to
//! ask for `EAGAIN` instead of a wait, while the client library's eventfds are always
//! non-blocking.

use std::ffi::c_int;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A new epoll fd (close-on-exec, blocking) watching `fds` for input, or the errno.
pub(crate) fn epoll_over(fds: &[RawFd]) -> Result<OwnedFd, c_int> {
    // SAFETY: creating a descriptor we own from here.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(last_errno());
    }
    // SAFETY: fresh descriptor.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: registering a live descriptor in our epoll instance.
        if unsafe {
            libc::epoll_ctl(
                std::os::fd::AsRawFd::as_raw_fd(&ep),
                libc::EPOLL_CTL_ADD,
                fd,
                &mut ev,
            )
        } < 0
        {
            return Err(last_errno());
        }
    }
    Ok(ep)
}

/// True if the application made `fd` non-blocking.
pub(crate) fn is_nonblocking(fd: RawFd) -> bool {
    // SAFETY: F_GETFL on a descriptor of ours.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// Waits until the epoll fd `ep` is readable (or a signal interrupts).
pub(crate) fn wait_readable(ep: RawFd) {
    let mut e = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: waiting on our epoll fd for one event.
    unsafe { libc::epoll_wait(ep, &mut e, 1, -1) };
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
