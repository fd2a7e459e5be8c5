//! The seed of a simulation run and the random stream derived from it.
//!
//! `IWARP_SEED=<seed>` (decimal or `0x`-hex) replays a run; without it a seed is chosen
//! from the wall clock. Every random choice of a run comes from one [`SimRng`] (ChaCha8
//! seeded with the seed), so a seed reproduces a run bit for bit. A [`SeedGuard`] prints
//! `IWARP_SEED=0x...` when the thread unwinds from a panic, so a failing run always tells
//! how to replay it.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Environment variable holding the seed to replay.
pub const SEED_ENV: &str = "IWARP_SEED";

/// Parses a seed written in decimal or `0x`-prefixed hexadecimal (underscores allowed).
pub fn parse_seed(text: &str) -> Option<u64> {
    let t: String = text.trim().chars().filter(|c| *c != '_').collect();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// The seed given in `IWARP_SEED`, if any. A value that does not parse is an error of the
/// person running the test, reported loudly.
pub fn seed_from_env() -> Option<u64> {
    let text = std::env::var(SEED_ENV).ok()?;
    match parse_seed(&text) {
        Some(s) => Some(s),
        None => panic!("{SEED_ENV}={text:?} is neither decimal nor 0x-hex"),
    }
}

/// A fresh seed from the wall clock and a process-wide counter (only used when no seed
/// was given; the run prints it on failure).
pub fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    splitmix64(nanos ^ splitmix64(n ^ u64::from(std::process::id())))
}

/// The seed of `IWARP_SEED` or a fresh one.
pub fn seed_or_fresh() -> u64 {
    seed_from_env().unwrap_or_else(fresh_seed)
}

/// SplitMix64: derives well-spread seeds from a base seed and an index.
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of run `index` of a suite started with `base`.
pub const fn run_seed(base: u64, index: u64) -> u64 {
    splitmix64(base ^ splitmix64(index))
}

/// Prints the seed when the thread panics (from `Drop`), so a failure can be replayed.
#[derive(Debug)]
pub struct SeedGuard {
    seed: u64,
    label: &'static str,
}

impl SeedGuard {
    /// A guard for `seed`; `label` names the test in the message.
    pub fn new(seed: u64, label: &'static str) -> SeedGuard {
        SeedGuard { seed, label }
    }

    /// The guarded seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: replay with {SEED_ENV}=0x{:016x}",
                self.label, self.seed
            );
        }
    }
}

/// The random stream of a run: ChaCha8 seeded from the run's seed.
#[derive(Clone, Debug)]
pub struct SimRng {
    inner: ChaCha8Rng,
    seed: u64,
}

impl SimRng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> SimRng {
        SimRng {
            inner: ChaCha8Rng::seed_from_u64(seed),
            seed,
        }
    }

    /// The seed this stream started from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// An independent stream for a sub-component (derived from this one, deterministic).
    pub fn fork(&mut self) -> SimRng {
        SimRng::new(self.inner.next_u64())
    }

    /// True with probability `p` (clamped to `[0, 1]`; `p <= 0` never draws).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.inner.gen::<f64>() < p
    }

    /// Uniform in `[0, n)`; zero when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.inner.gen_range(0..n)
        }
    }

    /// Uniform in `[lo, hi]`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            self.inner.gen_range(lo..=hi)
        }
    }

    /// A uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform `u32`.
    pub fn next_u32(&mut self) -> u32 {
        self.inner.next_u32()
    }

    /// Fills `buf` with random bytes.
    pub fn fill_bytes(&mut self, buf: &mut [u8]) {
        self.inner.fill_bytes(buf);
    }

    /// Picks one element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let i = self.below(items.len() as u64) as usize;
        &items[i]
    }

    /// A size skewed towards small values: mostly `[0, 64]`, often up to a few KiB,
    /// sometimes up to `max`.
    pub fn skewed_len(&mut self, max: u64) -> u64 {
        let roll = self.below(100);
        let cap = if roll < 45 {
            64
        } else if roll < 80 {
            2048
        } else if roll < 96 {
            16 * 1024
        } else {
            max
        };
        self.range_inclusive(0, cap.min(max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2A "), Some(42));
        assert_eq!(parse_seed("0xdead_beef"), Some(0xdead_beef));
        assert_eq!(parse_seed("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_seed("0x1_0000_0000_0000_0000"), None);
        assert_eq!(parse_seed("zz"), None);
        assert_eq!(parse_seed(""), None);
    }

    #[test]
    fn same_seed_same_stream() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        assert_eq!(va, vb);
        let mut c = SimRng::new(8);
        assert_ne!(va[0], c.next_u64());
        let (mut fa, mut fb) = (a.fork(), b.fork());
        assert_eq!(fa.next_u64(), fb.next_u64());
    }

    #[test]
    fn chance_edges_and_ranges() {
        let mut r = SimRng::new(1);
        assert!(!(0..100).any(|_| r.chance(0.0)));
        assert!((0..100).all(|_| r.chance(1.0)));
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range_inclusive(5, 5), 5);
        for _ in 0..1000 {
            let v = r.range_inclusive(3, 9);
            assert!((3..=9).contains(&v));
            assert!(r.skewed_len(100) <= 100);
        }
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
    }

    #[test]
    fn run_seeds_differ() {
        let s: std::collections::HashSet<u64> = (0..1000).map(|i| run_seed(5, i)).collect();
        assert_eq!(s.len(), 1000);
    }

    #[test]
    fn guard_reports_only_on_panic() {
        let g = SeedGuard::new(3, "t");
        assert_eq!(g.seed(), 3);
        drop(g);
        let r = std::panic::catch_unwind(|| {
            let _g = SeedGuard::new(4, "panicking");
            panic!("boom");
        });
        assert!(r.is_err());
    }
}
