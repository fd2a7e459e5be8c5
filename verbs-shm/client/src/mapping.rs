//! The memory behind an arena: a memfd the daemon made, mapped here
//! ([`SharedMapping`], unmapped with the last user), or the application's own pages
//! that `reg_user_mr` remapped onto a memfd (never unmapped: they are the
//! application's).

use std::ptr::NonNull;

use iwarp_shm_mem::SharedMapping;

/// An arena's memory.
#[derive(Debug)]
pub(crate) enum ArenaMem {
    /// Mapped by this library from the daemon's memfd.
    Shared(SharedMapping),
    /// The application's pages, remapped in place (see `remap.rs`).
    User {
        /// First byte of the first page.
        start: NonNull<u8>,
        /// Bytes of the pages.
        len: usize,
    },
}

// SAFETY: `User` carries only an address and a length that any thread may use (the
// pages stay mapped for the life of the process); `SharedMapping` is `Send + Sync`.
unsafe impl Send for ArenaMem {}
// SAFETY: as for `Send`: `&ArenaMem` gives out nothing but the address and length.
unsafe impl Sync for ArenaMem {}

impl ArenaMem {
    /// First byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        match self {
            ArenaMem::Shared(m) => m.as_ptr(),
            ArenaMem::User { start, .. } => start.as_ptr(),
        }
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            ArenaMem::Shared(m) => m.len(),
            ArenaMem::User { len, .. } => *len,
        }
    }
}
