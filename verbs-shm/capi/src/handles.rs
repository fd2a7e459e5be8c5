//! The opaque handle types of the header (`struct iwv_context` ...) and the helpers that
//! turn the C side's pointers into references.

#![allow(non_camel_case_types)]

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use iwarp_verbs::{
    Arena, CmEventChannel, CmId, CompChannel, Context, Cq, Error, FastRegMr, Mr, Mw, Pd, Qp, Srq,
};

use crate::error::{CResult, Failure, IWV_EAGAIN};

/// Locks, ignoring poisoning (a panic was caught while it was held; the object itself
/// is still consistent: the library never leaves it half-changed).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The C objects created on a channel, by daemon handle: what an event names by handle
/// becomes the C pointer (as `usize`) and the user context the application gave.
#[derive(Default)]
pub(crate) struct HandleMap(Mutex<HashMap<u32, (usize, usize)>>);

impl HandleMap {
    pub(crate) fn insert(&self, handle: u32, ptr: usize, context: usize) {
        lock(&self.0).insert(handle, (ptr, context));
    }

    pub(crate) fn remove(&self, handle: u32) {
        lock(&self.0).remove(&handle);
    }

    pub(crate) fn get(&self, handle: u32) -> Option<(usize, usize)> {
        lock(&self.0).get(&handle).copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }
}

/// `struct iwv_context`.
pub struct iwv_context {
    pub(crate) ctx: Context,
}

/// `struct iwv_arena`.
pub struct iwv_arena {
    pub(crate) arena: Arena,
}

/// `struct iwv_pd`.
pub struct iwv_pd {
    pub(crate) pd: Pd,
}

/// What an `iwv_mr` is.
pub(crate) enum MrKind {
    Region(Mr),
    FastReg(FastRegMr),
}

/// `struct iwv_mr`: a registered region or a fast-register MR.
pub struct iwv_mr {
    pub(crate) mr: Mutex<MrKind>,
}

/// `struct iwv_mw`.
pub struct iwv_mw {
    pub(crate) mw: Mutex<Mw>,
}

/// `struct iwv_comp_channel`.
pub struct iwv_comp_channel {
    pub(crate) channel: CompChannel,
    pub(crate) cqs: Arc<HandleMap>,
}

/// `struct iwv_cq`.
pub struct iwv_cq {
    pub(crate) cq: Mutex<Cq>,
    pub(crate) handle: u32,
    pub(crate) depth: std::sync::atomic::AtomicU32,
    pub(crate) channel: Option<(CompChannel, Arc<HandleMap>)>,
}

/// `struct iwv_qp`.
pub struct iwv_qp {
    pub(crate) qp: Mutex<Qp>,
    pub(crate) qp_num: u32,
    pub(crate) context: usize,
}

/// `struct iwv_srq`.
pub struct iwv_srq {
    pub(crate) srq: Mutex<Srq>,
    pub(crate) handle: u32,
}

/// `struct iwv_event_channel`.
pub struct iwv_event_channel {
    pub(crate) channel: CmEventChannel,
    pub(crate) ids: Arc<HandleMap>,
}

/// `struct iwv_cm_id`.
pub struct iwv_cm_id {
    pub(crate) id: CmId,
    pub(crate) context: usize,
    pub(crate) ids: Arc<HandleMap>,
}

// The header promises that every handle may be used from several threads.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<iwv_context>();
    shared::<iwv_arena>();
    shared::<iwv_pd>();
    shared::<iwv_mr>();
    shared::<iwv_mw>();
    shared::<iwv_comp_channel>();
    shared::<iwv_cq>();
    shared::<iwv_qp>();
    shared::<iwv_srq>();
    shared::<iwv_event_channel>();
    shared::<iwv_cm_id>();
};

/// `&*p`, or `EFAULT` naming `what` if `p` is NULL.
///
/// # Safety
///
/// `p` is NULL or points to a live `T` for `'a`.
pub(crate) unsafe fn obj<'a, T>(p: *const T, what: &str) -> CResult<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::null(what))
}

/// `&mut *p`, or `EFAULT` naming `what` if `p` is NULL.
///
/// # Safety
///
/// `p` is NULL or points to a live `T` nobody else uses for `'a`.
pub(crate) unsafe fn obj_mut<'a, T>(p: *mut T, what: &str) -> CResult<&'a mut T> {
    // SAFETY: the caller's contract.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::null(what))
}

/// Takes back ownership of a handle the library gave out, or `EFAULT` if NULL.
///
/// # Safety
///
/// `p` is NULL or a pointer returned by this library's constructor of `T`, not yet
/// destroyed, used by no other thread.
pub(crate) unsafe fn take<T>(p: *mut T, what: &str) -> CResult<Box<T>> {
    if p.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller's contract: `p` came from `Box::into_raw` and is unique now.
    Ok(unsafe { Box::from_raw(p) })
}

/// A C string argument as UTF-8.
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> CResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(Some)
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// Waits on an event source: `next` until it answers something else than `WouldBlock`,
/// polling `fd` in between. `timeout_ms` < 0: forever; 0: once (`EAGAIN`); else at most
/// that long (`ETIMEDOUT`).
pub(crate) fn wait_event<T>(
    fd: BorrowedFd<'_>,
    timeout_ms: i32,
    mut next: impl FnMut() -> Result<T, Error>,
) -> CResult<T> {
    let deadline =
        (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
    loop {
        match next() {
            Err(Error::WouldBlock) => {}
            r => return r.map_err(Failure::from),
        }
        let left = match deadline {
            _ if timeout_ms == 0 => return Err(Failure::new(IWV_EAGAIN, "no event")),
            None => None,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(Failure::from(Error::Timeout));
                }
                Some(d - now)
            }
        };
        let ts = left.map(|d| rustix::event::Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: d.subsec_nanos() as _,
        });
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Failure::from(Error::from(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IWV_ETIMEDOUT;
    use std::os::fd::AsFd;

    #[test]
    fn wait_event_timeouts() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let e = wait_event(r.as_fd(), 0, || Err::<(), _>(Error::WouldBlock)).unwrap_err();
        assert_eq!(e.code, IWV_EAGAIN);
        let t = Instant::now();
        let e = wait_event(r.as_fd(), 30, || Err::<(), _>(Error::WouldBlock)).unwrap_err();
        assert_eq!(e.code, IWV_ETIMEDOUT);
        assert!(t.elapsed() >= Duration::from_millis(30));
        let mut n = 0;
        let v = wait_event(r.as_fd(), -1, || {
            n += 1;
            if n < 3 {
                // Make the fd readable so that the wait returns at once.
                rustix::io::write(&_w, b"x").unwrap();
                Err(Error::WouldBlock)
            } else {
                Ok(n)
            }
        })
        .unwrap();
        assert_eq!(v, 3);
    }

    #[test]
    fn null_pointers_are_efault() {
        // SAFETY: NULL is allowed by the contract.
        let e = unsafe { obj::<u32>(std::ptr::null(), "cq") }.unwrap_err();
        assert_eq!(e.code, crate::error::IWV_EFAULT);
        assert_eq!(e.message, "cq is NULL");
        // SAFETY: as above.
        assert!(unsafe { take::<u32>(std::ptr::null_mut(), "qp") }.is_err());
        // SAFETY: as above.
        assert_eq!(unsafe { str_arg(std::ptr::null(), "name") }.unwrap(), None);
    }
}
