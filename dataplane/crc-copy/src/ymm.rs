//! The AVX2 + VPCLMULQDQ kernel: copy and CRC32c in one pass with 256-bit registers, for
//! CPUs that fold 256 bits at a time but have no AVX-512 (AMD Zen 3). The same folding as
//! `wide.rs` (its docs give the lane layout and the constants), with four 32-byte
//! accumulators (128 bytes per step) instead of four 64-byte ones.

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_broadcastsi128_si256, _mm256_castsi256_si128,
    _mm256_clmulepi64_epi128, _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_set_epi32,
    _mm256_storeu_si256, _mm256_xor_si256, _mm_clmulepi64_si128, _mm_crc32_u64, _mm_cvtsi128_si64,
    _mm_extract_epi64, _mm_set_epi64x, _mm_xor_si128,
};

// Not `wide::fold128`: that one is compiled for AVX-512 (EVEX encodings this CPU lacks).
use crate::wide::{crc_bytes, fold_over};

/// Shortest input of [`copy_crc`]'s folding (four 32-byte blocks).
pub(crate) const YMM_MIN_LEN: usize = 128;

const K128: (u64, u64) = fold_over(128);
const K256: (u64, u64) = fold_over(256);
const K512: (u64, u64) = fold_over(512);
const K768: (u64, u64) = fold_over(768);
const K1024: (u64, u64) = fold_over(1024);

/// The constants `k` in both 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn lanes(k: (u64, u64)) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_set_epi64x(k.1 as i64, k.0 as i64))
}

/// `a` folded by the constants in `k` (each lane), plus `next`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn fold256(a: __m256i, k: __m256i, next: __m256i) -> __m256i {
    let lo = _mm256_clmulepi64_epi128(a, k, 0x00);
    let hi = _mm256_clmulepi64_epi128(a, k, 0x11);
    _mm256_xor_si256(_mm256_xor_si256(lo, hi), next)
}

/// One lane folded by `k`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
fn fold128(a: __m128i, k: (u64, u64)) -> __m128i {
    let k = _mm_set_epi64x(k.1 as i64, k.0 as i64);
    _mm_xor_si128(
        _mm_clmulepi64_si128(a, k, 0x00),
        _mm_clmulepi64_si128(a, k, 0x11),
    )
}

/// Loads the 32 bytes at offset `i`, stores them at `dst + i` when `STORE`, and returns
/// them.
///
/// # Safety
///
/// `src + i .. src + i + 32` readable, and when `STORE` `dst + i .. dst + i + 32`
/// writable; the CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn copy32<const STORE: bool>(dst: *mut u8, src: *const u8, i: usize) -> __m256i {
    // SAFETY: the caller's ranges; unaligned load and store.
    unsafe {
        let v = _mm256_loadu_si256(src.add(i).cast());
        if STORE {
            _mm256_storeu_si256(dst.add(i).cast(), v);
        }
        v
    }
}

/// Copies `len` bytes from `src` to `dst` and returns the CRC32c of the bytes stored,
/// continued from `crc`.
///
/// # Safety
///
/// `src` valid for `len` bytes of reads, `dst` for `len` bytes of writes, not
/// overlapping; `len >= YMM_MIN_LEN`; the CPU has AVX2, VPCLMULQDQ, PCLMULQDQ and
/// SSE 4.2.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn copy_crc(dst: *mut u8, src: *const u8, len: usize, crc: u32) -> u32 {
    // SAFETY: the caller's contract is `fold`'s with `STORE`.
    unsafe { fold::<true>(dst, src, len, crc) }
}

/// The CRC32c of the `len` bytes at `src`, continued from `crc` (no copy).
///
/// # Safety
///
/// `src` valid for `len` bytes of reads; `len >= YMM_MIN_LEN`; the CPU has AVX2,
/// VPCLMULQDQ, PCLMULQDQ and SSE 4.2.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
pub(crate) unsafe fn crc(src: *const u8, len: usize, crc: u32) -> u32 {
    // SAFETY: the caller's contract is `fold`'s without `STORE` (`dst` is never used).
    unsafe { fold::<false>(std::ptr::null_mut(), src, len, crc) }
}

/// The kernel: the CRC32c of the `len` bytes at `src` continued from `crc`; when `STORE`
/// it also copies them to `dst` and the CRC is computed from what was stored (the same
/// registers).
///
/// # Safety
///
/// `src` valid for `len` bytes of reads; when `STORE`, `dst` valid for `len` bytes of
/// writes and not overlapping `src`; `len >= YMM_MIN_LEN`; the CPU has AVX2, VPCLMULQDQ,
/// PCLMULQDQ and SSE 4.2.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
unsafe fn fold<const STORE: bool>(dst: *mut u8, src: *const u8, len: usize, crc: u32) -> u32 {
    debug_assert!(len >= YMM_MIN_LEN);
    let mut a = [_mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, 0); 4];
    for (j, acc) in a.iter_mut().enumerate() {
        // SAFETY: bytes 32 * j .. 32 * j + 32 <= 128 <= len of the caller's ranges.
        *acc = unsafe { copy32::<STORE>(dst, src, 32 * j) };
    }
    // The running CRC enters as the first 32 bits of the message (reflected, inverted).
    a[0] = _mm256_xor_si256(a[0], _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, !crc as i32));
    let mut i = YMM_MIN_LEN;
    let k4 = lanes(K1024);
    while i + 128 <= len {
        for (j, acc) in a.iter_mut().enumerate() {
            // SAFETY: i + 32 * j + 32 <= i + 128 <= len.
            let b = unsafe { copy32::<STORE>(dst, src, i + 32 * j) };
            *acc = fold256(*acc, k4, b);
        }
        i += 128;
    }
    let mut one = fold256(
        a[0],
        lanes(K768),
        fold256(a[1], lanes(K512), fold256(a[2], lanes(K256), a[3])),
    );
    let k1 = lanes(K256);
    while i + 32 <= len {
        // SAFETY: i + 32 <= len.
        let b = unsafe { copy32::<STORE>(dst, src, i) };
        one = fold256(one, k1, b);
        i += 32;
    }
    let l0 = _mm256_castsi256_si128(one);
    let l1 = _mm256_extracti128_si256::<1>(one);
    let x = _mm_xor_si128(fold128(l0, K128), l1);
    // The 128 folded bits, through the crc32 instruction from a zero state, are the CRC
    // state of everything so far; the tail continues it.
    let mut state = _mm_crc32_u64(0, _mm_cvtsi128_si64(x) as u64) as u32;
    state = _mm_crc32_u64(u64::from(state), _mm_extract_epi64::<1>(x) as u64) as u32;
    let rest = len - i;
    if !STORE {
        // SAFETY: the last `rest` (< 32) bytes of the caller's range.
        return unsafe { !crc_bytes(state, src.add(i), rest) };
    }
    // SAFETY: the last `rest` (< 32) bytes of the caller's ranges; the CRC over what was
    // stored.
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), rest);
        !crc_bytes(state, dst.add(i), rest)
    }
}
