//! Converting the pointers applications hold back to this library's objects: every
//! object is `#[repr(C)]` with rdma-core's structure first and a magic number after it,
//! so `*mut ibv_pd` is a `*mut IwPd` after checking the magic (a pointer from elsewhere
//! is refused with `EINVAL`, not followed further than the magic).

use std::sync::atomic::{AtomicU64, Ordering};

/// An object whose first field is rdma-core's structure `Raw`.
pub(crate) trait Wrapped: Sized {
    /// rdma-core's structure.
    type Raw;
    /// The magic number of this kind.
    const MAGIC: u64;
    /// Its magic field.
    fn magic(&self) -> &AtomicU64;
}

/// The object behind `p`, if it is one of ours of this kind.
pub(crate) fn from_raw<'a, T: Wrapped>(p: *mut T::Raw) -> Option<&'a T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: objects of this library are `#[repr(C)]` with `Raw` first; the magic is
    // checked before anything else is read. A foreign pointer is a caller error rdma-core
    // does not detect at all; here it is read up to the magic.
    let t = unsafe { &*(p as *const T) };
    (t.magic().load(Ordering::Acquire) == T::MAGIC).then_some(t)
}

/// Moves an object to the heap and hands out its raw part.
pub(crate) fn into_raw<T: Wrapped>(t: T) -> *mut T::Raw {
    Box::into_raw(Box::new(t)) as *mut T::Raw
}

/// Frees an object handed out by [`into_raw`] (after [`from_raw`] found it).
///
/// # Safety
///
/// `t` came from [`into_raw`] and nothing uses it any more.
pub(crate) unsafe fn free<T: Wrapped>(t: &T) {
    // Cleared first so a second free of the same pointer is refused (while the memory
    // is not reused).
    t.magic().store(0, Ordering::Release);
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(t as *const T as *mut T) });
}
