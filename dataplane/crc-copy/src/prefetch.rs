//! Asking the CPU to bring bytes into its caches before they are copied: the payload of a
//! WR whose source is cold (a working set larger than the caches, as 10,000 QPs each
//! writing its own buffer make) is otherwise fetched from memory line by line inside the
//! copy, where the hardware prefetcher starts late on every new page.
//!
//! Why not a crate: `core::arch`'s `_mm_prefetch` is all it takes; it needs `unsafe`
//! (a `#[target_feature]` function), which the engine's crates forbid.

/// A cache line: the step between two prefetches.
const LINE: usize = 64;

/// Most bytes one [`prefetch_raw`] call asks for (from its start): 4 KiB, one page.
/// Beyond it the hardware prefetcher follows the stream the copy makes.
pub const PREFETCH_BYTES_MAX: usize = 4096;

/// Asks for the first `len.min(PREFETCH_BYTES_MAX)` bytes at `p` to be brought into the
/// caches. A hint: it reads nothing the caller sees, never faults (the instruction is
/// dropped for an address without a mapping), and does nothing off x86-64.
#[inline]
pub fn prefetch_raw(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let n = len.min(PREFETCH_BYTES_MAX);
        let mut i = 0;
        while i < n {
            // `wrapping_add` keeps the pointer arithmetic defined for any `p`.
            let line = p.wrapping_add(i).cast::<i8>();
            // `_mm_prefetch` is `unsafe` only for its `sse` target feature (x86-64
            // baseline); `prefetcht0` loads nothing into a register and cannot fault at any
            // address, mapped or not, so `line` need not point at valid memory.
            // SAFETY: every x86-64 CPU has SSE, and the instruction cannot fault.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line) };
            i += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// [`prefetch_raw`] over a slice: its first [`PREFETCH_BYTES_MAX`] bytes.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    prefetch_raw(bytes.as_ptr(), bytes.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_changes_nothing_and_takes_any_address() {
        let v: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        prefetch(&v);
        prefetch(&v[9_999..]);
        prefetch(&[]);
        // Addresses nobody mapped: a hint, never a fault.
        prefetch_raw(std::ptr::null(), 4096);
        prefetch_raw(usize::MAX as *const u8, 1 << 20);
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
    }
}
