//! Shared mappings of memfds: the ring area and arenas. The mapping is unmapped when its
//! last owner (an `Arc`) goes, so that every [`Region`] over it and every object that
//! hands out pointers into it keeps it alive.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::Arc;

use iwarp_shm_ring::Region;
use rustix::mm::{MapFlags, ProtFlags};

use crate::{Error, Result};

/// A `MAP_SHARED`, read-write mapping owned by this process.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// False for a mapping placed over the application's own pages (`reg_user_mr`):
    /// those addresses belong to the application and stay mapped.
    unmap_on_drop: bool,
}

// SAFETY: the mapping is plain shared memory; the struct only carries its address and
// length, which any thread may use (all accesses through it are the callers' business,
// documented where pointers are handed out).
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` gives out nothing but the address and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from offset 0, shared, read-write.
    pub(crate) fn map_fd(fd: BorrowedFd<'_>, len: usize) -> Result<Mapping> {
        if len == 0 {
            return Err(Error::invalid("mapping of 0 bytes"));
        }
        // SAFETY: a fresh mapping at an address the kernel chooses: no existing memory
        // is affected; the result is owned by the returned `Mapping` and unmapped once.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }?;
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::protocol("mmap returned null"))?;
        Ok(Mapping {
            ptr,
            len,
            unmap_on_drop: true,
        })
    }

    /// Records a mapping the library placed over application pages (never unmapped).
    pub(crate) fn adopt_fixed(ptr: NonNull<u8>, len: usize) -> Mapping {
        Mapping {
            ptr,
            len,
            unmap_on_drop: false,
        }
    }

    /// First byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A [`Region`] over the whole mapping that keeps it alive.
    pub(crate) fn region(self: &Arc<Self>) -> Result<Region> {
        let keep: Arc<dyn Send + Sync> = self.clone();
        // SAFETY: the mapping is read-write and stays mapped as long as `keep` (this
        // `Arc`) lives, which the region holds; ring memory is only accessed through
        // regions (arena memory is never made a region).
        unsafe { Region::from_mapping(self.ptr(), self.len, keep) }
            .map_err(|e| Error::protocol(format!("ring area: {e}")))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.unmap_on_drop {
            // SAFETY: `ptr..ptr+len` is the mapping this value created and owns; no
            // region or slice refers to it any more (they hold the `Arc` of this value).
            let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
        }
    }
}
