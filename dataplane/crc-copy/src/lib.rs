//! A copy that computes the CRC32c (Castagnoli, the MPA CRC of RFC 5044) of the bytes it
//! copies in the same pass.
//!
//! Why: the engine gathers every outbound FPDU's payload from registered memory into the
//! frame and then computed the FPDU's CRC over the frame: two passes over every payload
//! byte. On a core that moves the data of both ends (the shared-memory loopback) each pass
//! over the payload cost about the same, 11-13 % of the core at 1 MiB (docs/BENCHMARKS.md);
//! folding the CRC into the copy takes the CRC's pass away on transmit, and on receive
//! where a payload is placed in the pass that checks its FPDU's CRC (RDMA Writes, Read
//! Responses and Sends that came whole in one segment). Neither `crc32c` nor `crc-fast`
//! copies, hence this module.
//!
//! How: on x86-64 CPUs with AVX-512 (F, VL) and VPCLMULQDQ, each 64-byte block is loaded
//! once, stored to the destination and folded into four 512-bit accumulators with
//! carry-less multiplication (the folding of Intel's "Fast CRC Computation for Generic
//! Polynomials Using PCLMULQDQ"); the accumulators are folded into 128 bits and finished
//! with the SSE 4.2 `crc32` instruction, which also takes the tail. On CPUs with AVX2 and
//! VPCLMULQDQ but no AVX-512 (AMD Zen 3) the same folding with four 256-bit accumulators
//! (`ymm.rs`). Without their stores both kernels are also the CRC of bytes not copied
//! ([`crc32c_append`]). Elsewhere, and below [`WIDE_MIN_LEN`] bytes, a plain copy followed
//! by the CRC: up to [`SHORT_MAX_LEN`] bytes the `crc32` instruction inline (an MPA
//! header, a pad, a 64-byte payload: the `crc32c` crate's set-up costs more than the work
//! there), else the `crc32c` crate. The folding constants are `x^n mod P` computed at
//! compile time ([`xpow`]), not tables.
//!
//! The crate's plain [`copy`] (and [`copy_from_raw`], [`copy_to_raw`] for shared memory)
//! is the engine's payload copy: an AVX2 loop instead of glibc's `memcpy`, whose
//! `rep movsb` runs at 2 GB/s on AMD Zen for some distances between source and
//! destination (`copy.rs` says when).
//!
//! Checked: against the `crc32c` crate at every length from 0 to 2,048 and at random
//! lengths up to 66,000 with random alignments and initial CRCs, through the dispatch and
//! through each path directly (the wide and the 256-bit ones when the CPU has them), the
//! CRC alone as well; the copy against `copy_from_slice` through each entry point, nothing
//! written past the end (`copy.rs`); and by the `crc_copy` fuzz target.
//!
//! The crate also holds the cache hint that goes with the copies: [`prefetch_raw`] (and
//! [`prefetch`]) ask the CPU for the first page of a source before it is copied
//! (`prefetch.rs`: the engine asks for a WR's sources when the WR starts).
//!
//! `unsafe` is confined to the kernels (`wide.rs`, `ymm.rs`, `copy.rs`: the SIMD
//! intrinsics, each block with its `SAFETY:` comment), the prefetch instruction
//! (`prefetch.rs`), their dispatch here, and the raw
//! ends of [`copy_crc32c_from_raw`], [`copy_crc32c_to_raw`], [`copy_from_raw`] and
//! [`copy_to_raw`] (shared memory that another process may write: read and written
//! through a pointer, never a reference).

mod copy;
mod prefetch;
#[cfg(target_arch = "x86_64")]
mod wide;
#[cfg(target_arch = "x86_64")]
mod ymm;

pub use copy::{copy, copy_from_raw, copy_to_raw, VECTOR_MIN_LEN};
pub use prefetch::{prefetch, prefetch_raw, PREFETCH_BYTES_MAX};

/// Shortest copy the wide path takes (four 64-byte blocks); shorter ones copy, then CRC.
pub const WIDE_MIN_LEN: usize = 256;

/// Longest piece [`crc32c_append`] runs through the `crc32` instruction inline (8 bytes
/// per instruction): the `crc32c` crate's set-up (a byte loop to an 8-byte boundary, the
/// 3-way split) costs more than the work below this: an FPDU's ULPDU_Length (2 octets),
/// its DDP/RDMAP header (14 tagged, 18 untagged), its pad, a 64-byte WRITE's whole FPDU.
pub const SHORT_MAX_LEN: usize = 128;

/// What this CPU runs, detected once: [`CPU_KNOWN`] and the `CPU_*` bits.
static CPU: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
const CPU_KNOWN: u8 = 1;
const CPU_CRC32: u8 = 2;
const CPU_WIDE: u8 = 4;
const CPU_YMM: u8 = 8;
const CPU_AVX2: u8 = 16;

/// The CPU's paths in one load: every FPDU asks (five feature tests of `std` per
/// question were a call of their own, 0.5 % of a core moving 64 KiB WRITEs).
#[inline]
fn cpu() -> u8 {
    let c = CPU.load(std::sync::atomic::Ordering::Relaxed);
    if c & CPU_KNOWN != 0 {
        return c;
    }
    detect()
}

#[cold]
fn detect() -> u8 {
    let mut c = CPU_KNOWN;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let sse42 = has!("sse4.2");
        let clmul = sse42 && has!("vpclmulqdq") && has!("pclmulqdq");
        let avx2 = has!("avx2");
        if sse42 {
            c |= CPU_CRC32;
        }
        if clmul && has!("avx512f") && has!("avx512vl") {
            c |= CPU_WIDE;
        }
        if clmul && avx2 {
            c |= CPU_YMM;
        }
        if avx2 {
            c |= CPU_AVX2;
        }
    }
    // Idempotent: every thread computes the same value.
    CPU.store(c, std::sync::atomic::Ordering::Relaxed);
    c
}

/// True when this CPU has SSE 4.2's `crc32` instruction. Detected once.
#[inline]
pub fn has_crc32_instruction() -> bool {
    cpu() & CPU_CRC32 != 0
}

/// The CRC32c polynomial, bit-reflected.
const P_REFLECTED: u32 = 0x82F6_3B78;

/// `x^n mod P` in the bit-reflected form the CRC uses (`x^0` is `0x8000_0000`).
pub const fn xpow(n: u32) -> u32 {
    let mut v: u32 = 0x8000_0000;
    let mut i = 0;
    while i < n {
        v = if v & 1 != 0 {
            (v >> 1) ^ P_REFLECTED
        } else {
            v >> 1
        };
        i += 1;
    }
    v
}

/// True when this CPU runs the wide path (AVX-512 F and VL, VPCLMULQDQ, PCLMULQDQ,
/// SSE 4.2). Detected once.
#[inline]
pub fn has_wide() -> bool {
    cpu() & CPU_WIDE != 0
}

/// True when this CPU runs the 256-bit path (AVX2, VPCLMULQDQ, PCLMULQDQ, SSE 4.2): AMD
/// Zen 3 and other CPUs with VPCLMULQDQ but without AVX-512.
#[inline]
pub fn has_ymm() -> bool {
    cpu() & CPU_YMM != 0
}

/// True when this CPU has AVX2 (the vector copy of [`copy`]). Detected once.
#[inline]
pub fn has_vector_copy() -> bool {
    cpu() & CPU_AVX2 != 0
}

/// Copies `n = min(dst.len(), src.len())` bytes of `src` into `dst` and returns the
/// CRC32c of those bytes continued from `crc` (`crc32c_append` semantics: pass 0 to
/// start, or the CRC of what came before).
pub fn copy_crc32c(dst: &mut [u8], src: &[u8], crc: u32) -> u32 {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_wide() {
        // SAFETY: `src` is valid for `n` bytes of reads, `dst` for `n` bytes of writes
        // (slices of that length), a `&mut` cannot overlap a `&`, and the CPU has the
        // features `copy_crc` needs (checked just above).
        return unsafe { wide::copy_crc(dst.as_mut_ptr(), src.as_ptr(), n, crc) };
    }
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_ymm() {
        // SAFETY: as above, `n >= WIDE_MIN_LEN >= YMM_MIN_LEN`, and the CPU has the
        // features the 256-bit `copy_crc` needs (checked just above).
        return unsafe { ymm::copy_crc(dst.as_mut_ptr(), src.as_ptr(), n, crc) };
    }
    copy_then_crc(dst, src, crc)
}

/// As [`copy_crc32c`], from `src`, `dst.len()` bytes of memory that another process may
/// write meanwhile (a client's registered memory). The CRC is that of the bytes written
/// to `dst`, whatever `src` held before or after.
///
/// # Safety
///
/// `src` must be valid for reads of `dst.len()` bytes for the whole call and must not
/// overlap `dst`.
pub unsafe fn copy_crc32c_from_raw(dst: &mut [u8], src: *const u8, crc: u32) -> u32 {
    let n = dst.len();
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_wide() {
        // SAFETY: the caller guarantees `src` for `n` bytes of reads and no overlap;
        // `dst` is a slice of `n` bytes; the CPU has the features (checked above). The
        // kernel computes the CRC from the registers it stores, so it covers `dst`.
        return unsafe { wide::copy_crc(dst.as_mut_ptr(), src, n, crc) };
    }
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_ymm() {
        // SAFETY: as above, with the 256-bit kernel's features (checked above).
        return unsafe { ymm::copy_crc(dst.as_mut_ptr(), src, n, crc) };
    }
    // SAFETY: as above; the copy reads what `src` holds at each moment through the
    // pointer (no reference to shared memory is formed), and the CRC is that of `dst`.
    unsafe { copy::copy_from_raw(dst, src) };
    crc32c_append(crc, dst)
}

/// As [`copy_crc32c`], into `dst`, `src.len()` bytes of memory that another process may
/// read or write meanwhile (a client's registered memory: a received payload placed in
/// the pass that checks its MPA CRC). The CRC is that of `src` (the bytes loaded to be
/// stored), whatever `dst` holds before or after.
///
/// # Safety
///
/// `dst` must be valid for writes of `src.len()` bytes for the whole call and must not
/// overlap `src`.
pub unsafe fn copy_crc32c_to_raw(dst: *mut u8, src: &[u8], crc: u32) -> u32 {
    let n = src.len();
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_wide() {
        // SAFETY: the caller guarantees `dst` for `n` bytes of writes and no overlap;
        // `src` is a slice of `n` bytes; the CPU has the features (checked above). The
        // kernel computes the CRC from the registers it loaded from `src`.
        return unsafe { wide::copy_crc(dst, src.as_ptr(), n, crc) };
    }
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN_LEN && has_ymm() {
        // SAFETY: as above, with the 256-bit kernel's features (checked above).
        return unsafe { ymm::copy_crc(dst, src.as_ptr(), n, crc) };
    }
    // SAFETY: as above; the copy writes through the pointer (no reference to shared
    // memory is formed), and the CRC is computed over `src`, private memory.
    unsafe { copy::copy_to_raw(dst, src) };
    crc32c_append(crc, src)
}

/// CRC32c of `data` continued from `crc`, for bytes that are not copied: the copying
/// kernels without their stores from [`WIDE_MIN_LEN`] bytes, the 512-bit one on CPUs
/// that have it ([`has_wide`]), else the 256-bit one ([`has_ymm`]); up to
/// [`SHORT_MAX_LEN`] bytes the `crc32` instruction inline; the `crc32c` crate otherwise
/// (its 3-way `crc32` instruction runs 9-16 GiB/s at 1.4-64 KiB on the AMD EPYC VM of
/// docs/BENCHMARKS.md). Inlined: a dispatch on the length and the CPU, several times per
/// FPDU.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if data.len() <= SHORT_MAX_LEN && has_crc32_instruction() {
        // SAFETY: `crc_bytes` reads exactly `data.len()` bytes from `data.as_ptr()` (any
        // length), which the slice makes readable; it needs SSE 4.2, checked just above.
        return unsafe { !wide::crc_bytes(!crc, data.as_ptr(), data.len()) };
    }
    #[cfg(target_arch = "x86_64")]
    if data.len() >= WIDE_MIN_LEN && has_wide() {
        // SAFETY: `data` is valid for `data.len() >= WIDE_MIN_LEN` bytes of reads and the
        // CPU has the kernel's features (checked just above).
        return unsafe { wide::crc(data.as_ptr(), data.len(), crc) };
    }
    #[cfg(target_arch = "x86_64")]
    if data.len() >= WIDE_MIN_LEN && has_ymm() {
        // SAFETY: `data` is valid for `data.len() >= YMM_MIN_LEN` bytes of reads and the
        // CPU has the kernel's features (checked just above).
        return unsafe { ymm::crc(data.as_ptr(), data.len(), crc) };
    }
    crc32c::crc32c_append(crc, data)
}

/// The portable path: copy, then the CRC over the copy ([`crc32c_append`]'s choice
/// below [`WIDE_MIN_LEN`]: the `crc32` instruction inline for short copies).
fn copy_then_crc(dst: &mut [u8], src: &[u8], crc: u32) -> u32 {
    copy::copy(dst, src);
    crc32c_append(crc, dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A path: copies its second argument into its first, returns the CRC.
    type Path = fn(&mut [u8], &[u8], u32) -> u32;

    /// Every path this CPU can run, by name.
    fn paths() -> Vec<(&'static str, Path)> {
        let mut v: Vec<(&'static str, Path)> = vec![
            ("dispatch", copy_crc32c),
            ("portable", copy_then_crc),
            ("raw", |d, s, c| {
                // SAFETY: `s` is a live slice of at least `d.len()` bytes (the callers
                // pass equal lengths) that does not overlap `d`.
                unsafe { copy_crc32c_from_raw(d, s.as_ptr(), c) }
            }),
            ("raw destination", |d, s, c| {
                // SAFETY: `d` is a live slice of at least `s.len()` bytes (the callers
                // pass equal lengths) that does not overlap `s`.
                unsafe { copy_crc32c_to_raw(d.as_mut_ptr(), s, c) }
            }),
        ];
        #[cfg(target_arch = "x86_64")]
        if has_wide() {
            v.push(("wide", |d, s, c| {
                // SAFETY: equal lengths (the callers), disjoint slices, features checked.
                unsafe { wide::copy_crc(d.as_mut_ptr(), s.as_ptr(), d.len(), c) }
            }));
        }
        #[cfg(target_arch = "x86_64")]
        if has_ymm() {
            v.push(("ymm", |d, s, c| {
                if d.len() < ymm::YMM_MIN_LEN {
                    return copy_then_crc(d, s, c);
                }
                // SAFETY: equal lengths (the callers) of at least YMM_MIN_LEN, disjoint
                // slices, features checked.
                unsafe { ymm::copy_crc(d.as_mut_ptr(), s.as_ptr(), d.len(), c) }
            }));
        }
        v
    }

    /// A CRC-only path: the CRC of its second argument continued from its first.
    type CrcPath = fn(u32, &[u8]) -> u32;

    /// Every CRC-only path this CPU can run (no copy), by name.
    fn crc_paths() -> Vec<(&'static str, CrcPath)> {
        let mut v: Vec<(&'static str, CrcPath)> = vec![("dispatch", crc32c_append)];
        #[cfg(target_arch = "x86_64")]
        if has_crc32_instruction() {
            v.push(("crc32 instruction", |c, s| {
                // SAFETY: `crc_bytes` reads exactly `s.len()` bytes of the live slice `s`
                // (any length); SSE 4.2 checked just above.
                unsafe { !wide::crc_bytes(!c, s.as_ptr(), s.len()) }
            }));
        }
        #[cfg(target_arch = "x86_64")]
        if has_wide() {
            v.push(("wide", |c, s| {
                if s.len() < WIDE_MIN_LEN {
                    return crc32c::crc32c_append(c, s);
                }
                // SAFETY: a live slice of at least WIDE_MIN_LEN bytes, features checked.
                unsafe { wide::crc(s.as_ptr(), s.len(), c) }
            }));
        }
        #[cfg(target_arch = "x86_64")]
        if has_ymm() {
            v.push(("ymm", |c, s| {
                if s.len() < ymm::YMM_MIN_LEN {
                    return crc32c::crc32c_append(c, s);
                }
                // SAFETY: a live slice of at least YMM_MIN_LEN bytes, features checked.
                unsafe { ymm::crc(s.as_ptr(), s.len(), c) }
            }));
        }
        v
    }

    fn check(src: &[u8], dst: &mut [u8], init: u32) {
        let want = crc32c::crc32c_append(init, src);
        for (name, f) in crc_paths() {
            assert_eq!(f(init, src), want, "{name} crc only: len {}", src.len());
        }
        for (name, f) in paths() {
            dst.fill(0x5a);
            let got = f(dst, src, init);
            assert_eq!(got, want, "{name}: len {} init {init:#x}", src.len());
            assert_eq!(dst, src, "{name}: len {} copied wrong", src.len());
        }
    }

    #[test]
    fn every_length_to_2048_from_zero_and_a_running_crc() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let src: Vec<u8> = (0..2048).map(|_| rng.gen()).collect();
        let mut dst = vec![0u8; 2048];
        for len in 0..=2048 {
            let init = if len % 2 == 0 { 0 } else { rng.gen() };
            check(&src[..len], &mut dst[..len], init);
        }
    }

    #[test]
    fn random_lengths_alignments_and_initial_crcs() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let src: Vec<u8> = (0..70_000).map(|_| rng.gen()).collect();
        let mut dst = vec![0u8; 70_000];
        for _ in 0..2_000 {
            let len = rng.gen_range(0..66_000);
            let (s, d) = (rng.gen_range(0..64), rng.gen_range(0..64));
            check(&src[s..s + len], &mut dst[d..d + len], rng.gen());
        }
    }

    #[test]
    fn continues_like_one_crc_over_the_concatenation() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut dst = vec![0u8; 20_000];
        for cut in [0, 1, 255, 256, 1000, 9000, 19_999, 20_000] {
            let a = copy_crc32c(&mut dst[..cut], &src[..cut], 0);
            let b = copy_crc32c(&mut dst[cut..], &src[cut..], a);
            assert_eq!(b, crc32c::crc32c(&src), "cut {cut}");
            assert_eq!(dst, src);
        }
    }

    #[test]
    fn unequal_lengths_copy_the_shorter() {
        let src = [7u8; 300];
        let mut dst = [0u8; 500];
        assert_eq!(copy_crc32c(&mut dst, &src, 0), crc32c::crc32c(&src));
        assert_eq!(&dst[..300], &src[..]);
        assert!(dst[300..].iter().all(|&b| b == 0));
        let mut short = [0u8; 10];
        assert_eq!(copy_crc32c(&mut short, &src, 0), crc32c::crc32c(&src[..10]));
    }

    #[test]
    fn known_answer() {
        // RFC 3720 appendix B.4: 32 bytes of zeros.
        let mut dst = [1u8; 32];
        assert_eq!(copy_crc32c(&mut dst, &[0u8; 32], 0), 0x8a91_36aa);
        // And 4 KiB through the wide path.
        let src = vec![0u8; 4096];
        let mut out = vec![1u8; 4096];
        assert_eq!(copy_crc32c(&mut out, &src, 0), crc32c::crc32c(&src));
    }

    #[test]
    fn folding_constants_are_powers_of_x() {
        assert_eq!(xpow(0), 0x8000_0000);
        assert_eq!(xpow(1), 0x4000_0000);
        // x^32 mod P is P's low terms: the reflected polynomial itself.
        assert_eq!(xpow(32), P_REFLECTED);
    }
}
