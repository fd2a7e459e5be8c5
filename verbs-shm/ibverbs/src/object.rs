//! Converting the pointers applications hold back to this library's objects: every
//! object is `#[repr(C)]` with rdma-core's structure first and a magic number after it,
//! so `*mut ibv_pd` is a `*mut IwPd` after checking the magic (a pointer from elsewhere
//! is refused with `EINVAL`, not followed further than the magic).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
    // A misaligned pointer is not one of ours (and must not be dereferenced).
    if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return None;
    }
    // SAFETY: objects of this library are `#[repr(C)]` with `Raw` first; the magic is
    // checked before anything else is read. A foreign pointer is a caller error rdma-core
    // does not detect at all; here it is read up to the magic.
    let t = unsafe { &*(p as *const T) };
    (t.magic().load(Ordering::Acquire) == T::MAGIC).then_some(t)
}

/// An object others hold on to (a PD by its MRs, MWs, QPs and SRQs; a CQ or SRQ by its
/// QPs): its destroy verb refuses with `EBUSY` while `users` is not zero.
pub(crate) trait Counted: Wrapped {
    /// Objects created from this one and not yet destroyed.
    fn users(&self) -> &AtomicU32;
}

/// Counts one more user of `t` and hands back a reference the new object keeps (and
/// gives back with `users().fetch_sub` when it is destroyed).
pub(crate) fn hold<T: Counted>(t: &T) -> &'static T {
    t.users().fetch_add(1, Ordering::AcqRel);
    // SAFETY: `t` was made by `into_raw` (found by `from_raw`) and is freed only by its
    // destroy verb, which refuses while `users` is not zero: the count just taken keeps
    // it alive until the holder gives it back.
    unsafe { &*(t as *const T) }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A misaligned pointer (perftest's ib_read_lat passed one to rdma_resolve_addr) is
    /// refused, not dereferenced (which panicked: "misaligned pointer dereference").
    #[test]
    fn misaligned_pointers_are_not_objects() {
        let mut words = [0u64; 64];
        let p = (words.as_mut_ptr() as usize + 1) as *mut crate::sys::rdma_cm_id;
        assert!(from_raw::<crate::cm_id::IwCmId>(p).is_none());
        let q = (words.as_mut_ptr() as usize + 1) as *mut crate::sys::ibv_pd;
        assert!(from_raw::<crate::pd::IwPd>(q).is_none());
    }
}
