//! Writes the representative simulated session (see `iwarp_sim::session`) to a pcap.
//!
//! usage: sim-pcap OUT.pcap        (`IWARP_SEED=<seed>` replays a run)

use std::fs::File;
use std::io::BufWriter;
use std::process::ExitCode;

use iwarp_sim::rng::seed_or_fresh;
use iwarp_sim::session::representative_session;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: sim-pcap OUT.pcap");
        return ExitCode::from(2);
    };
    let file = match File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sim-pcap: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let seed = seed_or_fresh();
    match representative_session(seed, Box::new(BufWriter::new(file))) {
        Ok(s) => {
            println!(
                "sim-pcap: {path}: {} frames, {} ns of virtual time (IWARP_SEED=0x{seed:016x})",
                s.frames, s.end_ns
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sim-pcap: session failed: {e} (IWARP_SEED=0x{seed:016x})");
            ExitCode::FAILURE
        }
    }
}
