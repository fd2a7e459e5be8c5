//! [`Arena`]: memory shared with the daemon, the home of every memory region.

use std::sync::Arc;

use iwarp_shm_mem::SharedMapping;
use iwarp_shm_socket::{ArenaHandle, Request, Response};
use iwarp_types::{Access, RegionId, SendOp, Stag};

use crate::context::{unexpected, CtxInner};
use crate::mapping::ArenaMem;
use crate::{Context, Error, Result};

/// What an arena's users (the arena, its MRs) share; frees the arena when the last goes.
pub(crate) struct ArenaShared {
    pub(crate) ctx: Arc<CtxInner>,
    pub(crate) handle: ArenaHandle,
    pub(crate) map: ArenaMem,
    pub(crate) hugepages: bool,
    /// For `reg_user_mr`: the remapped application pages (released after `FreeArena`).
    pub(crate) _user_pages: Option<crate::remap::Remapped>,
}

impl ArenaShared {
    /// Client address of byte `offset`.
    pub(crate) fn addr(&self, offset: u64) -> u64 {
        self.map.ptr() as u64 + offset
    }

    /// `Err` unless `[offset, offset + len)` is inside the arena.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.map.len() as u64 => Ok(()),
            _ => Err(Error::invalid(format!(
                "range {offset}+{len} outside the arena of {} bytes",
                self.map.len()
            ))),
        }
    }
}

impl Drop for ArenaShared {
    fn drop(&mut self) {
        // No MR uses it any more (they hold this value). The daemon unmaps its side;
        // ours goes with `map` (unless it is the application's own pages).
        let _ = self.ctx.call(Request::FreeArena(self.handle));
    }
}

/// A piece of memory shared with the daemon (a sealed memfd, hugepages when the daemon
/// has them): register MRs over it with [`crate::Pd::reg_mr`]. The daemon reads and
/// writes it in place (RDMA Write, Read Response, Receive), so its content may change at
/// any time while an MR with write access exists: treat it like DMA memory.
///
/// The arena stays mapped and allocated in the daemon until it and every MR over it are
/// gone.
pub struct Arena {
    pub(crate) shared: Arc<ArenaShared>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("handle", &self.shared.handle)
            .field("addr", &self.shared.map.ptr())
            .field("len", &self.shared.map.len())
            .field("hugepages", &self.shared.hugepages)
            .finish()
    }
}

impl Context {
    /// Allocates an arena of at least `len` bytes (rounded up to the page size),
    /// hugepages if the daemon has free ones, else 4 KiB pages.
    pub fn alloc_arena(&self, len: usize) -> Result<Arena> {
        self.alloc_arena_with(len, false)
    }

    /// Like [`Context::alloc_arena`]; with `hugepages_required` the daemon fails
    /// ([`iwarp_shm_socket::ErrorCode::OutOfMemory`]) rather than fall back to 4 KiB
    /// pages.
    pub fn alloc_arena_with(&self, len: usize, hugepages_required: bool) -> Result<Arena> {
        if len == 0 {
            return Err(Error::invalid("arena of 0 bytes"));
        }
        let (r, fds) = self.inner.call_fds(
            Request::AllocArena {
                len: len as u64,
                hugepages_required,
            },
            &[],
        )?;
        let (handle, got_len, hugepages) = match r {
            Response::Arena {
                arena,
                len,
                hugepages,
            } => (arena, len, hugepages),
            r => return Err(unexpected("AllocArena", &r)),
        };
        // From here the arena exists in the daemon: free it on any failure.
        let free = |e: Error| {
            let _ = self.inner.call(Request::FreeArena(handle));
            e
        };
        let Some(fd) = fds.into_iter().next() else {
            return Err(free(Error::protocol("AllocArena reply without its fd")));
        };
        if got_len < len as u64 || got_len > isize::MAX as u64 {
            return Err(free(Error::protocol(format!(
                "arena of {got_len} bytes for {len} asked"
            ))));
        }
        let map = SharedMapping::from_fd(fd, got_len as usize)
            .map_err(|e| free(Error::protocol(format!("arena memfd: {e}"))))?;
        Ok(Arena {
            shared: Arc::new(ArenaShared {
                ctx: self.inner.clone(),
                handle,
                map: ArenaMem::Shared(map),
                hugepages,
                _user_pages: None,
            }),
        })
    }
}

impl Arena {
    /// The daemon's handle of the arena (also the region a Fast-Register WR names).
    pub fn handle(&self) -> ArenaHandle {
        self.shared.handle
    }

    /// First byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.shared.map.ptr()
    }

    /// First byte, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.shared.map.ptr()
    }

    /// Bytes of the arena (at least what was asked).
    pub fn len(&self) -> usize {
        self.shared.map.len()
    }

    /// Never true (an arena has at least one page); for symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        self.shared.map.len() == 0
    }

    /// Backed by hugepages.
    pub fn is_hugepages(&self) -> bool {
        self.shared.hugepages
    }

    /// The client address of byte `offset` (what an SGE or a VA-based MR uses).
    pub fn addr(&self, offset: usize) -> u64 {
        self.shared.addr(offset as u64)
    }

    /// The arena's bytes. The daemon may write them concurrently (incoming RDMA Writes,
    /// Receives, Read Responses into MRs with local or remote write access): read only
    /// memory whose completion you have seen and that no peer may write.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes, mapped as long as `self` (which
        // holds it through `shared`). Concurrent writes by the daemon are the documented
        // DMA contract of RDMA memory, as with any verbs library.
        unsafe { std::slice::from_raw_parts(self.shared.map.ptr(), self.shared.map.len()) }
    }

    /// The arena's bytes, writable (same caveat as [`Arena::as_slice`]).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only slice handed out by
        // this process for the arena.
        unsafe { std::slice::from_raw_parts_mut(self.shared.map.ptr(), self.shared.map.len()) }
    }

    /// The operation of a Fast-Register WR (`SendOp::FastReg`) that makes the
    /// fast-register STag `stag` (see [`crate::Pd::alloc_mr`], with the key you choose)
    /// a region over `[offset, offset + len)` of this arena, VA-based at the client
    /// address of `offset` unless `zero_based`. Post it in a [`crate::SendWr`] on a QP
    /// of the same PD. The arena must outlive the registration (until invalidated).
    pub fn fast_reg_op(
        &self,
        stag: Stag,
        offset: usize,
        len: usize,
        access: Access,
        zero_based: bool,
    ) -> Result<SendOp> {
        self.shared.check_range(offset as u64, len as u64)?;
        Ok(SendOp::FastReg {
            stag,
            region: RegionId(self.shared.handle.0),
            region_offset: offset as u64,
            len: len as u64,
            va: if zero_based { 0 } else { self.addr(offset) },
            access,
            zero_based,
        })
    }
}
