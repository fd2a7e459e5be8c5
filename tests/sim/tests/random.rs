//! The randomized suite: many small seeded whole-system runs mixing every operation and
//! message sizes from 0 bytes to 1 MiB under loss, reordering, duplication and corruption.
//!
//! `IWARP_SEED=<seed>` replays one run; `IWARP_SIM_RUNS=<n>` changes the number of runs
//! (default 1,000, split over four tests so the harness runs them in parallel).
//! `IWARP_SIM_KEEP_GOING=1` (scripts/sim-soak.sh) goes on after a failed run: each
//! failure prints its seed, each shard ends with `shard N: R runs, F failed`, and the
//! shard fails at the end if any run did.

use iwarp_sim::rng::{fresh_seed, run_seed, seed_from_env, SeedGuard};
use iwarp_sim::suite::{self, RunStats};

const RUNS_DEFAULT: u64 = 1_000;
const SHARDS: u64 = 4;

fn runs() -> u64 {
    std::env::var("IWARP_SIM_RUNS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(RUNS_DEFAULT)
}

fn shard(index: u64) {
    if let Some(seed) = seed_from_env() {
        // Replay: shard 0 runs the given seed once; the others have nothing to do.
        if index == 0 {
            let _g = SeedGuard::new(seed, "random (replay)");
            match suite::run_seed(seed) {
                Ok(s) => eprintln!("replayed 0x{seed:016x}: {s:?}"),
                Err(e) => panic!("run 0x{seed:016x} failed: {e}"),
            }
        }
        return;
    }
    let base = fresh_seed();
    let total = runs();
    let keep_going = std::env::var("IWARP_SIM_KEEP_GOING").is_ok_and(|v| v == "1");
    let mut sum = RunStats::default();
    let mut n = 0;
    let mut failed = 0u64;
    for i in (index..total).step_by(SHARDS as usize) {
        let seed = run_seed(base, i);
        if keep_going {
            // A panic inside a run (a simulator bound) is a failure of that run too.
            let r = std::panic::catch_unwind(|| suite::run_seed(seed))
                .unwrap_or_else(|_| Err("panicked".to_string()));
            match r {
                Ok(_) => n += 1,
                Err(e) => {
                    failed += 1;
                    eprintln!("run {i} failed: {e}\nreplay with IWARP_SEED=0x{seed:016x}");
                }
            }
            continue;
        }
        let _g = SeedGuard::new(seed, "random");
        match suite::run_seed(seed) {
            Ok(s) => {
                sum.ops += s.ops;
                sum.bytes += s.bytes;
                sum.frames += s.frames;
                sum.lost += s.lost;
                sum.corrupted += s.corrupted;
                sum.virtual_ns += s.virtual_ns;
                sum.closed |= s.closed;
                n += 1;
            }
            Err(e) => panic!("run {i} failed: {e}\nreplay with IWARP_SEED=0x{seed:016x}"),
        }
    }
    if keep_going {
        eprintln!("shard {index}: {} runs, {failed} failed", n + failed);
        assert_eq!(failed, 0, "shard {index}: {failed} runs failed");
        return;
    }
    eprintln!(
        "shard {index}: {n} runs, {} ops, {} bytes, {} frames ({} lost, {} corrupted and rejected)",
        sum.ops, sum.bytes, sum.frames, sum.lost, sum.corrupted
    );
}

#[test]
fn random_shard_0() {
    shard(0);
}

#[test]
fn random_shard_1() {
    shard(1);
}

#[test]
fn random_shard_2() {
    shard(2);
}

#[test]
fn random_shard_3() {
    shard(3);
}
