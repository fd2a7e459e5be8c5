//! `fork(2)` after `ibv_fork_init` (or with `RDMAV_FORK_SAFE` / `IBV_FORK_SAFE` set, as
//! rdma-core reads them): registered pages are not inherited by the child
//! (`MADV_DONTFORK`), as rdma-core arranges. A child that touches them faults, and it can
//! never write into the parent's registered memory.
//!
//! Why it matters here more than the usual copy-on-write story: the client library
//! remaps registered application memory onto a shared memfd (the daemon reads and writes
//! it in place), so without `MADV_DONTFORK` a child would share those pages with the
//! parent instead of getting copies. Without fork protection asked for, that is what
//! happens (`ibv_is_fork_initialized` then says `IBV_FORK_DISABLED`: the application has
//! not asked, and a child's writes to registered pages reach the parent's memory).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::sys;

/// `ibv_fork_init` was called.
static FORK_INIT: AtomicBool = AtomicBool::new(false);

/// The environment asks for fork protection (read once, as rdma-core reads it at init).
fn env_asks() -> bool {
    static ASKS: OnceLock<bool> = OnceLock::new();
    *ASKS.get_or_init(|| {
        ["RDMAV_FORK_SAFE", "IBV_FORK_SAFE"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
    })
}

/// Fork protection is on.
pub(crate) fn enabled() -> bool {
    FORK_INIT.load(Ordering::Acquire) || env_asks()
}

/// The page-aligned range covering `[addr, addr + len)`.
fn page_range(addr: usize, len: usize) -> Option<(usize, usize)> {
    // SAFETY: sysconf has no memory effects.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    let start = addr & !(page - 1);
    let end = addr.checked_add(len)?.checked_next_multiple_of(page)?;
    Some((start, end - start))
}

/// `madvise(advice)` over the pages of `[addr, addr + len)`: 0 or the errno.
fn advise(addr: usize, len: usize, advice: c_int) -> c_int {
    if len == 0 {
        return 0;
    }
    let Some((start, n)) = page_range(addr, len) else {
        return libc::EINVAL;
    };
    // SAFETY: madvise changes only how the range is inherited by fork; an unmapped range
    // is answered with ENOMEM, not a fault.
    if unsafe { libc::madvise(start as *mut c_void, n, advice) } == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    }
}

/// A region was registered (or re-registered to a new range): its pages are not
/// inherited when fork protection is on. Best effort, as in rdma-core's `ibv_reg_mr`:
/// the registration stands either way.
pub(crate) fn registered(addr: *const c_void, len: usize) {
    if enabled() {
        let e = advise(addr as usize, len, libc::MADV_DONTFORK);
        if e != 0 {
            crate::debug::debug!("ibv_reg_mr: madvise(MADV_DONTFORK): errno {e}");
        }
    }
}

/// `int ibv_fork_init(void)`: 0; later registrations are not inherited by children.
#[no_mangle]
pub extern "C" fn iwarp_ibv_fork_init() -> c_int {
    FORK_INIT.store(true, Ordering::Release);
    0
}

/// `enum ibv_fork_status ibv_is_fork_initialized(void)`: `IBV_FORK_ENABLED` after
/// `ibv_fork_init` or with the environment variables, else `IBV_FORK_DISABLED`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_is_fork_initialized() -> c_int {
    if enabled() {
        sys::IBV_FORK_ENABLED as c_int
    } else {
        sys::IBV_FORK_DISABLED as c_int
    }
}

/// `int ibv_dontfork_range(void *base, size_t size)`: the range is not inherited (0 or
/// the errno of `madvise`), whether or not protection is on, as rdma-core does it.
#[no_mangle]
pub extern "C" fn iwarp_ibv_dontfork_range(base: *mut c_void, size: usize) -> c_int {
    advise(base as usize, size, libc::MADV_DONTFORK)
}

/// `int ibv_dofork_range(void *base, size_t size)`: the range is inherited again.
#[no_mangle]
pub extern "C" fn iwarp_ibv_dofork_range(base: *mut c_void, size: usize) -> c_int {
    advise(base as usize, size, libc::MADV_DOFORK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_whole_pages() {
        assert_eq!(page_range(4096 + 7, 10), Some((4096, 4096)));
        assert_eq!(page_range(4095, 2), Some((0, 8192)));
        assert_eq!(page_range(usize::MAX - 3, 8), None);
    }
}
