//! memif specifics: telling a busy server socket apart, and the peer-loss guard.
//!
//! Peer loss: the 22.11 memif PMD unmaps a lost peer's shared regions on the EAL
//! interrupt thread (`memif_disconnect`) without raising any ethdev event, while a
//! polling lcore may be inside `rx_burst`/`tx_burst` on those rings. The shim
//! (`csrc/shim.c` in `iwarp-dpdk-sys`) interposes `munmap` so that, on the interrupt
//! thread, it first waits (bounded) until no guarded queue is inside a burst; memif
//! [`crate::PortQueue`]s poll through guarded bursts. [`guard_active`] tells whether the
//! process resolves `munmap` to the guard.

use std::ffi::{c_void, CStr};
use std::mem::size_of;

use iwarp_dpdk_sys as sys;

/// True if a memif server already listens on this socket (in another process, or in
/// this one outside DPDK): binding the same address fails with `EADDRINUSE` (abstract
/// sockets), or a connect succeeds (filesystem sockets).
pub fn socket_busy(name: &str, abstract_: bool) -> bool {
    // SAFETY: zeroed sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    let start = usize::from(abstract_);
    if bytes.len() + start >= addr.sun_path.len() {
        return false;
    }
    for (i, b) in bytes.iter().enumerate() {
        addr.sun_path[start + i] = *b as libc::c_char;
    }
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    // memif 22.11 binds an abstract name with its exact length (family + NUL + name).
    let len = if abstract_ {
        (size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t
    } else {
        size_of::<libc::sockaddr_un>() as libc::socklen_t
    };
    let ptr = (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>();
    let busy = if abstract_ {
        // SAFETY: fd is ours; addr is a valid sockaddr_un and len does not exceed it.
        let r = unsafe { libc::bind(fd, ptr, len) };
        r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EADDRINUSE)
    } else {
        // SAFETY: as above.
        unsafe { libc::connect(fd, ptr, len) == 0 }
    };
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    busy
}

/// True if `munmap` in this process is the guard's (the peer-loss protection works).
pub fn guard_active() -> bool {
    let name = c"munmap";
    // SAFETY: dlsym with RTLD_DEFAULT and a valid C string only looks a symbol up.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, CStr::as_ptr(name)) };
    // SAFETY: returns the address of a function; no preconditions.
    let ours = unsafe { sys::shim_guard_munmap_addr() };
    !found.is_null() && found == ours.cast::<c_void>()
}

/// (barriers run, barriers that gave up after 1 s) since start.
pub fn guard_stats() -> (u64, u64) {
    // SAFETY: atomic loads in the shim.
    unsafe { (sys::shim_guard_barriers(), sys::shim_guard_timeouts()) }
}

/// Turns the peer-loss barrier on (the default) or off. Off exists only to measure what
/// the guard prevents; a daemon never turns it off.
pub fn set_guard_enabled(enabled: bool) {
    // SAFETY: an atomic store in the shim.
    unsafe { sys::shim_guard_set_enabled(i32::from(enabled)) }
}
