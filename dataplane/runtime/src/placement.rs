//! Which core gets a new QP: least loaded (fewest QPs, the default), round-robin, or by
//! hash of a caller key. Loads come from the cores' published QP counts, corrected by the
//! placements made since each core last published.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::counters::CoreStats;

/// How QPs are spread over cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PlacementPolicy {
    /// The core with the fewest QPs (ties: the lowest index).
    #[default]
    LeastLoaded,
    /// Each core in turn.
    RoundRobin,
    /// A hash of the caller's key (the same key always lands on the same core).
    Hash,
}

/// Picks cores for new QPs (control thread).
#[derive(Debug)]
pub struct Placement {
    policy: PlacementPolicy,
    cores: Vec<Arc<CoreStats>>,
    next: usize,
    /// Per core: placements since its publication counter last moved, and that counter.
    placed: Vec<(u64, u64)>,
}

impl Placement {
    /// Placement over `cores` (their published stats), by `policy`.
    pub fn new(policy: PlacementPolicy, cores: Vec<Arc<CoreStats>>) -> Placement {
        let placed = vec![(0, 0); cores.len()];
        Placement {
            policy,
            cores,
            next: 0,
            placed,
        }
    }

    /// The policy.
    pub fn policy(&self) -> PlacementPolicy {
        self.policy
    }

    /// The QP count of core `i` as placement sees it.
    fn load(&mut self, i: usize) -> u64 {
        let s = &self.cores[i];
        let publications = s.publications.load(Ordering::Acquire);
        let entry = &mut self.placed[i];
        if entry.1 != publications {
            // The core published since: its count includes what was placed before.
            *entry = (0, publications);
        }
        s.qps.load(Ordering::Relaxed) + entry.0
    }

    /// The index (in the `cores` given to [`Placement::new`]) of the core for a new QP;
    /// `key` is used by [`PlacementPolicy::Hash`]. `None` if there are no cores.
    pub fn pick(&mut self, key: u64) -> Option<usize> {
        let n = self.cores.len();
        if n == 0 {
            return None;
        }
        let i = match self.policy {
            PlacementPolicy::LeastLoaded => {
                let mut best = 0;
                let mut best_load = u64::MAX;
                for i in 0..n {
                    let l = self.load(i);
                    if l < best_load {
                        (best, best_load) = (i, l);
                    }
                }
                best
            }
            PlacementPolicy::RoundRobin => {
                let i = self.next % n;
                self.next = (i + 1) % n;
                i
            }
            PlacementPolicy::Hash => {
                let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                ((h >> 32) % n as u64) as usize
            }
        };
        self.load(i);
        self.placed[i].0 += 1;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::CorePlain;

    fn cores(qps: &[u64]) -> Vec<Arc<CoreStats>> {
        qps.iter()
            .enumerate()
            .map(|(i, &q)| {
                let s = Arc::new(CoreStats::new(i, &[]));
                s.publish(&CorePlain::default(), &[], q);
                s
            })
            .collect()
    }

    #[test]
    fn least_loaded_counts_its_own_placements() {
        let cs = cores(&[5, 2, 3]);
        let mut p = Placement::new(PlacementPolicy::LeastLoaded, cs.clone());
        let picks: Vec<_> = (0..4).map(|_| p.pick(0).unwrap()).collect();
        // 2 -> core 1 (3), tie 3/3 -> core 1? no: core1=3, core2=3 -> lowest index 1.
        assert_eq!(picks, vec![1, 1, 2, 1]);
        // A publication resets the correction.
        cs[0].publish(&CorePlain::default(), &[], 0);
        assert_eq!(p.pick(0), Some(0));
    }

    #[test]
    fn round_robin_and_hash() {
        let mut p = Placement::new(PlacementPolicy::RoundRobin, cores(&[0, 0, 0]));
        let picks: Vec<_> = (0..4).map(|_| p.pick(0).unwrap()).collect();
        assert_eq!(picks, vec![0, 1, 2, 0]);
        let mut h = Placement::new(PlacementPolicy::Hash, cores(&[0, 0]));
        let a = h.pick(42).unwrap();
        assert_eq!(h.pick(42), Some(a));
        let spread: std::collections::HashSet<_> = (0..64).map(|k| h.pick(k).unwrap()).collect();
        assert_eq!(spread.len(), 2);
        assert_eq!(Placement::new(PlacementPolicy::Hash, vec![]).pick(1), None);
    }
}
