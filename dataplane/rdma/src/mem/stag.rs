//! STag index allocation: hard to predict, never zero, O(1) lookup.
//!
//! RFC 5040 section 8.1.1 #8 asks for STag values that are difficult to predict, and verbs
//! 7.2.1 forbids index 0. The table has `n` slots; slot `s` in generation `g` is the
//! value `v = g * n + s` (`v < 2^24`), and its 24-bit STag index is `P(v)`, where `P` is a
//! permutation of the 24-bit space keyed by the construction seed: a four-round Feistel
//! network over 12-bit halves whose round function is a keyed multiply/xor-shift mix
//! (two 64-bit round keys per round, derived from the seed once at construction). The
//! Feistel structure makes it a permutation whatever the round function; the keyed mix
//! makes the index of a slot unpredictable without the seed. Looking an index up is `P⁻¹`
//! (four rounds of a few multiplications: it runs on every tagged segment, so it must be
//! cheap) plus one slot read; a slot's generation advances each time it is freed, so a
//! stale STag never names the object that reuses its slot. The free-slot order is also
//! shuffled by the seed.

/// Number of distinct STag indices (24 bits).
const INDEX_SPACE: u32 = 1 << 24;
const HALF_BITS: u32 = 12;
const HALF_MASK: u32 = (1 << HALF_BITS) - 1;
const ROUNDS: usize = 4;
/// Largest table: every slot keeps at least four generations.
pub(crate) const MAX_SLOTS: usize = 1 << 22;

/// SplitMix64: expands the seed into keys and shuffle decisions.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The keyed permutation between slot values and STag indices.
pub(crate) struct StagSpace {
    /// Per round: the key xored into the input and the (odd) keyed multiplier.
    keys: [(u64, u64); ROUNDS],
    slots: u32,
}

impl StagSpace {
    /// A space of `slots` slots (clamped to `1..=MAX_SLOTS`), keyed by `seed`, with the
    /// seed-shuffled free order and initial generations.
    pub(crate) fn new(seed: u64, slots: usize) -> (StagSpace, Vec<u32>, Vec<u32>) {
        let slots = slots.clamp(1, MAX_SLOTS) as u32;
        let mut st = seed;
        let mut keys = [(0u64, 0u64); ROUNDS];
        for k in keys.iter_mut() {
            *k = (splitmix(&mut st), splitmix(&mut st) | 1);
        }
        let space = StagSpace { keys, slots };
        // Fisher-Yates over the free list; it is popped from the end.
        let mut free: Vec<u32> = (0..slots).collect();
        for i in (1..free.len()).rev() {
            let j = (splitmix(&mut st) % (i as u64 + 1)) as usize;
            free.swap(i, j);
        }
        let generations = (0..slots)
            .map(|s| (splitmix(&mut st) % space.generations(s) as u64) as u32)
            .collect();
        (space, free, generations)
    }

    /// The round function: the 12-bit half mixed with the round's keys; the top 12 bits
    /// of the second product depend on every input and key bit.
    fn round(&self, round: usize, half: u32) -> u32 {
        let (xor, mul) = self.keys[round % ROUNDS];
        let mut z = (u64::from(half) ^ xor).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z ^= z >> 29;
        z = z.wrapping_mul(mul);
        (z >> (64 - HALF_BITS)) as u32 & HALF_MASK
    }

    fn permute(&self, v: u32) -> u32 {
        let (mut l, mut r) = ((v >> HALF_BITS) & HALF_MASK, v & HALF_MASK);
        for i in 0..ROUNDS {
            let f = self.round(i, r);
            (l, r) = (r, l ^ f);
        }
        (l << HALF_BITS) | r
    }

    fn unpermute(&self, index: u32) -> u32 {
        let (mut l, mut r) = ((index >> HALF_BITS) & HALF_MASK, index & HALF_MASK);
        for i in (0..ROUNDS).rev() {
            let f = self.round(i, l);
            (l, r) = (r ^ f, l);
        }
        (l << HALF_BITS) | r
    }

    /// Number of generations slot `s` cycles through.
    fn generations(&self, s: u32) -> u32 {
        (INDEX_SPACE - s).div_ceil(self.slots)
    }

    /// The STag index of slot `s` in generation `g`, or `None` if that pair maps to
    /// index 0 (the caller then moves to the next generation).
    pub(crate) fn index(&self, s: u32, g: u32) -> Option<u32> {
        let v = g.checked_mul(self.slots)?.checked_add(s)?;
        if v >= INDEX_SPACE {
            return None;
        }
        Some(self.permute(v)).filter(|&i| i != 0)
    }

    /// The generation after `g` for slot `s`.
    pub(crate) fn next_generation(&self, s: u32, g: u32) -> u32 {
        let n = g.wrapping_add(1);
        if n >= self.generations(s) {
            0
        } else {
            n
        }
    }

    /// The (slot, generation) an index names, if the slot exists.
    pub(crate) fn locate(&self, index: u32) -> Option<(u32, u32)> {
        if index == 0 || index >= INDEX_SPACE {
            return None;
        }
        let v = self.unpermute(index);
        Some((v % self.slots, v / self.slots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_round_trips() {
        let (sp, _, _) = StagSpace::new(42, 1000);
        for v in [0u32, 1, 2, 999, 1000, 123_456, INDEX_SPACE - 1] {
            let i = sp.permute(v);
            assert!(i < INDEX_SPACE);
            assert_eq!(sp.unpermute(i), v);
        }
    }

    #[test]
    fn permutation_is_a_bijection_on_a_sample() {
        let (sp, _, _) = StagSpace::new(7, 16);
        let mut seen = std::collections::HashSet::new();
        for v in 0..50_000u32 {
            assert!(seen.insert(sp.permute(v)));
        }
    }

    #[test]
    fn index_and_locate_agree_and_skip_zero() {
        let (sp, _, _) = StagSpace::new(1, 3);
        for s in 0..3 {
            for g in [0u32, 1, 2, 5_000, sp.generations(s) - 1] {
                if let Some(i) = sp.index(s, g) {
                    assert_ne!(i, 0);
                    assert_eq!(sp.locate(i), Some((s, g)));
                }
            }
            assert_eq!(
                sp.index(s, sp.generations(s)),
                None,
                "past the last generation"
            );
            assert_eq!(sp.next_generation(s, sp.generations(s) - 1), 0, "wraps");
        }
        assert_eq!(sp.locate(0), None);
        assert_eq!(sp.locate(INDEX_SPACE), None);
    }

    #[test]
    fn neighbouring_values_scatter() {
        // Avalanche over a sample: one flipped input bit changes about half of the 24
        // output bits, so a known index tells little about its neighbours' indices.
        let (sp, _, _) = StagSpace::new(0x5eed, 1 << 16);
        let (mut flipped, mut total) = (0u64, 0u64);
        for v in (0..INDEX_SPACE).step_by(4099) {
            for bit in 0..24 {
                let d = sp.permute(v) ^ sp.permute(v ^ (1 << bit));
                flipped += u64::from(d.count_ones());
                total += 24;
            }
        }
        let ratio = flipped as f64 / total as f64;
        assert!((0.4..0.6).contains(&ratio), "avalanche ratio {ratio}");
    }

    #[test]
    fn seeds_change_everything() {
        let (a, fa, ga) = StagSpace::new(1, 64);
        let (b, fb, gb) = StagSpace::new(2, 64);
        assert_ne!(fa, fb);
        assert_ne!(ga, gb);
        let ia: Vec<_> = (0..16).map(|v| a.permute(v)).collect();
        let ib: Vec<_> = (0..16).map(|v| b.permute(v)).collect();
        assert_ne!(ia, ib);
        let (c, fc, _) = StagSpace::new(1, 64);
        assert_eq!(fa, fc, "same seed, same order: deterministic");
        assert_eq!(c.permute(5), a.permute(5));
    }
}
