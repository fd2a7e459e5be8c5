//! [`SharedMapping`]: a memfd mapped `MAP_SHARED` read-write, sealed against shrinking
//! and growing, that the daemon and a client both map.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use iwarp_shm_ring::Region;
use iwarp_types::MemoryFault;
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

/// Small pages (the unit a non-hugetlb memfd is rounded to).
const PAGE_BYTES: usize = 4096;

/// What memory backs a new mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Hugepages (`MFD_HUGETLB`) or an error.
    Hugepages,
    /// 4 KiB pages.
    Pages,
    /// Hugepages if the kernel has free ones and can seal them, else 4 KiB pages.
    HugepagesOrPages,
}

/// The mapping itself; unmapped when the last handle (a [`SharedMapping`] or a `Region`
/// made by [`SharedMapping::region`]) goes.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    map_len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; every access through it is either atomic
// (regions) or an explicit byte copy whose races are documented as the application's
// business (like RDMA memory); the pointer is valid on every thread.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+map_len` is the mapping made by `map` and nothing refers to it
        // any more (every SharedMapping and Region holding it is gone).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

/// A sealed memfd mapped `MAP_SHARED` read-write. `Send + Sync`; share it with `Arc`.
#[derive(Debug)]
pub struct SharedMapping {
    inner: Arc<Mapping>,
    len: usize,
    hugepages: bool,
}

fn round_up(len: usize, unit: usize) -> Option<usize> {
    len.checked_next_multiple_of(unit)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The page size of the file behind `fd` (the hugepage size on hugetlbfs).
fn block_bytes(fd: BorrowedFd<'_>) -> io::Result<(usize, u64)> {
    let st = rustix::fs::fstat(fd)?;
    let blk = usize::try_from(st.st_blksize)
        .unwrap_or(PAGE_BYTES)
        .max(PAGE_BYTES);
    let size = u64::try_from(st.st_size).unwrap_or(0);
    Ok((blk, size))
}

fn map(fd: OwnedFd, len: usize, map_len: usize, hugepages: bool) -> io::Result<SharedMapping> {
    // SAFETY: a fresh shared mapping of `map_len` bytes of `fd` at an address the kernel
    // chooses; it aliases no Rust object. The file is at least `map_len` long (checked
    // or set by the callers) and sealed against shrinking, so no access inside it faults.
    let ptr = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            map_len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            &fd,
            0,
        )
    }?;
    let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| invalid("mmap returned null".into()))?;
    Ok(SharedMapping {
        inner: Arc::new(Mapping { ptr, map_len, fd }),
        len,
        hugepages,
    })
}

fn create_with(name: &str, len: usize, huge: bool) -> io::Result<SharedMapping> {
    let mut flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    if huge {
        flags |= MemfdFlags::HUGETLB;
    }
    let fd = rustix::fs::memfd_create(name, flags)?;
    let (blk, _) = block_bytes(fd.as_fd())?;
    let map_len = round_up(len, blk).ok_or_else(|| invalid(format!("length {len} too large")))?;
    rustix::fs::ftruncate(&fd, map_len as u64)?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    map(fd, len, map_len, huge)
}

impl SharedMapping {
    /// A new memfd named `name` (for `/proc/<pid>/maps`) of `len_bytes` (rounded up to
    /// its page size), sealed (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`) and mapped.
    /// Hugepages need the kernel to have free ones and to seal hugetlb files (4.16+);
    /// [`Backing::HugepagesOrPages`] falls back to pages if either fails.
    pub fn create(name: &str, len_bytes: usize, backing: Backing) -> io::Result<SharedMapping> {
        if len_bytes == 0 {
            return Err(invalid("a shared mapping needs at least one byte".into()));
        }
        match backing {
            Backing::Pages => create_with(name, len_bytes, false),
            Backing::Hugepages => create_with(name, len_bytes, true),
            Backing::HugepagesOrPages => {
                create_with(name, len_bytes, true).or_else(|_| create_with(name, len_bytes, false))
            }
        }
    }

    /// Maps `len_bytes` of a memfd received from a peer. Refused unless the file is at
    /// least that long and sealed with `F_SEAL_SHRINK` (a peer that could shrink it
    /// could make our accesses fault with `SIGBUS`).
    pub fn from_fd(fd: OwnedFd, len_bytes: usize) -> io::Result<SharedMapping> {
        if len_bytes == 0 {
            return Err(invalid("a shared mapping needs at least one byte".into()));
        }
        let seals = rustix::fs::fcntl_get_seals(&fd)
            .map_err(|e| invalid(format!("shared memory fd has no seals (not a memfd?): {e}")))?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(invalid(
                "shared memory fd is not sealed with F_SEAL_SHRINK: refused".into(),
            ));
        }
        let (blk, size) = block_bytes(fd.as_fd())?;
        let map_len = round_up(len_bytes, blk)
            .ok_or_else(|| invalid(format!("length {len_bytes} too large")))?;
        if size < map_len as u64 {
            return Err(invalid(format!(
                "shared memory fd has {size} bytes, {map_len} needed"
            )));
        }
        map(fd, len_bytes, map_len, blk > PAGE_BYTES)
    }

    /// The memfd (to send to the peer with `SCM_RIGHTS`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// A new descriptor of the memfd (`F_DUPFD_CLOEXEC`).
    pub fn dup_fd(&self) -> io::Result<OwnedFd> {
        self.inner.fd.as_fd().try_clone_to_owned()
    }

    /// Usable bytes (as asked; the mapping may be longer, rounded to its page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (a mapping has at least one byte); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if hugepages back the mapping.
    pub fn is_hugepages(&self) -> bool {
        self.hugepages
    }

    /// The first byte of the mapping (page aligned). Accesses through it race with the
    /// peer; use atomics for anything but payload.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.ptr.as_ptr()
    }

    /// The mapping as an atomic [`Region`] (`len()` rounded down to 64 bytes), which keeps
    /// the mapping alive for as long as it or a clone or sub-region exists.
    pub fn region(&self) -> Region {
        let keep: Arc<dyn Send + Sync> = self.inner.clone();
        // SAFETY: the mapping covers `map_len >= len` bytes and stays mapped while
        // `keep` (the `Mapping`, which unmaps on drop) lives, which the region holds.
        // The pointer is page aligned, so `from_mapping` cannot fail.
        unsafe { Region::from_mapping(self.as_ptr(), self.len, keep) }
            .expect("a page-aligned non-null mapping is a valid region")
    }

    /// The checked start of `offset..offset+n` (inside `len()`).
    fn range(&self, offset: u64, n: usize) -> Result<usize, MemoryFault> {
        let start = usize::try_from(offset).map_err(|_| MemoryFault)?;
        let end = start.checked_add(n).ok_or(MemoryFault)?;
        if end > self.len {
            return Err(MemoryFault);
        }
        Ok(start)
    }

    /// Copies `out.len()` bytes at `offset` into `out`; [`MemoryFault`] (and no copy) if
    /// the range is not inside `len()`. The peer may write the bytes concurrently: the
    /// copy is then torn, like a DMA read of memory the application is changing.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), MemoryFault> {
        let start = self.range(offset, out.len())?;
        // The copy is `iwarp_crc_copy`'s: never `rep movsb` (its docs say why).
        // SAFETY: `start..start+out.len()` is inside the mapping (checked above), which
        // lives as long as `self`; `out` is private memory, so the ranges do not overlap
        // (`copy_from_raw`'s contract). Concurrent writes by the peer process race on
        // payload bytes only (see above).
        unsafe { iwarp_crc_copy::copy_from_raw(out, self.as_ptr().add(start)) };
        Ok(())
    }

    /// As [`SharedMapping::read`], and returns the CRC32c of the bytes copied into `out`
    /// continued from `crc`, computed in the same pass (`iwarp_crc_copy`). The CRC is that
    /// of `out`, whatever the peer writes meanwhile.
    pub fn read_crc32c(&self, offset: u64, out: &mut [u8], crc: u32) -> Result<u32, MemoryFault> {
        let start = self.range(offset, out.len())?;
        // SAFETY: as in `read`: `start..start+out.len()` is inside the mapping, which
        // lives as long as `self`, and `out` is private memory; the source is read
        // through a pointer only.
        Ok(unsafe { iwarp_crc_copy::copy_crc32c_from_raw(out, self.as_ptr().add(start), crc) })
    }

    /// Asks the CPU to bring the first page of `len` bytes at `offset` into its caches
    /// (`iwarp_crc_copy::prefetch_raw`): a hint before a read; nothing if the range is not
    /// inside `len()`. Reads nothing the caller sees.
    pub fn prefetch(&self, offset: u64, len: usize) {
        if let Ok(start) = self.range(offset, len) {
            iwarp_crc_copy::prefetch_raw(self.as_ptr().wrapping_add(start), len);
        }
    }

    /// As [`SharedMapping::write`], and returns the CRC32c of `data` continued from `crc`,
    /// computed in the same pass (`iwarp_crc_copy`): the CRC of what was received, whatever
    /// the peer writes to the destination meanwhile.
    pub fn write_crc32c(&self, offset: u64, data: &[u8], crc: u32) -> Result<u32, MemoryFault> {
        let start = self.range(offset, data.len())?;
        // SAFETY: as in `write`: `start..start+data.len()` is inside the writable mapping,
        // which lives as long as `self`, and `data` is private memory; the destination is
        // written through a pointer only.
        Ok(unsafe { iwarp_crc_copy::copy_crc32c_to_raw(self.as_ptr().add(start), data, crc) })
    }

    /// Copies `data` to `offset`; [`MemoryFault`] (and no copy) if the range is not inside
    /// `len()`. Races with the peer as [`SharedMapping::read`].
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        let start = self.range(offset, data.len())?;
        // SAFETY: as in `read` (`copy_to_raw`'s contract: `data.len()` writable bytes not
        // overlapping `data`); the mapping is writable (PROT_WRITE, MAP_SHARED).
        unsafe { iwarp_crc_copy::copy_to_raw(self.as_ptr().add(start), data) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mappings_of_one_fd_share_bytes() {
        let a = SharedMapping::create("t", 10_000, Backing::Pages).unwrap();
        assert_eq!(
            (a.len(), a.is_hugepages(), a.is_empty()),
            (10_000, false, false)
        );
        assert_eq!(a.as_ptr() as usize % 4096, 0);
        let b = SharedMapping::from_fd(a.dup_fd().unwrap(), 10_000).unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        a.write(9_990, b"0123456789").unwrap();
        let mut out = [0u8; 10];
        b.read(9_990, &mut out).unwrap();
        assert_eq!(&out, b"0123456789");
        // Atomic regions see the same memory, and keep it mapped after the handle goes.
        let r = b.region();
        assert_eq!(r.len(), 10_000 / 64 * 64);
        drop(b);
        r.store_u64(64, 0x1122);
        let mut w = [0u8; 8];
        a.read(64, &mut w).unwrap();
        assert_eq!(u64::from_ne_bytes(w), 0x1122);
    }

    #[test]
    fn bounds_are_checked() {
        let a = SharedMapping::create("t", 100, Backing::Pages).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(a.read(93, &mut out), Err(MemoryFault));
        assert_eq!(a.write(u64::MAX, &out), Err(MemoryFault));
        assert_eq!(a.read(92, &mut out), Ok(()));
        assert!(SharedMapping::create("t", 0, Backing::Pages).is_err());
        assert!(SharedMapping::create("t", usize::MAX, Backing::Pages).is_err());
    }

    #[test]
    fn seals_are_enforced() {
        let a = SharedMapping::create("t", 8192, Backing::Pages).unwrap();
        let seals = rustix::fs::fcntl_get_seals(a.fd()).unwrap();
        assert!(seals.contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL));
        assert!(rustix::fs::ftruncate(a.fd(), 4096).is_err());
        assert!(rustix::fs::ftruncate(a.fd(), 1 << 20).is_err());
        assert!(rustix::fs::fcntl_add_seals(a.fd(), SealFlags::WRITE).is_err());
    }

    #[test]
    fn from_fd_refuses_unsealed_short_or_foreign_fds() {
        let unsealed =
            rustix::fs::memfd_create("u", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&unsealed, 4096).unwrap();
        let e = SharedMapping::from_fd(unsealed, 4096).unwrap_err();
        assert!(e.to_string().contains("F_SEAL_SHRINK"), "{e}");
        let a = SharedMapping::create("t", 4096, Backing::Pages).unwrap();
        let e = SharedMapping::from_fd(a.dup_fd().unwrap(), 8192).unwrap_err();
        assert!(e.to_string().contains("bytes"), "{e}");
        assert!(SharedMapping::from_fd(a.dup_fd().unwrap(), 0).is_err());
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(SharedMapping::from_fd(file.into(), 10).is_err());
    }

    #[test]
    fn hugepages_or_pages_always_maps() {
        let len = 3 << 20;
        let m = SharedMapping::create("h", len, Backing::HugepagesOrPages).unwrap();
        m.write(len as u64 - 1, &[7]).unwrap();
        let peer = SharedMapping::from_fd(m.dup_fd().unwrap(), len).unwrap();
        assert_eq!(peer.is_hugepages(), m.is_hugepages());
        let mut b = [0u8];
        peer.read(len as u64 - 1, &mut b).unwrap();
        assert_eq!(b, [7]);
        // Hugepages only: either really hugepages, or an error (no free ones here).
        match SharedMapping::create("h", len, Backing::Hugepages) {
            Ok(h) => assert!(h.is_hugepages()),
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
}
