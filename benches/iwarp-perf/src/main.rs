//! `iwarp-perf`: a perftest-like benchmark over iwarpd's shared-memory verbs.

mod args;
mod report;
mod stats;
mod wire;

fn main() {
    let args = match args::Args::parse_from_args(std::env::args()) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    println!("{}", report::header(args.test));
}
