//! `iwarpd`: the software iWARP appliance daemon. See `iwarpd --help`.
#![forbid(unsafe_code)]

mod apps;
mod capture;
mod daemon;
mod devices;
mod link;
mod loadgen;
mod loadgen_interval;
mod lock;
mod log;
mod metrics;
mod metrics_loadgen;
mod notify;
mod ports;
mod stats;
mod telemetry;
mod verbs;

use std::process::ExitCode;

use clap::Parser;
use iwarp_config::{keys, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.help_config {
        print!("{}", keys::render());
        return ExitCode::SUCCESS;
    }
    let action = cli.action();
    if let Command::ConfigKeys = action {
        print!("{}", keys::render());
        return ExitCode::SUCCESS;
    }
    if let Command::ListDevices = action {
        print!(
            "{}",
            devices::render(&devices::list(std::path::Path::new("/sys")))
        );
        return ExitCode::SUCCESS;
    }
    let cfg = match cli.load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iwarpd: {e}");
            return ExitCode::from(2);
        }
    };
    log::init(
        &cfg.daemon.name,
        cfg.daemon.log_level,
        cfg.daemon.log_format,
    );
    let _root = log::root().entered();
    match action {
        Command::ConfigKeys | Command::ListDevices => ExitCode::SUCCESS,
        Command::CheckConfig => {
            // Every check that needs no device: the file's rules (done by load_config),
            // then this machine's CPUs and accounts.
            let online = iwarp_config::daemon::online_cpus();
            if let Err(e) = daemon::host_checks(&cfg, &online) {
                eprintln!("iwarpd: {e}");
                return ExitCode::from(2);
            }
            println!("{}", cfg.summary());
            println!("configuration is valid");
            ExitCode::SUCCESS
        }
        Command::PrintConfig => match cfg.to_toml_string() {
            Ok(t) => {
                print!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("iwarpd: {e}");
                ExitCode::from(2)
            }
        },
        Command::Stats(a) => {
            let path = a
                .socket
                .clone()
                .or_else(|| cfg.daemon.stats_socket_path().map(Into::into));
            let Some(path) = path else {
                eprintln!(
                    "iwarpd: daemon.stats_socket is off in this configuration; pass --socket PATH"
                );
                return ExitCode::from(2);
            };
            match stats::query(&path, a.json) {
                Ok(t) => {
                    print!("{t}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("iwarpd: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Run => finish(daemon::run(cfg, None)),
        Command::Loadgen(a) => finish(daemon::run(cfg, Some(a))),
    }
}

fn finish(r: Result<(), daemon::Failure>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            tracing::error!("{}", f.message);
            ExitCode::from(f.code)
        }
    }
}
