//! The command line: which daemon, which view, which format.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The exit codes, printed under `--help`.
pub const EXIT_CODES: &str =
    "Exit codes: 0 success; 1 the daemon refused or failed the request; 2 usage \
error; 3 the daemon is not running (no socket, or nobody listening on it); 4 permission denied \
(socket access, access policy or admin policy); 5 protocol version mismatch; 6 other \
communication failure (timeout, malformed or unexpected answer).";

/// The operator's view of a running iwarpd: its status, clients, verbs objects and
/// dataplane counters, read over the daemon's verbs socket with Admin requests.
#[derive(Debug, Parser, PartialEq, Eq)]
#[command(name = "iwarpctl", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// The daemon's name (`[daemon] name`): its socket is /run/iwarpd/NAME.verbs.
    #[arg(
        long,
        global = true,
        default_value = "iwarpd",
        conflicts_with = "socket"
    )]
    pub name: String,
    /// The daemon's verbs socket (`[control] socket`), instead of --name.
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// How long to wait for each answer, in milliseconds.
    #[arg(long, global = true, default_value_t = 5000, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub timeout_ms: u64,
    /// What to show.
    #[command(subcommand)]
    pub command: Command,
}

/// The views and actions.
#[derive(Debug, Subcommand, PartialEq, Eq, Clone)]
pub enum Command {
    /// The daemon: version, uptime, cores, ports, clients, object totals.
    Status,
    /// The ports: device (PCI address or vdev), driver, queues, offload and RSS
    /// capabilities and what is in use, link state and link changes.
    Ports,
    /// The connected clients and what each holds.
    Clients,
    /// Queue pairs (of every client, or of --client ID).
    Qps(ObjectFilter),
    /// Completion queues (of every client, or of --client ID).
    Cqs(ObjectFilter),
    /// Memory regions and windows (of every client, or of --client ID).
    Mrs(ObjectFilter),
    /// Dataplane counters, per core and summed; with --watch, what changed every interval.
    Counters(CounterArgs),
    /// Ends client ID's session (admin only): its socket closes, its calls answer that
    /// the daemon is gone, its objects are freed and its connections reset.
    DisconnectClient {
        /// The client, as `iwarpctl clients` shows it.
        #[arg(value_name = "ID")]
        id: u32,
    },
    /// Acts on one queue pair (admin only).
    #[command(subcommand)]
    Qp(QpCommand),
    /// Starts or stops a capture of the dataplane's frames into a pcap file (admin only).
    #[command(subcommand)]
    Capture(CaptureCommand),
}

/// `iwarpctl capture ...`.
#[derive(Debug, Subcommand, PartialEq, Eq, Clone)]
pub enum CaptureCommand {
    /// Creates FILE (as the user running iwarpctl; an existing file is replaced) and has
    /// the daemon write pcap into it: every frame its cores receive or send.
    Start {
        /// The pcap file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Only the frames of this port index (default: every port).
        #[arg(long, value_name = "N")]
        port: Option<u16>,
        /// Bytes kept of each frame (64..=65535; default: whole frames).
        #[arg(long, value_name = "N",
              value_parser = clap::value_parser!(u32).range(64..=65535))]
        snaplen: Option<u32>,
    },
    /// Stops the running capture; the daemon writes the rest and closes the file.
    Stop,
}

/// `iwarpctl qp ...`.
#[derive(Debug, Subcommand, PartialEq, Eq, Clone, Copy)]
pub enum QpCommand {
    /// Moves QP ID of client --client to Error: its WRs are flushed, its connection (if
    /// any) reset, and its owner gets a QP-fatal asynchronous event.
    Reset {
        /// The QP's handle, as `iwarpctl qps` shows it.
        #[arg(value_name = "ID")]
        id: u32,
        /// The client that owns it.
        #[arg(long, value_name = "CLIENT")]
        client: u32,
    },
}

/// Options of `counters`.
#[derive(Debug, clap::Args, PartialEq, Eq, Clone, Copy, Default)]
pub struct CounterArgs {
    /// Read the counters every SECONDS and print, for each counter that moved, its value,
    /// the change since the last reading and the rate per second (with --json, one JSON
    /// object per line). Ends after --count readings, or on SIGINT.
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub watch: Option<u32>,
    /// With --watch: stop after this many intervals (default: until interrupted).
    #[arg(long, value_name = "N", requires = "watch",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub count: Option<u32>,
}

/// Which client's objects.
#[derive(Debug, clap::Args, PartialEq, Eq, Clone, Copy)]
pub struct ObjectFilter {
    /// Only this client's objects (its id, as `iwarpctl clients` shows it).
    #[arg(long, value_name = "ID")]
    pub client: Option<u32>,
}

impl Command {
    /// For object views, the object kinds shown (the `kind` strings of `ObjectInfo`).
    pub fn object_kinds(&self) -> Option<&'static [&'static str]> {
        match self {
            Command::Qps(_) => Some(&["qp"]),
            Command::Cqs(_) => Some(&["cq"]),
            Command::Mrs(_) => Some(&["mr", "mw"]),
            _ => None,
        }
    }
}

impl Cli {
    /// The socket to connect to.
    pub fn socket_path(&self) -> PathBuf {
        match &self.socket {
            Some(p) => p.clone(),
            None => iwarp_shm_socket::default_socket_path(&self.name),
        }
    }

    /// What to call the daemon in messages.
    pub fn daemon_label(&self) -> String {
        match &self.socket {
            Some(_) => "iwarpd".to_string(),
            None => format!("iwarpd {}", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("iwarpctl").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_name_the_default_daemon() {
        let c = parse(&["status"]).unwrap();
        assert_eq!(c.command, Command::Status);
        assert_eq!(c.socket_path(), PathBuf::from("/run/iwarpd/iwarpd.verbs"));
        assert!(!c.json);
        assert_eq!(c.timeout_ms, 5000);
        assert_eq!(c.daemon_label(), "iwarpd iwarpd");
    }

    #[test]
    fn name_socket_json_and_filters() {
        let c = parse(&["--name", "memif-a", "qps", "--json"]).unwrap();
        assert_eq!(c.socket_path(), PathBuf::from("/run/iwarpd/memif-a.verbs"));
        assert_eq!(c.command, Command::Qps(ObjectFilter { client: None }));
        assert!(c.json);
        let c = parse(&["mrs", "--client", "7", "--socket", "/tmp/x.verbs"]).unwrap();
        assert_eq!(c.command, Command::Mrs(ObjectFilter { client: Some(7) }));
        assert_eq!(c.socket_path(), PathBuf::from("/tmp/x.verbs"));
        assert_eq!(
            Command::Mrs(ObjectFilter { client: None }).object_kinds(),
            Some(&["mr", "mw"][..])
        );
        assert_eq!(
            Command::Counters(CounterArgs::default()).object_kinds(),
            None
        );
        for v in ["status", "clients", "qps", "cqs", "mrs", "counters"] {
            assert!(parse(&[v]).is_ok(), "{v}");
        }
    }

    #[test]
    fn bad_usage_is_an_error() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["frobnicate"]).is_err());
        assert!(parse(&["--name", "a", "--socket", "/x", "status"]).is_err());
        assert!(parse(&["qps", "--client", "x"]).is_err());
        assert!(parse(&["status", "--timeout-ms", "0"]).is_err());
        assert!(parse(&["status", "--client", "1"]).is_err());
        assert!(parse(&["counters", "--watch", "0"]).is_err());
        assert!(
            parse(&["counters", "--count", "3"]).is_err(),
            "--count needs --watch"
        );
        assert!(parse(&["status", "--watch", "1"]).is_err());
    }

    #[test]
    fn counters_watch() {
        let c = parse(&["counters", "--watch", "2", "--count", "5", "--json"]).unwrap();
        assert_eq!(
            c.command,
            Command::Counters(CounterArgs {
                watch: Some(2),
                count: Some(5)
            })
        );
        assert!(c.json);
    }

    #[test]
    fn capture() {
        let c = parse(&[
            "capture",
            "start",
            "/tmp/x.pcap",
            "--port",
            "1",
            "--snaplen",
            "128",
        ])
        .unwrap();
        assert_eq!(
            c.command,
            Command::Capture(CaptureCommand::Start {
                file: PathBuf::from("/tmp/x.pcap"),
                port: Some(1),
                snaplen: Some(128)
            })
        );
        assert_eq!(
            parse(&["capture", "stop"]).unwrap().command,
            Command::Capture(CaptureCommand::Stop)
        );
        assert!(parse(&["capture", "start"]).is_err(), "FILE is required");
        assert!(parse(&["capture", "start", "x", "--snaplen", "10"]).is_err());
    }

    #[test]
    fn actions() {
        let c = parse(&["disconnect-client", "12", "--json"]).unwrap();
        assert_eq!(c.command, Command::DisconnectClient { id: 12 });
        assert!(c.json);
        let c = parse(&["qp", "reset", "3", "--client", "12"]).unwrap();
        assert_eq!(
            c.command,
            Command::Qp(QpCommand::Reset { id: 3, client: 12 })
        );
        assert!(
            parse(&["qp", "reset", "3"]).is_err(),
            "--client is required"
        );
        assert!(parse(&["disconnect-client"]).is_err());
        assert!(parse(&["qp", "frobnicate", "3"]).is_err());
    }
}
