//! `iwarp-shm-pingpong [ROUND_TRIPS] [--size BYTES] [--warmup N]`: `send_lat` round trips
//! through two engines, their shared-memory verbs services and client rings in one
//! process (see `iwarp_benches::shm`). For counting instructions where hardware counters
//! are missing:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*measured_round_trips*' \
//!     target/release/iwarp-shm-pingpong 20000
//! ```
//!
//! counts only the measured round trips (not the set-up, not the warm-up).
#![forbid(unsafe_code)]

use std::process::ExitCode;

use iwarp_benches::shm::{measured_round_trips, ShmPingPong};

fn main() -> ExitCode {
    let mut n: u64 = 10_000;
    let mut size: u32 = 64;
    let mut warmup: u64 = 1_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let parsed = match a.as_str() {
            "--size" => args.next().and_then(|v| v.parse().ok()).map(|v| size = v),
            "--warmup" => args.next().and_then(|v| v.parse().ok()).map(|v| warmup = v),
            v => v.parse().ok().map(|v| n = v),
        };
        if parsed.is_none() {
            eprintln!("usage: iwarp-shm-pingpong [ROUND_TRIPS] [--size BYTES] [--warmup N]");
            return ExitCode::from(2);
        }
    }
    let run = || -> Result<ShmPingPong, iwarp_benches::BenchError> {
        let mut p = ShmPingPong::new(size)?;
        measured_round_trips(&mut p, 0)?;
        for _ in 0..warmup {
            p.round_trip()?;
        }
        let rounds = p.rounds;
        let start = std::time::Instant::now();
        measured_round_trips(&mut p, n)?;
        let t = start.elapsed();
        println!(
            "{n} round trips of {size} B: {:.3} us each (wall, both sides on one thread), {:.2} shuttle rounds each",
            t.as_secs_f64() * 1e6 / n.max(1) as f64,
            (p.rounds - rounds) as f64 / n.max(1) as f64
        );
        Ok(p)
    };
    match run() {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp-shm-pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}
