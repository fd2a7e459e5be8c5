//! `iwarp-cpu-probe [--cpus A,B] [--rounds N] [--round-ms MS] [--ring]`: the round trip
//! of one cache line between CPUs A and B (`iwarp_benches::cpu_probe`), one figure per
//! round, then the median; with `--ring`, the Gbit/s of jumbo frames copied through a
//! memif-like ring from A to B instead (`--slots`, `--slot-bytes`, `--frame-bytes`). Run it while nothing else busy-polls either CPU (a dataplane core
//! there takes turns with the probe and the figure is the scheduler's, not the caches').
//!
//! Output, one line: `cross_cpu_round_trip: cpus 0,1 median 55.2 ns (min 52.0, max
//! 60.1) over 10 rounds of 100 ms: 52.0 53.1 ...` (with `--ring`: `cross_cpu_ring: cpus
//! 0,1 median 201.3 Gbit/s ...`); exit status 1 with the reason when it
//! cannot measure.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use iwarp_benches::cpu_probe::{
    cross_cpu_ring_gbps, cross_cpu_round_trip_ns, median, ProbeConfig, RingConfig, ROUNDS_MAX,
};

#[derive(Parser, Debug)]
#[command(about = "Round trip of one cache line between two CPUs")]
struct Args {
    /// The measuring CPU and the responding CPU.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1])]
    cpus: Vec<usize>,
    /// Rounds (one figure each).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=i64::from(ROUNDS_MAX)))]
    rounds: u32,
    /// Length of a round, ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    round_ms: u64,
    /// Measure frames copied through a ring of buffers from the first CPU to the second
    /// (Gbit/s) instead of a cache line's round trip.
    #[arg(long)]
    ring: bool,
    /// Buffers in the ring (--ring).
    #[arg(long, default_value_t = 1024)]
    slots: usize,
    /// Bytes of one ring buffer (--ring).
    #[arg(long, default_value_t = 10_240)]
    slot_bytes: usize,
    /// Bytes copied in and out per frame (--ring).
    #[arg(long, default_value_t = 9_014)]
    frame_bytes: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let [a, b] = args.cpus[..] else {
        eprintln!("iwarp-cpu-probe: --cpus takes two CPUs, e.g. --cpus 0,1");
        return ExitCode::FAILURE;
    };
    let cfg = ProbeConfig {
        cpus: (a, b),
        rounds: args.rounds,
        round: Duration::from_millis(args.round_ms),
    };
    let (what, unit, measured) = if args.ring {
        let ring = RingConfig {
            probe: cfg,
            slots: args.slots,
            slot_bytes: args.slot_bytes,
            frame_bytes: args.frame_bytes,
        };
        ("cross_cpu_ring", "Gbit/s", cross_cpu_ring_gbps(&ring))
    } else {
        ("cross_cpu_round_trip", "ns", cross_cpu_round_trip_ns(&cfg))
    };
    match measured {
        Ok(v) => {
            let med = median(&v).unwrap_or(f64::NAN);
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(0.0, f64::max);
            let each: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
            println!(
                "{what}: cpus {a},{b} median {med:.1} {unit} (min {min:.1}, max {max:.1}) over {} rounds of {} ms: {}",
                args.rounds,
                args.round_ms,
                each.join(" ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iwarp-cpu-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
