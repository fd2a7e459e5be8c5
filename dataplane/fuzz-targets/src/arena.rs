//! The initial content of the memory arenas of the stateful targets: a byte pattern (so
//! that any write is visible), computed once, copied in and compared with `memcpy`/`memcmp`
//! speed (a per-byte loop would run under the fuzzer's comparison tracing).

use std::sync::OnceLock;

/// Largest arena any target uses.
pub const ARENA_MAX: usize = 128 * 1024;

/// The pattern byte of offset `i`.
pub const fn pattern_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(151).wrapping_add(0x3b)
}

/// The pattern of `[0, ARENA_MAX)`.
pub fn pattern() -> &'static [u8] {
    static P: OnceLock<Vec<u8>> = OnceLock::new();
    P.get_or_init(|| (0..ARENA_MAX).map(pattern_byte).collect())
}

/// Fills `arena` (at most [`ARENA_MAX`] bytes) with the pattern.
pub fn fill(arena: &mut [u8]) {
    let n = arena.len().min(ARENA_MAX);
    arena[..n].copy_from_slice(&pattern()[..n]);
}

/// The first offset in `[lo, hi)` of `arena` that no longer holds the pattern.
pub fn first_change(arena: &[u8], lo: usize, hi: usize) -> Option<usize> {
    let hi = hi.min(arena.len()).min(ARENA_MAX);
    let lo = lo.min(hi);
    if arena[lo..hi] == pattern()[lo..hi] {
        return None;
    }
    (lo..hi).find(|&i| arena[i] != pattern()[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_find_a_change() {
        let mut a = vec![0u8; 1000];
        fill(&mut a);
        assert_eq!(first_change(&a, 0, 1000), None);
        a[700] ^= 1;
        assert_eq!(first_change(&a, 0, 1000), Some(700));
        assert_eq!(first_change(&a, 701, 5000), None);
        assert_eq!(a[3], pattern_byte(3));
    }
}
