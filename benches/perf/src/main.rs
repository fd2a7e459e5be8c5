//! `iwarp-perf`: a perftest-like benchmark over iwarpd's shared-memory verbs.
//!
//! ```text
//! iwarp-perf <write_bw|write_lat|read_bw|read_lat|send_bw|send_lat>
//!     [--server | --connect IP | --loopback [--peer-daemon NAME]] [--port P] [--daemon NAME]
//!     [-s SIZE | -a] [-n ITERS | -D SECONDS] [--depth N] [--qps N] [--ird N] [--ord N]
//!     [--json FILE]
//! ```
//!
//! Exit codes: 0 success; 1 the run failed; 2 usage error; 3 the daemon could not be
//! reached or refused the set-up.

mod args;
mod client;
mod progress;
mod report;
mod responder;
mod run;
mod setup;
mod stats;
mod wire;

use std::process::ExitCode;

/// Why a run failed.
#[derive(Debug)]
pub enum PerfError {
    /// A verbs call failed.
    Verbs(String, iwarp_verbs::Error),
    /// Connection set-up failed.
    Setup(String),
    /// The measurement failed (error completion, stall).
    Run(String),
    /// Writing the report failed.
    Io(String),
}

impl PerfError {
    /// A verbs failure while doing `what`.
    pub fn verbs(what: impl Into<String>, e: iwarp_verbs::Error) -> PerfError {
        PerfError::Verbs(what.into(), e)
    }

    fn exit_code(&self) -> u8 {
        match self {
            PerfError::Verbs(..) | PerfError::Setup(_) => 3,
            PerfError::Run(_) | PerfError::Io(_) => 1,
        }
    }
}

impl std::fmt::Display for PerfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PerfError::Verbs(w, e) => write!(f, "{w}: {e}"),
            PerfError::Setup(m) | PerfError::Run(m) | PerfError::Io(m) => f.write_str(m),
        }
    }
}

fn main() -> ExitCode {
    let args = match args::Args::parse_from_args(std::env::args()) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    let result = run::run(&args).and_then(|results| {
        if let Some(path) = &args.json {
            let daemons = std::iter::once(args.daemon.clone())
                .chain(args.peer_daemon.clone())
                .collect();
            let info = report::RunInfo {
                test: args.test,
                qps: args.qp_count(),
                depth: args.effective_depth(),
                daemons,
                peer: args.connect.map_or_else(
                    || "loopback".to_string(),
                    |ip| format!("{ip}:{}", args.port),
                ),
            };
            let text =
                serde_json::to_string_pretty(&report::json(&info, &results)).unwrap_or_default();
            std::fs::write(path, text + "\n")
                .map_err(|e| PerfError::Io(format!("writing {}: {e}", path.display())))?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iwarp-perf: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
