//! A plain copy for payload-sized buffers that never takes the `rep movsb` instruction.
//!
//! Why not `copy_from_slice` (glibc's `memmove`): above `x86_rep_movsb_threshold` (2,112
//! bytes here) glibc copies with `rep movsb` on CPUs with ERMS/FSRM, and on AMD Zen CPUs
//! that instruction runs at 1.6-2.0 GB/s instead of 40-70 when the destination sits a few
//! bytes after the source modulo the page (measured on this project's AMD EPYC VM, glibc
//! 2.36: a 9,000-byte copy at a distance of 1-16 bytes modulo 4 KiB 1.9 GB/s, at 32 bytes
//! 47 GB/s). Payload copies into
//! and out of frames sit at every distance (the headers move the payload by 54-90 bytes),
//! and on that VM the engine pair spent 57 % of its time in that instruction at MTU 9000.
//! Here: AVX2 unaligned 32-byte loads and stores, four per step; the last 32 bytes are
//! copied once more from their own offset (overlapping the step before) instead of a
//! byte loop. Below [`VECTOR_MIN_LEN`] bytes, or without AVX2, `copy_from_slice`.

#[cfg(target_arch = "x86_64")]
use crate::has_vector_copy;

/// Shortest copy the vector loop takes; shorter ones go to `copy_from_slice` (glibc's
/// vector moves, no `rep movsb` at these sizes).
pub const VECTOR_MIN_LEN: usize = 256;

/// Copies `n = min(dst.len(), src.len())` bytes of `src` into `dst` (like
/// `dst[..n].copy_from_slice(&src[..n])`, without `rep movsb`).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    #[cfg(target_arch = "x86_64")]
    if n >= VECTOR_MIN_LEN && has_vector_copy() {
        // SAFETY: `src` is valid for `n` bytes of reads, `dst` for `n` bytes of writes
        // (slices of that length), a `&mut` cannot overlap a `&`, and the CPU has AVX2
        // (checked just above).
        unsafe { copy_avx2(dst.as_mut_ptr(), src.as_ptr(), n) };
        return;
    }
    dst.copy_from_slice(src);
}

/// As [`copy`], `dst.len()` bytes from `src`: memory that another process may write
/// meanwhile (a client's registered memory), read through a pointer, never a reference.
/// A byte written by the other process during the copy may arrive old or new.
///
/// # Safety
///
/// `src` must be valid for reads of `dst.len()` bytes for the whole call and must not
/// overlap `dst`.
pub unsafe fn copy_from_raw(dst: &mut [u8], src: *const u8) {
    let n = dst.len();
    #[cfg(target_arch = "x86_64")]
    if n >= VECTOR_MIN_LEN && has_vector_copy() {
        // SAFETY: the caller guarantees `src` for `n` bytes of reads and no overlap;
        // `dst` is a slice of `n` bytes; the CPU has AVX2 (checked above).
        unsafe { copy_avx2(dst.as_mut_ptr(), src, n) };
        return;
    }
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), n) };
}

/// Copies `src` to `dst`: `src.len()` bytes of memory that another process may read or
/// write meanwhile (a client's registered memory), written through a pointer.
///
/// # Safety
///
/// `dst` must be valid for writes of `src.len()` bytes for the whole call and must not
/// overlap `src`.
pub unsafe fn copy_to_raw(dst: *mut u8, src: &[u8]) {
    let n = src.len();
    #[cfg(target_arch = "x86_64")]
    if n >= VECTOR_MIN_LEN && has_vector_copy() {
        // SAFETY: the caller guarantees `dst` for `n` bytes of writes and no overlap;
        // `src` is a slice of `n` bytes; the CPU has AVX2 (checked above).
        unsafe { copy_avx2(dst, src.as_ptr(), n) };
        return;
    }
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
}

/// Copies `len >= 32` bytes from `src` to `dst` with AVX2 loads and stores.
///
/// # Safety
///
/// `src` valid for `len` bytes of reads, `dst` for `len` bytes of writes, not
/// overlapping; `len >= 32`; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn copy_avx2(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    debug_assert!(len >= 32);
    let mut i = 0;
    while i + 128 <= len {
        // SAFETY: bytes i .. i + 128 <= len of the caller's ranges; unaligned loads and
        // stores. All four are loaded before any is stored (the ranges do not overlap, so
        // this is for the load/store queues, not correctness).
        unsafe {
            let s = src.add(i).cast::<__m256i>();
            let d = dst.add(i).cast::<__m256i>();
            let a = _mm256_loadu_si256(s);
            let b = _mm256_loadu_si256(s.add(1));
            let c = _mm256_loadu_si256(s.add(2));
            let e = _mm256_loadu_si256(s.add(3));
            _mm256_storeu_si256(d, a);
            _mm256_storeu_si256(d.add(1), b);
            _mm256_storeu_si256(d.add(2), c);
            _mm256_storeu_si256(d.add(3), e);
        }
        i += 128;
    }
    while i + 32 <= len {
        // SAFETY: bytes i .. i + 32 <= len.
        unsafe {
            let v = _mm256_loadu_si256(src.add(i).cast());
            _mm256_storeu_si256(dst.add(i).cast(), v);
        }
        i += 32;
    }
    if i < len {
        // The last 32 bytes (len >= 32), overlapping what the loop stored: the same
        // bytes again.
        // SAFETY: bytes len - 32 .. len of the caller's ranges.
        unsafe {
            let v = _mm256_loadu_si256(src.add(len - 32).cast());
            _mm256_storeu_si256(dst.add(len - 32).cast(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn check_all_ways(src: &[u8], dst: &mut [u8]) {
        let n = src.len();
        dst.fill(0xa5);
        copy(dst, src);
        assert_eq!(&dst[..n], src, "copy, len {n}");
        dst.fill(0xa5);
        // SAFETY: `src` is a live slice of `n` bytes, disjoint from `dst`.
        unsafe { copy_from_raw(&mut dst[..n], src.as_ptr()) };
        assert_eq!(&dst[..n], src, "copy_from_raw, len {n}");
        dst.fill(0xa5);
        // SAFETY: `dst` is a live slice of at least `n` bytes, disjoint from `src`.
        unsafe { copy_to_raw(dst.as_mut_ptr(), src) };
        assert_eq!(&dst[..n], src, "copy_to_raw, len {n}");
        #[cfg(target_arch = "x86_64")]
        if n >= 32 && has_vector_copy() {
            dst.fill(0xa5);
            // SAFETY: as above; the CPU has AVX2.
            unsafe { copy_avx2(dst.as_mut_ptr(), src.as_ptr(), n) };
            assert_eq!(&dst[..n], src, "copy_avx2, len {n}");
        }
        // Nothing past the copy was touched.
        assert!(dst[n..].iter().all(|&b| b == 0xa5), "wrote past len {n}");
    }

    #[test]
    fn every_length_to_1100_and_random_ones_at_every_alignment() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let src: Vec<u8> = (0..70_000).map(|_| rng.gen()).collect();
        let mut dst = vec![0u8; 70_100];
        for len in 0..=1100 {
            check_all_ways(&src[..len], &mut dst[..len + 40]);
        }
        for _ in 0..2_000 {
            let len = rng.gen_range(0..66_000);
            let (s, d) = (rng.gen_range(0..64), rng.gen_range(0..64));
            check_all_ways(&src[s..s + len], &mut dst[d..d + len + 40]);
        }
    }

    #[test]
    fn unequal_lengths_copy_the_shorter() {
        let src = [7u8; 600];
        let mut dst = [0u8; 900];
        copy(&mut dst, &src);
        assert_eq!(&dst[..600], &src[..]);
        assert!(dst[600..].iter().all(|&b| b == 0));
        let mut short = [0u8; 300];
        copy(&mut short, &src);
        assert_eq!(short, [7u8; 300]);
    }
}
