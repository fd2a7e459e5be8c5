//! [`Region`]: a piece of shared memory the ring code reads and writes only through
//! atomic 64-bit words.
//!
//! In a normal build a region is a raw pointer into a mapping (or an owned, aligned
//! allocation for tests); under `cfg(loom)` it is an array of loom atomics, so that the
//! ring code above it is the same code that loom model-checks.

use std::sync::Arc;

use crate::abi::CACHE_LINE;
use crate::LayoutError;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

const _: () = assert!(usize::BITS == 64, "the ring ABI assumes a 64-bit target");

/// One cache line of atomic words: the unit of an owned allocation.
#[cfg(not(loom))]
#[repr(C, align(64))]
struct Line([AtomicU64; CACHE_LINE / 8]);

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Line>() == CACHE_LINE);

/// A cache-line-aligned span of memory shared with another process (or thread), with
/// every access atomic. Cloning a region is cheap and yields another handle on the same
/// memory.
#[derive(Clone)]
pub struct Region {
    #[cfg(not(loom))]
    base: core::ptr::NonNull<AtomicU64>,
    #[cfg(not(loom))]
    /// Keeps an owned allocation alive; `None` for a foreign mapping.
    _backing: Option<Arc<[Line]>>,
    #[cfg(not(loom))]
    /// Keeps a foreign mapping alive (see [`Region::from_mapping`]); `None` otherwise.
    _keep: Option<Arc<dyn Send + Sync>>,
    #[cfg(loom)]
    words: Arc<[AtomicU64]>,
    #[cfg(loom)]
    first_word: usize,
    len: usize,
}

// SAFETY: the memory behind `base` is only ever accessed through `&AtomicU64`s (atomic
// operations), which are safe to share and send between threads; an owned allocation lives
// as long as any handle, a foreign mapping as long as its creator promised.
#[cfg(not(loom))]
unsafe impl Send for Region {}
// SAFETY: as for `Send`: all access is atomic.
#[cfg(not(loom))]
unsafe impl Sync for Region {}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Region").field("len", &self.len).finish()
    }
}

impl Region {
    /// A zeroed, cache-line-aligned region of at least `len` bytes (rounded up to a
    /// cache line) owned by the returned handle and its clones. For tests and for rings
    /// shared by threads of one process.
    pub fn alloc(len: usize) -> Region {
        let lines = len.div_ceil(CACHE_LINE).max(1);
        #[cfg(not(loom))]
        {
            let mem: Arc<[Line]> = (0..lines)
                .map(|_| Line(core::array::from_fn(|_| AtomicU64::new(0))))
                .collect();
            // The pointer covers the whole slice; the content of an `Arc` never moves.
            let base = core::ptr::NonNull::from(&mem[..]).cast::<AtomicU64>();
            Region {
                base,
                _backing: Some(mem),
                _keep: None,
                len: lines * CACHE_LINE,
            }
        }
        #[cfg(loom)]
        {
            let words: Arc<[AtomicU64]> = (0..lines * CACHE_LINE / 8)
                .map(|_| AtomicU64::new(0))
                .collect();
            Region {
                words,
                first_word: 0,
                len: lines * CACHE_LINE,
            }
        }
    }

    /// A region over `len` bytes of an existing mapping at `ptr` (typically a
    /// `MAP_SHARED` mapping of a memfd or hugetlbfs file). Checked once: `ptr` must be
    /// non-null and aligned to [`CACHE_LINE`]; `len` is rounded down to a cache line.
    ///
    /// # Safety
    ///
    /// `ptr..ptr+len` must be mapped readable and writable for as long as this region or
    /// any clone or sub-region of it exists, and must not be accessed by this process
    /// other than through regions (other processes may write it in any way: the ring
    /// code treats its content as untrusted).
    #[cfg(not(loom))]
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Result<Region, LayoutError> {
        let Some(base) = core::ptr::NonNull::new(ptr.cast::<AtomicU64>()) else {
            return Err(LayoutError::Misaligned);
        };
        if (ptr as usize) % CACHE_LINE != 0 {
            return Err(LayoutError::Misaligned);
        }
        Ok(Region {
            base,
            _backing: None,
            _keep: None,
            len: len / CACHE_LINE * CACHE_LINE,
        })
    }

    /// Like [`Region::from_raw`], but the region (and every clone and sub-region) holds
    /// `keep` until the last of them is dropped: `keep` is the owner of the mapping
    /// (e.g. the object whose `Drop` unmaps it), so the mapping outlives every region.
    ///
    /// # Safety
    ///
    /// `ptr..ptr+len` must be mapped readable and writable for as long as `keep` lives,
    /// and must not be accessed by this process other than through regions or with
    /// atomic or byte copies that tolerate concurrent writes (other processes may write
    /// it in any way: the ring code treats its content as untrusted).
    #[cfg(not(loom))]
    pub unsafe fn from_mapping(
        ptr: *mut u8,
        len: usize,
        keep: Arc<dyn Send + Sync>,
    ) -> Result<Region, LayoutError> {
        // SAFETY: the caller guarantees the mapping lives as long as `keep`, which the
        // returned region (and its clones) hold.
        let mut r = unsafe { Region::from_raw(ptr, len) }?;
        r._keep = Some(keep);
        Ok(r)
    }

    /// Length in bytes (a multiple of [`CACHE_LINE`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the region has no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sub-region `offset..offset+len` (e.g. one ring of a mapping that holds an SQ,
    /// an RQ and a CQ). `offset` and `len` must be multiples of [`CACHE_LINE`] inside
    /// this region.
    pub fn sub(&self, offset: usize, len: usize) -> Result<Region, LayoutError> {
        let end = offset.checked_add(len).ok_or(LayoutError::OutOfBounds)?;
        if offset % CACHE_LINE != 0 || len % CACHE_LINE != 0 || end > self.len {
            return Err(LayoutError::OutOfBounds);
        }
        let mut r = self.clone();
        #[cfg(not(loom))]
        {
            // SAFETY: `offset <= self.len`, so the result stays inside (or one past the
            // end of) the memory this region covers; `offset` is a multiple of 8.
            r.base = unsafe { r.base.add(offset / 8) };
        }
        #[cfg(loom)]
        {
            r.first_word += offset / 8;
        }
        r.len = len;
        Ok(r)
    }

    /// Atomic `Acquire` load of the 64-bit word at byte `offset` (a multiple of 8);
    /// `None` if out of bounds. Raw access for tools that inspect a ring and for tests
    /// that play a malicious peer; the ring API never needs it.
    pub fn load_u64(&self, offset: usize) -> Option<u64> {
        self.word(offset).map(|w| w.load(Ordering::Acquire))
    }

    /// Atomic `Release` store of the 64-bit word at byte `offset` (a multiple of 8);
    /// false if out of bounds. See [`Region::load_u64`].
    pub fn store_u64(&self, offset: usize, value: u64) -> bool {
        self.word(offset)
            .map(|w| w.store(value, Ordering::Release))
            .is_some()
    }

    /// Atomic `fetch_or` (`Release`) of the word at byte `offset`; returns the previous
    /// value, `None` if out of bounds or not a multiple of 8.
    pub fn fetch_or_u64(&self, offset: usize, value: u64) -> Option<u64> {
        self.word(offset)
            .map(|w| w.fetch_or(value, Ordering::Release))
    }

    /// Atomic `fetch_add` (`AcqRel`, wrapping) of the word at byte `offset`; returns the
    /// previous value, `None` if out of bounds.
    pub fn fetch_add_u64(&self, offset: usize, value: u64) -> Option<u64> {
        self.word(offset)
            .map(|w| w.fetch_add(value, Ordering::AcqRel))
    }

    /// Atomic `swap` (`Acquire`) of the word at byte `offset`; returns the previous
    /// value, `None` if out of bounds.
    pub fn swap_u64(&self, offset: usize, value: u64) -> Option<u64> {
        self.word(offset).map(|w| w.swap(value, Ordering::Acquire))
    }

    /// Atomic `compare_exchange(current, new)` (`AcqRel` on success, `Acquire` on
    /// failure) of the word at byte `offset`: `Some(Ok(previous))` if it was `current`
    /// and is now `new`, `Some(Err(actual))` if not, `None` if out of bounds.
    pub fn compare_exchange_u64(
        &self,
        offset: usize,
        current: u64,
        new: u64,
    ) -> Option<Result<u64, u64>> {
        self.word(offset)
            .map(|w| w.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire))
    }

    /// The `count` atomic words starting at byte `offset`, or `None` if that is not
    /// inside the region or `offset` is not a multiple of 8.
    pub(crate) fn words(&self, offset: usize, count: usize) -> Option<&[AtomicU64]> {
        let end = count.checked_mul(8)?.checked_add(offset)?;
        if offset % 8 != 0 || end > self.len {
            return None;
        }
        #[cfg(not(loom))]
        {
            // SAFETY: `offset..end` lies inside the region, which (by the contract of
            // `alloc` / `from_raw`) is mapped and 8-aligned for the lifetime of `self`;
            // `AtomicU64` has the size and alignment of `u64` and interior mutability,
            // so shared references to memory written concurrently (atomically, or by the
            // other process) are allowed.
            Some(unsafe { core::slice::from_raw_parts(self.base.as_ptr().add(offset / 8), count) })
        }
        #[cfg(loom)]
        {
            let first = self.first_word + offset / 8;
            self.words.get(first..first + count)
        }
    }

    /// One atomic word at byte `offset`.
    pub(crate) fn word(&self, offset: usize) -> Option<&AtomicU64> {
        self.words(offset, 1).and_then(|w| w.first())
    }

    /// Copies `out.len()` bytes (a multiple of 8) from byte `offset`, one relaxed atomic
    /// load per word. Returns false (and copies nothing) if out of bounds.
    pub(crate) fn load_bytes(&self, offset: usize, out: &mut [u8]) -> bool {
        if out.len() % 8 != 0 {
            return false;
        }
        let Some(words) = self.words(offset, out.len() / 8) else {
            return false;
        };
        for (w, chunk) in words.iter().zip(out.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        true
    }

    /// Stores `bytes` (a multiple of 8) at byte `offset`, one relaxed atomic store per
    /// word. Returns false (and stores nothing) if out of bounds.
    pub(crate) fn store_bytes(&self, offset: usize, bytes: &[u8]) -> bool {
        if bytes.len() % 8 != 0 {
            return false;
        }
        let Some(words) = self.words(offset, bytes.len() / 8) else {
            return false;
        };
        for (w, chunk) in words.iter().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_aligned_and_zeroed() {
        let r = Region::alloc(100);
        assert_eq!(r.len(), 128);
        assert_eq!(r.base.as_ptr() as usize % CACHE_LINE, 0);
        let mut buf = [0xffu8; 128];
        assert!(r.load_bytes(0, &mut buf));
        assert!(buf.iter().all(|&b| b == 0));
    }

    #[test]
    fn bounds_are_checked() {
        let r = Region::alloc(128);
        let mut buf = [0u8; 16];
        assert!(r.load_bytes(112, &mut buf));
        assert!(!r.load_bytes(120, &mut buf));
        assert!(!r.load_bytes(4, &mut buf));
        assert!(!r.load_bytes(0, &mut buf[..12]));
        assert!(!r.store_bytes(usize::MAX - 7, &buf));
        assert!(r.words(0, usize::MAX).is_none());
        assert!(r.word(128).is_none());
        assert!(r.word(120).is_some());
    }

    #[test]
    fn sub_regions_share_memory() {
        let r = Region::alloc(256);
        let s = r.sub(128, 128).unwrap();
        assert!(s.store_bytes(8, &7u64.to_ne_bytes()));
        let mut buf = [0u8; 8];
        assert!(r.load_bytes(136, &mut buf));
        assert_eq!(u64::from_ne_bytes(buf), 7);
        assert_eq!(r.sub(64, 256).unwrap_err(), LayoutError::OutOfBounds);
        assert_eq!(r.sub(8, 64).unwrap_err(), LayoutError::OutOfBounds);
        assert_eq!(r.sub(usize::MAX, 64).unwrap_err(), LayoutError::OutOfBounds);
    }

    #[test]
    fn from_raw_checks_alignment() {
        // SAFETY: null pointer is rejected before any use.
        let e = unsafe { Region::from_raw(core::ptr::null_mut(), 64) };
        assert_eq!(e.unwrap_err(), LayoutError::Misaligned);
        let r = Region::alloc(128);
        // SAFETY: misaligned pointer is rejected before any use.
        let e = unsafe { Region::from_raw(r.base.as_ptr().cast::<u8>().add(8), 64) };
        assert_eq!(e.unwrap_err(), LayoutError::Misaligned);
    }
}
