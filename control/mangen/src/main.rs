//! `iwarp-mangen DIR`: writes section-1 man pages (`DIR/iwarpd.1`, `DIR/iwarpctl.1`,
//! `DIR/iwarp-perf.1` and one page per subcommand, e.g. `iwarpctl-status.1`) from the clap
//! definitions the binaries parse, so the pages never disagree with `--help`.
//!
//! iwarpctl and iwarp-perf are binary crates; their command-line modules have no
//! dependency on the rest of their crate (iwarpctl's uses iwarp-shm-socket), so they are compiled in here by path.
#![forbid(unsafe_code)]

#[allow(dead_code)]
#[path = "../../../benches/perf/src/args.rs"]
mod iwarp_perf_args;
#[allow(dead_code)]
#[path = "../../iwarpctl/src/cli.rs"]
mod iwarpctl_cli;

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: iwarp-mangen DIR");
        return ExitCode::from(2);
    };
    let dir = Path::new(&dir);
    let commands = [
        iwarp_config::Cli::command(),
        iwarpctl_cli::Cli::command(),
        iwarp_perf_args::Args::command(),
    ];
    let result = std::fs::create_dir_all(dir).and_then(|()| {
        commands
            .into_iter()
            .try_for_each(|c| clap_mangen::generate_to(c, dir))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp-mangen: {}: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}
